// Tuning logs and the report built from them, and suite files: the reliability issue's logs, hostile values
// (absurd GFLOP/s, floats where integers belong, too many values for a chart), special files, --batch-scale.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "convtune/error.h"
#include "src/core/atomic_file.h"
#include "tools/convtune/report.h"
#include "tools/convtune/suite.h"
#include "tools/convtune/svg_chart.h"
#include "tools/convtune/tune_log.h"

using namespace convtune;
using namespace convtune::cli;
namespace fs = std::filesystem;

namespace {

const std::string kRepro = std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/";

std::string message_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One working trial of the given GFLOP/s and parameters, as `convtune tune` logs it.
std::string trial(double gflops, int tile_m = 32, int tile_n = 32, const std::string& layer = "layer1") {
  return "{\"layer\": \"" + layer + "\", \"direction\": \"fwd\", \"problem\": \"N=1,C=1,H=8,K=1,R=3\", "
         "\"family\": \"implicit_gemm\", \"parameters\": {\"TILE_M\": " + std::to_string(tile_m) +
         ", \"TILE_N\": " + std::to_string(tile_n) + "}, \"status\": \"ok\", \"ms\": 1.0, \"gflops\": " +
         std::to_string(gflops) + "}";
}

std::string log_of(const std::vector<std::string>& trials) {
  std::string text = "{\"metadata\": {}, \"trials\": [";
  for (size_t i = 0; i < trials.size(); ++i) text += (i ? ", " : "") + trials[i];
  return text + "]}";
}

}  // namespace

// report-histogram-min.json: one candidate at 1e17 GFLOP/s made the histogram's range round to nothing and write
// counts[INT_MIN] (SIGSEGV).
TEST(Report, AbsurdGflopsDrawWithoutWritingOutOfBounds) {
  const TuneLog log = TuneLog::load(kRepro + "report-histogram-min.json");
  const Report report = build_report(log, {}, 0);
  ASSERT_EQ(report.charts.size(), 1u);
  EXPECT_TRUE(contains(report.charts[0].second, "1 working kernels"));
  for (const std::vector<double>& values : std::vector<std::vector<double>>{
           {1e17}, {1e17, 1e17 + 1}, {-1e308, 1e308}, {0, std::numeric_limits<double>::max()}, {}}) {
    EXPECT_TRUE(contains(svg_histogram(values, 20, "t", "x"), "</svg>"));
  }
  Heatmap map{"t", "a", "b", "v", {"1", "2"}, {"1"}, {{1e17, 1e17}}};
  EXPECT_TRUE(contains(svg_heatmap(map), "</svg>"));
}

// tunelog-float-param-to-int64-ub.json: a parameter of 6.5e21 was converted to int64 (undefined behaviour). The
// fuzzed file also holds a key twice in its first trial, which is refused first now; the parameter's check is
// tested on the same file with that key renamed.
TEST(Report, TuneLogFieldsAreCheckedAndNamed) {
  EXPECT_TRUE(contains(message_of([] { TuneLog::load(kRepro + "tunelog-float-param-to-int64-ub.json"); }),
                       "(at trials[0]): the key \"problem\" appears twice in one object"));
  const fs::path dir = fs::temp_directory_path() / ("convtune_report_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto error_for = [&](const std::string& text) {
    std::ofstream(dir / "log.json") << text;
    return message_of([&] { TuneLog::load(dir / "log.json"); });
  };
  std::string repro = read_file(kRepro + "tunelog-float-param-to-int64-ub.json");
  const std::string twice = "\"problem\": \"N=64,C=1,H=28,W=28,K=8,R=5,S=5,stride=1ilter\"";
  ASSERT_NE(repro.find(twice), std::string::npos);
  repro.replace(repro.find(twice), std::string("\"problem\"").size(), "\"problem_cut\"");
  EXPECT_TRUE(contains(error_for(repro),
                       "trials[2]: parameter BATCH_CHUNK is 6.492233720368548e+21, expected a 64-bit integer"))
      << error_for(repro);
  EXPECT_TRUE(contains(error_for("{\"trials\": [{\"layer\": 3}]}"), "trials[0]: field 'layer' is 3, expected a string"));
  EXPECT_TRUE(contains(error_for(log_of({trial(-5)})), "trials[0]: field 'gflops' is -5.0, expected a number of 0 or more"));
  EXPECT_TRUE(contains(error_for("{\"trials\": [], \"tasks\": [{\"layer\": \"l\", \"problem\": \"N=1,H=3\", \"family\": "
                                 "\"f\", \"space\": -1}]}"),
                       "tasks[0]: field 'space' is -1, expected a count of 0 or more"));
  EXPECT_TRUE(contains(error_for("{\"metadata\": [1], \"trials\": []}"), "metadata: expected an object"));
  EXPECT_TRUE(contains(error_for("{\"trials\": [" + std::string(100, '[') + std::string(100, ']') + "]}"),
                       "nested deeper than 64 levels"));
  // Metadata of the wrong type is ignored where the report reads it, not an exception.
  std::ofstream(dir / "log.json") << "{\"metadata\": {\"peak_gflops\": \"fast\", \"device\": 7}, \"trials\": []}";
  EXPECT_EQ(build_report(TuneLog::load(dir / "log.json"), {}, 0).peak_gflops, 0);
  const fs::path fifo = dir / "fifo.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(contains(message_of([&] { TuneLog::load(fifo); }), "FIFO (named pipe), expected a regular file"));
  fs::remove_all(dir);
}

TEST(Report, ChartsAreBoundedWhateverTheLog) {
  std::vector<std::string> many_values;
  for (int i = 0; i < 70; ++i) many_values.push_back(trial(1.0 + i, i + 1, 32));
  many_values.push_back(trial(1.0, 1, 64));
  const TuneLog wide = TuneLog::parse(log_of(many_values), "wide.json");
  EXPECT_TRUE(contains(message_of([&] { build_report(wide, {}, 0); }),
                       "parameter TILE_M takes 70 values among the working candidates: a heatmap draws at most 64"));
  std::vector<std::string> many_tasks;
  for (int i = 0; i < 4100; ++i) many_tasks.push_back(trial(1.0, 32, 32, "layer" + std::to_string(i)));
  EXPECT_TRUE(contains(message_of([&] { build_report(TuneLog::parse(log_of(many_tasks), "tasks.json"), {}, 0); }),
                       "more than 4096 tasks"));
  // Parameter names become parts of file names: nothing but letters, digits, - and _ survives.
  const TuneLog odd = TuneLog::parse(log_of({"{\"layer\": \"../x\", \"direction\": \"fwd\", \"problem\": "
                                             "\"N=1,C=1,H=8,K=1,R=3\", \"family\": \"f\", \"parameters\": "
                                             "{\"../A\": 1, \"B/\": 2}, \"status\": \"ok\", \"ms\": 1, \"gflops\": 1}",
                                             "{\"layer\": \"../x\", \"direction\": \"fwd\", \"problem\": "
                                             "\"N=1,C=1,H=8,K=1,R=3\", \"family\": \"f\", \"parameters\": "
                                             "{\"../A\": 2, \"B/\": 3}, \"status\": \"ok\", \"ms\": 1, \"gflops\": 2}"}),
                                     "odd.json");
  for (const auto& [name, svg] : build_report(odd, {}, 0).charts) EXPECT_EQ(name.find('/'), std::string::npos) << name;
}

TEST(Suite, OverflowingLinesAndSpecialFilesAreRefused) {
  EXPECT_TRUE(contains(message_of([] { load_suite(kRepro + "suite-pad-overflow-ub.txt"); }),
                       "suite-pad-overflow-ub.txt:2: layer alex0: W=532147483647 is too large"));
  EXPECT_TRUE(contains(message_of([] { load_suite("/dev/zero"); }), "suite file /dev/zero: "));
}

// --batch-scale 1e30 once became N=1 silently (llround of a value beyond int64).
TEST(Suite, BatchScaleIsCheckedNotWrapped) {
  const ConvProblem layer = parse_problem("N=128,C=3,H=8,K=4,R=3");
  EXPECT_EQ(scale_batch(layer, 0.01).conv().n, 1);
  EXPECT_EQ(scale_batch(layer, 0.5).conv().n, 64);
  const Problem gemm = parse_any_problem("gemm:M=8,N=8,K=8");
  EXPECT_EQ(scale_batch(gemm, 1e30), gemm);  // a matrix product has no batch to scale
  EXPECT_TRUE(contains(message_of([&] { scale_batch(layer, 1e30); }),
                       "--batch-scale=1e+30 makes N=128 into 1.28e+32: expected at most 2147483647"));
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_TRUE(contains(message_of([&] { scale_batch(layer, bad); }), "is invalid: expected a finite number > 0"));
}

// Axis ticks are multiples of 1, 2 or 5 x 10^k printed with the digits their spacing needs (the histogram once
// labelled its axis 0,0,0,1,1), and cell values keep three significant digits.
TEST(Charts, TicksAreNiceAndReadable) {
  auto expect_ticks = [](std::vector<double> got, std::vector<double> want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << i;
  };
  expect_ticks(nice_ticks(0.03, 0.97, 5), {0, 0.2, 0.4, 0.6, 0.8, 1});
  expect_ticks(nice_ticks(331, 598, 5), {300, 400, 500, 600});
  expect_ticks(nice_ticks(0, 3, 4), {0, 1, 2, 3});
  EXPECT_GE(nice_ticks(7, 7, 5).size(), 2u);
  EXPECT_EQ(format_tick(0.4, 0.2), "0.4");
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(350, 50), "350");
  EXPECT_EQ(format_value(1.04), "1.04");
  EXPECT_EQ(format_value(1.3), "1.3");
  EXPECT_EQ(format_value(589.1), "589");
}
