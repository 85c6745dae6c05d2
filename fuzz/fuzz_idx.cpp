// Fuzz harness: IDX dataset files (raw or gzip). Input: a 16-bit little-endian length L of the image file, one
// option byte (bits 0-1 choose the image limit: all, 0, 1 or 3), then L bytes of the image file and the rest as
// the label file. Properties: only InvalidArgument escapes; nothing is allocated beyond what the files can hold
// (ASan's allocation limit and libFuzzer's -rss_limit_mb catch that); what loads is consistent.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "convtune/data/idx.h"
#include "convtune/error.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convtune;
  if (size < 3) return 0;
  const size_t images_size = std::min<size_t>(data[0] | (size_t{data[1]} << 8), size - 3);
  const int64_t limits[] = {-1, 0, 1, 3};
  const int64_t limit = limits[data[2] & 3];
  const auto* bytes = reinterpret_cast<const char*>(data + 3);
  const fuzz::MemoryFile images(std::string_view(bytes, images_size));
  const fuzz::MemoryFile labels(std::string_view(bytes + images_size, size - 3 - images_size));
  try {
    const data::LabelledImages set = data::load_idx_pair(images.path(), labels.path(), 10, limit);
    const uint64_t pixels = static_cast<uint64_t>(set.count) * set.rows * set.cols;
    if (set.pixels.size() != pixels || set.labels.size() != static_cast<size_t>(set.count)) __builtin_trap();
    for (uint8_t label : set.labels)
      if (label >= 10) __builtin_trap();
  } catch (const InvalidArgument&) {
  }
  return 0;
}
