// `convtune db import-bench`: stores the rows of a `bench --out` file as tuning entries of the family and
// configuration each row ran. A bench row is a measurement like the tuner's (median of its runs on the device,
// checked against the float64 reference first), so a configuration benchmarked on a machine that is gone can still
// serve the plans; rows that failed their check or were skipped are left out.
#include <fmt/format.h>

#include <iostream>

#include <nlohmann/json.hpp>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/core/atomic_file.h"
#include "src/core/json_reader.h"
#include "src/tuning_db/tuning_database.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/options.h"

namespace convtune::cli {

DeviceInfo entries_device(const TuningDevice& d);  // db_fit_command.cpp

namespace {

struct ImportOptions {
  std::string db;
  std::string file;
  std::string family;  // only this family's rows
};

// The device the bench ran on, as entries record it: the file's own description (bench writes it since this
// command exists), else the device of an entry already in the database with the same name and driver.
TuningDevice bench_device(const nlohmann::json& doc, const TuningDatabase& database, const std::string& file) {
  if (doc.contains("device_info")) {
    const nlohmann::json& d = doc["device_info"];
    TuningDevice device;
    device.fingerprint = d.value("fingerprint", ""), device.backend = d.value("backend", "");
    device.name = d.value("name", ""), device.vendor = d.value("vendor", "");
    device.architecture = d.value("architecture", ""), device.driver_version = d.value("driver", "");
    if (device.fingerprint.empty() || device.backend.empty())
      throw InvalidArgument(fmt::format("{}: device_info lacks its fingerprint or backend", file));
    return device;
  }
  const std::string name = doc.value("device", ""), driver = doc.value("driver", "");
  for (const ListedEntry& l : database.list())
    if (l.entry.device.name == name && l.entry.device.driver_version == driver) return l.entry.device;
  throw InvalidArgument(fmt::format(
      "{} names device '{}' (driver {}) without its vendor and architecture, and the database holds no entry of that "
      "device and driver to take them from: bench this device again (the file then describes it)",
      file, name, driver));
}

// The device as the families' recipes read it, to name the kernel sources whose hash the entries carry: the device
// itself where it is present, else its recorded identity with a generic GPU's limits (the sources a recipe names
// do not depend on them; its configuration may).
DeviceInfo recipe_device(const TuningDevice& device) {
  for (Device* present : Registry::instance().all_devices())
    if (present->info().fingerprint() == device.fingerprint) return present->info();
  DeviceInfo info = entries_device(device);
  info.can_run_kernels = true;
  info.compute_units = 1;
  info.max_work_group_size = 1024;
  info.local_memory_bytes = 48 << 10;
  if (info.backend == BackendKind::Cuda) info.local_memory_optin_bytes = 227 << 10;
  info.global_memory_bytes = uint64_t{16} << 30;
  return info;
}

// "family[K=V,...] (tier)" -> family and configuration; nullopt for a row of no family (a reference library).
std::optional<std::pair<std::string, Config>> family_and_config(const std::string& algorithm) {
  const size_t open = algorithm.find('['), close = algorithm.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  return std::make_pair(algorithm.substr(0, open), parse_config(algorithm.substr(open + 1, close - open - 1)));
}

}  // namespace

void add_db_import_bench_command(CLI::App& db) {
  auto opt = std::make_shared<ImportOptions>();
  auto* cmd = db.add_subcommand("import-bench",
                                "Store the rows of a `bench --out` JSON file (each checked against the float64 "
                                "reference when measured) as tuning entries of the family and configuration they ran");
  cmd->add_option("file", opt->file, "A JSON file written by `convtune bench --out`")->required()->check(CLI::ExistingFile);
  cmd->add_option("--family", opt->family, "Only rows of this kernel family");
  add_db_option(cmd, opt->db);
  cmd->callback([opt, &db] {
    const CLI::Option* path = db.get_option("--db");
    const std::filesystem::path target = !opt->db.empty() ? std::filesystem::path(opt->db)
                                         : path->count()   ? std::filesystem::path(path->as<std::string>())
                                                           : TuningDatabase::default_user_file();
    TuningDatabase database(target, shipped_tuning_dir());
    if (const std::string refusal = database.save_refusal(); !refusal.empty()) throw InvalidArgument(refusal);
    nlohmann::json doc;
    try {
      doc = parse_json(read_file(opt->file));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("{} is not valid JSON: {}", opt->file, e.what()));
    }
    if (!doc.is_object() || !doc.contains("rows") || !doc["rows"].is_array())
      throw InvalidArgument(fmt::format("{} is not a `convtune bench --out` JSON file: it has no \"rows\" list", opt->file));
    const TuningDevice device = bench_device(doc, database, opt->file);
    const DeviceInfo info = recipe_device(device);
    const std::string date = doc.value("date", "");
    std::vector<TuningEntry> entries;
    size_t skipped = 0;
    for (const nlohmann::json& row : doc["rows"]) {
      // Only measured rows that passed their check: a failed or skipped row has no "ms".
      if (!row.contains("ms") || !row["ms"].is_number() || !row.contains("check_rel_l2") ||
          !row["check_rel_l2"].is_number() || !row.contains("algorithm") || !row.contains("problem")) {
        ++skipped;
        continue;
      }
      const auto parsed = family_and_config(row["algorithm"].get<std::string>());
      if (!parsed || (!opt->family.empty() && parsed->first != opt->family)) {
        ++skipped;
        continue;
      }
      const KernelFamily& family = kernel_family(parsed->first);  // throws naming the families for an unknown one
      const Problem problem = parse_any_problem(row["problem"].get<std::string>());
      // A row this convtune's family no longer computes (its support changed since the bench) is left out.
      if (!family.unsupported_reason(problem, {}, info).empty()) {
        ++skipped;
        continue;
      }
      TuningEntry entry = make_tuning_entry(info, family.name(), family.kernel_version(), problem,
                                            parsed->second, row["ms"].get<double>());
      entry.device = device;
      if (!date.empty()) entry.date = date;
      entries.push_back(std::move(entry));
    }
    const MergeCounts counts = database.merge(entries);
    // The default database's folder is convtune's own, created on the first save; a --db file's folder must exist.
    const bool default_file = opt->db.empty() && !path->count();
    if (default_file && target.has_parent_path()) ensure_directory(target.parent_path());
    database.save();
    std::cout << fmt::format("imported {} rows of {} ({}) into {}: {} added, {} replaced (faster), {} kept (ours at "
                             "least as fast); {} rows left out (failed, skipped, another family, no family, or a problem the family refuses)\n",
                             entries.size(), opt->file, device.name, database.user_file().string(), counts.added,
                             counts.replaced, counts.kept, skipped);
  });
}

}  // namespace convtune::cli
