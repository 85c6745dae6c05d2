// IDX reader: zlib's gzread reads gzip and raw files alike, so one code path serves both; every check names the file.
// Sizes in a header are checked against what the file can hold before anything is allocated, and data is read in
// bounded chunks, so a forged header costs a message, not gigabytes.
#include "convtune/data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "convtune/error.h"
#include "src/core/resources.h"

namespace convtune::data {
namespace {

// IDX magic numbers: two zero bytes, the element type (0x08 = unsigned byte), the number of dimensions.
constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// Far above any real dataset, low enough that a garbage header cannot ask for terabytes.
constexpr uint32_t kMaxSide = 1u << 14;
constexpr uint32_t kMaxCount = 1u << 28;
// Deflate cannot expand data by more than 1032:1 (RFC 1951's longest match per fewest bits), so a gzip file of
// S bytes holds at most 1032 * S bytes; the margin covers gzip's own headers.
constexpr uint64_t kMaxDeflateRatio = 1032;
// Reads grow the buffer in steps of this size, so memory follows the data actually present.
constexpr uint64_t kReadChunk = uint64_t{64} << 20;

// An open IDX file; closes itself. Reads report truncation and zlib errors with the file's name.
class IdxFile {
 public:
  explicit IdxFile(std::string path) : path_(std::move(path)) {
    // O_NONBLOCK: a FIFO would otherwise block the open until a writer appears; it is refused below anyway.
    const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
      throw InvalidArgument(fmt::format("IDX file {}: {}", path_,
                                        errno == ENOENT ? std::string("no such file") : std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw InvalidArgument(fmt::format("IDX file {}: not a regular file (a FIFO, device or folder cannot be a dataset)",
                                        path_));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    file_size_ = static_cast<uint64_t>(st.st_size);
    file_ = gzdopen(fd, "rb");
    if (file_ == nullptr) {
      ::close(fd);
      throw InvalidArgument(fmt::format("IDX file {}: cannot open it", path_));
    }
    gzbuffer(file_, 1 << 17);
  }
  ~IdxFile() {
    if (file_ != nullptr) gzclose(file_);
  }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  const std::string& path() const { return path_; }

  // The most bytes this file can deliver in all: its size when raw, the deflate bound when gzip.
  uint64_t max_content_bytes() {
    return gzdirect(file_) ? file_size_ : file_size_ * kMaxDeflateRatio + 1024;
  }
  bool is_gzip() { return gzdirect(file_) == 0; }
  uint64_t file_size() const { return file_size_; }

  // Reads exactly `bytes` bytes; `what` says what was being read for the truncation message.
  void read_exact(void* dst, uint64_t bytes, const std::string& what) {
    auto* out = static_cast<unsigned char*>(dst);
    uint64_t done = 0;
    while (done < bytes) done += read_some(out + done, bytes - done, bytes, done, what);
  }

  // Appends exactly `bytes` bytes to `out`, growing it chunk by chunk as data arrives.
  void read_into(std::vector<unsigned char>& out, uint64_t bytes, const std::string& what) {
    uint64_t done = 0;
    while (done < bytes) {
      const uint64_t step = std::min(bytes - done, kReadChunk);
      out.resize(static_cast<size_t>(done + step));
      uint64_t got = 0;
      while (got < step) got += read_some(out.data() + done + got, step - got, bytes, done + got, what);
      done += step;
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

  // Before allocating for `bytes` of data after a header of `header_bytes`: refuses what the file cannot hold.
  void require_room(uint64_t bytes, uint64_t header_bytes, const std::string& what) {
    const uint64_t most = max_content_bytes();
    const uint64_t room = most > header_bytes ? most - header_bytes : 0;
    if (bytes <= room) return;
    if (is_gzip()) {
      throw InvalidArgument(fmt::format(
          "IDX file {}: the header announces {} ({} bytes), more than a gzip file of {} bytes can hold (at most {}): "
          "a damaged header or a truncated file",
          path_, what, bytes, file_size_, room));
    }
    throw InvalidArgument(fmt::format("IDX file {}: truncated: the header announces {} ({} bytes), but only {} bytes "
                                      "follow the header",
                                      path_, what, bytes, room));
  }

  // True when bytes remain after what the header announced (a sign of a wrong header or a concatenated file).
  bool has_trailing_data() {
    unsigned char byte = 0;
    return gzread(file_, &byte, 1) > 0;
  }

 private:
  // One gzread of at most `want` bytes (> 0); `total` and `done` describe the whole read for messages.
  uint64_t read_some(unsigned char* dst, uint64_t want, uint64_t total, uint64_t done, const std::string& what) {
    // gzread takes an unsigned count and returns an int: read in chunks well below INT_MAX.
    const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(want, 1u << 30));
    const int got = gzread(file_, dst, chunk);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file_, &code);
      throw InvalidArgument(fmt::format("IDX file {}: cannot read {} (zlib: {}): is it a damaged gzip file?", path_,
                                        what, message != nullptr ? message : "unknown error"));
    }
    if (got == 0) {
      throw InvalidArgument(fmt::format("IDX file {}: truncated while reading {}: expected {} bytes, found {}", path_,
                                        what, total, done));
    }
    return static_cast<uint64_t>(got);
  }

  std::string path_;
  gzFile file_ = nullptr;
  uint64_t file_size_ = 0;
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
  if (image_count == 0) {
    throw InvalidArgument(fmt::format("IDX file {}: the header announces 0 images, expected at least 1", images_path));
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

  // At most 2^28 * 2^14 * 2^14 = 2^56: no overflow in 64 bits.
  const uint64_t pixel_count = static_cast<uint64_t>(count) * rows * cols;
  const std::string images_what = fmt::format("{} images of {}x{} (header says {})", count, rows, cols, image_count);
  images.require_room(pixel_count, 16, fmt::format("{} images of {}x{}", count, rows, cols));
  labels.require_room(static_cast<uint64_t>(count), 8, fmt::format("{} labels", count));
  // The bytes as read plus the floats they become.
  require_host_memory(pixel_count * (1 + sizeof(float)), fmt::format("reading {} of {}", images_what, images_path));
  std::vector<unsigned char> raw;
  images.read_into(raw, pixel_count, images_what);
  if (whole_file && images.has_trailing_data()) {
    throw InvalidArgument(fmt::format("IDX file {}: data continues after the {} images of {}x{} the header announces",
                                      images_path, image_count, rows, cols));
  }
  result.pixels.resize(pixel_count);
  for (uint64_t i = 0; i < pixel_count; ++i) result.pixels[i] = static_cast<float>(raw[i]) * (1.0f / 255.0f);

  labels.read_into(result.labels, static_cast<uint64_t>(count),
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
DatasetFiles find_dataset_files(const std::string& dir, bool need_training_files) {
  if (!std::filesystem::is_directory(dir)) {
    throw InvalidArgument(fmt::format(
        "dataset folder {} {}: install the Debian package dataset-fashion-mnist or pass --data DIR "
        "(a folder with train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
        "t10k-labels-idx1-ubyte, raw or .gz)",
        dir, std::filesystem::exists(dir) ? "is not a folder" : "does not exist"));
  }
  auto find = [&](const std::string& name) {
    for (const std::string& candidate : {name, name + ".gz"}) {
      const std::filesystem::path path = std::filesystem::path(dir) / candidate;
      std::error_code ec;
      const auto status = std::filesystem::status(path, ec);
      if (std::filesystem::is_regular_file(status)) return path.string();
      if (std::filesystem::exists(status)) {
        throw InvalidArgument(fmt::format("IDX file {}: not a regular file (a FIFO, device or folder cannot be a "
                                          "dataset)", path.string()));
      }
    }
    throw InvalidArgument(fmt::format("dataset folder {} has no {} (nor {}.gz)", dir, name, name));
  };
  DatasetFiles files;
  if (need_training_files) {
    files.train_images = find("train-images-idx3-ubyte");
    files.train_labels = find("train-labels-idx1-ubyte");
  }
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
