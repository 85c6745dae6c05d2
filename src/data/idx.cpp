// IDX reader: raw files and gzip files (zlib's inflate, member by member) through one path; every check names the
// file.
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
#include <vector>

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

// An open IDX file; closes itself. Reads report truncation and zlib errors with the file's name. A gzip file is
// inflated here rather than through gzread, which ignores whatever follows the last gzip stream: bytes after the
// stream are refused as bytes after the data of a raw file are.
class IdxFile {
 public:
  explicit IdxFile(std::string path) : path_(std::move(path)) {
    // O_NONBLOCK: a FIFO would otherwise block the open until a writer appears; it is refused below anyway.
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) {
      throw InvalidArgument(fmt::format("IDX file {}: {}", path_,
                                        errno == ENOENT ? std::string("no such file") : std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw InvalidArgument(fmt::format("IDX file {}: not a regular file (a FIFO, device or folder cannot be a dataset)",
                                        path_));
    }
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    file_size_ = static_cast<uint64_t>(st.st_size);
    input_.resize(kInputChunk);
    fill_input();
    // gzip's magic bytes (RFC 1952); anything else is read as it is, as gzread reads a file that is not gzip.
    gzip_ = available_ >= 2 && input_[0] == 0x1f && input_[1] == 0x8b;
    if (gzip_) {
      // 16 + 15: a gzip wrapper (its CRC-32 and length checked at the stream's end), the largest window.
      if (inflateInit2(&stream_, 16 + 15) != Z_OK) {
        ::close(fd_);
        throw InvalidArgument(fmt::format("IDX file {}: zlib could not start inflating it", path_));
      }
      inflating_ = true;
    }
  }
  ~IdxFile() {
    if (inflating_) inflateEnd(&stream_);
    if (fd_ >= 0) ::close(fd_);
  }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  const std::string& path() const { return path_; }

  // The most bytes this file can deliver in all: its size when raw, the deflate bound when gzip.
  uint64_t max_content_bytes() const { return gzip_ ? file_size_ * kMaxDeflateRatio + 1024 : file_size_; }
  bool is_gzip() const { return gzip_; }
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
  // A gzip file must also end with its stream: bytes after it that are not another gzip stream, and a stream cut
  // short (no end marker, CRC-32 or length), are refused here.
  bool has_trailing_data() {
    unsigned char byte = 0;
    if (pull(&byte, 1) > 0) return true;
    if (gzip_ && !member_ended_) {
      throw InvalidArgument(fmt::format("IDX file {}: the gzip stream ends without its end marker and checksum: a "
                                        "truncated file", path_));
    }
    return false;
  }

 private:
  static constexpr size_t kInputChunk = size_t{1} << 17;

  // Refills the input buffer when it is empty; false at the end of the file.
  bool fill_input() {
    if (available_ > 0) return true;
    if (input_ended_) return false;
    for (;;) {
      const ssize_t n = ::read(fd_, input_.data(), input_.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        throw InvalidArgument(fmt::format("IDX file {}: cannot read it: {}", path_, std::strerror(errno)));
      }
      if (n == 0) input_ended_ = true;
      next_ = 0;
      available_ = static_cast<size_t>(n);
      return n > 0;
    }
  }

  // Up to `want` bytes of content (raw bytes, or inflated ones); 0 only at the content's end.
  uint64_t pull(unsigned char* dst, uint64_t want) {
    want = std::min<uint64_t>(want, uint64_t{1} << 30);
    if (!gzip_) {
      if (!fill_input()) return 0;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(want, available_));
      std::memcpy(dst, input_.data() + next_, n);
      next_ += n, available_ -= n;
      return n;
    }
    for (;;) {
      if (member_ended_) {
        // After a stream: the end of the file, another gzip stream (concatenated files), or bytes that are neither.
        if (!fill_input()) return 0;
        if (available_ < 2 && !input_ended_) {
          // The second magic byte may be in the next read: keep the first at the buffer's start.
          input_[0] = input_[next_];
          const ssize_t n = ::read(fd_, input_.data() + 1, input_.size() - 1);
          if (n < 0 && errno != EINTR) {
            throw InvalidArgument(fmt::format("IDX file {}: cannot read it: {}", path_, std::strerror(errno)));
          }
          if (n == 0) input_ended_ = true;
          next_ = 0;
          available_ = 1 + static_cast<size_t>(std::max<ssize_t>(n, 0));
          continue;
        }
        if (available_ >= 2 && input_[next_] == 0x1f && input_[next_ + 1] == 0x8b) {
          inflateReset(&stream_);
          member_ended_ = false;
        } else {
          throw InvalidArgument(fmt::format("IDX file {}: {} byte(s) follow the end of its gzip stream that are not "
                                            "another gzip stream: expected the file to end with the stream (a file "
                                            "with bytes after its data is refused, gzip or raw)",
                                            path_, file_size_ - consumed_input()));
        }
      }
      fill_input();
      stream_.next_in = input_.data() + next_;
      stream_.avail_in = static_cast<uInt>(available_);
      stream_.next_out = dst;
      stream_.avail_out = static_cast<uInt>(want);
      const int status = inflate(&stream_, Z_NO_FLUSH);
      const size_t used = available_ - stream_.avail_in;
      next_ += used, available_ -= used, consumed_ += used;
      const uint64_t produced = want - stream_.avail_out;
      if (status == Z_STREAM_END) {
        member_ended_ = true;
      } else if (status != Z_OK && !(status == Z_BUF_ERROR && input_ended_ && available_ == 0)) {
        throw InvalidArgument(fmt::format("IDX file {}: cannot inflate it (zlib: {}): is it a damaged gzip file?",
                                          path_, stream_.msg ? stream_.msg : zError(status)));
      }
      if (produced > 0) return produced;
      if (!member_ended_ && input_ended_ && available_ == 0) return 0;  // the stream was cut short
    }
  }

  // Bytes of the file inflate has taken so far (the rest of the buffer not yet).
  uint64_t consumed_input() const { return consumed_; }

  // One read of at most `want` bytes (> 0); `total` and `done` describe the whole read for messages.
  uint64_t read_some(unsigned char* dst, uint64_t want, uint64_t total, uint64_t done, const std::string& what) {
    const uint64_t got = pull(dst, want);
    if (got == 0) {
      throw InvalidArgument(fmt::format("IDX file {}: truncated while reading {}: expected {} bytes, found {}", path_,
                                        what, total, done));
    }
    return got;
  }

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  bool gzip_ = false;
  bool inflating_ = false;
  z_stream stream_{};
  bool member_ended_ = false;
  std::vector<unsigned char> input_;
  size_t next_ = 0, available_ = 0;  // unread input: input_[next_, next_ + available_)
  bool input_ended_ = false;
  uint64_t consumed_ = 0;
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
