// Fuzz harness: tuning database files. Parses the input as a database (strict reader), loads it as a user
// database file, looks every entry's problem up on a device built from the entries (exact, nearest,
// architecture and vendor tiers, with the plans' carry/fit of parameters), and saves and re-reads the entries.
// Properties: only TuningDatabaseError escapes the reader; lookups never throw; what is accepted round-trips.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "convtune/extension/kernel_family.h"
#include "convtune/plan.h"
#include "fuzz/fuzz_support.h"
#include "src/tuning_db/tuning_database.h"
#include "tests/support/hopper_device.h"

namespace {

using namespace convtune;

DeviceInfo device_of(const TuningEntry& e) {
  DeviceInfo d = test::described_hopper();
  d.backend = e.device.backend == "cuda" ? BackendKind::Cuda : e.device.backend == "cpu" ? BackendKind::Cpu
                                                                                         : BackendKind::OpenCL;
  d.name = e.device.name;
  d.vendor = e.device.vendor;
  d.architecture = e.device.architecture;
  d.driver_version = e.device.driver_version;
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<TuningEntry> entries;
  try {
    entries = parse_tuning_text(text, "fuzz.json");
  } catch (const TuningDatabaseError&) {
    // The same damage through the file path: TuningDatabase records it and never throws for a user file. A file whose
    // structure is damaged is recorded whole (no entries); damaged entries are left out and named, the sound ones
    // loaded. Either way a writer refuses the file.
    const fuzz::MemoryFile file(text);
    const TuningDatabase db(file.path());
    if (db.user_file_error().empty() == db.damaged_entries().empty()) __builtin_trap();
    if (!db.user_file_error().empty() && db.user_entry_count() != 0) __builtin_trap();
    if (db.save_refusal().empty()) __builtin_trap();
    return 0;
  }

  // Written and read back, every accepted entry is the same.
  std::vector<const TuningEntry*> pointers;
  for (const TuningEntry& e : entries) pointers.push_back(&e);
  const std::vector<TuningEntry> again = parse_tuning_text(tuning_file_text(pointers), "fuzz-saved.json");
  if (again != entries) __builtin_trap();

  const fuzz::MemoryFile file(text);
  const TuningDatabase db(file.path());
  if (!db.user_file_error().empty() || !db.damaged_entries().empty()) __builtin_trap();
  (void)db.list();

  KernelVersions versions;
  for (const auto& family : kernel_families()) versions[family->name()] = family->kernel_version();
  for (const TuningEntry& e : entries)
    if (versions.count(e.family)) versions[e.family] = e.kernel_version;
  // A handful of lookups: each costs a pass over all entries.
  for (size_t i = 0; i < entries.size() && i < 8; ++i) {
    const DeviceInfo device = device_of(entries[i]);
    LookupOptions options;
    options.fit = [&](const TuningEntry& e) {
      return carry_config(kernel_family(e.family), e.parameters, e.problem, entries[i].problem, device);
    };
    (void)db.lookup(entries[i].problem, device, versions, options).explain();
    if (entries[i].problem.is_conv()) {
      (void)db.lookup(entries[i].problem.conv().with_direction(Direction::BackwardData), test::described_hopper(),
                      versions).explain();
    }
  }
  return 0;
}
