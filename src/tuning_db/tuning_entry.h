// TuningEntry: one tuned result (device, kernel source, family, problem, parameters, time) and its JSON form.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

#include "convtune/backend.h"
#include "convtune/conv_problem.h"
#include "convtune/kernel_family.h"

namespace convtune {

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
  friend bool operator==(const TuningDevice&, const TuningDevice&) = default;
};

struct TuningEntry {
  TuningDevice device;
  std::string family;
  std::string source_hash;  // of the family's expanded kernel source, computed by the caller
  ConvProblem problem;      // direction and precision included
  Config parameters;
  double time_ms = 0;
  double gflops = 0;
  std::string date;              // UTC, ISO 8601: "2025-03-01T12:00:00Z"
  std::string convtune_version;  // of the convtune that measured it

  // Entries with equal keys describe the same measurement target; a database keeps the fastest of them.
  // Driver and source hash are part of it (through the fingerprint and the hash), so a retune after an update
  // never competes with the stale result: that one stays until pruned and is never trusted.
  std::string key() const;
  friend bool operator==(const TuningEntry&, const TuningEntry&) = default;
};

// A fresh entry measured now: GFLOP/s from the problem's FLOP count, today's date, this convtune's version.
TuningEntry make_tuning_entry(const DeviceInfo& device, std::string family, std::string source_hash,
                              const ConvProblem& problem, Config parameters, double time_ms);

// Empty when `entry` can be trusted on `device` with the family's current source hash; else why not
// ("kernel source changed: entry a1b2, now c3d4", "driver 535.104 -> 550.54"). A different device's driver is
// not a reason: that entry is judged by its own hardware, and only the source hash applies.
std::string stale_reason(const TuningEntry& entry, const DeviceInfo& device, std::string_view current_source_hash);

std::string_view convtune_version();
std::string utc_date_now();

// Fields in reading order (what it is, what it got, where), not alphabetical.
nlohmann::ordered_json to_json(const TuningEntry& entry);
// `where` names the entry in error messages ("/home/u/tuning.json: entry 3"). Throws InvalidArgument naming
// it, the entry's family and problem when known, and the offending field with what was expected.
TuningEntry tuning_entry_from_json(const nlohmann::json& json, const std::string& where);

}  // namespace convtune
