// TuneLog: every candidate a `convtune tune` run measured (and each task's outcome), as JSON or CSV; `convtune
// report` reads the JSON form back.
#pragma once

#include <filesystem>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "convtune/extension/kernel_family.h"
#include "convtune/problem.h"
#include "convtune/tuning.h"

namespace convtune::cli {

// One layer x direction x family of a tuning run.
struct TaskSummary {
  std::string layer;
  Problem problem;
  std::string family;
  size_t space = 0;  // valid configurations
  size_t tried = 0;
  size_t failed = 0;
  double default_ms = 0;  // the family's built-in default; 0 when it failed
  double best_ms = 0;     // 0 when nothing worked
  Config best_config;
  std::string stop_reason;
};

struct LoggedTrial {
  std::string layer;
  Problem problem;  // a convolution's direction included
  std::string family;
  Config config;
  std::string status;  // "ok", "compile error", "launch error", "wrong result"
  double ms = 0;       // 0 unless ok
  double gflops = 0;
  double wall_ms = 0;  // compile + verify + time
  std::string note;    // "built-in default", "timed once: 3.2x the best so far"
  std::string failure;
};

// A log of a whole day's tuning is a few MB; a file far beyond that is not a tuning log.
inline constexpr uint64_t kMaxTuneLogBytes = uint64_t{256} << 20;

class TuneLog {
 public:
  explicit TuneLog(std::filesystem::path path) : path_(std::move(path)) {}
  // Reads a JSON log (a regular file of at most kMaxTuneLogBytes); throws InvalidArgument naming the file, the
  // entry (trials[3]) and the field, and what was expected.
  static TuneLog load(const std::filesystem::path& path);
  // The same for text already read; `path` names it in errors.
  static TuneLog parse(std::string_view text, const std::filesystem::path& path);

  nlohmann::json metadata = nlohmann::json::object();
  std::vector<LoggedTrial> trials;
  std::vector<TaskSummary> tasks;

  void add_trial(const TaskSummary& task, const TuneTrial& trial);
  void add_task(const TaskSummary& task) { tasks.push_back(task); }
  // Writes .json or .csv (by extension) atomically into an existing folder; throws InvalidArgument for others.
  void save() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace convtune::cli
