// IDX reader: zlib's gzread reads gzip and raw files alike, so one code path serves both; every check names the file.
#include "convtune/data/idx.h"

#include <zlib.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune::data {
namespace {

// IDX magic numbers: two zero bytes, the element type (0x08 = unsigned byte), the number of dimensions.
constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// Far above any real dataset, low enough that a garbage header cannot ask for terabytes.
constexpr uint32_t kMaxSide = 1u << 14;
constexpr uint32_t kMaxCount = 1u << 28;

// An open IDX file; closes itself. Reads report truncation and zlib errors with the file's name.
class IdxFile {
 public:
  explicit IdxFile(std::string path) : path_(std::move(path)) {
    if (!std::filesystem::is_regular_file(path_)) {
      throw InvalidArgument(fmt::format("IDX file {}: no such file", path_));
    }
    file_ = gzopen(path_.c_str(), "rb");
    if (file_ == nullptr) throw InvalidArgument(fmt::format("IDX file {}: cannot open it", path_));
    gzbuffer(file_, 1 << 17);
  }
  ~IdxFile() {
    if (file_ != nullptr) gzclose(file_);
  }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  const std::string& path() const { return path_; }

  // Reads exactly `bytes` bytes; `what` says what was being read for the truncation message.
  void read_exact(void* dst, uint64_t bytes, const std::string& what) {
    auto* out = static_cast<unsigned char*>(dst);
    uint64_t done = 0;
    while (done < bytes) {
      // gzread takes an unsigned count and returns an int: read in chunks well below INT_MAX.
      const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(bytes - done, 1u << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        throw InvalidArgument(fmt::format("IDX file {}: cannot read {} (zlib: {}): is it a damaged gzip file?",
                                          path_, what, message != nullptr ? message : "unknown error"));
      }
      if (got == 0) {
        throw InvalidArgument(fmt::format("IDX file {}: truncated while reading {}: expected {} bytes, found {}",
                                          path_, what, bytes, done));
      }
      done += static_cast<uint64_t>(got);
    }
  }

  uint32_t read_be32(const std::string& what) {
    std::array<unsigned char, 4> bytes{};
    read_exact(bytes.data(), bytes.size(), what);
    return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
  }

  // The magic number, with a message that says which kind of IDX file was expected and what was found.
  void expect_magic(uint32_t expected, const char* kind) {
    const uint32_t magic = read_be32("the magic number");
    if (magic != expected) {
      throw InvalidArgument(fmt::format(
          "IDX file {}: wrong magic number 0x{:08x}, expected 0x{:08x} ({}): not an {} file, or the image and "
          "label files are swapped",
          path_, magic, expected, kind, kind));
    }
  }

  uint32_t read_dimension(const char* name, uint32_t max) {
    const uint32_t value = read_be32(fmt::format("the header field '{}'", name));
    if (value > max) {
      throw InvalidArgument(fmt::format("IDX file {}: header field '{}' = {} is implausible (at most {})", path_,
                                        name, value, max));
    }
    return value;
  }

  // True when bytes remain after what the header announced (a sign of a wrong header or a concatenated file).
  bool has_trailing_data() {
    unsigned char byte = 0;
    return gzread(file_, &byte, 1) > 0;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

}  // namespace

LabelledImages load_idx_pair(const std::string& images_path, const std::string& labels_path, int classes,
                             int64_t limit) {
  if (classes < 1 || classes > 256) {
    throw InvalidArgument(fmt::format("load_idx_pair: classes={} is invalid, expected 1..256", classes));
  }
  IdxFile images(images_path);
  images.expect_magic(kImagesMagic, "IDX3 unsigned-byte images");
  const uint32_t image_count = images.read_dimension("image count", kMaxCount);
  const uint32_t rows = images.read_dimension("rows", kMaxSide);
  const uint32_t cols = images.read_dimension("columns", kMaxSide);
  if (rows == 0 || cols == 0) {
    throw InvalidArgument(fmt::format("IDX file {}: images of {}x{} pixels, expected at least 1x1", images_path,
                                      rows, cols));
  }

  IdxFile labels(labels_path);
  labels.expect_magic(kLabelsMagic, "IDX1 unsigned-byte labels");
  const uint32_t label_count = labels.read_dimension("label count", kMaxCount);
  if (label_count != image_count) {
    throw InvalidArgument(fmt::format("IDX files {} and {}: {} images but {} labels, expected one label per image",
                                      images_path, labels_path, image_count, label_count));
  }

  const int64_t count = limit >= 0 ? std::min<int64_t>(limit, image_count) : int64_t{image_count};
  const bool whole_file = count == int64_t{image_count};
  LabelledImages result;
  result.count = count;
  result.rows = static_cast<int>(rows);
  result.cols = static_cast<int>(cols);

  const uint64_t pixel_count = static_cast<uint64_t>(count) * rows * cols;
  std::vector<unsigned char> raw(pixel_count);
  images.read_exact(raw.data(), pixel_count,
                    fmt::format("{} images of {}x{} (header says {})", count, rows, cols, image_count));
  if (whole_file && images.has_trailing_data()) {
    throw InvalidArgument(fmt::format("IDX file {}: data continues after the {} images of {}x{} the header announces",
                                      images_path, image_count, rows, cols));
  }
  result.pixels.resize(pixel_count);
  for (uint64_t i = 0; i < pixel_count; ++i) result.pixels[i] = static_cast<float>(raw[i]) * (1.0f / 255.0f);

  result.labels.resize(static_cast<size_t>(count));
  labels.read_exact(result.labels.data(), result.labels.size(),
                    fmt::format("{} labels (header says {})", count, label_count));
  if (whole_file && labels.has_trailing_data()) {
    throw InvalidArgument(
        fmt::format("IDX file {}: data continues after the {} labels the header announces", labels_path, label_count));
  }
  for (size_t i = 0; i < result.labels.size(); ++i) {
    if (result.labels[i] >= classes) {
      throw InvalidArgument(fmt::format("IDX file {}: label {} at index {} is out of range, expected 0..{}",
                                        labels_path, int{result.labels[i]}, i, classes - 1));
    }
  }
  return result;
}

DatasetFiles find_dataset_files(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) {
    throw InvalidArgument(fmt::format(
        "dataset folder {} does not exist: install the Debian package dataset-fashion-mnist or pass --data DIR "
        "(a folder with train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
        "t10k-labels-idx1-ubyte, raw or .gz)",
        dir));
  }
  auto find = [&](const std::string& name) {
    for (const std::string& candidate : {name, name + ".gz"}) {
      const std::filesystem::path path = std::filesystem::path(dir) / candidate;
      if (std::filesystem::is_regular_file(path)) return path.string();
    }
    throw InvalidArgument(fmt::format("dataset folder {} has no {} (nor {}.gz)", dir, name, name));
  };
  DatasetFiles files;
  files.train_images = find("train-images-idx3-ubyte");
  files.train_labels = find("train-labels-idx1-ubyte");
  files.test_images = find("t10k-images-idx3-ubyte");
  files.test_labels = find("t10k-labels-idx1-ubyte");
  return files;
}

std::string default_data_dir() {
  const char* from_environment = std::getenv("CONVTUNE_DATA");
  if (from_environment != nullptr && from_environment[0] != '\0') return from_environment;
  return "/usr/share/datasets/fashion-mnist";
}

}  // namespace convtune::data
