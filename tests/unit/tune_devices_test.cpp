// tune_devices() and its scheduler: tasks handed out in order to free workers, tune()'s budget rule across workers,
// failures stopping the run, and a real run over two CPU devices that matches tune() on one, merged into one database;
// and tune() on the CPU storing each task's best of both search rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "convtune/convtune.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/tuner/task_spread.h"

using namespace convtune;
namespace fs = std::filesystem;

namespace {

TEST(SpreadTasks, OneWorkerSharesTheBudgetLikeTune) {
  // 4 tasks, 8 s: the first gets 2 s and uses 1; the 7 s left are shared by the 3 others.
  std::vector<double> shares;
  spread_tasks(1, 4, 8.0, [&](size_t worker, size_t, double share) {
    EXPECT_EQ(worker, 0u);
    shares.push_back(share);
    return shares.size() == 1 ? 1.0 : share;
  });
  ASSERT_EQ(shares.size(), 4u);
  EXPECT_DOUBLE_EQ(shares[0], 2.0);
  EXPECT_DOUBLE_EQ(shares[1], 7.0 / 3);
  EXPECT_DOUBLE_EQ(shares[2], 7.0 / 3);
  EXPECT_DOUBLE_EQ(shares[3], 7.0 / 3);
}

TEST(SpreadTasks, WorkersTakeEveryTaskOnceInOrder) {
  std::mutex mutex;
  std::vector<size_t> started;
  std::map<size_t, std::vector<size_t>> by_worker;
  spread_tasks(3, 12, 12.0, [&](size_t worker, size_t task, double share) {
    {
      std::lock_guard lock(mutex);
      started.push_back(task);
      by_worker[worker].push_back(task);
    }
    EXPECT_GT(share, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return share;
  });
  // Every task once. The order of hand-out is only observable per worker: this callback records under its own
  // lock, after spread_tasks handed the task out, so two workers may record in either order (a loaded machine saw it).
  ASSERT_EQ(started.size(), 12u);
  std::sort(started.begin(), started.end());
  for (size_t i = 0; i < started.size(); ++i) EXPECT_EQ(started[i], i);
  for (const auto& [worker, tasks] : by_worker) EXPECT_TRUE(std::is_sorted(tasks.begin(), tasks.end())) << worker;
  EXPECT_EQ(by_worker.size(), 3u);
}

TEST(SpreadTasks, BudgetsOfRunningTasksAreNotGivenTwice) {
  // Two workers, 4 tasks, 8 s: the two first tasks start together with 2 s each, and the later ones share what the
  // first two leave, so the run's budgets add up to the whole budget when every task uses its share.
  std::mutex mutex;
  double total = 0;
  spread_tasks(2, 4, 8.0, [&](size_t, size_t, double share) {
    std::lock_guard lock(mutex);
    total += share;
    return share;
  });
  EXPECT_NEAR(total, 8.0, 1e-9);
}

TEST(SpreadTasks, AFailureStopsTheHandingOutAndIsRethrown) {
  std::atomic<int> ran{0};
  EXPECT_THROW(spread_tasks(2, 50, 1.0,
                            [&](size_t, size_t task, double) -> double {
                              ++ran;
                              if (task == 3) throw std::runtime_error("task 3 failed");
                              std::this_thread::sleep_for(std::chrono::milliseconds(2));
                              return 0.0;
                            }),
               std::runtime_error);
  EXPECT_LT(ran.load(), 50);
}

// A CPU device under another id: two of them are two alike devices (same fingerprint) with their own queues.
class RenamedDevice final : public Device {
 public:
  RenamedDevice(Device& inner, std::string id) : inner_(inner), info_(inner.info()) { info_.id = std::move(id); }
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override { return inner_.allocate(bytes); }
  Queue& queue() override { return inner_.queue(); }
  std::shared_ptr<Program> build(const ProgramSource& source) override { return inner_.build(source); }

 private:
  Device& inner_;
  DeviceInfo info_;
};

std::vector<TuneTask> cpu_tasks(const DeviceInfo& device) {
  std::vector<std::pair<std::string, Problem>> problems;
  const ConvProblem layer = parse_problem("N=2,C=4,H=8,K=8,R=3,pad=1");
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
    problems.emplace_back("small", layer.with_direction(d));
  problems.emplace_back("gemm", parse_gemm("M=16,N=24,K=32"));
  return make_tune_tasks(device, problems);
}

TEST(TuneDevices, TwoAlikeDevicesGiveTuneResultsInOneDatabase) {
  auto backend_a = cpu::make_cpu_backend();
  auto backend_b = cpu::make_cpu_backend();
  RenamedDevice a(backend_a->device(0), "cpu");
  RenamedDevice b(backend_b->device(0), "cpu:b");
  const std::vector<TuneTask> tasks = cpu_tasks(a.info());
  ASSERT_GE(tasks.size(), 4u);
  TuneOptions options;
  options.budget_seconds = 600;  // the candidate count decides, so both runs search the same configurations
  options.max_candidates = 2;
  options.warmup = 0;
  options.repeats = 1;
  options.save = false;
  options.jobs = 1;

  TuningDatabase single_db{fs::path()};
  const std::vector<TuneTaskResult> single = tune(a, tasks, single_db, options);
  TuningDatabase spread_db{fs::path()};
  size_t started = 0, done = 0;
  std::set<std::string> devices_used;
  TuneCallbacks callbacks;
  callbacks.task_started = [&](const TuneTask&, size_t index, size_t count) {
    EXPECT_LT(index, count);
    EXPECT_EQ(count, tasks.size());
    ++started;
  };
  callbacks.task_done = [&](const TuneTaskResult& r) {
    ++done;
    devices_used.insert(r.device);
    if (!r.stored) {  // the second opinion found today's plan at least as fast, and it was stored instead
      EXPECT_NE(r.stop_reason.find("not kept: timed again"), std::string::npos) << r.stop_reason;
      return;
    }
    EXPECT_EQ(*r.stored, InsertOutcome::Added);  // what the caller's database did, not the scratch one
  };
  const std::vector<TuneTaskResult> spread = tune_devices({&a, &b}, tasks, spread_db, options, callbacks);

  ASSERT_EQ(spread.size(), single.size());
  EXPECT_EQ(started, tasks.size());
  EXPECT_EQ(done, tasks.size());
  // Every problem has its entries in both databases. Their counts may differ: where a problem's best is not today's
  // plan, the second opinion times both again, and on layers this small which one wins (the plan, stored in place of
  // the search's entries, or the search's best) is a matter of timing noise.
  for (const TuneTask& t : tasks) {
    EntryFilter filter;
    const auto has = [&](const TuningDatabase& db) {
      for (const ListedEntry& listed : db.list(filter))
        if (listed.entry.problem == t.problem) return true;
      return false;
    };
    EXPECT_TRUE(has(single_db)) << t.problem.to_string();
    EXPECT_TRUE(has(spread_db)) << t.problem.to_string();
  }
  for (size_t t = 0; t < spread.size(); ++t) {
    EXPECT_EQ(spread[t].task.name, tasks[t].name);
    EXPECT_EQ(spread[t].task.problem, tasks[t].problem);
    // A family whose default is far slower than the best family's is not searched, a decision on measured times:
    // on the CPU, cpu_direct beside cpu_blocked falls either side of it from run to run. Compared where both runs
    // decided alike.
    const auto unsearched = [](const TuneTaskResult& r) { return r.stop_reason.rfind("not searched", 0) == 0; };
    if (unsearched(spread[t]) != unsearched(single[t])) continue;
    ASSERT_EQ(spread[t].trials.size(), single[t].trials.size()) << t;
    for (size_t i = 0; i < spread[t].trials.size(); ++i)  // the same seed per task: the same candidates
      EXPECT_EQ(spread[t].trials[i].config, single[t].trials[i].config) << t << " " << i;
  }
  for (const TuneTaskResult& r : single) EXPECT_EQ(r.device, "cpu");
  EXPECT_TRUE(devices_used.count("cpu") || devices_used.count("cpu:b"));
}

TEST(Tune, StoresEachTasksBestOfBothSearchRounds) {
  // The search runs in two rounds and stores each task's best after each. What the database holds at the end is the
  // best of both: a second round's better configuration replaces the first round's entry (it used to be dropped).
  // Whether a second round beats the first here is a matter of timing, so this checks the invariant on every run
  // but catches the old behaviour only on the runs where it does (none of the six tried; a tune on an H100 did).
  auto backend = cpu::make_cpu_backend();
  Device& cpu = backend->device(0);
  std::vector<std::pair<std::string, Problem>> problems;
  // A space too large to search in the first round (thousands of configurations at 0.3-0.5 ms each), so the
  // second round runs; a 3x3 layer, so Winograd's and the direct form's configurations both compete.
  const ConvProblem layer = parse_problem("N=4,C=64,H=28,K=64,R=3,pad=1");
  for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
    problems.emplace_back("layer", layer.with_direction(d));
  TuneOptions options;
  options.budget_seconds = 6;
  options.save = false;
  TuningDatabase db{fs::path()};
  const std::vector<TuneTaskResult> results =
      tune(cpu, make_tune_tasks(cpu.info(), problems, "cpu_blocked"), db, options);
  size_t checked = 0, kept = 0;
  for (const TuneTaskResult& r : results) {
    // Today's plan faster on the second opinion: it is the problem's exact entry instead (of this same family here,
    // so it replaced the search's entry under the same key; a slow run, as under the sanitizers, often ends so).
    if (r.plan_kept || !r.stored || !r.best_config) {
      ++kept;
      continue;
    }
    std::optional<TuningEntry> held;
    for (const ListedEntry& listed : db.list(EntryFilter{}))
      if (listed.entry.family == r.task.family->name() && listed.entry.problem == r.task.problem) held = listed.entry;
    ASSERT_TRUE(held) << r.task.problem.to_string();
    EXPECT_EQ(held->parameters, *r.best_config) << r.task.problem.to_string() << ": " << r.stop_reason;
    EXPECT_DOUBLE_EQ(held->time_ms, r.best_ms);
    EXPECT_EQ(*r.stored, InsertOutcome::Added);  // the task's first entry; later rounds replace only their own
    ++checked;
  }
  EXPECT_EQ(checked + kept, results.size());
  std::cout << "tune: " << checked << " task(s) hold their best, " << kept << " kept today's plan\n";
}

TEST(TuneDevices, RefusesEmptyDuplicateAndUnlikeLists) {
  Device& cpu = device("cpu");
  TuningDatabase db{fs::path()};
  const std::vector<TuneTask> tasks = cpu_tasks(cpu.info());
  try {
    tune_devices({}, tasks, db);
    FAIL() << "an empty list was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("list is empty"), std::string::npos) << e.what();
  }
  try {
    tune_devices({&cpu, &cpu}, tasks, db);
    FAIL() << "a device listed twice was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cpu is listed twice"), std::string::npos) << e.what();
  }
  for (Device* other : Registry::instance().all_devices()) {
    if (other->info().fingerprint() == cpu.info().fingerprint()) continue;
    try {
      tune_devices({&cpu, other}, tasks, db);
      FAIL() << "unlike devices were accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("differ"), std::string::npos) << e.what();
    }
    break;
  }
  TuneOptions bad;
  bad.budget_seconds = -1;
  EXPECT_THROW(tune_devices({&cpu}, tasks, db, bad), InvalidArgument);
}

}  // namespace
