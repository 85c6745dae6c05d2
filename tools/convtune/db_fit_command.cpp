// `convtune db fit`: fits the cost model on each device's entries of the tuning database and checks it by leaving
// one shape out at a time, so a user sees what the untuned family choice rests on and how well it picks.
#include <fmt/format.h>

#include <iostream>
#include <map>

#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/families/untuned_order.h"
#include "src/tuning_db/cost_model.h"
#include "src/tuning_db/tuning_database.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/options.h"

namespace convtune::cli {

DeviceInfo entries_device(const TuningDevice& d);  // below

namespace {

struct FitOptions {
  std::string db;  // --db after `fit`; before it (db --db F fit), the db command's own option
  std::string device;
  double ridge = kCostModelRidge;
  bool rows = false;
};

// The plans' own rules: a family known to suit the problem badly on the device is never picked untuned; without a
// prediction the rank order decides.
bool poor_fit(const std::string& family, const ConvProblem& problem, const DeviceInfo& device) {
  for (const auto& f : kernel_families())
    if (f->name() == family) return !f->untuned_poor_fit(Problem(problem), device).empty();
  return false;
}

// A family's claim on a problem (ahead of the model where it cannot predict the family, of the rank order where it
// predicts nothing).
bool claims(const std::string& family, const ConvProblem& problem, const DeviceInfo& device) {
  for (const auto& f : kernel_families())
    if (f->name() == family) return !f->untuned_claim(Problem(problem), device).empty();
  return false;
}

void print_device(const std::string& name, const DeviceInfo& device, const std::vector<CostSample>& samples,
                  const FitOptions& opt) {
  const CostModel model = CostModel::fit(samples, opt.ridge);
  std::cout << fmt::format("{}: {} measured (family, problem) pairs, ridge {:g}\n", name, model.sample_count(), opt.ridge);
  if (model.empty()) {
    std::cout << fmt::format("  no family has {} measured problems of one element type: plans keep the built-in "
                             "rank order on this device\n\n",
                             kCostModelMinSamples);
    return;
  }
  std::cout << fmt::format("  {:<16} {:<12} {:>8} {:>16}\n", "family", "types", "problems", "rms error (x)");
  for (const CostModel::FamilyFit& f : model.fits())
    std::cout << fmt::format("  {:<16} {:<12} {:>8} {:>16.2f}\n", f.family, f.types, f.samples, std::exp(f.rms_log_error));
  const CostModelCheck check = leave_one_shape_out(
      samples, [&](const std::string& f, const ConvProblem& p) { return poor_fit(f, p, device); },
      [](const std::string& f) { return untuned_rank(f); }, opt.ridge,
      [&](const std::string& f, const ConvProblem& p) { return claims(f, p, device); });
  if (check.rows.empty()) {
    std::cout << "  leave-one-shape-out: no problem has two or more families measured\n\n";
    return;
  }
  if (opt.rows) {
    std::cout << fmt::format("  {:<90} {:<14} {:>9} {:<14} {:>9} {:>6} {:>9}\n", "problem", "best", "ms", "picked",
                             "ms", "speed", "pred/meas");
    for (const CostModelCheckRow& r : check.rows) {
      std::cout << fmt::format("  {:<90} {:<14} {:>9.4f} {:<14} {:>9.4f} {:>6.2f} {:>9}\n", r.problem.to_string(),
                               r.best, r.best_ms, r.chosen, r.chosen_ms, r.ratio(),
                               r.modelled ? fmt::format("{:.2f}", r.predicted_ms / r.chosen_ms) : "rules");
    }
  }
  double worst = 1, log_err = 0;
  for (const CostModelCheckRow& r : check.rows) {
    worst = std::min(worst, r.ratio());
    if (r.modelled) log_err += std::abs(std::log(r.predicted_ms / r.chosen_ms));
  }
  const size_t modelled = check.rows.size() - check.unpredicted();
  std::cout << fmt::format(
      "  leave-one-shape-out over {} problems with 2+ families measured (tuned times): the pick is the measured best "
      "on {}, within 90% of its speed on {}, worst {:.2f}x; the model picked on {} (predicted/measured time of its "
      "pick within {:.2f}x, geometric mean), the rules on {} (outside the measured range)\n\n",
      check.rows.size(), check.best_picked(), check.within(0.9), worst, modelled,
      std::exp(modelled ? log_err / static_cast<double>(modelled) : 0.0), check.unpredicted());
}

}  // namespace

// What the poor-fit rules read of the device the entries were measured on (the device itself may be absent): its
// backend and whether it is a GPU. OpenCL on a CPU reports the CPU's vendor ("GenuineIntel", "AuthenticAMD").
DeviceInfo entries_device(const TuningDevice& d) {  // also db_import_bench.cpp
  DeviceInfo info;
  info.backend = d.backend == "cuda" ? BackendKind::Cuda : d.backend == "opencl" ? BackendKind::OpenCL : BackendKind::Cpu;
  info.name = d.name, info.vendor = d.vendor, info.architecture = d.architecture;
  info.is_gpu = info.backend == BackendKind::Cuda ||
                (info.backend == BackendKind::OpenCL && d.vendor != "GenuineIntel" && d.vendor != "AuthenticAMD");
  return info;
}

void add_db_fit_command(CLI::App& db) {
  auto opt = std::make_shared<FitOptions>();
  auto* fit = db.add_subcommand(
      "fit", "Fit the untuned family choice's cost model on each device's entries and check it leaving one shape out "
             "(plans refit it themselves whenever the database changes)");
  add_db_option(fit, opt->db);
  fit->add_option("--device", opt->device, "Only devices whose name or fingerprint contains this");
  fit->add_option("--ridge", opt->ridge, "Ridge strength on standardized features (what plans use: the default)");
  fit->add_flag("--rows", opt->rows, "Print each checked problem: best family, the model's pick, their times");
  fit->callback([opt, &db] {
    const CLI::Option* path = db.get_option("--db");
    const std::filesystem::path file = !opt->db.empty() ? std::filesystem::path(opt->db)
                                       : path->count()   ? std::filesystem::path(path->as<std::string>())
                                                         : TuningDatabase::default_user_file();
    const TuningDatabase database(file, shipped_tuning_dir());
    if (!database.user_file_error().empty()) std::cerr << "db: warning: " << database.user_file_error() << "\n";
    const std::vector<ListedEntry> entries = database.list();
    // One model per device fingerprint (plans take every driver of the same hardware; stale entries count).
    std::map<std::string, TuningDevice> devices;  // by fingerprint
    for (const ListedEntry& l : entries) {
      if (!l.entry.problem.is_conv()) continue;
      const TuningDevice& d = l.entry.device;
      if (opt->device.empty() || d.name.find(opt->device) != std::string::npos ||
          d.fingerprint.find(opt->device) != std::string::npos)
        devices.emplace(d.fingerprint, d);
    }
    if (devices.empty()) std::cout << "no convolution entries" << (opt->device.empty() ? "" : " for that device") << "\n";
    for (const auto& [fingerprint, device] : devices) {
      const std::string fp = fingerprint;
      print_device(fmt::format("{} ({})", device.name, fingerprint), entries_device(device),
                   cost_samples(entries, [&fp](const TuningEntry& e) { return e.device.fingerprint == fp; }), *opt);
    }
  });
}

}  // namespace convtune::cli
