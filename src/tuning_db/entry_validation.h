// A tuning entry checked against what its kernel family declares (the search space a tuner could have stored it
// from): kept apart from the file format so that what an entry identifies can change without touching it.
#pragma once

#include <string>

#include "convtune/tuning.h"

namespace convtune {

// Empty when `entry` names a kernel family of this convtune that computes its kind of problem and every parameter
// the family declares for the entry's problem holds one of its declared values; otherwise why not, as
// "field 'parameters.COLS' is -1: expected one of 1, 2, 4 (cpu_blocked's declared values)". Parameters the family
// does not declare, or declared ones the entry lacks, are not damage: they mark an entry of other kernel code,
// which lookups already never run (fit_config refuses other parameter sets).
std::string search_space_violation(const TuningEntry& entry);

}  // namespace convtune
