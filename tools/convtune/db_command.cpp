// `convtune db`: list, show, merge and prune the tuning database (the user's file plus the shipped defaults).
#include <fmt/format.h>

#include <iostream>

#include <nlohmann/json.hpp>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "src/core/atomic_file.h"
#include "src/tuning_db/tuning_database.h"
#include "src/tuning_db/tuning_db_report.h"
#include "src/tuning_db/tuning_entry.h"
#include "tools/convtune/commands.h"

namespace convtune::cli {

namespace {

struct DbOptions {
  std::string db;
  std::string device, family, direction;
  bool user_only = false;
  size_t number = 0;
  std::string merge_file;
  bool stale = false;
  std::string prune_device;
  bool json = false;
};

std::filesystem::path db_path(const DbOptions& opt) {
  return opt.db.empty() ? TuningDatabase::default_user_file() : std::filesystem::path(opt.db);
}

TuningDatabase open_database(const DbOptions& opt) {
  TuningDatabase db(db_path(opt), shipped_tuning_dir());
  if (!db.user_file_error().empty()) std::cerr << "db: warning: " << db.user_file_error() << "\n";
  for (const std::string& damaged : db.damaged_entries())
    std::cerr << "db: warning: " << damaged << "; entry left out (fix or remove it)\n";
  return db;
}

// The default database's folder is convtune's own: created on the first save. A --db file's folder must exist.
void save(TuningDatabase& db, const DbOptions& opt) {
  if (opt.db.empty() && db.user_file().has_parent_path()) ensure_directory(db.user_file().parent_path());
  db.save();
}

std::vector<ListedEntry> listed(const TuningDatabase& db, const DbOptions& opt) {
  EntryFilter filter;
  filter.device = opt.device;
  filter.family = opt.family;
  if (!opt.direction.empty()) filter.direction = parse_direction(opt.direction);
  filter.include_shipped = !opt.user_only;
  return db.list(filter);
}

// An entry as `db list --json` and `db show --json` print it: its number, where it lives, and its stored fields.
nlohmann::ordered_json entry_json(const ListedEntry& listed, size_t number) {
  nlohmann::ordered_json doc = {{"number", number}, {"origin", listed.origin}, {"shipped", listed.shipped}};
  doc["entry"] = to_json(listed.entry);
  return doc;
}

void add_filters(CLI::App* cmd, DbOptions& opt) {
  cmd->add_option("--device", opt.device, "Only entries whose device name or fingerprint contains this");
  cmd->add_option("--family", opt.family, "Only this kernel family");
  cmd->add_option("--direction", opt.direction, "Only fwd, bwd-data or bwd-filter");
  cmd->add_flag("--user-only", opt.user_only, "Leave out the defaults shipped with convtune");
}

// Why this convtune does not trust `e` on `device` (empty: it does): an unknown family, another kernel version,
// another driver.
std::string stale_here(const TuningEntry& e, const DeviceInfo& device) {
  for (const auto& f : kernel_families()) {
    if (f->name() == e.family) return stale_reason(e, device, f->kernel_version());
  }
  return "unknown family";
}

}  // namespace

void add_db_fit_command(CLI::App& db);           // db_fit_command.cpp
void add_db_import_bench_command(CLI::App& db);  // db_import_bench.cpp

void add_db_command(CLI::App& app) {
  auto opt = std::make_shared<DbOptions>();
  auto* db = app.add_subcommand("db", "List, show, merge and prune tuning-database entries");
  // --db is taken before the subcommand (db --db F list, the old spelling) and after it (db list --db F, like tune).
  add_db_option(db, opt->db);
  db->require_subcommand(1);

  auto* list = db->add_subcommand("list", "One line per entry, numbered for `db show`");
  add_filters(list, *opt);
  add_db_option(list, opt->db);
  add_json_flag(list, opt->json);
  list->callback([opt] {
    const TuningDatabase database = open_database(*opt);
    const auto entries = listed(database, *opt);
    if (opt->json) {
      nlohmann::ordered_json doc = {{"file", database.user_file().string()},
                                    {"user_entries", database.user_entry_count()},
                                    {"shipped_entries", database.shipped_entry_count()},
                                    {"entries", nlohmann::ordered_json::array()}};
      for (size_t i = 0; i < entries.size(); ++i) doc["entries"].push_back(entry_json(entries[i], i + 1));
      std::cout << doc.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("{}: {} user entr{}, {} shipped\n", database.user_file().string(),
                             database.user_entry_count(), database.user_entry_count() == 1 ? "y" : "ies",
                             database.shipped_entry_count());
    std::cout << format_entry_table(entries);
  });

  auto* show = db->add_subcommand("show", "Every field of one entry (its number in `db list` with the same filters)");
  add_filters(show, *opt);
  add_db_option(show, opt->db);
  add_json_flag(show, opt->json);
  show->add_option("number", opt->number, "Entry number from `db list`")->required();
  show->callback([opt] {
    const TuningDatabase database = open_database(*opt);
    const auto entries = listed(database, *opt);
    if (opt->number < 1 || opt->number > entries.size()) {
      throw InvalidArgument(fmt::format("db show {}: expected an entry number from 1 to {} (see `convtune db list`)",
                                        opt->number, entries.size()));
    }
    const ListedEntry& entry = entries[opt->number - 1];
    nlohmann::ordered_json doc = entry_json(entry, opt->number);
    doc["here"] = nlohmann::ordered_json::object();
    if (!opt->json) std::cout << format_entry_details(entry);
    // Whether this convtune still trusts it on a device present here.
    for (Device* device : Registry::instance().all_devices()) {
      if (!entry.entry.device.same_hardware(device->info())) continue;
      const std::string why = stale_here(entry.entry, device->info());
      doc["here"][device->info().id] = why.empty() ? "current" : "stale: " + why;
      if (!opt->json) std::cout << fmt::format("on {} here: {}\n", device->info().id, why.empty() ? "current" : "stale: " + why);
    }
    if (opt->json) std::cout << doc.dump(2) << "\n";
  });

  auto* merge = db->add_subcommand("merge", "Fold another database file in, keeping the faster entry per key");
  merge->add_option("file", opt->merge_file, "Database file to merge")->required()->check(CLI::ExistingFile);
  add_db_option(merge, opt->db);
  merge->callback([opt] {
    TuningDatabase database = open_database(*opt);
    const MergeCounts counts = database.merge_file(opt->merge_file);
    for (const std::string& damaged : counts.damaged)
      std::cerr << "db: warning: " << damaged << "; entry not merged\n";
    save(database, *opt);
    std::cout << fmt::format("merged {} into {}: {} added, {} replaced (faster), {} kept (ours at least as fast)\n",
                             opt->merge_file, database.user_file().string(), counts.added, counts.replaced, counts.kept);
  });

  add_db_fit_command(*db);
  add_db_import_bench_command(*db);

  auto* prune = db->add_subcommand("prune", "Remove stale entries (other kernel version or driver) or one device's");
  prune->add_flag("--stale", opt->stale, "Entries this convtune would not trust on the devices present here");
  prune->add_option("--device", opt->prune_device, "Entries of this device (name or fingerprint)");
  add_db_option(prune, opt->db);
  prune->callback([opt] {
    if (!opt->stale && opt->prune_device.empty()) throw InvalidArgument("db prune: give --stale and/or --device NAME");
    TuningDatabase database = open_database(*opt);
    size_t removed = 0;
    if (!opt->prune_device.empty()) removed += database.prune_device(opt->prune_device);
    if (opt->stale) {
      std::vector<DeviceInfo> devices;
      for (Device* device : Registry::instance().all_devices()) devices.push_back(device->info());
      removed += database.prune_if([&](const TuningEntry& e) {
        for (const DeviceInfo& d : devices) {
          if (!e.device.same_hardware(d)) continue;
          return !stale_here(e, d).empty();
        }
        return false;  // measured on hardware not present here: nothing says it is stale
      });
    }
    save(database, *opt);
    std::cout << fmt::format("removed {} entr{} from {}\n", removed, removed == 1 ? "y" : "ies",
                             database.user_file().string());
  });
}

}  // namespace convtune::cli
