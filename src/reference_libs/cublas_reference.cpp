// cuBLAS's SGEMM (and strided-batched SGEMM) as a reference for GEMM problems on convtune's own CUDA device: the
// same primary context, stream and device buffers. FP32 math by default (no TF32), TF32 tensor-op math on request;
// BF16 and FP16 matrices through GemmEx with FP32 accumulation (CUBLAS_COMPUTE_32F).
// Loaded with dlopen (the GPU machine's copy comes with PyTorch's wheel).
#include <fmt/format.h>

#include "convtune/error.h"
#include "src/reference_libs/reference_library.h"
#include "src/reference_libs/shared_library.h"

#if defined(CONVTUNE_WITH_CUDA) && __has_include(<cublas_v2.h>)
#include <cublas_v2.h>

#include "src/backend/cuda/cuda_buffer.h"
#include "src/backend/cuda/cuda_queue.h"
#define CONVTUNE_HAVE_CUBLAS 1
#endif

namespace convtune::reference {

#ifdef CONVTUNE_HAVE_CUBLAS
namespace {

#define CONVTUNE_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate_v2)                 \
  X(cublasDestroy_v2)                \
  X(cublasGetVersion_v2)             \
  X(cublasSetStream_v2)              \
  X(cublasSetMathMode)               \
  X(cublasSgemm_v2)                  \
  X(cublasSgemmStridedBatched)

// The Ex entry points are overloaded in C++ (an inline wrapper taking the older cudaDataType compute type), so their
// table entries name the exported signature.
#define CONVTUNE_CUBLAS_EX_FUNCTIONS(X) \
  X(cublasGemmEx)                       \
  X(cublasGemmStridedBatchedEx)

struct CublasApi {
#define CONVTUNE_CUBLAS_DECLARE(function) decltype(&::function) function = nullptr;
  CONVTUNE_CUBLAS_FUNCTIONS(CONVTUNE_CUBLAS_DECLARE)
#undef CONVTUNE_CUBLAS_DECLARE
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                 const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                 cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void*, cudaDataType, int, long long, const void*,
                                               cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                               long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

struct CublasLibrary {
  // The toolkit's copy by default; the GPU bench script points CONVTUNE_CUBLAS_LIBRARY at PyTorch's.
  SharedLibrary library{"CONVTUNE_CUBLAS_LIBRARY",
                        {"libcublas.so.13", "libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so.13",
                         "/usr/local/cuda/lib64/libcublas.so.12"}};
  CublasApi api;
  std::string error;
  std::string version;
  CublasLibrary() {
    if (!library.loaded()) {
      error = library.error() + " (set CONVTUNE_CUBLAS_LIBRARY to a libcublas.so, e.g. PyTorch's nvidia/cublas/lib)";
      return;
    }
#define CONVTUNE_CUBLAS_RESOLVE(function) CONVTUNE_RESOLVE_SYMBOL(library, api, function);
    CONVTUNE_CUBLAS_FUNCTIONS(CONVTUNE_CUBLAS_RESOLVE)
    CONVTUNE_CUBLAS_EX_FUNCTIONS(CONVTUNE_CUBLAS_RESOLVE)
#undef CONVTUNE_CUBLAS_RESOLVE
    if (!library.missing().empty()) {
      error = fmt::format("{} lacks {} (convtune needs cuBLAS 11 or later)", library.resolved_path(), library.missing());
      return;
    }
    version = fmt::format("cuBLAS ({})", library.resolved_path());
  }
  static CublasLibrary& instance() {
    static CublasLibrary lib;
    return lib;
  }
};

class CublasReference final : public ReferenceLibrary {
 public:
  CublasReference() : lib_(CublasLibrary::instance()), api_(lib_.api) {}
  ~CublasReference() override {
    if (queue_ && handle_) {
      const cuda::CurrentContext current = queue_->context().make_current_noexcept();
      api_.cublasDestroy_v2(handle_);
    }
  }

  std::string name() const override { return "cublas"; }
  std::string unavailable_reason() const override { return lib_.error; }
  std::string version() const override { return lib_.version; }

  std::string unsupported_reason(const Problem& problem, const DeviceInfo& device) const override {
    if (!lib_.error.empty()) return lib_.error;
    if (!problem.is_gemm()) return "cuBLAS computes matrix products (cudnn computes convolutions)";
    if (device.backend != BackendKind::Cuda)
      return fmt::format("cuBLAS needs convtune on a CUDA device, not {}", device.id);
    return {};
  }

  void prepare(harness::Workload& workload) override {
    if (const std::string why = unsupported_reason(workload.problem(), workload.device().info()); !why.empty())
      throw Unsupported(why);
    problem_ = workload.problem().gemm();
    device_ = &workload.device();
    queue_ = dynamic_cast<cuda::CudaQueue*>(&device_->queue());
    if (!queue_) throw BackendError("cuBLAS needs convtune's CUDA queue on " + device_->info().id);
    const Operands operands = workload.operands();
    auto pointer = [&](const Buffer* b) { return reinterpret_cast<void*>(cuda::as_cuda_buffer(*b, "cuBLAS").pointer()); };
    a_ = pointer(operands[0]), b_ = pointer(operands[1]), c_ = pointer(operands[2]);
    const cuda::CurrentContext current = queue_->context().make_current();
    if (!handle_) check(api_.cublasCreate_v2(&handle_), "cublasCreate");
    check(api_.cublasSetStream_v2(handle_, reinterpret_cast<cudaStream_t>(queue_->stream())), "cublasSetStream");
    // Default math keeps FP32 products in FP32 (cuBLAS 11+ uses TF32 only when asked).
    check(api_.cublasSetMathMode(handle_, math_ == MathMode::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "cublasSetMathMode");
    int version = 0;
    api_.cublasGetVersion_v2(handle_, &version);
    version_number_ = version;
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the operands swap, the transpositions stay.
  void run() override {
    const GemmProblem& g = problem_;
    const cuda::CurrentContext current = queue_->context().make_current();
    const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
    const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    auto i = [](int64_t v) { return static_cast<int>(v); };
    if (g.type != ElementType::F32) {
      const cudaDataType_t t = g.type == ElementType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
      if (g.batch == 1) {
        check(api_.cublasGemmEx(handle_, op_b, op_a, i(g.n), i(g.m), i(g.k), &alpha, b_, t, i(g.ld_b()), a_, t,
                                i(g.ld_a()), &beta, c_, t, i(g.ld_c()), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
      } else {
        check(api_.cublasGemmStridedBatchedEx(handle_, op_b, op_a, i(g.n), i(g.m), i(g.k), &alpha, b_, t, i(g.ld_b()),
                                              g.batch_stride_b(), a_, t, i(g.ld_a()), g.batch_stride_a(), &beta, c_, t,
                                              i(g.ld_c()), g.batch_stride_c(), i(g.batch), CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
      }
      return;
    }
    float *a = static_cast<float*>(a_), *b = static_cast<float*>(b_), *c = static_cast<float*>(c_);
    if (g.batch == 1) {
      check(api_.cublasSgemm_v2(handle_, op_b, op_a, i(g.n), i(g.m), i(g.k), &alpha, b, i(g.ld_b()), a, i(g.ld_a()),
                                &beta, c, i(g.ld_c())),
            "cublasSgemm");
    } else {
      check(api_.cublasSgemmStridedBatched(handle_, op_b, op_a, i(g.n), i(g.m), i(g.k), &alpha, b, i(g.ld_b()),
                                           g.batch_stride_b(), a, i(g.ld_a()), g.batch_stride_a(), &beta, c,
                                           i(g.ld_c()), g.batch_stride_c(), i(g.batch)),
            "cublasSgemmStridedBatched");
    }
  }

  std::string algorithm() const override {
    if (problem_.type != ElementType::F32) {
      return fmt::format("{} {} ({}, FP32 accumulation)", problem_.batch > 1 ? "GemmStridedBatchedEx" : "GemmEx",
                         version_number_ ? fmt::format("v{}", version_number_) : std::string(), to_string(problem_.type));
    }
    return fmt::format("{} {} ({} math)", problem_.batch > 1 ? "SgemmStridedBatched" : "Sgemm",
                       version_number_ ? fmt::format("v{}", version_number_) : std::string(),
                       math_ == MathMode::TF32 ? "tf32 tensor-op" : "fp32");
  }

 private:
  void check(cublasStatus_t status, const char* call) const {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw BackendError(fmt::format("{} failed with status {} for {} on {}", call, static_cast<int>(status),
                                     problem_.to_string(), device_ ? device_->info().id : "?"));
  }

  CublasLibrary& lib_;
  const CublasApi& api_;
  GemmProblem problem_;
  Device* device_ = nullptr;
  cuda::CudaQueue* queue_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  void *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  int version_number_ = 0;
};

}  // namespace

std::unique_ptr<ReferenceLibrary> make_cublas_reference() { return std::make_unique<CublasReference>(); }
#else
std::unique_ptr<ReferenceLibrary> make_cublas_reference() {
#ifdef CONVTUNE_WITH_CUDA
  return make_unbuilt_reference("cublas", "convtune was built without cublas_v2.h");
#else
  return make_unbuilt_reference("cublas", "convtune was built without its CUDA backend, which cuBLAS needs");
#endif
}
#endif

}  // namespace convtune::reference
