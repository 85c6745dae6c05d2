// Seeded weight initialisation on the host, so every backend starts from identical parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace convtune::nn {

// He (Kaiming) uniform: U(-sqrt(6 / fan_in), +sqrt(6 / fan_in)), suited to ReLU networks. The stream is
// std::mt19937_64 seeded from `seed` and the parameter's name, so layers differ and runs repeat.
std::vector<float> he_uniform(int64_t count, int64_t fan_in, uint64_t seed, const std::string& name);

}  // namespace convtune::nn
