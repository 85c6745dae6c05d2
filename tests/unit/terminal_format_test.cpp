// The command line's terminal output: a progress line never exceeds the width it is given (a wrapped redraw leaves
// a stale line per update), and a table leaves out its least wanted columns to fit.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tools/convtune/progress.h"
#include "tools/convtune/report_table.h"

using namespace convtune::cli;

namespace {

size_t longest_line(const std::string& text) {
  size_t longest = 0, start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    longest = std::max(longest, end - start);
    start = end + 1;
  }
  return longest;
}

}  // namespace

TEST(ProgressLine, NeverExceedsTheWidth) {
  // tune's status as it was when it wrapped in 80 columns, and worse.
  const std::string tune_status = "1234 candidates, 56 failed; fmnist2 bwd-filter implicit_gemm: timing TILE_M=64,"
                                  "TILE_N=64,TILE_K=16,SPLIT_K=4,VEC=4 (candidate 812 of 4096)";
  for (const std::string& label : {std::string("tune"), std::string("epoch 12/100"), std::string(200, 'L')}) {
    for (const std::string& status : {std::string(), std::string("loss 0.1234"), tune_status}) {
      for (const std::string& timing : {std::string(), std::string("ETA 1h02m"), std::string("in 12.3s")}) {
        for (size_t width : {10u, 20u, 40u, 79u, 80u, 120u}) {
          for (double fraction : {0.0, 0.5, 1.0}) {
            const std::string line = format_progress_line(label, fraction, status, timing, width);
            EXPECT_LE(line.size(), width) << "width " << width << ": " << line;
            EXPECT_EQ(line.find('\n'), std::string::npos);
          }
        }
      }
    }
  }
  // At 80 columns the label, the percentage and the ETA survive; the status is what gets cut.
  const std::string line = format_progress_line("tune", 0.25, tune_status, "ETA 3m05s", 79);
  EXPECT_EQ(line.rfind("tune [", 0), 0u) << line;
  EXPECT_NE(line.find(" 25%"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 3m05s"), std::string::npos) << line;
  EXPECT_NE(line.find("..."), std::string::npos) << line;
  // Width 0: no limit, nothing cut.
  EXPECT_NE(format_progress_line("tune", 0.25, tune_status, "", 0).find(tune_status), std::string::npos);
}

TEST(ProgressLine, FitWidthCutsWithAnEllipsis) {
  EXPECT_EQ(fit_width("abcdef", 0), "abcdef");
  EXPECT_EQ(fit_width("abcdef", 6), "abcdef");
  EXPECT_EQ(fit_width("abcdefgh", 6), "abc...");
  EXPECT_EQ(fit_width("abcdef", 2), "ab");
}

TEST(ReportTable, LeavesOutLowPriorityColumnsToFit) {
  ReportTable table(std::vector<TableColumn>{{"layer", 0}, {"ms", 0}, {"algorithm", 1}, {"device", 4}, {"note", 3}});
  table.add_row({"conv1", "1.000", std::string(75, 'a'), "opencl:0", "a short note"},
                {{"layer", "conv1"}, {"ms", 1.0}});
  std::ostringstream wide, narrow;
  table.print(wide, 0);
  table.print(narrow, 80);
  EXPECT_GT(longest_line(wide.str()), 80u);
  const std::string text = narrow.str();
  // Everything but the last line (which names what was left out) fits.
  const std::string table_part = text.substr(0, text.rfind("(left out"));
  EXPECT_LE(longest_line(text), 80u) << text;  // the note that names them included
  // The wide algorithm column goes; the narrower device and note columns, left out before it, come back.
  EXPECT_EQ(table_part.find("algorithm"), std::string::npos) << text;
  EXPECT_NE(table_part.find("device"), std::string::npos) << text;
  EXPECT_NE(text.find("left out to fit 80 columns: algorithm;"), std::string::npos) << text;
  // Many columns left out: the note wraps rather than run past the width.
  ReportTable many(std::vector<TableColumn>{{"layer", 0}, {std::string(30, 'b'), 1}, {std::string(30, 'c'), 1},
                                           {std::string(30, 'd'), 1}, {std::string(30, 'e'), 1}});
  many.add_row({"conv1", "x", "x", "x", "x"}, nlohmann::ordered_json::object());
  std::ostringstream wrapped;
  many.print(wrapped, 40);
  EXPECT_LE(longest_line(wrapped.str()), 40u) << wrapped.str();
}

TEST(ReportTable, CsvHoldsTheRecordsRawNumbersAndMetadata) {
  ReportTable table(std::vector<std::string>{"layer", "ms"});
  table.add_row({"conv1", "0.123"}, {{"layer", "conv,1"}, {"ms", 0.12345678}, {"against", {{"cudnn", {{"ms", 2.5}}}}}});
  const std::string csv = table.csv({{"device", "gpu"}});
  EXPECT_EQ(csv, "layer,ms,against.cudnn.ms,device\n\"conv,1\",0.12345678,2.5,gpu\n");
}
