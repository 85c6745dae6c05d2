// The tuning database's internal pieces in one include: the public class (convtune/tuning.h), its file format and
// its lookup.
#pragma once

#include "convtune/tuning.h"
#include "src/tuning_db/tuning_db_file.h"
#include "src/tuning_db/tuning_entry.h"
#include "src/tuning_db/tuning_lookup.h"
