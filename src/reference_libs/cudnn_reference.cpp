// cuDNN as a reference on convtune's own CUDA device: the same primary context, stream and device buffers,
// the legacy convolution API with its benchmark-mode search (Find*AlgorithmEx) and the best algorithm's
// workspace. FP32 math (tensor cores off) by default, TF32 on request; BF16 and FP16 tensors with FP32 accumulation
// (tensor cores). Loaded with dlopen.
#include <fmt/format.h>

#include <array>
#include <limits>

#include "convtune/error.h"
#include "src/reference_libs/reference_library.h"
#include "src/reference_libs/shared_library.h"

#if defined(CONVTUNE_WITH_CUDA) && __has_include(<cudnn.h>)
#include <cudnn.h>

#include "src/backend/cuda/cuda_buffer.h"
#include "src/backend/cuda/cuda_queue.h"
#define CONVTUNE_HAVE_CUDNN 1
#endif

namespace convtune::reference {

#ifdef CONVTUNE_HAVE_CUDNN
namespace {

#define CONVTUNE_CUDNN_FUNCTIONS(X)                    \
  X(cudnnGetVersion)                                   \
  X(cudnnGetErrorString)                               \
  X(cudnnCreate)                                       \
  X(cudnnDestroy)                                      \
  X(cudnnSetStream)                                    \
  X(cudnnCreateTensorDescriptor)                       \
  X(cudnnSetTensor4dDescriptor)                        \
  X(cudnnDestroyTensorDescriptor)                      \
  X(cudnnCreateFilterDescriptor)                       \
  X(cudnnSetFilter4dDescriptor)                        \
  X(cudnnDestroyFilterDescriptor)                      \
  X(cudnnCreateConvolutionDescriptor)                  \
  X(cudnnSetConvolution2dDescriptor)                   \
  X(cudnnSetConvolutionGroupCount)                     \
  X(cudnnSetConvolutionMathType)                       \
  X(cudnnDestroyConvolutionDescriptor)                 \
  X(cudnnFindConvolutionForwardAlgorithmEx)            \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx)       \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx)     \
  X(cudnnConvolutionForward)                           \
  X(cudnnConvolutionBackwardData)                      \
  X(cudnnConvolutionBackwardFilter)

struct CudnnApi {
#define CONVTUNE_CUDNN_DECLARE(function) decltype(&::function) function = nullptr;
  CONVTUNE_CUDNN_FUNCTIONS(CONVTUNE_CUDNN_DECLARE)
#undef CONVTUNE_CUDNN_DECLARE
};

struct CudnnLibrary {
  // The system's copy by default; the GPU bench script points CONVTUNE_CUDNN_LIBRARY at PyTorch's.
  SharedLibrary library{"CONVTUNE_CUDNN_LIBRARY",
                        {"libcudnn.so.9", "/usr/local/cuda/lib64/libcudnn.so.9", "/usr/local/cuda/lib/libcudnn.so.9"}};
  CudnnApi api;
  std::string error;
  std::string version;
  CudnnLibrary() {
    if (!library.loaded()) {
      error = library.error() + " (set CONVTUNE_CUDNN_LIBRARY to a libcudnn.so.9, e.g. PyTorch's nvidia/cudnn/lib)";
      return;
    }
#define CONVTUNE_CUDNN_RESOLVE(function) CONVTUNE_RESOLVE_SYMBOL(library, api, function);
    CONVTUNE_CUDNN_FUNCTIONS(CONVTUNE_CUDNN_RESOLVE)
#undef CONVTUNE_CUDNN_RESOLVE
    if (!library.missing().empty()) {
      error = fmt::format("{} lacks {} (convtune needs cuDNN 8 or 9's legacy convolution API)",
                          library.resolved_path(), library.missing());
      return;
    }
    const size_t v = api.cudnnGetVersion();  // 90100 for 9.1.0 (8.x: 8100 for 8.1.0)
    const size_t major = v >= 90000 ? v / 10000 : v / 1000;
    const size_t minor = v >= 90000 ? v / 100 % 100 : v / 100 % 10;
    version = fmt::format("cuDNN {}.{}.{} ({})", major, minor, v % 100, library.resolved_path());
  }
  static CudnnLibrary& instance() {
    static CudnnLibrary lib;
    return lib;
  }
};

constexpr std::array<const char*, 8> kForwardNames = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                                       "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
constexpr std::array<const char*, 6> kBackwardDataNames = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                                           "WINOGRAD_NONFUSED"};
constexpr std::array<const char*, 7> kBackwardFilterNames = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                                             "WINOGRAD_NONFUSED", "FFT_TILING"};

template <size_t N>
const char* name_of(const std::array<const char*, N>& names, int algo) {
  return algo >= 0 && static_cast<size_t>(algo) < N ? names[static_cast<size_t>(algo)] : "?";
}

class CudnnReference final : public ReferenceLibrary {
 public:
  CudnnReference() : lib_(CudnnLibrary::instance()), api_(lib_.api) {}
  ~CudnnReference() override {
    if (!queue_) return;
    const cuda::CurrentContext current = queue_->context().make_current_noexcept();
    release_descriptors();
    if (handle_) api_.cudnnDestroy(handle_);
  }

  std::string name() const override { return "cudnn"; }
  std::string unavailable_reason() const override { return lib_.error; }
  std::string version() const override { return lib_.version; }
  bool runs_on_host() const override { return false; }

  std::string unsupported_reason(const Problem& problem, const DeviceInfo& device) const override {
    if (!lib_.error.empty()) return lib_.error;
    if (!problem.is_conv()) return "cuDNN computes convolutions (cublas computes matrix products)";
    if (device.backend != BackendKind::Cuda)
      return fmt::format("cuDNN needs convtune on a CUDA device, not {}", device.id);
    return {};
  }

  void prepare(harness::Workload& workload) override {
    if (const std::string why = unsupported_reason(workload.problem(), workload.device().info()); !why.empty())
      throw Unsupported(why);
    const ConvProblem& pb = workload.problem().conv();
    const MathMode math = math_;
    const Operands operands = workload.operands();
    problem_ = pb;
    device_ = &workload.device();
    context_ = pb.to_string();
    queue_ = dynamic_cast<cuda::CudaQueue*>(&device_->queue());
    if (!queue_) throw BackendError("cuDNN needs convtune's CUDA queue on " + device_->info().id);
    auto pointer = [&](const Buffer* b, const char* role) {
      if (!b) throw BackendError(fmt::format("cuDNN got no device buffer for {} of {}", role, context_));
      return reinterpret_cast<void*>(cuda::as_cuda_buffer(*b, "cuDNN").pointer());
    };
    x_ = pointer(operands[0], "x");
    w_ = pointer(operands[1], "w");
    y_ = pointer(operands[2], "y");

    const cuda::CurrentContext current = queue_->context().make_current();
    if (!handle_) check(api_.cudnnCreate(&handle_), "cudnnCreate");
    check(api_.cudnnSetStream(handle_, reinterpret_cast<cudaStream_t>(queue_->stream())), "cudnnSetStream");
    release_descriptors();
    workspace_.reset();
    check(api_.cudnnCreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor");
    check(api_.cudnnCreateTensorDescriptor(&y_desc_), "cudnnCreateTensorDescriptor");
    check(api_.cudnnCreateFilterDescriptor(&w_desc_), "cudnnCreateFilterDescriptor");
    check(api_.cudnnCreateConvolutionDescriptor(&conv_desc_), "cudnnCreateConvolutionDescriptor");
    auto i = [](int64_t v) { return static_cast<int>(v); };
    // 16-bit tensors keep FP32 accumulation (compute type FLOAT: cuDNN's "pseudo" BF16/FP16 configurations).
    narrow_ = pb.type != ElementType::F32;
    const cudnnDataType_t data = pb.type == ElementType::BF16 ? CUDNN_DATA_BFLOAT16
                                 : pb.type == ElementType::F16 ? CUDNN_DATA_HALF
                                                               : CUDNN_DATA_FLOAT;
    // The problem's layout for all three (NHWC: x and y channels-last, the filters KRSC), as PyTorch hands cuDNN
    // channels-last tensors.
    const cudnnTensorFormat_t format = pb.layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    check(api_.cudnnSetTensor4dDescriptor(x_desc_, format, data, i(pb.n), i(pb.c), i(pb.h), i(pb.w)),
          "cudnnSetTensor4dDescriptor (x)");
    check(api_.cudnnSetTensor4dDescriptor(y_desc_, format, data, i(pb.n), i(pb.k), i(pb.p()), i(pb.q())),
          "cudnnSetTensor4dDescriptor (y)");
    check(api_.cudnnSetFilter4dDescriptor(w_desc_, data, format, i(pb.k), i(pb.c_per_group()), i(pb.r),
                                          i(pb.s)),
          "cudnnSetFilter4dDescriptor");
    check(api_.cudnnSetConvolution2dDescriptor(conv_desc_, i(pb.pad.h), i(pb.pad.w), i(pb.stride.h), i(pb.stride.w),
                                               i(pb.dilation.h), i(pb.dilation.w), CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(api_.cudnnSetConvolutionGroupCount(conv_desc_, i(pb.groups)), "cudnnSetConvolutionGroupCount");
    // FMA math keeps every product in FP32 (no tensor cores, no TF32); tensor-op math lets cuDNN use TF32, and for
    // 16-bit tensors the tensor cores (their products are exact in FP32 either way).
    const cudnnMathType_t wanted = math == MathMode::FP32 && !narrow_ ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    check(api_.cudnnSetConvolutionMathType(conv_desc_, wanted), "cudnnSetConvolutionMathType");
    search(math);
  }

  void run() override { enqueue(); }

  std::string algorithm() const override { return algorithm_; }

 private:
  void check(cudnnStatus_t status, const char* call) const {
    if (status != CUDNN_STATUS_SUCCESS)
      throw BackendError(fmt::format("{} failed: {} ({}) for {} on {}", call, api_.cudnnGetErrorString(status),
                                     static_cast<int>(status), context_, device_ ? device_->info().id : "?"));
  }

  // The benchmark mode: cuDNN times every algorithm it has on these very buffers with a generous search
  // workspace, then the fastest one that keeps the requested math gets a workspace of exactly its size.
  void search(MathMode math) {
    std::unique_ptr<Buffer> search_space;
    size_t search_bytes = 0;
    for (size_t bytes : {size_t{1} << 30, size_t{256} << 20, size_t{0}}) {
      try {
        if (bytes) search_space = device_->allocate(bytes);
        search_bytes = bytes;
        break;
      } catch (const BackendError&) {
      }
    }
    void* ws = search_space ? reinterpret_cast<void*>(cuda::as_cuda_buffer(*search_space, "cuDNN").pointer()) : nullptr;
    const cuda::CurrentContext current = queue_->context().make_current();
    constexpr int kMax = 16;
    int found = 0;
    int algo = -1;
    size_t memory = 0;
    cudnnMathType_t math_type = CUDNN_DEFAULT_MATH;
    // Results come fastest first; in FP32 mode only FMA-math results count, so TF32 never slips in.
    // `names` names the first algorithm tried in the error message when none qualifies.
    auto pick = [&](const auto* results, const auto& names) {
      for (int r = 0; r < found; ++r) {
        const auto& p = results[r];
        if (p.status != CUDNN_STATUS_SUCCESS) continue;
        if (math == MathMode::FP32 && !narrow_ && p.mathType != CUDNN_FMA_MATH) continue;
        // ALLOW_CONVERSION would round FP32 data to FP16, which is neither FP32 nor TF32.
        if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
        algo = static_cast<int>(p.algo), memory = p.memory, math_type = p.mathType;
        return;
      }
      throw BackendError(fmt::format("cuDNN's search found no algorithm that runs {} in {} math ({} tried, "
                                     "search workspace {} MiB); first: {}",
                                     context_, narrow_ ? to_string(problem_.type) : to_string(math), found,
                                     search_bytes >> 20,
                                     found ? name_of(names, static_cast<int>(results[0].algo)) : "none"));
    };
    switch (problem_.direction) {
      case Direction::Forward: {
        cudnnConvolutionFwdAlgoPerf_t results[kMax];
        check(api_.cudnnFindConvolutionForwardAlgorithmEx(handle_, x_desc_, x_, w_desc_, w_, conv_desc_, y_desc_, y_,
                                                          kMax, &found, results, ws, search_bytes),
              "cudnnFindConvolutionForwardAlgorithmEx");
        pick(results, kForwardNames);
        algorithm_ = name_of(kForwardNames, algo);
        break;
      }
      case Direction::BackwardData: {
        cudnnConvolutionBwdDataAlgoPerf_t results[kMax];
        check(api_.cudnnFindConvolutionBackwardDataAlgorithmEx(handle_, w_desc_, w_, y_desc_, y_, conv_desc_, x_desc_,
                                                               x_, kMax, &found, results, ws, search_bytes),
              "cudnnFindConvolutionBackwardDataAlgorithmEx");
        pick(results, kBackwardDataNames);
        algorithm_ = name_of(kBackwardDataNames, algo);
        break;
      }
      case Direction::BackwardFilter: {
        cudnnConvolutionBwdFilterAlgoPerf_t results[kMax];
        check(api_.cudnnFindConvolutionBackwardFilterAlgorithmEx(handle_, x_desc_, x_, y_desc_, y_, conv_desc_,
                                                                 w_desc_, w_, kMax, &found, results, ws, search_bytes),
              "cudnnFindConvolutionBackwardFilterAlgorithmEx");
        pick(results, kBackwardFilterNames);
        algorithm_ = name_of(kBackwardFilterNames, algo);
        break;
      }
    }
    search_space.reset();
    algo_ = algo;
    workspace_bytes_ = memory;
    if (memory) workspace_ = device_->allocate(memory);
    check(api_.cudnnSetConvolutionMathType(conv_desc_, math_type), "cudnnSetConvolutionMathType");
    const char* math_name = math_type == CUDNN_FMA_MATH ? "fma" : math_type == CUDNN_DEFAULT_MATH ? "default"
                            : math_type == CUDNN_TENSOR_OP_MATH                                  ? "tensor-op"
                                                                                                 : "tensor-op-conv";
    algorithm_ += fmt::format(" ({} math, ws {:.1f} MiB)", math_name, static_cast<double>(memory) / (1 << 20));
  }

  void enqueue() {
    const cuda::CurrentContext current = queue_->context().make_current();
    const float one = 1.0f, zero = 0.0f;
    void* ws = workspace_ ? reinterpret_cast<void*>(cuda::as_cuda_buffer(*workspace_, "cuDNN").pointer()) : nullptr;
    switch (problem_.direction) {
      case Direction::Forward:
        check(api_.cudnnConvolutionForward(handle_, &one, x_desc_, x_, w_desc_, w_, conv_desc_,
                                           static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws, workspace_bytes_, &zero,
                                           y_desc_, y_),
              "cudnnConvolutionForward");
        break;
      case Direction::BackwardData:
        check(api_.cudnnConvolutionBackwardData(handle_, &one, w_desc_, w_, y_desc_, y_, conv_desc_,
                                                static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws,
                                                workspace_bytes_, &zero, x_desc_, x_),
              "cudnnConvolutionBackwardData");
        break;
      case Direction::BackwardFilter:
        check(api_.cudnnConvolutionBackwardFilter(handle_, &one, x_desc_, x_, y_desc_, y_, conv_desc_,
                                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_), ws,
                                                  workspace_bytes_, &zero, w_desc_, w_),
              "cudnnConvolutionBackwardFilter");
        break;
    }
  }

  void release_descriptors() {
    if (x_desc_) api_.cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_) api_.cudnnDestroyTensorDescriptor(y_desc_);
    if (w_desc_) api_.cudnnDestroyFilterDescriptor(w_desc_);
    if (conv_desc_) api_.cudnnDestroyConvolutionDescriptor(conv_desc_);
    x_desc_ = y_desc_ = nullptr;
    w_desc_ = nullptr;
    conv_desc_ = nullptr;
  }

  CudnnLibrary& lib_;
  const CudnnApi& api_;
  ConvProblem problem_;
  std::string context_;
  std::string algorithm_;
  Device* device_ = nullptr;
  cuda::CudaQueue* queue_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  void *x_ = nullptr, *w_ = nullptr, *y_ = nullptr;
  int algo_ = 0;
  bool narrow_ = false;  // BF16 or FP16 tensors
  size_t workspace_bytes_ = 0;
  std::unique_ptr<Buffer> workspace_;
};

}  // namespace

std::unique_ptr<ReferenceLibrary> make_cudnn_reference() { return std::make_unique<CudnnReference>(); }
#else
std::unique_ptr<ReferenceLibrary> make_cudnn_reference() {
#ifdef CONVTUNE_WITH_CUDA
  return make_unbuilt_reference("cudnn", "convtune was built without cudnn.h (configure with -DCONVTUNE_CUDNN_INCLUDE=DIR)");
#else
  return make_unbuilt_reference("cudnn", "convtune was built without its CUDA backend, which cuDNN needs");
#endif
}
#endif

}  // namespace convtune::reference
