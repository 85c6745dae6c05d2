// Side-by-side comparison for `convtune bench --against`: after convtune's plan is verified and timed on a
// Workload, each requested reference library runs on the same inputs (the very same device buffers where it runs on
// convtune's device, a CPU workload with the same values where it runs on the host), is checked against convtune's
// output and the float64 reference, and is timed the same way.
#pragma once

#include <nlohmann/json.hpp>

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
  };
  // `workload` is the one convtune ran on; `convtune_output` its written operand after convtune's run, held to
  // `convtune_error_factor` times the direct sum's tolerance (Plan::error_factor).
  Outcome compare(harness::Workload& workload, const std::vector<float>& convtune_output, double convtune_error_factor,
                  double convtune_ms, int warmup, int repeats);

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
