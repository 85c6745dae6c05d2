// Seed 002's MLP trainer: host loops on the CPU backend (the reference), device kernels elsewhere with the
// dataset uploaded once and the weights kept on the device (src/kernels/mlp/mlp.cl explains the kernels).
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "convtune/error.h"
#include "convtune/mlp/mlp.h"
#include "convtune/rounding.h"
#include "src/core/parallel_for.h"
#include "src/mlp/mlp_kernels.h"

namespace convtune::mlp {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// splitmix64: a tiny, well-mixed generator whose sequence is the same on every platform and standard library.
class SeededUniform {
 public:
  explicit SeededUniform(uint64_t seed) : state_(seed) {}
  float next(float limit) {  // uniform in [-limit, limit]
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const double unit = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    return static_cast<float>((2.0 * unit - 1.0) * limit);
  }

 private:
  uint64_t state_;
};

void check_dataset(const data::LabelledImages& set, const MlpWeights& w, const char* what) {
  if (static_cast<int64_t>(set.rows) * set.cols != w.inputs) {
    throw InvalidArgument(fmt::format("MLP: {} images have {}x{} = {} pixels, the network expects {} inputs", what,
                                      set.rows, set.cols, int64_t{set.rows} * set.cols, w.inputs));
  }
  if (set.count < 1) throw InvalidArgument(fmt::format("MLP: the {} set is empty", what));
  for (int64_t s = 0; s < set.count; ++s) {
    if (set.labels[static_cast<size_t>(s)] >= w.outputs) {
      throw InvalidArgument(fmt::format("MLP: {} label {} at index {} is out of range for {} outputs", what,
                                        int{set.labels[static_cast<size_t>(s)]}, s, w.outputs));
    }
  }
}

// The math mode's rounding of a product's operand (mlp.cl's MLP_Q) and of a gradient (MLP_QG: FP16 at the loss
// scale): the identity in fp32 and 3xtf32.
struct Rounding {
  Precision precision;
  float operator()(float v) const {
    if (precision.type != ElementType::F32) return round_to_type(precision.type, v);
    return precision.math == MathMode::TF32 ? round_to_tf32(v) : v;
  }
  float gradient(float v) const {
    if (precision.type != ElementType::F16) return (*this)(v);
    constexpr float kLossScale = 4096.0f;
    return (*this)(v * kLossScale) * (1.0f / kLossScale);
  }
};

// Seed 002's forward pass for one image (already rounded), on the host: fills `hidden` (without the bias) and `out`.
// Plain multiply-adds in index order (std::fma would be a slow library call without hardware-FMA compile flags).
void host_forward(const MlpWeights& w, const float* x, std::vector<float>& hidden, std::vector<float>& out,
                  const Rounding& q) {
  const int in1 = w.inputs + 1;
  for (int j = 0; j < w.hidden; ++j) {
    const float* row = &w.input_hidden[static_cast<size_t>(j) * in1];
    float sum = 0.0f;
    for (int i = 0; i < w.inputs; ++i) sum += x[i] * q(row[i]);
    sum += kBiasValue * q(row[w.inputs]);
    hidden[j] = q(sigmoid(sum));
  }
  for (int k = 0; k < w.outputs; ++k) {
    float sum = 0.0f;
    for (int j = 0; j <= w.hidden; ++j) {
      const float h = j < w.hidden ? hidden[j] : kBiasValue;
      sum += h * q(w.hidden_output[static_cast<size_t>(j) * w.outputs + k]);
    }
    out[k] = sigmoid(sum);
  }
}

// ", math bf16" (what describe() adds outside fp32).
std::string math_suffix(Precision precision) {
  if (precision.type == ElementType::F32 && precision.math == MathMode::FP32) return {};
  return fmt::format(", math {}", to_string(precision));
}

// The image as the mode's tensors hold it.
const float* rounded_image(const float* pixels, int count, const Rounding& q, std::vector<float>& storage) {
  if (q.precision.type == ElementType::F32 && q.precision.math != MathMode::TF32) return pixels;
  storage.resize(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) storage[static_cast<size_t>(i)] = q(pixels[i]);
  return storage.data();
}

struct SampleScore {
  double squared_error = 0;
  bool correct = false;
};

SampleScore score(const std::vector<float>& out, int label) {
  SampleScore s;
  for (size_t k = 0; k < out.size(); ++k) {
    const double d = out[k] - (static_cast<int>(k) == label ? 1.0 : 0.0);
    s.squared_error += d * d;
  }
  s.correct = std::max_element(out.begin(), out.end()) - out.begin() == label;
  return s;
}

EpochStats stats_of(double squared_error, int64_t correct, int64_t count, int outputs, double ms) {
  return {ms, squared_error / (static_cast<double>(count) * outputs), static_cast<double>(correct) / count};
}

// Host loops, the reference for the device kernels and the path of the CPU backend.
class HostTrainer final : public MlpTrainer {
 public:
  HostTrainer(Device& device, const data::LabelledImages& train, MlpWeights weights, TrainOptions options)
      : device_(device), train_(train), w_(std::move(weights)), options_(options) {}

  EpochStats train_epoch() override {
    double squared_error = 0;
    int64_t correct = 0;
    const double ms = device_.queue().elapsed_ms([&] {
      for (int64_t first = 0; first < train_.count; first += options_.batch) {
        const int rows = static_cast<int>(std::min<int64_t>(options_.batch, train_.count - first));
        train_batch(first, rows, squared_error, correct);
      }
    });
    return stats_of(squared_error, correct, train_.count, w_.outputs, ms);
  }

  EpochStats evaluate(const data::LabelledImages& test) override {
    check_dataset(test, w_, "test");
    std::vector<SampleScore> scores(static_cast<size_t>(test.count));
    const double ms = device_.queue().elapsed_ms([&] {
      const Rounding q{options_.precision};
      parallel_for(test.count, hardware_threads(), [&](int64_t s) {
        std::vector<float> hidden(w_.hidden), out(w_.outputs), image;
        host_forward(w_, rounded_image(&test.pixels[static_cast<size_t>(s) * w_.inputs], w_.inputs, q, image), hidden,
                     out, q);
        scores[static_cast<size_t>(s)] = score(out, test.labels[static_cast<size_t>(s)]);
      });
    });
    double squared_error = 0;
    int64_t correct = 0;
    for (const auto& s : scores) {
      squared_error += s.squared_error;
      correct += s.correct;
    }
    return stats_of(squared_error, correct, test.count, w_.outputs, ms);
  }

  MlpWeights weights() override { return w_; }
  std::string describe() const override {
    return (options_.batch == 1 ? std::string("host loops, per-sample updates")
                                : fmt::format("host loops, mini-batches of {}", options_.batch)) +
           math_suffix(options_.precision);
  }

 private:
  // One update from `rows` images starting at `first`: seed 002's rule with the batch's mean gradient
  // (rows == 1: exactly seed 002's per-sample update).
  void train_batch(int64_t first, int rows, double& squared_error, int64_t& correct) {
    const int in1 = w_.inputs + 1, hid1 = w_.hidden + 1;
    grad_ih_.assign(static_cast<size_t>(w_.hidden) * in1, 0.0f);
    grad_ho_.assign(static_cast<size_t>(hid1) * w_.outputs, 0.0f);
    std::vector<float> hidden(w_.hidden), out(w_.outputs), out_grad(w_.outputs), image;
    const Rounding q{options_.precision};
    for (int b = 0; b < rows; ++b) {
      const float* x = rounded_image(&train_.pixels[static_cast<size_t>(first + b) * w_.inputs], w_.inputs, q, image);
      const int label = train_.labels[static_cast<size_t>(first + b)];
      host_forward(w_, x, hidden, out, q);
      const SampleScore s = score(out, label);
      squared_error += s.squared_error;
      correct += s.correct;
      for (int k = 0; k < w_.outputs; ++k) {
        const float target = k == label ? 1.0f : 0.0f;
        out_grad[k] = q.gradient(out[k] * (1.0f - out[k]) * (target - out[k]));
      }
      for (int j = 0; j <= w_.hidden; ++j) {
        const float h = j < w_.hidden ? hidden[j] : kBiasValue;
        for (int k = 0; k < w_.outputs; ++k) {
          float& g = grad_ho_[static_cast<size_t>(j) * w_.outputs + k];
          g += h * out_grad[k];
        }
      }
      for (int j = 0; j < w_.hidden; ++j) {
        float back = 0.0f;
        for (int k = 0; k < w_.outputs; ++k) {
          back += q(w_.hidden_output[static_cast<size_t>(j) * w_.outputs + k]) * out_grad[k];
        }
        const float hidden_grad = q.gradient(hidden[j] * (1.0f - hidden[j]) * back);
        float* g = &grad_ih_[static_cast<size_t>(j) * in1];
        for (int i = 0; i < w_.inputs; ++i) g[i] += hidden_grad * x[i];
        g[w_.inputs] += hidden_grad * kBiasValue;
      }
    }
    const float scale = options_.learning_rate / static_cast<float>(rows);
    apply(w_.input_hidden, w_.input_hidden_delta, grad_ih_, scale);
    apply(w_.hidden_output, w_.hidden_output_delta, grad_ho_, scale);
  }

  void apply(std::vector<float>& weights, std::vector<float>& delta, const std::vector<float>& grad, float scale) {
    for (size_t e = 0; e < weights.size(); ++e) {
      delta[e] = scale * grad[e] + options_.momentum * delta[e];
      weights[e] += delta[e];
    }
  }

  Device& device_;
  const data::LabelledImages& train_;
  MlpWeights w_;
  TrainOptions options_;
  std::vector<float> grad_ih_, grad_ho_;
};

// Device kernels: the dataset and weights live on the device for the trainer's lifetime.
class DeviceTrainer final : public MlpTrainer {
 public:
  DeviceTrainer(Device& device, const data::LabelledImages& train, const MlpWeights& initial, TrainOptions options)
      : device_(device), w_shape_(initial), options_(options), train_count_(train.count) {
    const MlpKernelShape shape = mlp_kernel_shape(device.info(), initial.inputs, initial.hidden, initial.outputs,
                                                  options.groups, options.precision);
    work_group_ = shape.work_group;
    groups_ = shape.groups;
    hidden_per_group_ = shape.hidden_per_group;
    tile_ = shape.tile;
    w1_local_ = shape.w1_local;
    program_ = device.build(shape.source);
    epoch_kernel_ = program_->kernel("mlp_sgd_epoch");
    forward_kernel_ = program_->kernel("mlp_hidden_forward");
    output_kernel_ = program_->kernel("mlp_output_layer");
    update_kernel_ = program_->kernel("mlp_update");

    Queue& q = device.queue();
    train_set_ = upload_set(train);
    w1_ = upload(initial.input_hidden);
    dw1_ = upload(initial.input_hidden_delta);
    w2_ = upload(initial.hidden_output);
    dw2_ = upload(initial.hidden_output_delta);
    exchange_ = device.allocate(sizeof(float) * 2 * static_cast<size_t>(initial.hidden));
    counter_ = device.allocate(sizeof(int32_t));
    const size_t rows = static_cast<size_t>(std::max(options.batch, kEvalChunk));
    hidden_ = device.allocate(sizeof(float) * rows * initial.hidden);
    out_grad_ = device.allocate(sizeof(float) * rows * initial.outputs);
    hidden_grad_ = device.allocate(sizeof(float) * rows * initial.hidden);
    q.finish();
  }

  EpochStats train_epoch() override {
    Queue& q = device_.queue();
    const int32_t zero = 0;
    const auto count = static_cast<int32_t>(train_count_);
    double ms = 0;
    if (options_.batch == 1) {
      Kernel& k = *epoch_kernel_;
      int a = 0;
      for (const Buffer* b : {train_set_.images.get(), train_set_.labels.get(), w1_.get(), dw1_.get(), w2_.get(),
                              dw2_.get(), exchange_.get(), counter_.get(), train_set_.error.get(),
                              train_set_.correct.get()}) {
        k.set_arg(a++, b);
      }
      k.set_arg(a++, count);
      k.set_arg(a++, options_.learning_rate);
      k.set_arg(a++, options_.momentum);
      LaunchGeometry g;
      g.global[0] = static_cast<size_t>(groups_) * work_group_;
      g.local[0] = static_cast<size_t>(work_group_);
      ms = q.elapsed_ms([&] {
        q.write(*counter_, &zero, sizeof zero);
        q.launch(k, g);
      });
    } else {
      set_update_args();
      ms = q.elapsed_ms([&] {
        for (int64_t first = 0; first < train_count_; first += options_.batch) {
          const int rows = static_cast<int>(std::min<int64_t>(options_.batch, train_count_ - first));
          forward(train_set_, static_cast<int>(first), rows, true);
          update_kernel_->set_arg(8, static_cast<int32_t>(first));
          update_kernel_->set_arg(9, rows);
          LaunchGeometry g;
          const size_t weights =
              static_cast<size_t>(w_shape_.hidden) * (w_shape_.inputs + 1) + (w_shape_.hidden + 1) * w_shape_.outputs;
          g.local[0] = static_cast<size_t>(work_group_);
          g.global[0] = (weights + g.local[0] - 1) / g.local[0] * g.local[0];
          q.launch(*update_kernel_, g);
        }
      });
    }
    return read_stats(train_set_, ms);
  }

  EpochStats evaluate(const data::LabelledImages& test) override {
    if (!test_set_.images || test_set_.count != test.count) {
      check_dataset(test, w_shape_, "test");
      test_set_ = upload_set(test);
    }
    Queue& q = device_.queue();
    const double ms = q.elapsed_ms([&] {
      for (int64_t first = 0; first < test_set_.count; first += kEvalChunk) {
        const int rows = static_cast<int>(std::min<int64_t>(kEvalChunk, test_set_.count - first));
        forward(test_set_, static_cast<int>(first), rows, false);
      }
    });
    return read_stats(test_set_, ms);
  }

  MlpWeights weights() override {
    MlpWeights w = w_shape_;
    Queue& q = device_.queue();
    q.read(*w1_, w.input_hidden.data(), w.input_hidden.size() * sizeof(float));
    q.read(*dw1_, w.input_hidden_delta.data(), w.input_hidden_delta.size() * sizeof(float));
    q.read(*w2_, w.hidden_output.data(), w.hidden_output.size() * sizeof(float));
    q.read(*dw2_, w.hidden_output_delta.data(), w.hidden_output_delta.size() * sizeof(float));
    q.finish();
    return w;
  }

  std::string describe() const override {
    if (options_.batch > 1) {
      return fmt::format("mini-batches of {}: 3 kernels per batch (tiled hidden forward, output layer, update)",
                         options_.batch) +
             math_suffix(options_.precision);
    }
    const char* rows = w1_local_ ? "W1 rows in local memory" : "W1 in global memory";
    return (groups_ == 1 ? fmt::format("persistent per-sample kernel, 1 work-group of {} threads, {}", work_group_, rows)
                         : fmt::format("persistent per-sample kernel, {} work-groups x {} threads ({} hidden neurons "
                                       "each, {}) with a grid barrier per sample",
                                       groups_, work_group_, hidden_per_group_, rows)) +
           math_suffix(options_.precision);
  }

 private:
  static constexpr int kEvalChunk = 1024;  // test images per forward launch

  struct DeviceSet {
    int64_t count = 0;
    std::unique_ptr<Buffer> images, labels, error, correct;
  };

  std::unique_ptr<Buffer> upload(const std::vector<float>& values) {
    auto buffer = device_.allocate(values.size() * sizeof(float));
    device_.queue().write(*buffer, values.data(), values.size() * sizeof(float));
    return buffer;
  }

  DeviceSet upload_set(const data::LabelledImages& set) {
    DeviceSet d;
    d.count = set.count;
    d.images = upload(set.pixels);
    std::vector<int32_t> labels(set.labels.begin(), set.labels.end());
    d.labels = device_.allocate(labels.size() * sizeof(int32_t));
    device_.queue().write(*d.labels, labels.data(), labels.size() * sizeof(int32_t));
    d.error = device_.allocate(static_cast<size_t>(set.count) * sizeof(float));
    d.correct = device_.allocate(static_cast<size_t>(set.count) * sizeof(int32_t));
    return d;
  }

  void set_update_args() {
    Kernel& k = *update_kernel_;
    int a = 0;
    for (const Buffer* b : {train_set_.images.get(), hidden_.get(), out_grad_.get(), hidden_grad_.get(), w1_.get(),
                            dw1_.get(), w2_.get(), dw2_.get()}) {
      k.set_arg(a++, b);
    }
    k.set_arg(10, options_.learning_rate);
    k.set_arg(11, options_.momentum);
  }

  // Hidden forward and output layer for `rows` images of `set` from `first` (gradients when training).
  void forward(const DeviceSet& set, int first, int rows, bool with_gradients) {
    Queue& q = device_.queue();
    Kernel& f = *forward_kernel_;
    f.set_arg(0, set.images.get());
    f.set_arg(1, w1_.get());
    f.set_arg(2, hidden_.get());
    f.set_arg(3, first);
    f.set_arg(4, rows);
    LaunchGeometry fg;
    fg.dims = 2;
    fg.global = {static_cast<size_t>((w_shape_.hidden + tile_ - 1) / tile_ * tile_),
                 static_cast<size_t>((rows + tile_ - 1) / tile_ * tile_), 1};
    fg.local = {static_cast<size_t>(tile_), static_cast<size_t>(tile_), 1};
    q.launch(f, fg);

    Kernel& o = *output_kernel_;
    int a = 0;
    for (const Buffer* b : {hidden_.get(), set.labels.get(), w2_.get(), out_grad_.get(), hidden_grad_.get(),
                            set.error.get(), set.correct.get()}) {
      o.set_arg(a++, b);
    }
    o.set_arg(a++, first);
    o.set_arg(a++, with_gradients ? 1 : 0);
    LaunchGeometry og;
    og.global[0] = static_cast<size_t>(rows) * work_group_;
    og.local[0] = static_cast<size_t>(work_group_);
    q.launch(o, og);
  }

  EpochStats read_stats(const DeviceSet& set, double ms) {
    std::vector<float> error(static_cast<size_t>(set.count));
    std::vector<int32_t> correct(static_cast<size_t>(set.count));
    Queue& q = device_.queue();
    q.read(*set.error, error.data(), error.size() * sizeof(float));
    q.read(*set.correct, correct.data(), correct.size() * sizeof(int32_t));
    q.finish();
    double squared_error = 0;
    int64_t right = 0;
    for (size_t s = 0; s < error.size(); ++s) {
      squared_error += error[s];
      right += correct[s];
    }
    return stats_of(squared_error, right, set.count, w_shape_.outputs, ms);
  }

  Device& device_;
  MlpWeights w_shape_;  // sizes and initial values; the current weights live on the device
  TrainOptions options_;
  int64_t train_count_ = 0;
  int work_group_ = 256, groups_ = 1, hidden_per_group_ = 1, tile_ = 16;
  bool w1_local_ = false;
  std::shared_ptr<Program> program_;
  std::unique_ptr<Kernel> epoch_kernel_, forward_kernel_, output_kernel_, update_kernel_;
  DeviceSet train_set_, test_set_;
  std::unique_ptr<Buffer> w1_, dw1_, w2_, dw2_, exchange_, counter_, hidden_, out_grad_, hidden_grad_;
};

}  // namespace

static int floor_power_of_two(int v) {
  int p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

MlpKernelShape mlp_kernel_shape(const DeviceInfo& info, int inputs, int hidden, int outputs, int groups_option,
                                Precision precision) {
  MlpKernelShape shape;
  const size_t device_limit = std::clamp<size_t>(info.max_work_group_size, 32, 1024);
  shape.work_group = std::min(256, floor_power_of_two(static_cast<int>(device_limit)));
  if (outputs > shape.work_group) {
    throw Unsupported(
        fmt::format("MLP on {}: {} outputs exceed a work-group of {} threads", info.id, outputs, shape.work_group));
  }
  // Per-sample kernel groups: all must run at once for the grid barrier, or it deadlocks. Automatically, only on a
  // GPU, where one small group per compute unit is always resident: up to one group per compute unit. Elsewhere a
  // single group, unless asked: PoCL runs one work-group per compute unit (CPU core) at a time, so N <= compute
  // units works there too (tests use 2 groups on PoCL to check the barrier), but nothing in OpenCL promises it.
  const int cus = std::max(1, info.compute_units);
  int groups = 1;
  if (groups_option > cus) {
    throw InvalidArgument(fmt::format(
        "--groups {} on {}: the device has {} compute units, and more groups than that need not all run at once, "
        "which the per-sample kernel's grid barrier requires",
        groups_option, info.id, cus));
  }
  if (groups_option > 0) {
    groups = std::min(groups_option, hidden);
  } else if (info.is_gpu) {
    groups = std::min(cus, hidden);
  }
  shape.hidden_per_group = (hidden + groups - 1) / groups;
  shape.groups = (hidden + shape.hidden_per_group - 1) / shape.hidden_per_group;  // no empty group
  const int threads_per_neuron = std::clamp(floor_power_of_two(shape.work_group / shape.hidden_per_group),
                                            std::min(32, shape.work_group), shape.work_group);
  const int threads_per_output = std::min(32, floor_power_of_two(shape.work_group / outputs));
  // The group's W1 and dW1 rows in local memory when they fit beside the other local arrays (~4.3k floats) in
  // 48 KiB, CUDA's static shared-memory limit and a common OpenCL minimum: with a GPU's many groups they do.
  const size_t other_local_bytes = sizeof(float) * (static_cast<size_t>(inputs) + 1 + 3 * (hidden + 1) * outputs +
                                                    shape.work_group + 2 * outputs + shape.hidden_per_group);
  const size_t rows_bytes = sizeof(float) * 2 * static_cast<size_t>(shape.hidden_per_group) * (inputs + 1);
  const size_t device_local = info.local_memory_bytes > 0 ? info.local_memory_bytes : size_t{32} << 10;
  const size_t local_budget = std::min<size_t>(size_t{48} << 10, device_local);
  shape.w1_local = other_local_bytes + rows_bytes <= local_budget;
  shape.source.file = "mlp/mlp.cl";
  shape.source.defines = {{"INPUTS", std::to_string(inputs)},
                          {"HIDDEN", std::to_string(hidden)},
                          {"OUTPUTS", std::to_string(outputs)},
                          {"WG", std::to_string(shape.work_group)},
                          {"GROUPS", std::to_string(shape.groups)},
                          {"HIDDEN_PER_GROUP", std::to_string(shape.hidden_per_group)},
                          {"THREADS_PER_NEURON", std::to_string(threads_per_neuron)},
                          {"THREADS_PER_OUTPUT", std::to_string(threads_per_output)},
                          {"TILE", std::to_string(shape.tile)},
                          {"W1_LOCAL", shape.w1_local ? "1" : "0"},
                          {"MLP_MATH", precision.type == ElementType::BF16   ? "2"
                                       : precision.type == ElementType::F16  ? "3"
                                       : precision.math == MathMode::TF32    ? "1"
                                                                             : "0"}};
  return shape;
}

MlpWeights initial_weights(int inputs, int hidden, int outputs, uint64_t seed) {
  if (inputs < 1 || hidden < 1 || outputs < 2) {
    throw InvalidArgument(fmt::format("MLP: sizes {}-{}-{} are invalid, expected at least 1-1-2", inputs, hidden,
                                      outputs));
  }
  MlpWeights w;
  w.inputs = inputs;
  w.hidden = hidden;
  w.outputs = outputs;
  SeededUniform uniform(seed);
  const float input_range = 1.0f / std::sqrt(static_cast<float>(inputs));
  const float hidden_range = 1.0f / std::sqrt(static_cast<float>(hidden));
  w.input_hidden.resize(static_cast<size_t>(hidden) * (inputs + 1));
  for (float& v : w.input_hidden) v = uniform.next(input_range);
  w.hidden_output.resize(static_cast<size_t>(hidden + 1) * outputs);
  for (float& v : w.hidden_output) v = uniform.next(hidden_range);
  w.input_hidden_delta.assign(w.input_hidden.size(), 0.0f);
  w.hidden_output_delta.assign(w.hidden_output.size(), 0.0f);
  return w;
}

void validate(const TrainOptions& o) {
  if (!(o.learning_rate > 0.0f) || !std::isfinite(o.learning_rate)) {
    throw InvalidArgument(
        fmt::format("--lr={} is invalid: the learning rate must be a positive number", o.learning_rate));
  }
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) {
    throw InvalidArgument(fmt::format("--momentum={} is invalid: expected 0 <= momentum < 1", o.momentum));
  }
  if (o.batch < 1) throw InvalidArgument(fmt::format("--batch={} is invalid: expected 1 or more images", o.batch));
  if (o.groups < 0) throw InvalidArgument(fmt::format("--groups={} is invalid: expected 0 (auto) or more", o.groups));
  validate_precision(o.precision.type, o.precision.math);
}

std::unique_ptr<MlpTrainer> MlpTrainer::create(Device& device, const data::LabelledImages& train,
                                               const MlpWeights& initial, const TrainOptions& options) {
  validate(options);
  check_dataset(train, initial, "training");
  if (device.info().backend == BackendKind::Cpu) {
    return std::make_unique<HostTrainer>(device, train, initial, options);
  }
  if (!device.info().can_run_kernels) {
    throw BackendError(fmt::format("MLP on {}: the device cannot run kernels: {}", device.info().id,
                                   device.info().cannot_run_reason));
  }
  return std::make_unique<DeviceTrainer>(device, train, initial, options);
}

}  // namespace convtune::mlp
