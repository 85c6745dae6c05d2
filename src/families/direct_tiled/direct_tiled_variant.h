// The per-direction halves of the direct_tiled family: output-tiled gathers (forward, backward-data) and the
// filter-tiled reduction (backward-filter), each with its own typed parameters, constraints and launches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "convtune/extension/kernel_family.h"
#include "src/families/direction_variant.h"
#include "src/families/parameter_table.h"

namespace convtune::direct_tiled {

// Static shared memory a CUDA kernel may declare; the same source must also compile there.
inline constexpr int64_t kMaxStaticLocalBytes = 48 * 1024;
// Accumulators a work-item keeps in registers; larger tiles spill on every GPU.
inline constexpr int64_t kMaxRegisterTile = 64;

using DirectTiledVariant = families::DirectionVariant;

// Forward (y from x, w) or backward-data (dx from dy, w) for one problem.
std::unique_ptr<DirectTiledVariant> make_output_tiled(const ConvProblem& problem);
// Backward-filter (dw from x, dy) for one problem.
std::unique_ptr<DirectTiledVariant> make_filter_tiled(const ConvProblem& problem);

// Helpers shared by both halves.
int64_t pow2_ceil(int64_t v);
int64_t ceil_div(int64_t a, int64_t b);
int64_t local_memory_limit(const DeviceInfo& device);  // the device's, capped at kMaxStaticLocalBytes
// Shrinks the work-group, then the tile, until tile x threads fits the extent rounded up to a power of two.
void fit_extent(int64_t& tile, int64_t& threads, int64_t extent);
// A constraint that the product of `uses` stays within `extent` rounded up to a power of two: a tile or
// work-group wider than that only adds idle work-items.
template <typename P>
Constraint within(const ParameterTable<P>& table, std::string name, std::vector<int64_t P::*> uses, int64_t extent) {
  return table.constraint(std::move(name), uses, [uses, limit = pow2_ceil(extent)](const P& p, const ConstraintContext&) {
    int64_t product = 1;
    for (auto member : uses) product *= p.*member;
    return product <= limit;
  });
}

// The default's fallback ladder: `tuned` with vector width 4, then 2, then as is, then every parameter 1 and local
// memory off (`ones_overrides` then applied): the first of these whose values are candidates and that satisfies
// every constraint is the default; the last one is valid by construction.
template <typename P>
Config first_valid_default(const ParameterTable<P>& table, const std::vector<Constraint>& constraints, P tuned,
                           const std::function<void(P&)>& ones_overrides, const Problem& problem,
                           const DeviceInfo& device) {
  std::vector<P> candidates;
  for (int64_t v : {4, 2}) {
    P vectorised = tuned;
    vectorised.vector_width = v;
    candidates.push_back(vectorised);
  }
  candidates.push_back(tuned);
  P ones = tuned;
  for (const auto& field : table.fields()) ones.*field.member = 1;
  ones.use_local = 0;
  if (ones_overrides) ones_overrides(ones);
  candidates.push_back(ones);
  for (const P& p : candidates) {
    const Config config = table.write(p);
    const bool values_ok = std::all_of(table.fields().begin(), table.fields().end(), [&](const auto& f) {
      return std::find(f.values.begin(), f.values.end(), p.*f.member) != f.values.end();
    });
    const ConstraintContext context{config, problem, device};
    if (values_ok &&
        std::all_of(constraints.begin(), constraints.end(), [&](const Constraint& c) { return c.holds(context); })) {
      return config;
    }
  }
  return table.write(candidates.back());
}

}  // namespace convtune::direct_tiled
