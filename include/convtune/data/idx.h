// IDX datasets (MNIST, Fashion-MNIST): images and labels, raw or gzip, validated, pixels scaled to [0, 1].
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace convtune::data {

struct LabelledImages {
  int64_t count = 0;
  int rows = 0, cols = 0;
  std::vector<float> pixels;    // count * rows * cols, row-major per image, scaled to [0, 1]
  std::vector<uint8_t> labels;  // count labels, each < classes
};

// Reads an IDX3 image file and an IDX1 label file (raw or gzip, detected by content), validating magic, sizes,
// truncation, image/label count agreement and label range; errors (convtune::InvalidArgument) name the file.
// Only regular files are read; a header announcing no images, or more data than the file can hold, is refused
// before anything is allocated. limit >= 0 keeps the first `limit` examples.
LabelledImages load_idx_pair(const std::string& images_path, const std::string& labels_path, int classes = 10,
                             int64_t limit = -1);

// The dataset's four files in `dir` (accepting NAME or NAME.gz); error naming dir and the missing file, or the
// file that is there but not a regular file. Without `need_training_files` (eval) only the test files are looked
// for, and the training paths stay empty.
struct DatasetFiles {
  std::string train_images, train_labels, test_images, test_labels;
};
DatasetFiles find_dataset_files(const std::string& dir, bool need_training_files = true);

// $CONVTUNE_DATA if set, else /usr/share/datasets/fashion-mnist (where Debian's dataset-fashion-mnist installs).
std::string default_data_dir();

}  // namespace convtune::data
