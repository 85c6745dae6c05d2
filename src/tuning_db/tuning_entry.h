// TuningEntry's JSON form (the public type is in convtune/tuning.h): strict (de)serialisation with errors that name
// the field.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "convtune/tuning.h"

namespace convtune {

// Fields in reading order (what it is, what it got, where), not alphabetical.
nlohmann::ordered_json to_json(const TuningEntry& entry);
// `where` names the entry in error messages ("/home/u/tuning.json: entry 3"). Throws InvalidArgument naming
// it, the entry's family and problem when known, and the offending field with what was expected.
TuningEntry tuning_entry_from_json(const nlohmann::json& json, const std::string& where);

}  // namespace convtune
