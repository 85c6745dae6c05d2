// Fuzz harness: suite files (bench/tune --suite FILE) through load_suite and --batch-scale.
// Properties: only InvalidArgument escapes; every layer read is valid and stays valid when scaled.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "convtune/error.h"
#include "fuzz/fuzz_support.h"
#include "tools/convtune/suite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convtune;
  const fuzz::MemoryFile file(std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<cli::Layer> layers;
  try {
    layers = cli::load_suite(file.path());
  } catch (const InvalidArgument&) {
    return 0;
  }
  for (const cli::Layer& layer : layers) {
    layer.problem.validate();  // throws (and so fails the run) if load_suite let an invalid layer through
    for (double scale : {0.01, 1.0, 3.5, 1e6, 1e30}) {
      try {
        cli::scale_batch(layer.problem, scale).validate();
      } catch (const InvalidArgument&) {
      }
    }
  }
  return 0;
}
