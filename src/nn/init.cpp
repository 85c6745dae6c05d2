// He-uniform initialisation from a seeded std::mt19937_64.
#include "src/nn/init.h"

#include <cmath>
#include <random>

#include "src/core/hash.h"

namespace convtune::nn {

std::vector<float> he_uniform(int64_t count, int64_t fan_in, uint64_t seed, const std::string& name) {
  std::mt19937_64 rng(seed ^ fnv1a64(name));
  const double bound = std::sqrt(6.0 / static_cast<double>(fan_in));
  // The distribution's own algorithm differs between standard libraries; scale raw 53-bit draws instead so
  // the values are the same wherever convtune is built.
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) {
    const double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    v = static_cast<float>((2.0 * unit - 1.0) * bound);
  }
  return values;
}

}  // namespace convtune::nn
