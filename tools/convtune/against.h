// Side-by-side comparison for `convtune bench --against`: after convtune's plan is verified on a Workload, each requested reference library runs on the same inputs (the very same device buffers where it runs on
// convtune's device, a CPU workload with the same values where it runs on the host), is checked against convtune's
// output and the float64 reference, and is timed in the same rounds as convtune.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "src/harness/workload.h"
#include "src/reference_libs/reference_library.h"

namespace convtune::cli {

class Against {
 public:
  // Throws InvalidArgument for an unknown name; a library that is absent stays in the list as "missing".
  Against(const std::vector<std::string>& names, Precision precision, const Device& device);

  // Four per library: "<name> ms", "<name> algorithm", "<name> check", "convtune/<name>".
  std::vector<std::string> columns() const;
  // "-" in every column, for rows where convtune itself did not run.
  std::vector<std::string> empty_cells() const;

  struct Outcome {
    std::vector<std::string> cells;  // as columns()
    nlohmann::json values;           // {"cudnn": {"ms":..., "ratio":..., "status":...}, ...}
    std::vector<std::string> failures;
    std::vector<double> convtune_samples;  // convtune's timed runs (ms), taken in the same rounds
    std::vector<double> ceiling_gflops;    // the ceiling probe's readings, one per round (none without a probe)
  };
  // `workload` is the one convtune's plan `convtune` ran on; `convtune_output` its written operand after a run,
  // held to convtune.error_factor() times the direct sum's tolerance (Plan::error_factor). Each library is checked,
  // then convtune and the libraries that computed the problem are timed together: `warmup` untimed runs each, then
  // `repeats` rounds of one timed run of each in turn (so a slow spell of a shared machine lands on all alike; a
  // side under 50 ms gets an untimed run before each timed one, and the side after oneDNN runs untimed for 50 ms
  // while oneDNN's OpenMP workers spin down). With `ceiling` (one reading of the device's FMA ceiling, GFLOP/s),
  // each round ends with a reading, so a row's % peak can divide by the ceiling of the minutes it ran in. Throws
  // Error when convtune's plan fails while timed.
  Outcome compare(harness::Workload& workload, harness::Implementation& convtune,
                  const std::vector<float>& convtune_output, int warmup, int repeats,
                  const std::function<double()>& ceiling = {});

  // One line per library: its version and file, or why it is missing; for headers of reports.
  std::vector<std::pair<std::string, std::string>> describe() const;
  MathMode math() const { return precision_.math; }
  Precision precision() const { return precision_; }

 private:
  Precision precision_;
  const Device& device_;
  std::vector<std::unique_ptr<reference::ReferenceLibrary>> libraries_;
};

// "onednn" runs on the host CPU even when convtune runs on a GPU; its column names say so.
std::string reference_label(const reference::ReferenceLibrary& library);

}  // namespace convtune::cli
