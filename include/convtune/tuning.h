// Tuning: the tuning database (the user's file plus the defaults convtune ships, with a fallback lookup for shapes
// never tuned) and the tuner that fills it, as library functions: a program tunes its own layers in-process with
// tune() and its plans pick the results up through the database.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/config.h"
#include "convtune/plan.h"
#include "convtune/problem.h"

namespace convtune {

// ---- Entries ----

// The device an entry was measured on. The fingerprint decides exact matches; the separate fields serve the
// architecture and vendor fallbacks and tell a driver update (same device, other driver) from another device.
struct TuningDevice {
  std::string fingerprint;  // DeviceInfo::fingerprint() at measurement time
  std::string backend;      // "cuda", "opencl", "cpu"
  std::string name;
  std::string vendor;
  std::string architecture;
  std::string driver_version;

  static TuningDevice from(const DeviceInfo& info);
  // Same hardware behind the same backend, whatever the driver.
  bool same_hardware(const DeviceInfo& info) const;
  // The same chip (name and architecture) behind the other kernel backend: CUDA for NVIDIA's OpenCL, or back.
  bool same_chip_other_backend(const DeviceInfo& info) const;
  friend bool operator==(const TuningDevice& a, const TuningDevice& b) {
    return a.fingerprint == b.fingerprint && a.backend == b.backend && a.name == b.name && a.vendor == b.vendor &&
           a.architecture == b.architecture && a.driver_version == b.driver_version;
  }
  friend bool operator!=(const TuningDevice& a, const TuningDevice& b) { return !(a == b); }
};

// Family name -> the kernel version it runs today (KernelFamily::kernel_version): entries measured under another
// version are stale.
using KernelVersions = std::map<std::string, int>;

struct TuningEntry {
  TuningDevice device;
  std::string family;
  // The family's kernel version when it was measured (KernelFamily::kernel_version); 0 for entries written before
  // families declared versions (they carried a hash of the kernel source instead), which no family runs now.
  int kernel_version = 0;
  Problem problem;          // a convolution (direction, type and math included) or a GEMM
  Config parameters;
  double time_ms = 0;
  double gflops = 0;
  std::string date;              // UTC, ISO 8601: "2025-03-01T12:00:00Z"
  std::string convtune_version;  // of the convtune that measured it

  // Entries with equal keys describe the same measurement target; a database keeps the fastest of them.
  // Driver and kernel version are part of it (through the fingerprint and the version), so a retune after an update
  // never competes with the stale result: that one stays until pruned and is never trusted.
  std::string key() const;
  friend bool operator==(const TuningEntry& a, const TuningEntry& b) {
    return a.device == b.device && a.family == b.family && a.kernel_version == b.kernel_version && a.problem == b.problem &&
           a.parameters == b.parameters && a.time_ms == b.time_ms && a.gflops == b.gflops && a.date == b.date &&
           a.convtune_version == b.convtune_version;
  }
  friend bool operator!=(const TuningEntry& a, const TuningEntry& b) { return !(a == b); }
};

// A fresh entry measured now: GFLOP/s from the problem's FLOP count, today's date, this convtune's version.
TuningEntry make_tuning_entry(const DeviceInfo& device, std::string family, int kernel_version,
                              const Problem& problem, Config parameters, double time_ms);

// Empty when `entry` can be trusted on `device` with the family's current kernel version; else why not
// ("kernel version changed: entry measured with version 1, now 2", "driver 535.104 -> 550.54"). A different
// device's driver is not a reason: that entry is judged by its own hardware, and only the version applies.
std::string stale_reason(const TuningEntry& entry, const DeviceInfo& device, int current_kernel_version);

std::string_view convtune_version();
std::string utc_date_now();

// ---- Lookup ----

// How far a tuned shape may be for its parameters to stand in for another's: 6, a factor of 64 over the five
// extents together. Measured on the H200: eight layers at distances 0.4-4.6 from tuned AlexNet layers ran at 86-115%
// of their own tuned time on their neighbours' parameters; the seed layers at 9.8-14.6 ran slower on AlexNet's
// parameters than on the built-in defaults in five of nine rows, up to 3.1x. Beyond this distance the built-in
// default, which is chosen from the problem's own shape, is used instead.
inline constexpr double kMaxNearestShapeDistance = 6;

// The tiers are ConfigTier's but Given: Exact (this device and driver, this exact problem), Nearest (this device,
// the nearest comparable shape), Architecture and Vendor (another device of the same backend and architecture or
// vendor; exact or nearest shape), BuiltInDefault (nothing usable). Tried in that order, except that an exact-shape
// Architecture entry comes before a Nearest one.
using LookupTier = ConfigTier;

// An entry the lookup saw but did not use, and why.
struct SkippedEntry {
  TuningEntry entry;
  std::string origin;  // the file it came from
  std::string reason;
};

struct LookupResult {
  LookupTier tier = LookupTier::BuiltInDefault;
  std::optional<TuningEntry> entry;  // absent only for BuiltInDefault
  std::string origin;                // the file the entry came from
  double distance = 0;               // shape distance of the asked problem to entry->problem; 0 for an exact shape
  double max_distance = kMaxNearestShapeDistance;  // the farthest shape the lookup considered
  // What to run: the entry's parameters, or those LookupOptions::fit made of them for the asked problem.
  Config parameters;
  std::string fitted;  // what fitting changed ("SPLIT_K 32 -> 16"); empty when the entry's parameters fit as stored
  // The entry was measured on this same chip through the other kernel backend (CUDA for OpenCL or back); its tier
  // is then Architecture.
  bool other_backend = false;
  // Entries for the asked problem (exact shape) on this device or a fallback device that are stale (other
  // kernel source, other driver) and were not trusted: worth a retune.
  std::vector<SkippedEntry> stale;
  // Entries LookupOptions::fit refused (parameters that cannot be made to fit the asked problem).
  std::vector<SkippedEntry> rejected;
  // Entries LookupOptions::refuse kept from this request (a variant its math mode does not admit, a workspace
  // over its limit), each with why.
  std::vector<SkippedEntry> refused;

  // One line for logs and `convtune` output, e.g. "nearest tuned shape N=1,C=64,... (distance 1) on
  // NVIDIA H100: implicit_gemm TILE_M=64,... 0.412 ms; 1 stale entry ignored (kernel source changed: ...)".
  std::string explain() const;
};

struct LookupOptions {
  // The parameters a stored entry gives the asked problem: its own when they fit, else the closest ones that do
  // (see fit_config in convtune/plan.h), or nullopt when none can, and the entry is skipped. A nearest shape thus
  // never hands back parameters that do not run. Unset: every entry's parameters are taken as stored.
  std::function<std::optional<FittedConfig>(const TuningEntry&)> fit;
  // Why this request may not use an entry with the parameters `fit` gave it (empty: it may): such an entry is
  // skipped, the family's next one tried, and it is listed in LookupResult::refused. Unset: none is refused.
  std::function<std::string(const TuningEntry& entry, const Config& parameters)> refuse;
  // Tuned shapes farther than this are not used at all (see kMaxNearestShapeDistance).
  double max_distance = kMaxNearestShapeDistance;
};

// ---- The database ----

// A database file that cannot be read or parsed, or holds an invalid entry. what() names the file (and the
// entry and field when it is one entry).
class TuningDatabaseError : public Error {
 public:
  TuningDatabaseError(std::filesystem::path path, const std::string& message)
      : Error(message), path_(std::move(path)) {}
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

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
  std::vector<std::string> damaged;  // entries of the merged file left out, each with why (file, entry, field)
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
  // The user file's entries left out because they are damaged (a field's type or value, a key twice, a family or
  // parameter value outside what the family declares), each naming the file, the entry and the field; the file's
  // other entries are loaded.
  const std::vector<std::string>& damaged_entries() const { return damaged_entries_; }

  // The best tuned configuration for `problem` on `device` among the families in `kernel_versions` (each
  // family's current kernel version: entries measured under another are stale), by the tiers above.
  LookupResult lookup(const Problem& problem, const DeviceInfo& device,
                      const KernelVersions& kernel_versions,
                      const LookupOptions& options = {}) const;

  // Stores the entry in the user database unless one with the same key is at least as fast.
  // Throws InvalidArgument when the entry lacks a family or device fingerprint or has no positive time.
  InsertOutcome insert(TuningEntry entry);
  // Entries of another database file, keeping the faster per key; its damaged entries are left out and listed in
  // the counts. Throws TuningDatabaseError naming that file when its structure is damaged; this database is then
  // unchanged.
  MergeCounts merge_file(const std::filesystem::path& path);
  MergeCounts merge(const std::vector<TuningEntry>& entries);

  // Removes user entries that are stale: measured on one of `devices` under another driver, or of a family in
  // `kernel_versions` under another kernel version. Entries of devices not listed are kept (nothing here
  // says they are stale). Returns how many were removed.
  size_t prune_stale(const std::vector<DeviceInfo>& devices,
                     const KernelVersions& kernel_versions);
  // Removes user entries whose device fingerprint or name equals `device`.
  size_t prune_device(std::string_view device);
  size_t prune_if(const std::function<bool(const TuningEntry&)>& remove);

  // Writes the user database atomically under an exclusive lock (flock on USER_FILE.lock): reads the file as it is
  // now, with the entries other processes saved since this one loaded, and writes it with this database's own
  // changes since its last save (what it inserted, keeping the faster per key; what it pruned left out), so an
  // entry another process removed is not written back; then holds the file's entries. It writes a temporary file,
  // flushes it and renames it over the database, so any number of concurrent tuners lose nothing and a crash leaves
  // the old or the new file. While it holds the lock it removes temporary files that killed writers left. The folder
  // must exist. Throws TuningDatabaseError naming the file, which stays untouched, when the file on disk is damaged
  // (a damaged entry included: writing would drop it) or unreadable.
  void save();
  // Why save() would refuse the user file as it was loaded (user_file_error(), or its first damaged entry and how
  // many there are); empty when it would not. Writers check it before they start work.
  std::string save_refusal() const;

  std::vector<ListedEntry> list(const EntryFilter& filter = {}) const;
  size_t user_entry_count() const { return user_entries_.size(); }
  size_t shipped_entry_count() const { return shipped_entries_.size(); }
  const std::vector<std::filesystem::path>& shipped_files() const { return shipped_files_; }
  // Shipped files (or damaged entries of them) left out by open_for_lookups(), each with why; empty otherwise.
  const std::vector<std::string>& shipped_file_errors() const { return shipped_file_errors_; }
  // Differs between databases and changes whenever the entries may have (insert, merge, prune, save): what is
  // derived from the entries and cached (the plans' cost model) is keyed by it.
  uint64_t revision() const { return revision_; }

 private:
  static uint64_t next_revision();

  TuningDatabase(std::filesystem::path user_file, const std::filesystem::path& shipped_dir, bool tolerate_shipped);

  std::filesystem::path user_file_;
  std::string user_origin_;
  std::string user_file_error_;
  std::vector<std::string> damaged_entries_;
  std::map<std::string, TuningEntry> user_entries_;  // by key(), so the file is written in a stable order
  std::set<std::string> pruned_keys_;                // so save() does not bring them back from disk
  std::set<std::string> changed_keys_;               // inserted or replaced since the last save: save() writes these
  std::vector<std::filesystem::path> shipped_files_;
  std::vector<std::pair<TuningEntry, std::string>> shipped_entries_;  // entry, origin
  std::vector<std::string> shipped_file_errors_;
  uint64_t revision_ = next_revision();
};

// ---- The tuner ----

// One tuning task: a problem (named for reports, e.g. the layer of a suite) and the family whose configurations
// are searched.
struct TuneTask {
  std::string name;
  Problem problem;
  const KernelFamily* family = nullptr;
};

// The tasks for `problems` on `device`: every family that computes each problem (`family` names one, "all" or ""
// every one). Problems a family does not compute are listed in `skipped` ("name fwd implicit_gemm: why").
std::vector<TuneTask> make_tune_tasks(const DeviceInfo& device, const std::vector<std::pair<std::string, Problem>>& problems,
                                      const std::string& family = "all", std::vector<std::string>* skipped = nullptr);

struct TuneOptions {
  double budget_seconds = 60;  // wall time for the whole run, shared by the tasks
  // The scratch memory (bytes) a candidate may take (PlanRequest::workspace_limit): configurations over it are
  // not searched. Empty: the device's default. Pass the same limit to make_tune_tasks (with_workspace_limit).
  std::optional<uint64_t> workspace_limit;
  std::string strategy = "annealing";  // exhaustive, random, annealing or model
  double max_fraction = 0;             // also stop each task after this fraction of its space (0: no limit)
  size_t max_candidates = 0;           // also stop each task after this many candidates (0: no limit)
  int warmup = 1;
  int repeats = 5;
  double abort_factor = 1.5;  // a candidate whose first run is this many times the best is timed no further
  uint64_t seed = 1;
  int jobs = 0;  // candidates compiled ahead on worker threads (0: cores - 1, at most 8)
  // Search only configurations with these values ("SPLIT_K" -> {1}); the default is measured only inside them.
  std::map<std::string, std::vector<int64_t>> only;
  bool skip_tuned = false;  // leave out tasks the database holds a current exact entry for
  bool save = true;         // save the database after every task (an interrupted run keeps what it found)
  // The device's measured FP32 peak (0: unknown). With it, search time goes where the headroom is: a problem
  // already near the peak gets less of the budget.
  double peak_gflops = 0;
};

// What one candidate gave.
struct TuneTrial {
  Config config;
  std::optional<double> ms;  // nullopt: failed
  std::string failure;       // "compile error: ...", "launch error: ...", "wrong result: ..."
  std::string note;          // "built-in default", "timed once: 3.2x the best so far"
  double wall_ms = 0;        // compile + verify + time
};

struct TuneTaskResult {
  TuneTask task;
  std::string device;  // the id of the device that tuned it ("cuda:1"), which tune_devices() chose
  // The search space is enumerated when the task's search starts (after the run's baselines and defaults), so a
  // task the budget left unsearched has none: space_enumerated false, space 0.
  size_t space = 0;  // valid configurations (within `only`); those found by the deadline when space_partial
  bool space_partial = false;  // the budget ran out while the space was being enumerated
  bool space_enumerated = false;
  size_t tried = 0;
  size_t failed = 0;
  double default_ms = 0;  // the family's built-in default; 0 when it failed or was not measured
  double best_ms = 0;     // 0 when nothing worked
  std::optional<Config> best_config;
  std::string stop_reason;
  std::optional<InsertOutcome> stored;  // what the database did with the best
  // On the first task of a problem whose tuned results were all slower than today's plan: what the database did
  // with that plan, stored as the problem's exact entry instead (stop_reason says so too).
  std::optional<InsertOutcome> plan_kept;
  std::vector<TuneTrial> trials;        // the default first when it was measured
};

struct TuneCallbacks {
  // Every task at the start of the run, before any trial: its index and the task count. (Its search space is
  // enumerated later, when its search starts; the result's `space` holds it.)
  std::function<void(const TuneTask& task, size_t index, size_t count)> task_started;
  // After each candidate of any task; `fraction` estimates how much of that task's search share is used (0 to 1).
  std::function<void(const TuneTaskResult& so_far, const TuneTrial& trial, double fraction)> trial_done;
  // Every task's result at the end of the run.
  std::function<void(const TuneTaskResult& result)> task_done;
  // What the run is doing now, in words ("baselines: ...", "search: ... (12.5 s)"), for progress lines.
  std::function<void(const std::string& text)> status;
};

// Tunes the tasks on `device` within options.budget_seconds of wall time in all (compiles, reference and
// verification included; nothing starts that would likely end past the deadline, and tasks left out say so):
//  1. per problem, today's plan (the database's answer, whatever its tier) and each family's built-in default are
//     measured;
//  2. the time left is shared by expected gain (the problem's current time, times its headroom to peak_gflops);
//     a family whose default is three times the problem's best default is not searched; each search starts from
//     the points already measured. Every candidate is compiled (ahead, on worker threads), run on seeded inputs,
//     verified against the float64 reference at sampled elements, then timed;
//  3. each task's fastest verified configuration goes into `database` (saved after each task when options.save);
//     a problem whose tuned results are all slower than today's plan gets that plan stored as its exact entry, so
//     tuning never makes a problem slower.
// Throws InvalidArgument for a bad strategy or option and TuningDatabaseError when saving fails.
std::vector<TuneTaskResult> tune(Device& device, const std::vector<TuneTask>& tasks, TuningDatabase& database,
                                 const TuneOptions& options = {}, const TuneCallbacks& callbacks = {});

// tune() spread over several alike devices (the GPUs of one host: same backend, model and driver, so one device's
// entry is exact for all): a thread per device takes the next task in order and tunes it with tune() into a scratch
// database of its own; each result is merged into `database` (the faster entry per key, saved after every task
// when options.save). Each task gets the budget share and seed tune() would give it on one device, so n devices
// finish in about 1/n of the time with the same search per task. options.jobs = 0 shares the host's cores among
// the devices. Callbacks are called one at a time from the device threads, with indices of the whole run; a
// result's `device` says which device tuned it. Results come back in task order. Throws InvalidArgument for an
// empty list, a device listed twice or devices that differ, and whatever tune() throws.
std::vector<TuneTaskResult> tune_devices(const std::vector<Device*>& devices, const std::vector<TuneTask>& tasks,
                                         TuningDatabase& database, const TuneOptions& options = {},
                                         const TuneCallbacks& callbacks = {});

}  // namespace convtune
