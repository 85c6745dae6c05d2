// `convtune eval MODEL`: accuracy and per-layer op times of a trained model on the Fashion-MNIST test images.
#include <fmt/format.h>

#include <iostream>

#include "convtune/data/idx.h"
#include "convtune/error.h"
#include "convtune/nn/model_file.h"
#include "convtune/nn/trainer.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"
#include "tools/convtune/progress.h"
#include "tools/convtune/report_table.h"

namespace convtune::cli {

namespace {

struct EvalOptions {
  std::string model;
  std::string data;
  std::string device = kDefaultDevice;
  std::string family = "auto";
  std::string fused_family = "direct_tiled";
  std::string math;
  int64_t limit = -1;
  int64_t batch = 100;
  bool no_fuse = false;
  std::string workspace_limit;  // --workspace-limit's text
};

void run_eval(const EvalOptions& opt) {
  if (opt.limit == 0 || opt.limit < -1) {
    throw InvalidArgument(fmt::format("--limit={} is invalid: expected a positive image count (or -1: all)", opt.limit));
  }
  const nn::ModelHeader header = nn::read_model_header(opt.model);  // fails early, naming the file
  const std::string dir = opt.data.empty() ? data::default_data_dir() : opt.data;
  const data::DatasetFiles files = data::find_dataset_files(dir, false);
  const data::LabelledImages test = data::load_idx_pair(files.test_images, files.test_labels, 10, opt.limit);
  Device& device = choose_device(opt.device, "eval");
  nn::Runtime runtime(device, parse_precision(opt.math.empty() ? "fp32" : opt.math));
  runtime.set_workspace_limit(workspace_limit_bytes(opt.workspace_limit));
  auto network = nn::load_network(opt.model, runtime, opt.family == "auto" ? "" : opt.family);
  std::cout << fmt::format("eval: {} ({}) on {} ({}), {} test images, batch {}, math {}\n", opt.model,
                           header.architecture, device.info().id, device.info().name, test.count, opt.batch,
                           to_string(runtime.precision()));
  if (!opt.no_fuse) {
    for (const std::string& line : network->fuse_for_inference(opt.fused_family)) std::cout << "  " << line << "\n";
  }
  // One untimed pass over a batch compiles every plan, so compile time does not count as op time.
  {
    data::LabelledImages warm = test;
    warm.count = std::min<int64_t>(test.count, opt.batch);
    nn::evaluate(*network, warm, opt.batch, false);
  }
  Progress bar("eval", test.count);
  const nn::EvalResult result = nn::evaluate(*network, test, opt.batch, true, [&](int64_t done) { bar.update(done); });
  bar.finish();
  ReportTable table({"layer", "op ms", "us/image", "share"});
  auto record = [](const std::string& layer, double ms, double us_per_image, double share) {
    return nlohmann::ordered_json{{"layer", layer}, {"op_ms", ms}, {"us_per_image", us_per_image}, {"share", share}};
  };
  double total = 0;
  for (double ms : result.step_ms) total += ms;
  for (size_t i = 0; i < result.steps.size(); ++i) {
    const double per_image_us = result.step_ms[i] * 1000.0 / static_cast<double>(result.images);
    table.add_row({result.steps[i], fmt::format("{:.3f}", result.step_ms[i]), fmt::format("{:.3f}", per_image_us),
                   fmt::format("{:.1f}%", total > 0 ? 100.0 * result.step_ms[i] / total : 0.0)},
                  record(result.steps[i], result.step_ms[i], per_image_us, total > 0 ? result.step_ms[i] / total : 0.0));
  }
  const double total_us = total * 1000.0 / static_cast<double>(result.images);
  table.add_row({"total", fmt::format("{:.3f}", total), fmt::format("{:.3f}", total_us), "100%"},
                record("total", total, total_us, 1.0));
  table.print(std::cout, table_width());
  std::cout << fmt::format("accuracy {:.4f} ({} images, {:.1f} ms wall)\n", result.accuracy, result.images, result.ms);
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opt = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "Evaluate a trained model on the Fashion-MNIST test images: accuracy "
                                             "and each layer's op time");
  cmd->add_option("model", opt->model, "Model file written by `convtune train cnn`")->required();
  cmd->add_option("--data", opt->data, "Folder with the IDX files (default: $CONVTUNE_DATA or "
                                       "/usr/share/datasets/fashion-mnist)");
  add_device_option(cmd, opt->device);
  add_workspace_limit_option(cmd, opt->workspace_limit);
  cmd->add_option("--limit", opt->limit, "Evaluate the first N test images (default: all 10,000)");
  cmd->add_option("--batch", opt->batch, "Images per forward pass")->capture_default_str()->check(positive_integer());
  add_family_option(cmd, opt->family, "Kernel family of the unfused convolutions: auto (the plan's choice per layer: "
                                      "the tuning database's entry, else the built-in default)");
  add_math_option(cmd, opt->math, "");
  cmd->add_option("--fused-family", opt->fused_family, "Kernel family for conv+bias+ReLU+max-pool in one kernel")
      ->capture_default_str();
  cmd->add_flag("--no-fuse", opt->no_fuse, "Run conv, ReLU and pool as separate steps");
  cmd->callback([opt, cmd] {
    refuse_inapplicable(cmd, "--fused-family", !opt->no_fuse, "chooses the fused kernel, but --no-fuse fuses nothing");
    run_eval(*opt);
  });
}

}  // namespace convtune::cli
