// spread_tasks(): hands tasks in order to whichever worker is free and gives each task its share of a common
// budget, the way tune() shares its budget on one device; tune_devices() runs it with one worker per device.
#pragma once

#include <cstddef>
#include <functional>

namespace convtune {

// Runs run(worker, task, budget_seconds) for every task 0..tasks-1 on `workers` threads: a free worker takes the
// next task. A task's budget is what is left of `budget_seconds` (less the time used by finished tasks and the
// budgets of tasks still running) divided by the tasks not yet started, at least `min_share`: on one worker this
// is tune()'s own rule (time a task leaves unused goes to the later ones), so n workers finish in about 1/n of
// the time with the same budget per task. run() returns the seconds it used. The first exception a task throws
// stops the handing out; running tasks finish, then it is rethrown.
void spread_tasks(size_t workers, size_t tasks, double budget_seconds,
                  const std::function<double(size_t worker, size_t task, double budget_seconds)>& run,
                  double min_share = 1e-3);

}  // namespace convtune
