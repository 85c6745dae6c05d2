// Fuzz harness: model files (convtune eval MODEL). Each input is loaded twice into a lenet-small network on the
// CPU: as it is, and with its trailing checksum recomputed (FNV-1a for version 1, SHA-256 for version 2), so the
// fuzzer also reaches the header and payload checks that a damaged checksum would stop. Properties: only
// InvalidArgument escapes, no read out of bounds, and a refused file leaves the network's weights unchanged.
#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "convtune/nn/model_file.h"
#include "convtune/nn/runtime.h"
#include "src/core/hash.h"

namespace {

using namespace convtune;

// The file with a valid trailer for its version (bytes 8..11), where it is long enough to have one.
std::string with_checksum(std::string file) {
  if (file.size() < 16) return file;
  const uint32_t version = static_cast<unsigned char>(file[8]) | (static_cast<unsigned char>(file[9]) << 8) |
                           (static_cast<unsigned char>(file[10]) << 16) |
                           (static_cast<uint32_t>(static_cast<unsigned char>(file[11])) << 24);
  if (version == 1 && file.size() >= 24) {
    const uint64_t h = fnv1a64(file.data(), file.size() - 8);
    for (int i = 0; i < 8; ++i) file[file.size() - 8 + i] = static_cast<char>((h >> (8 * i)) & 0xff);
  } else if (version == 2 && file.size() >= 48) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(file.data(), file.size() - 32, digest, &length, EVP_sha256(), nullptr);
    std::memcpy(file.data() + file.size() - 32, digest, 32);
  }
  return file;
}

struct Fixture {
  nn::Runtime runtime{Registry::instance().find("cpu")};
  std::unique_ptr<nn::Network> network = nn::make_network(runtime, "lenet-small");
  std::vector<float> first_weights;
  Fixture() {
    network->initialize(1);
    first_weights = runtime.download(network->parameters().front()->value);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const std::string file(reinterpret_cast<const char*>(data), size);
  for (const std::string& bytes : {file, with_checksum(file)}) {
    try {
      nn::load_model_bytes(bytes, "fuzz.model", *fixture.network);
      // Loaded: put the reference weights back for the next input.
      fixture.network->initialize(1);
    } catch (const InvalidArgument&) {
      if (fixture.runtime.download(fixture.network->parameters().front()->value) != fixture.first_weights)
        __builtin_trap();
    }
  }
  return 0;
}
