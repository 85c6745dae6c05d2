// The per-direction halves of the direct_tiled family: output-tiled gathers (forward, backward-data) and the
// filter-tiled reduction (backward-filter), each with its own parameters, constraints and launches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "convtune/kernel_family.h"

namespace convtune::direct_tiled {

// Static shared memory a CUDA kernel may declare; the same source must also compile there.
inline constexpr int64_t kMaxStaticLocalBytes = 48 * 1024;
// Accumulators a work-item keeps in registers; larger tiles spill on every GPU.
inline constexpr int64_t kMaxRegisterTile = 64;

class DirectTiledVariant {
 public:
  virtual ~DirectTiledVariant() = default;
  virtual std::vector<Parameter> parameters() const = 0;
  virtual std::vector<Constraint> constraints() const = 0;
  virtual Config default_config(const DeviceInfo& device) const = 0;
  virtual size_t local_memory_bytes(const Config& config) const = 0;
  virtual KernelRecipe recipe(const Epilogue& epilogue, const Config& config, const DeviceInfo& device) const = 0;
};

// Forward (y from x, w) or backward-data (dx from dy, w) for one problem.
std::unique_ptr<DirectTiledVariant> make_output_tiled(const ConvProblem& problem);
// Backward-filter (dw from x, dy) for one problem.
std::unique_ptr<DirectTiledVariant> make_filter_tiled(const ConvProblem& problem);

// Helpers shared by both halves.
int64_t pow2_ceil(int64_t v);
int64_t ceil_div(int64_t a, int64_t b);
int64_t local_memory_limit(const DeviceInfo& device);  // the device's, capped at kMaxStaticLocalBytes
// The first configuration of `candidates` whose values are all candidates of `parameters` and that satisfies
// every constraint, or the last one unchecked (callers end the list with one valid by construction).
// The default's fallback ladder: `tuned` with vector width 4, then 2, then as is, then every parameter 1 and
// local memory off (with `ones_overrides` applied): the first of these the constraints accept is the default.
std::vector<Config> default_candidates(const Config& tuned, const Config& ones_overrides);

Config first_valid(const std::vector<Config>& candidates, const std::vector<Parameter>& parameters,
                   const std::vector<Constraint>& constraints, const ConvProblem& problem, const DeviceInfo& device);
// Shrinks the work-group, then the tile, until tile x threads fits the extent rounded up to a power of two.
void fit_extent(Config& config, const std::string& tile, const std::string& threads, int64_t extent);
// Every parameter as a -D define, beside the problem's shape.
std::map<std::string, std::string> kernel_defines(const ConvProblem& problem, const Config& config);

}  // namespace convtune::direct_tiled
