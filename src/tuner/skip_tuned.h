// tasks_to_tune(): the tasks a run tunes, leaving out with skip_tuned those the database already holds a current
// exact entry for; tune() and tune_devices() both start from it, so a task's index (and seed) is the same in both.
#pragma once

#include <vector>

#include "convtune/tuning.h"

namespace convtune {

std::vector<TuneTask> tasks_to_tune(const std::vector<TuneTask>& tasks, const TuningDatabase& database,
                                    const DeviceInfo& device, bool skip_tuned);

}  // namespace convtune
