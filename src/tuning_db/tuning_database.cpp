// The tuning database: loading (tolerant of a damaged user file, never overwriting it), insert/merge/prune,
// lookup across user and shipped entries, and atomic saves that fold in concurrent writers.
#include "src/tuning_db/tuning_database.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "src/core/atomic_file.h"

namespace convtune {

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

InsertOutcome insert_keeping_faster(std::map<std::string, TuningEntry>& entries, TuningEntry entry) {
  std::string key = entry.key();
  const auto it = entries.find(key);
  if (it == entries.end()) {
    entries.emplace(std::move(key), std::move(entry));
    return InsertOutcome::Added;
  }
  if (entry.time_ms < it->second.time_ms) {
    it->second = std::move(entry);
    return InsertOutcome::Replaced;
  }
  return InsertOutcome::KeptExisting;
}

}  // namespace

std::filesystem::path TuningDatabase::default_user_file() {
  if (const std::string explicit_file = env("CONVTUNE_TUNING_DB"); !explicit_file.empty()) return explicit_file;
  // The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
  if (const std::string xdg = env("XDG_DATA_HOME"); !xdg.empty() && xdg.front() == '/')
    return std::filesystem::path(xdg) / "convtune" / "tuning.json";
  if (const std::string home = env("HOME"); !home.empty())
    return std::filesystem::path(home) / ".local" / "share" / "convtune" / "tuning.json";
  throw Error(
      "cannot place the tuning database: HOME and XDG_DATA_HOME are unset; set CONVTUNE_TUNING_DB to a file path");
}

TuningDatabase::TuningDatabase(std::filesystem::path user_file, const std::filesystem::path& shipped_dir)
    : TuningDatabase(std::move(user_file), shipped_dir, false) {}

TuningDatabase TuningDatabase::open_for_lookups(std::filesystem::path user_file,
                                                const std::filesystem::path& shipped_dir) {
  TuningDatabase db(std::move(user_file), shipped_dir, true);
  // Once per file and process: plans look the database up for every layer, and one warning says it all.
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (!db.user_file_error().empty() && warned.insert(db.user_file().string()).second) {
    std::cerr << fmt::format("convtune: warning: {}; plans go on without this file (shipped and built-in defaults "
                             "only). Fix or move it; `convtune db list` shows the problem.\n",
                             db.user_file_error());
  }
  for (const std::string& error : db.damaged_entries()) {
    if (warned.insert(error).second)
      std::cerr << fmt::format("convtune: warning: {}; plans go on without this entry (the file's other entries are "
                               "used). Fix or remove it.\n", error);
  }
  for (const std::string& error : db.shipped_file_errors()) {
    if (warned.insert(error).second)
      std::cerr << fmt::format("convtune: warning: {}; plans go on without this shipped file.\n", error);
  }
  return db;
}

TuningDatabase::TuningDatabase(std::filesystem::path user_file, const std::filesystem::path& shipped_dir,
                               bool tolerate_shipped)
    : user_file_(std::move(user_file)), user_origin_(user_file_.string()) {
  std::error_code ec;
  if (std::filesystem::exists(user_file_, ec) || ec) {
    try {
      TuningFileEntries read = read_tuning_file_entries(user_file_);
      for (TuningEntry& e : read.entries) insert_keeping_faster(user_entries_, std::move(e));
      damaged_entries_ = std::move(read.damaged);
    } catch (const TuningDatabaseError& e) {
      // Keep nothing from a damaged file: half of it could be mistaken for all of it and then saved.
      user_entries_.clear();
      user_file_error_ = e.what();
    }
  }

  if (shipped_dir.empty()) return;
  if (!std::filesystem::is_directory(shipped_dir, ec))
    throw TuningDatabaseError(shipped_dir, fmt::format("shipped tuning defaults directory {} does not exist",
                                                       shipped_dir.string()));
  for (const auto& item : std::filesystem::directory_iterator(shipped_dir))
    if (item.is_regular_file() && item.path().extension() == ".json") shipped_files_.push_back(item.path());
  std::sort(shipped_files_.begin(), shipped_files_.end());
  for (const auto& file : shipped_files_) {
    try {
      TuningFileEntries read = read_tuning_file_entries(file);
      if (!read.damaged.empty() && !tolerate_shipped) throw TuningDatabaseError(file, read.damaged.front());
      for (TuningEntry& e : read.entries) shipped_entries_.emplace_back(std::move(e), file.string());
      for (std::string& error : read.damaged) shipped_file_errors_.push_back(std::move(error));
    } catch (const TuningDatabaseError& e) {
      if (!tolerate_shipped) throw;
      shipped_file_errors_.push_back(e.what());
    }
  }
}

LookupResult TuningDatabase::lookup(const Problem& problem, const DeviceInfo& device,
                                    const KernelVersions& kernel_versions,
                                    const LookupOptions& options) const {
  std::vector<LookupCandidate> candidates;
  candidates.reserve(user_entries_.size() + shipped_entries_.size());
  // User entries first: on equal rank the user's own measurement beats a shipped one.
  for (const auto& [key, e] : user_entries_) candidates.push_back({&e, &user_origin_});
  for (const auto& [e, origin] : shipped_entries_) candidates.push_back({&e, &origin});
  return lookup_tuning(candidates, problem, device, kernel_versions, options);
}

uint64_t TuningDatabase::next_revision() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

InsertOutcome TuningDatabase::insert(TuningEntry entry) {
  const std::string what = fmt::format("tuning entry ({} {})", entry.family, entry.problem.to_string());
  if (entry.family.empty()) throw InvalidArgument(fmt::format("{}: field 'family' is empty", what));
  if (entry.device.fingerprint.empty())
    throw InvalidArgument(fmt::format("{}: field 'device.fingerprint' is empty", what));
  if (!(entry.time_ms > 0))
    throw InvalidArgument(fmt::format("{}: field 'time_ms' is {}: expected a positive time", what, entry.time_ms));
  revision_ = next_revision();
  std::string key = entry.key();
  const InsertOutcome outcome = insert_keeping_faster(user_entries_, std::move(entry));
  if (outcome != InsertOutcome::KeptExisting) changed_keys_.insert(std::move(key));
  return outcome;
}

MergeCounts TuningDatabase::merge(const std::vector<TuningEntry>& entries) {
  MergeCounts counts;
  for (const TuningEntry& e : entries) {
    switch (insert(e)) {
      case InsertOutcome::Added: ++counts.added; break;
      case InsertOutcome::Replaced: ++counts.replaced; break;
      case InsertOutcome::KeptExisting: ++counts.kept; break;
    }
  }
  return counts;
}

MergeCounts TuningDatabase::merge_file(const std::filesystem::path& path) {
  TuningFileEntries read = read_tuning_file_entries(path);
  MergeCounts counts = merge(read.entries);
  counts.damaged = std::move(read.damaged);
  return counts;
}

std::string TuningDatabase::save_refusal() const {
  if (!user_file_error_.empty()) return user_file_error_;
  if (damaged_entries_.empty()) return {};
  return fmt::format("{}{}: writing the file would drop {}", damaged_entries_.front(),
                     damaged_entries_.size() > 1 ? fmt::format(" (and {} more damaged entries)", damaged_entries_.size() - 1)
                                                 : std::string(),
                     damaged_entries_.size() > 1 ? "them" : "it");
}

size_t TuningDatabase::prune_if(const std::function<bool(const TuningEntry&)>& remove) {
  revision_ = next_revision();
  size_t removed = 0;
  for (auto it = user_entries_.begin(); it != user_entries_.end();) {
    if (remove(it->second)) {
      pruned_keys_.insert(it->first);
      changed_keys_.erase(it->first);
      it = user_entries_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

size_t TuningDatabase::prune_stale(const std::vector<DeviceInfo>& devices,
                                   const KernelVersions& kernel_versions) {
  return prune_if([&](const TuningEntry& e) {
    const auto family = kernel_versions.find(e.family);
    if (family != kernel_versions.end() && family->second != e.kernel_version) return true;
    return std::any_of(devices.begin(), devices.end(), [&](const DeviceInfo& d) {
      return e.device.same_hardware(d) && e.device.fingerprint != d.fingerprint();
    });
  });
}

size_t TuningDatabase::prune_device(std::string_view device) {
  return prune_if([&](const TuningEntry& e) { return e.device.fingerprint == device || e.device.name == device; });
}

void TuningDatabase::save() {
  revision_ = next_revision();  // entries other processes saved are folded in
  FileLock lock(user_file_);
  remove_stale_temporaries(user_file_);
  // The file as it is now, less what this database pruned, plus what it inserted since its last save (the faster per
  // key). Only this database's own changes are written over the file: an entry another process removed stays removed
  // even where this one had read it (the tuner prunes its own stored entry when today's plan wins the second
  // opinion; a concurrent tuner that had folded that entry in must not write it back).
  std::map<std::string, TuningEntry> written;
  std::error_code ec;
  const bool on_disk_exists = std::filesystem::exists(user_file_, ec) || ec;
  if (on_disk_exists) {
    std::vector<TuningEntry> on_disk;
    try {
      on_disk = read_tuning_file(user_file_);
    } catch (const TuningDatabaseError& e) {
      throw TuningDatabaseError(
          user_file_, fmt::format("refusing to save the tuning database: {}. The file was left untouched; fix or "
                                  "remove {}, then save again",
                                  e.what(), user_file_.string()));
    }
    for (TuningEntry& e : on_disk)
      if (!pruned_keys_.count(e.key())) insert_keeping_faster(written, std::move(e));
    for (const std::string& key : changed_keys_)
      if (const auto it = user_entries_.find(key); it != user_entries_.end()) insert_keeping_faster(written, it->second);
  } else {
    written = user_entries_;  // a new (or removed) file: everything this database holds
  }
  std::vector<const TuningEntry*> ordered;
  ordered.reserve(written.size());
  for (const auto& [key, e] : written) ordered.push_back(&e);
  write_file_atomic(user_file_, tuning_file_text(ordered));
  user_entries_ = std::move(written);
  changed_keys_.clear();
  pruned_keys_.clear();
  user_file_error_.clear();
  damaged_entries_.clear();
}

std::vector<ListedEntry> TuningDatabase::list(const EntryFilter& filter) const {
  auto matches = [&](const TuningEntry& e) {
    if (!filter.family.empty() && e.family != filter.family) return false;
    if (filter.direction && (!e.problem.is_conv() || e.problem.conv().direction != *filter.direction)) return false;
    if (!filter.device.empty() && e.device.name.find(filter.device) == std::string::npos &&
        e.device.fingerprint.find(filter.device) == std::string::npos)
      return false;
    return true;
  };
  std::vector<ListedEntry> out;
  for (const auto& [key, e] : user_entries_)
    if (matches(e)) out.push_back({e, user_origin_, false});
  if (filter.include_shipped)
    for (const auto& [e, origin] : shipped_entries_)
      if (matches(e)) out.push_back({e, origin, true});
  return out;
}

}  // namespace convtune
