// One direction's share of a family whose directions run different kernels (direct_tiled, depthwise): its typed
// parameters, constraints, default and launches; and the launch that sums a split reduction's partials in order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "convtune/extension/kernel_family.h"

namespace convtune::families {

class DirectionVariant {
 public:
  virtual ~DirectionVariant() = default;
  virtual std::vector<Parameter> parameters() const = 0;
  virtual std::vector<Constraint> constraints() const = 0;
  virtual Config default_config(const DeviceInfo& device) const = 0;
  virtual KernelRecipe recipe(const Epilogue& epilogue, const Config& config, const DeviceInfo& device) const = 0;
};

// `kernel`(workspace of partials, operand `written`): one work-item per element of the `elements` it writes, in
// work-groups of up to 256.
inline LaunchStep split_sum_step(std::string kernel, int written, int64_t elements, const DeviceInfo& device) {
  LaunchStep sum;
  sum.kernel = std::move(kernel);
  sum.args = {ArgSource::workspace(), ArgSource::of_operand(written)};
  const size_t local = std::min<size_t>(256, std::max<size_t>(1, device.max_work_group_size));
  const size_t blocks = (static_cast<size_t>(elements) + local - 1) / local;
  sum.geometry.dims = 1;
  sum.geometry.local = {local, 1, 1};
  sum.geometry.global = {blocks * local, 1, 1};
  return sum;
}

}  // namespace convtune::families
