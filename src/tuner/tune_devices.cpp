// tune_devices(): one tuning run spread over several alike devices (the GPUs of one host). A thread per device takes
// the next task, tunes it with tune() into a scratch database of its own, and the result is merged into the caller's
// database (saved after every task), so the merged file is what one device would have produced, in less time.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/tuning.h"
#include "src/tuner/skip_tuned.h"
#include "src/tuner/task_spread.h"

namespace convtune {

void spread_tasks(size_t workers, size_t tasks, double budget_seconds,
                  const std::function<double(size_t, size_t, double)>& run, double min_share) {
  std::mutex mutex;
  size_t next = 0;
  double used = 0;       // seconds the finished tasks took
  double committed = 0;  // budgets handed to tasks still running
  std::exception_ptr failure;
  auto work = [&](size_t worker) {
    for (;;) {
      size_t task = 0;
      double share = 0;
      {
        std::lock_guard lock(mutex);
        if (failure || next == tasks) return;
        task = next++;
        share = std::max(min_share, std::max(0.0, budget_seconds - used - committed) / static_cast<double>(tasks - task));
        committed += share;
      }
      double took = 0;
      try {
        took = run(worker, task, share);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
      std::lock_guard lock(mutex);
      used += took;
      committed -= share;
    }
  };
  std::vector<std::thread> threads;
  const size_t count = std::min(workers, tasks);
  // Worker 0 runs on the calling thread: one worker is then exactly a loop over the tasks.
  for (size_t w = 1; w < count; ++w) threads.emplace_back(work, w);
  if (count > 0) work(0);
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

namespace {

void check_devices(const std::vector<Device*>& devices) {
  if (devices.empty()) throw InvalidArgument("tune_devices: the device list is empty: expected one or more devices");
  std::set<std::string> ids;
  for (const Device* d : devices) {
    if (!d) throw InvalidArgument("tune_devices: a device in the list is null");
    if (!ids.insert(d->info().id).second) {
      throw InvalidArgument(fmt::format("tune_devices: {} is listed twice: expected each device once", d->info().id));
    }
    // Entries are keyed by the device's fingerprint: a task tuned on one device of a list stands for all of them
    // only when they are alike.
    const DeviceInfo& first = devices.front()->info();
    if (d->info().fingerprint() != first.fingerprint()) {
      throw InvalidArgument(fmt::format(
          "tune_devices: {} ({}) and {} ({}) differ: tasks are shared only among alike devices (same backend, model "
          "and driver), since each task is tuned on one of them; tune each kind of device in its own run",
          first.id, first.name, d->info().id, d->info().name));
    }
  }
}

InsertOutcome outcome(const MergeCounts& counts) {
  if (counts.replaced) return InsertOutcome::Replaced;
  if (counts.added) return InsertOutcome::Added;
  return InsertOutcome::KeptExisting;
}

}  // namespace

std::vector<TuneTaskResult> tune_devices(const std::vector<Device*>& devices, const std::vector<TuneTask>& all_tasks,
                                         TuningDatabase& database, const TuneOptions& options,
                                         const TuneCallbacks& callbacks) {
  check_devices(devices);
  // tune() checks the options and the database; with no tasks it does nothing else, so bad input fails here,
  // before any thread starts.
  tune(*devices.front(), {}, database, options);
  if (devices.size() == 1) return tune(*devices.front(), all_tasks, database, options, callbacks);

  const std::vector<TuneTask> tasks =
      tasks_to_tune(all_tasks, database, devices.front()->info(), options.skip_tuned);

  // Compiling ahead is CPU work: the devices share the host's cores instead of each taking tune()'s default.
  int jobs = options.jobs;
  if (jobs <= 0) {
    const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
    jobs = static_cast<int>(std::clamp<size_t>((hardware - 1) / devices.size(), 1, 8));
  }

  // A problem's tasks (one per family, listed together) go to one worker in one tune() call: tune() measures the
  // problem's plan once for all its families and stores that plan when no family beat it, so a call per family
  // would measure it again and store it beside each family's entry (seen once the CPU had two families to tune).
  std::vector<std::pair<size_t, size_t>> groups;  // [begin, end) of tasks
  for (size_t begin = 0; begin < tasks.size();) {
    size_t end = begin + 1;
    while (end < tasks.size() && tasks[end].problem == tasks[begin].problem) ++end;
    groups.emplace_back(begin, end);
    begin = end;
  }

  std::mutex database_mutex;  // the caller's database and its file
  std::mutex callback_mutex;  // callbacks run one at a time, as they do from tune()
  std::vector<std::optional<TuneTaskResult>> results(tasks.size());
  spread_tasks(devices.size(), groups.size(), options.budget_seconds, [&](size_t worker, size_t g, double share) {
    const auto start = std::chrono::steady_clock::now();
    // Plain variables, not a structured binding: the lambdas below capture them (clang before 16 refuses that).
    const size_t begin = groups[g].first, end = groups[g].second;
    const std::vector<TuneTask> group(tasks.begin() + static_cast<std::ptrdiff_t>(begin),
                                      tasks.begin() + static_cast<std::ptrdiff_t>(end));
    // The task of `group` a result or callback is about, as an index into the whole run's tasks.
    auto index_of = [&](const TuneTask& task) {
      for (size_t i = begin; i < end; ++i)
        if (tasks[i].family == task.family && tasks[i].problem == task.problem) return i;
      return begin;
    };
    TuneOptions task_options = options;
    task_options.budget_seconds = share;
    task_options.seed = options.seed + begin;  // tune() adds the task's index in the call: the whole run's seeds
    task_options.jobs = jobs;
    task_options.skip_tuned = false;
    task_options.save = false;
    TuneCallbacks wrapped;
    if (callbacks.task_started) {
      wrapped.task_started = [&](const TuneTask& task, size_t, size_t) {
        std::lock_guard lock(callback_mutex);
        callbacks.task_started(task, index_of(task), tasks.size());
      };
    }
    if (callbacks.trial_done) {
      wrapped.trial_done = [&](const TuneTaskResult& so_far, const TuneTrial& trial, double fraction) {
        std::lock_guard lock(callback_mutex);
        callbacks.trial_done(so_far, trial, fraction);
      };
    }
    TuningDatabase scratch{std::filesystem::path()};  // no file: receives this problem's entries only
    std::set<std::string> merged;                     // keys of scratch entries already in the caller's database
    auto merge_entries = [&](const std::function<bool(const TuningEntry&)>& which) {
      std::vector<TuningEntry> entries;
      for (ListedEntry& e : scratch.list({"", "", std::nullopt, false}))
        if (!merged.count(e.entry.key()) && which(e.entry)) entries.push_back(std::move(e.entry));
      for (const TuningEntry& e : entries) merged.insert(e.key());
      std::lock_guard lock(database_mutex);
      const MergeCounts counts = database.merge(entries);
      if (options.save && !entries.empty()) database.save();
      return counts;
    };
    // The merge happens before task_done, so the callback sees what the caller's database did with the result:
    // the task's own entry (its family's, for its problem).
    wrapped.task_done = [&](const TuneTaskResult& done) {
      TuneTaskResult result = done;
      if (result.stored) {
        result.stored = outcome(merge_entries([&](const TuningEntry& e) {
          return e.family == done.task.family->name() && e.problem == done.task.problem;
        }));
      }
      results[index_of(done.task)] = result;
      if (callbacks.task_done) {
        std::lock_guard lock(callback_mutex);
        callbacks.task_done(result);
      }
    };
    tune(*devices[worker], group, scratch, task_options, wrapped);
    merge_entries([](const TuningEntry&) { return true; });  // the plan kept for a family not tuned here, say
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });

  std::vector<TuneTaskResult> ordered;
  for (auto& r : results)
    if (r) ordered.push_back(std::move(*r));
  return ordered;
}

}  // namespace convtune
