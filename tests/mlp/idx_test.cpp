// IDX reader: raw and gzip files round-trip, every malformed input gives an error naming the file, and a header
// never makes the reader allocate more than the file can hold.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "convtune/data/idx.h"
#include "convtune/error.h"
#include "src/core/atomic_file.h"

using namespace convtune;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<unsigned char> be32(uint32_t v) {
  return {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
          static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
}

std::vector<unsigned char> idx3(uint32_t count, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::vector<unsigned char> bytes;
  for (uint32_t field : {magic, count, rows, cols}) {
    const auto b = be32(field);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  for (uint32_t i = 0; i < count * rows * cols; ++i) bytes.push_back(static_cast<unsigned char>((i * 37 + 11) % 256));
  return bytes;
}

std::vector<unsigned char> idx1(const std::vector<unsigned char>& labels, uint32_t magic = 0x801) {
  std::vector<unsigned char> bytes;
  for (uint32_t field : {magic, static_cast<uint32_t>(labels.size())}) {
    const auto b = be32(field);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("convtune_idx_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<unsigned char>& bytes, bool gzip = false) {
    const std::string path = (dir_ / name).string();
    if (gzip) {
      gzFile file = gzopen(path.c_str(), "wb");
      EXPECT_NE(file, nullptr);
      EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
      gzclose(file);
    } else {
      std::FILE* file = std::fopen(path.c_str(), "wb");
      std::fwrite(bytes.data(), 1, bytes.size(), file);
      std::fclose(file);
    }
    return path;
  }

  // The error message of load_idx_pair, or a test failure when it does not throw InvalidArgument.
  static std::string error_of(const std::string& images, const std::string& labels, int64_t limit = -1) {
    try {
      data::load_idx_pair(images, labels, 10, limit);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected InvalidArgument for " << images << " / " << labels;
    return {};
  }

  fs::path dir_;
};

}  // namespace

TEST_F(IdxTest, RawAndGzipReadTheSame) {
  const std::vector<unsigned char> labels = {3, 0, 9};
  for (bool gzip : {false, true}) {
    const std::string suffix = gzip ? ".gz" : "";
    const auto images_path = write("img" + suffix, idx3(3, 4, 5), gzip);
    const auto labels_path = write("lab" + suffix, idx1(labels), gzip);
    const auto set = data::load_idx_pair(images_path, labels_path);
    EXPECT_EQ(set.count, 3);
    EXPECT_EQ(set.rows, 4);
    EXPECT_EQ(set.cols, 5);
    ASSERT_EQ(set.pixels.size(), 60u);
    EXPECT_EQ(set.labels, labels);
    for (size_t i = 0; i < set.pixels.size(); ++i) {
      EXPECT_FLOAT_EQ(set.pixels[i], static_cast<float>((i * 37 + 11) % 256) / 255.0f) << i;
    }
  }
}

TEST_F(IdxTest, LimitKeepsTheFirstExamples) {
  const auto set = data::load_idx_pair(write("img", idx3(5, 2, 2)), write("lab", idx1({1, 2, 3, 4, 5})), 10, 2);
  EXPECT_EQ(set.count, 2);
  EXPECT_EQ(set.pixels.size(), 8u);
  EXPECT_EQ(set.labels, (std::vector<unsigned char>{1, 2}));
  // A limit above the count keeps all.
  EXPECT_EQ(data::load_idx_pair(dir_ / "img", dir_ / "lab", 10, 99).count, 5);
}

TEST_F(IdxTest, WrongMagicNamesTheFile) {
  const auto labels = write("lab", idx1({1, 2}));
  const auto images = write("img", idx3(2, 2, 2));
  // Swapped files: the label file where images are expected.
  std::string message = error_of(labels, images);
  EXPECT_NE(message.find(labels), std::string::npos) << message;
  EXPECT_NE(message.find("wrong magic number 0x00000801"), std::string::npos) << message;
  message = error_of(write("bad.gz", idx3(2, 2, 2, 0x12345678), true), labels);
  EXPECT_NE(message.find("bad.gz: wrong magic number 0x12345678"), std::string::npos) << message;
  message = error_of(images, write("badlab", idx1({1, 2}, 0x803)));
  EXPECT_NE(message.find("badlab: wrong magic number 0x00000803"), std::string::npos) << message;
}

TEST_F(IdxTest, TruncatedFilesNameTheFile) {
  auto bytes = idx3(3, 4, 4);
  bytes.resize(bytes.size() - 5);
  const auto labels = write("lab", idx1({1, 2, 3}));
  for (bool gzip : {false, true}) {
    const std::string name = gzip ? "short.gz" : "short";
    const std::string message = error_of(write(name, bytes, gzip), labels);
    EXPECT_NE(message.find(name + ": truncated"), std::string::npos) << message;
  }
  // A header cut short.
  const std::string message = error_of(write("tiny", {0, 0, 8}), labels);
  EXPECT_NE(message.find("tiny: truncated while reading the magic number"), std::string::npos) << message;
  // Labels cut short.
  auto label_bytes = idx1({1, 2, 3});
  label_bytes.pop_back();
  const std::string label_message = error_of(write("img", idx3(3, 4, 4)), write("shortlab", label_bytes));
  EXPECT_NE(label_message.find("shortlab: truncated"), std::string::npos) << label_message;
  // Bytes beyond what the header announces.
  auto long_bytes = idx3(3, 4, 4);
  long_bytes.push_back(7);
  const std::string long_message = error_of(write("long", long_bytes), labels);
  EXPECT_NE(long_message.find("long: data continues after the 3 images"), std::string::npos) << long_message;
}

// zlib's gzread read a gzip file's stream and ignored whatever followed it: bytes after a gzip stream are refused as
// bytes after a raw file's data are. Concatenated gzip streams are one file (gzip's own rule) and still read.
TEST_F(IdxTest, BytesAfterTheGzipStreamAreRefusedAsInARawFile) {
  const auto labels = write("lab.gz", idx1({1, 2, 3}), true);
  const std::string images = write("img.gz", idx3(3, 4, 4), true);
  ASSERT_NO_THROW(data::load_idx_pair(images, labels, 10, -1));
  const std::string stream = read_file(images);
  for (const std::string& tail : {std::string("x"), std::string(1000, '\0'), std::string("\x1f")}) {
    write_file_atomic(dir_ / "tail.gz", stream + tail);
    const std::string message = error_of((dir_ / "tail.gz").string(), labels);
    EXPECT_NE(message.find(fmt::format("tail.gz: {} byte(s) follow the end of its gzip stream", tail.size())),
              std::string::npos) << message;
  }
  // The labels too.
  write_file_atomic(dir_ / "labtail.gz", read_file(labels) + "junk");
  const std::string message = error_of(images, (dir_ / "labtail.gz").string());
  EXPECT_NE(message.find("labtail.gz: 4 byte(s) follow the end of its gzip stream"), std::string::npos) << message;
  // Two gzip streams one after the other: the data continues in the second.
  const auto bytes = idx3(3, 4, 4);
  const std::string first = read_file(write("a.gz", std::vector<unsigned char>(bytes.begin(), bytes.begin() + 20), true));
  const std::string second = read_file(write("b.gz", std::vector<unsigned char>(bytes.begin() + 20, bytes.end()), true));
  write_file_atomic(dir_ / "two.gz", first + second);
  EXPECT_NO_THROW(data::load_idx_pair((dir_ / "two.gz").string(), labels, 10, -1));
  // A stream cut before its end marker and checksum, though every announced byte is there.
  write_file_atomic(dir_ / "cut.gz", stream.substr(0, stream.size() - 4));
  const std::string cut = error_of((dir_ / "cut.gz").string(), labels);
  EXPECT_NE(cut.find("cut.gz"), std::string::npos) << cut;
  // A damaged stream names zlib's reason.
  std::string damaged = stream;
  damaged[damaged.size() - 6] ^= 0x55;  // the CRC-32
  write_file_atomic(dir_ / "crc.gz", damaged);
  const std::string crc = error_of((dir_ / "crc.gz").string(), labels);
  EXPECT_NE(crc.find("crc.gz: cannot inflate it (zlib: incorrect data check)"), std::string::npos) << crc;
}

TEST_F(IdxTest, CountMismatchNamesBothFiles) {
  const std::string message = error_of(write("img", idx3(3, 2, 2)), write("lab", idx1({1, 2})));
  EXPECT_NE(message.find("3 images but 2 labels"), std::string::npos) << message;
  EXPECT_NE(message.find((dir_ / "img").string()), std::string::npos) << message;
  EXPECT_NE(message.find((dir_ / "lab").string()), std::string::npos) << message;
}

TEST_F(IdxTest, LabelOutOfRangeNamesIndexAndValue) {
  const std::string message = error_of(write("img", idx3(3, 2, 2)), write("lab", idx1({1, 2, 10})));
  EXPECT_NE(message.find("lab: label 10 at index 2 is out of range, expected 0..9"), std::string::npos) << message;
}

TEST_F(IdxTest, MissingFileAndImplausibleHeader) {
  std::string message = error_of((dir_ / "nothere").string(), (dir_ / "lab").string());
  EXPECT_NE(message.find("nothere: no such file"), std::string::npos) << message;
  message = error_of(write("huge", idx3(0, 1u << 20, 2)), write("lab", idx1({})));
  EXPECT_NE(message.find("huge: header field 'rows' = 1048576 is implausible"), std::string::npos) << message;
  // Garbage that is not gzip nor IDX.
  message = error_of(write("text", {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}), write("lab", idx1({})));
  EXPECT_NE(message.find("text: wrong magic number"), std::string::npos) << message;
}

TEST_F(IdxTest, FindDatasetFilesAcceptsRawAndGzip) {
  write("train-images-idx3-ubyte.gz", idx3(1, 1, 1), true);
  write("train-labels-idx1-ubyte", idx1({0}));
  write("t10k-images-idx3-ubyte", idx3(1, 1, 1));
  try {
    data::find_dataset_files(dir_.string());
    FAIL() << "expected a missing-file error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has no t10k-labels-idx1-ubyte (nor t10k-labels-idx1-ubyte.gz)"),
              std::string::npos)
        << e.what();
  }
  write("t10k-labels-idx1-ubyte.gz", idx1({0}), true);
  const auto files = data::find_dataset_files(dir_.string());
  EXPECT_EQ(files.train_images, (dir_ / "train-images-idx3-ubyte.gz").string());
  EXPECT_EQ(files.train_labels, (dir_ / "train-labels-idx1-ubyte").string());
  EXPECT_EQ(files.test_labels, (dir_ / "t10k-labels-idx1-ubyte.gz").string());
  EXPECT_THROW(data::find_dataset_files((dir_ / "absent").string()), InvalidArgument);
}

TEST(IdxDefaults, DataDirFollowsEnvironment) {
  const char* saved = std::getenv("CONVTUNE_DATA");
  const std::string saved_value = saved != nullptr ? saved : "";
  unsetenv("CONVTUNE_DATA");
  EXPECT_EQ(data::default_data_dir(), "/usr/share/datasets/fashion-mnist");
  setenv("CONVTUNE_DATA", "/elsewhere", 1);
  EXPECT_EQ(data::default_data_dir(), "/elsewhere");
  if (saved != nullptr) {
    setenv("CONVTUNE_DATA", saved_value.c_str(), 1);
  } else {
    unsetenv("CONVTUNE_DATA");
  }
}

// The Debian package's files, when installed: 60000 + 10000 images of 28x28 with labels 0..9.
TEST(IdxDebian, FashionMnistWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " absent (Debian package dataset-fashion-mnist)";
  const auto files = data::find_dataset_files(dir);
  const auto train = data::load_idx_pair(files.train_images, files.train_labels);
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(train.rows, 28);
  EXPECT_EQ(train.cols, 28);
  const auto test = data::load_idx_pair(files.test_images, files.test_labels);
  EXPECT_EQ(test.count, 10000);
  std::vector<int> per_class(10, 0);
  for (auto label : test.labels) ++per_class[label];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << "class " << c;
}

// Peak resident memory of this process so far, in bytes.
static uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

// The reliability issue's IDX reproducers: headers asking for gigabytes that the files do not hold used to be
// allocated (2.1 GB, then "truncated"; or ~400 GB and std::bad_alloc) before a byte of data was read.
TEST_F(IdxTest, HeadersAskingForMoreThanTheFileHoldsAllocateNothing) {
  const std::string repro = std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/";
  const uint64_t rss_before = peak_rss_bytes();
  std::string message = error_of(repro + "idx-24-byte-header-2GiB/t10k-images-idx3-ubyte",
                                 repro + "idx-24-byte-header-2GiB/t10k-labels-idx1-ubyte");
  EXPECT_NE(message.find("t10k-images-idx3-ubyte: truncated: the header announces 33554432 images of 8x8 "
                         "(2147483648 bytes), but only 0 bytes follow the header"),
            std::string::npos)
      << message;

  // The fuzzer's input: 2-byte length of the image file, an option byte, the image file, the label file.
  const std::string fuzz_input = read_bytes(repro + "idx-header-huge-allocation.bin");
  const size_t images_size = static_cast<unsigned char>(fuzz_input[0]) | (static_cast<unsigned char>(fuzz_input[1]) << 8);
  const std::string images = fuzz_input.substr(3, images_size), labels = fuzz_input.substr(3 + images_size);
  message = error_of(write("huge-images", {images.begin(), images.end()}),
                     write("huge-labels", {labels.begin(), labels.end()}));
  EXPECT_NE(message.find("huge-images: truncated: the header announces 525056 images of 768x1024"), std::string::npos)
      << message;
  // The same header in a gzip file: bounded by deflate's largest expansion, not believed.
  message = error_of(write("huge-images.gz", {images.begin(), images.end()}, true),
                     write("huge-labels.gz", {labels.begin(), labels.end()}, true));
  EXPECT_NE(message.find("more than a gzip file of"), std::string::npos) << message;
  EXPECT_LT(peak_rss_bytes() - rss_before, uint64_t{256} << 20) << "the reader allocated for the header's claim";
}

TEST_F(IdxTest, ZeroImagesAndSpecialFilesAreRefused) {
  std::string message = error_of(write("empty", idx3(0, 28, 28)), write("lab", idx1({})));
  EXPECT_NE(message.find("empty: the header announces 0 images, expected at least 1"), std::string::npos) << message;
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  message = error_of(fifo, write("lab", idx1({1})));  // returns at once: a FIFO is not opened for reading data
  EXPECT_NE(message.find("fifo: not a regular file"), std::string::npos) << message;
  message = error_of("/dev/zero", write("lab", idx1({1})));
  EXPECT_NE(message.find("/dev/zero: not a regular file"), std::string::npos) << message;
  // A dataset folder whose file is a FIFO says so, rather than that the file is missing.
  write("t10k-labels-idx1-ubyte", idx1({1}));
  ASSERT_EQ(mkfifo((dir_ / "t10k-images-idx3-ubyte").c_str(), 0600), 0);
  try {
    data::find_dataset_files(dir_.string(), false);
    ADD_FAILURE() << "expected an error for the FIFO";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("t10k-images-idx3-ubyte: not a regular file"), std::string::npos) << e.what();
  }
}

TEST_F(IdxTest, EvalNeedsOnlyTheTestFiles) {
  write("t10k-images-idx3-ubyte", idx3(1, 1, 1));
  write("t10k-labels-idx1-ubyte", idx1({0}));
  const auto files = data::find_dataset_files(dir_.string(), false);
  EXPECT_EQ(files.test_images, (dir_ / "t10k-images-idx3-ubyte").string());
  EXPECT_TRUE(files.train_images.empty());
  EXPECT_THROW(data::find_dataset_files(dir_.string()), InvalidArgument);  // training needs its files
}
