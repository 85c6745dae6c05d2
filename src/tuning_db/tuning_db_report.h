// Text for `convtune db list` and `convtune db show`: a table of entries and one entry in full.
#pragma once

#include <string>
#include <vector>

#include "src/tuning_db/tuning_database.h"

namespace convtune {

// One row per entry, numbered from 1 in the given order (what `db show N` takes):
// "#  device  family  dir  problem  time ms  GFLOP/s  date  origin".
std::string format_entry_table(const std::vector<ListedEntry>& entries);

// Every field of one entry, one per line.
std::string format_entry_details(const ListedEntry& entry);

}  // namespace convtune
