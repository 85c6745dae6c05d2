// TuningDatabase: the user's tuning database (one JSON file, read-write) plus shipped defaults (a directory of
// JSON files, read-only): fallback lookup, insert keeping the fastest, merge, prune, list, atomic save.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "src/tuning_db/tuning_db_file.h"
#include "src/tuning_db/tuning_entry.h"
#include "src/tuning_db/tuning_lookup.h"

namespace convtune {

// One entry as `convtune db list` shows it.
struct ListedEntry {
  TuningEntry entry;
  std::string origin;  // the file it lives in
  bool shipped = false;
};

struct EntryFilter {
  std::string device;  // substring of the device name or fingerprint; empty: any
  std::string family;  // exact; empty: any
  std::optional<Direction> direction;
  bool include_shipped = true;
};

enum class InsertOutcome { Added, Replaced, KeptExisting };

struct MergeCounts {
  size_t added = 0;
  size_t replaced = 0;  // the merged entry was faster
  size_t kept = 0;      // ours was at least as fast
};

class TuningDatabase {
 public:
  // Loads `user_file` (a missing file is an empty database) and every *.json file in `shipped_dir` (none when
  // empty). A damaged or unreadable user file does not throw: lookups go on with the shipped defaults, the
  // problem is in user_file_error(), and save() refuses until the file is fixed or removed. A damaged shipped
  // file, or a shipped_dir that does not exist, throws TuningDatabaseError naming it: that is a broken install.
  explicit TuningDatabase(std::filesystem::path user_file, const std::filesystem::path& shipped_dir = {});

  // For commands that only look parameters up (bench, train, eval: the plans' default database). A damaged user
  // file or shipped file is left out with one warning per file and process on stderr, naming it and the
  // problem; lookups go on with the rest. Never throws for a file's content (only for a shipped_dir that was named
  // and does not exist).
  static TuningDatabase open_for_lookups(std::filesystem::path user_file, const std::filesystem::path& shipped_dir);

  // $CONVTUNE_TUNING_DB (a file path), else $XDG_DATA_HOME/convtune/tuning.json, else
  // ~/.local/share/convtune/tuning.json. Throws Error when none of them can be formed.
  static std::filesystem::path default_user_file();

  const std::filesystem::path& user_file() const { return user_file_; }
  // Why the user file could not be loaded (its path included); empty when it loaded or does not exist.
  const std::string& user_file_error() const { return user_file_error_; }

  LookupResult lookup(const ConvProblem& problem, const DeviceInfo& device,
                      const std::map<std::string, std::string>& source_hash_by_family,
                      const LookupOptions& options = {}) const;

  // Stores the entry in the user database unless one with the same key is at least as fast.
  // Throws InvalidArgument when the entry lacks a family or device fingerprint or has no positive time.
  InsertOutcome insert(TuningEntry entry);
  // Entries of another database file, keeping the faster per key. Throws TuningDatabaseError naming that file
  // when it is damaged; this database is then unchanged.
  MergeCounts merge_file(const std::filesystem::path& path);
  MergeCounts merge(const std::vector<TuningEntry>& entries);

  // Removes user entries that are stale: measured on one of `devices` under another driver, or of a family in
  // `source_hash_by_family` with another source hash. Entries of devices not listed are kept (nothing here
  // says they are stale). Returns how many were removed.
  size_t prune_stale(std::span<const DeviceInfo> devices,
                     const std::map<std::string, std::string>& source_hash_by_family);
  // Removes user entries whose device fingerprint or name equals `device`.
  size_t prune_device(std::string_view device);
  size_t prune_if(const std::function<bool(const TuningEntry&)>& remove);

  // Writes the user database atomically under an exclusive lock (flock on USER_FILE.lock): reads the file as it is
  // now, folds in the entries other processes saved since this one loaded (keeping the faster per key, and
  // leaving out what this one pruned), writes a temporary file, flushes it and renames it over the database, so
  // any number of concurrent tuners lose nothing and a crash leaves the old or the new file. While it holds the
  // lock it removes temporary files that killed writers left. The folder must exist. Throws TuningDatabaseError
  // naming the file, which stays untouched, when the file on disk is damaged or unreadable.
  void save();

  std::vector<ListedEntry> list(const EntryFilter& filter = {}) const;
  size_t user_entry_count() const { return user_entries_.size(); }
  size_t shipped_entry_count() const { return shipped_entries_.size(); }
  const std::vector<std::filesystem::path>& shipped_files() const { return shipped_files_; }
  // Shipped files left out by open_for_lookups(), each with why; empty otherwise.
  const std::vector<std::string>& shipped_file_errors() const { return shipped_file_errors_; }

 private:
  TuningDatabase(std::filesystem::path user_file, const std::filesystem::path& shipped_dir, bool tolerate_shipped);

  std::filesystem::path user_file_;
  std::string user_origin_;
  std::string user_file_error_;
  std::map<std::string, TuningEntry> user_entries_;  // by key(), so the file is written in a stable order
  std::set<std::string> pruned_keys_;                // so save() does not bring them back from disk
  std::vector<std::filesystem::path> shipped_files_;
  std::vector<std::pair<TuningEntry, std::string>> shipped_entries_;  // entry, origin
  std::vector<std::string> shipped_file_errors_;
};

}  // namespace convtune
