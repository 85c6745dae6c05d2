// CLBlast's Sconvgemm (forward convolutions) and Sgemm / SgemmStridedBatched (GEMMs), FP32, as references on
// convtune's own OpenCL device, queue and cl_mem buffers. Loaded with dlopen; the prototypes are declared here so
// the adapter builds without clblast_c.h (the GPU machine has the library carried in, not the -dev package).
#include <fmt/format.h>

#include <limits>

#include "convtune/error.h"
#include "src/reference_libs/reference_library.h"
#include "src/reference_libs/shared_library.h"

#ifdef CONVTUNE_WITH_OPENCL
#include "src/backend/opencl/opencl_buffer.h"
#include "src/backend/opencl/opencl_queue.h"
#endif

namespace convtune::reference {

#ifdef CONVTUNE_WITH_OPENCL
namespace {

// clblast_c.h (CLBlast 1.5): CLBlastKernelModeCrossCorrelation = 151, status 0 is success.
constexpr int kCrossCorrelation = 151;
using SconvgemmFunction = int (*)(int kernel_mode, size_t channels, size_t height, size_t width, size_t kernel_h,
                                  size_t kernel_w, size_t pad_h, size_t pad_w, size_t stride_h, size_t stride_w,
                                  size_t dilation_h, size_t dilation_w, size_t num_kernels, size_t batch_count,
                                  cl_mem im_buffer, size_t im_offset, cl_mem kernel_buffer, size_t kernel_offset,
                                  cl_mem result_buffer, size_t result_offset, cl_command_queue* queue,
                                  cl_event* event);

// clblast_c.h's CLBlastLayoutRowMajor and CLBlastTransposeNo/Yes.
constexpr int kRowMajor = 101, kTransposeNo = 111, kTransposeYes = 112;
using SgemmFunction = int (*)(int layout, int a_transpose, int b_transpose, size_t m, size_t n, size_t k, float alpha,
                              cl_mem a, size_t a_offset, size_t a_ld, cl_mem b, size_t b_offset, size_t b_ld,
                              float beta, cl_mem c, size_t c_offset, size_t c_ld, cl_command_queue* queue,
                              cl_event* event);
using SgemmStridedBatchedFunction = int (*)(int layout, int a_transpose, int b_transpose, size_t m, size_t n, size_t k,
                                            float alpha, cl_mem a, size_t a_offset, size_t a_ld, size_t a_stride,
                                            cl_mem b, size_t b_offset, size_t b_ld, size_t b_stride, float beta,
                                            cl_mem c, size_t c_offset, size_t c_ld, size_t c_stride,
                                            size_t batch_count, cl_command_queue* queue, cl_event* event);

std::string status_text(int status) {
  switch (status) {
    case -1024: return "-1024 (CLBlastNotImplemented)";
    case -2049: return "-2049 (CLBlastInvalidBatchCount)";
    case -3: return "-3 (OpenCL compiler not available)";
    case -4: return "-4 (OpenCL out of device memory)";
    case -11: return "-11 (its OpenCL kernel failed to build)";
    default: return std::to_string(status);
  }
}

struct ClblastLibrary {
  SharedLibrary library{"CONVTUNE_CLBLAST_LIBRARY", {"libclblast.so.1", "libclblast.so"}};
  SconvgemmFunction sconvgemm = nullptr;
  SgemmFunction sgemm = nullptr;                                // optional: GEMM rows say so when absent
  SgemmStridedBatchedFunction sgemm_strided_batched = nullptr;  // optional, likewise
  std::string error;
  std::string version;
  ClblastLibrary() {
    if (!library.loaded()) {
      error = library.error() + " (install Debian's libclblast1, or set CONVTUNE_CLBLAST_LIBRARY)";
      return;
    }
    sconvgemm = reinterpret_cast<SconvgemmFunction>(library.symbol("CLBlastSconvgemm"));
    sgemm = reinterpret_cast<SgemmFunction>(library.symbol("CLBlastSgemm"));
    sgemm_strided_batched = reinterpret_cast<SgemmStridedBatchedFunction>(library.symbol("CLBlastSgemmStridedBatched"));
    if (!sconvgemm) {
      error = fmt::format("{} lacks CLBlastSconvgemm (CLBlast 1.5 or later has it)", library.resolved_path());
      return;
    }
    // CLBlast has no version call; the file name the soname link resolves to carries it (libclblast.so.1.5.3).
    const std::string& path = library.resolved_path();
    const auto at = path.find(".so.");
    version = fmt::format("CLBlast {} ({})", at == std::string::npos ? "?" : path.substr(at + 4), path);
  }
  static ClblastLibrary& instance() {
    static ClblastLibrary lib;
    return lib;
  }
};

class ClblastReference final : public ReferenceLibrary {
 public:
  ClblastReference() : lib_(ClblastLibrary::instance()) {}
  std::string name() const override { return "clblast"; }
  std::string unavailable_reason() const override { return lib_.error; }
  std::string version() const override { return lib_.version; }
  bool runs_on_host() const override { return false; }

  std::string unsupported_reason(const Problem& problem, const DeviceInfo& device) const override {
    if (!lib_.error.empty()) return lib_.error;
    if (device.backend != BackendKind::OpenCL)
      return fmt::format("CLBlast needs convtune on an OpenCL device, not {}", device.id);
    if (problem.type() != ElementType::F32) return "only FP32 (Sconvgemm, Sgemm) is wired up";
    if (problem.is_conv() && problem.conv().layout != Layout::NCHW) return "CLBlast's Convgemm reads NCHW tensors";
    if (problem.is_gemm()) {
      if (!lib_.sgemm) return "this CLBlast lacks CLBlastSgemm";
      return {};
    }
    const ConvProblem& pb = problem.conv();
    if (pb.direction != Direction::Forward) return "CLBlast's Convgemm computes the forward pass only";
    if (pb.groups != 1) return fmt::format("CLBlast's Convgemm has no groups (groups={})", pb.groups);
    return {};
  }

  void prepare(harness::Workload& workload) override {
    if (const std::string why = unsupported_reason(workload.problem(), workload.device().info()); !why.empty())
      throw Unsupported(why);
    const Problem& pb = workload.problem();
    const Operands operands = workload.operands();
    problem_ = pb;
    device_ = &workload.device();
    queue_ = dynamic_cast<opencl::OpenCLQueue*>(&device_->queue());
    auto memory = [&](const Buffer* b, const char* role) {
      const auto* cl = dynamic_cast<const opencl::OpenCLBuffer*>(b);
      if (!cl) throw BackendError(fmt::format("CLBlast needs convtune's OpenCL buffer for {} of {}", role, pb.to_string()));
      return cl->memory();
    };
    if (!queue_) throw BackendError("CLBlast needs convtune's OpenCL queue on " + device_->info().id);
    x_ = memory(operands[0], pb.operand(0).name);
    w_ = memory(operands[1], pb.operand(1).name);
    y_ = memory(operands[2], pb.operand(2).name);
    // Probed now, outside any timed region (the probe waits for a marker).
    timed_from_marker_ = queue_->markers_are_timed();
  }

  void run() override {
    if (problem_.is_gemm()) {
      enqueue_gemm();
      return;
    }
    const ConvProblem& pb = problem_.conv();
    queue_->enqueue_foreign([&](cl_event* event) {
      cl_command_queue queue = queue_->handle();
      const int status = lib_.sconvgemm(kCrossCorrelation, pb.c, pb.h, pb.w, pb.r, pb.s, pb.pad.h, pb.pad.w,
                                        pb.stride.h, pb.stride.w, pb.dilation.h, pb.dilation.w, pb.k, pb.n, x_, 0,
                                        w_, 0, y_, 0, &queue, event);
      if (status != 0)
        throw BackendError(fmt::format("CLBlastSconvgemm failed with status {} for {} on {}", status_text(status),
                                       pb.to_string(), device_->info().id));
    });
  }

  std::string algorithm() const override {
    const std::string routine = problem_.is_gemm() ? (problem_.gemm().batch > 1 ? "SgemmStridedBatched" : "Sgemm")
                                                   : "Sconvgemm";
    return timed_from_marker_ ? routine : routine + " (timed by its last event: markers carry no timestamps here)";
  }

 private:
  // Row-major C = op(A) op(B): CLBlast takes the layout as an argument, so the problem passes through unchanged.
  void enqueue_gemm() {
    const GemmProblem& g = problem_.gemm();
    queue_->enqueue_foreign([&](cl_event* event) {
      cl_command_queue queue = queue_->handle();
      const float beta = g.accumulate ? 1.0f : 0.0f;
      const int a_trans = g.trans_a ? kTransposeYes : kTransposeNo, b_trans = g.trans_b ? kTransposeYes : kTransposeNo;
      int status = 0;
      if (g.batch == 1) {
        status = lib_.sgemm(kRowMajor, a_trans, b_trans, g.m, g.n, g.k, 1.0f, x_, 0, g.ld_a(), w_, 0, g.ld_b(), beta,
                            y_, 0, g.ld_c(), &queue, event);
      } else if (lib_.sgemm_strided_batched) {
        status = lib_.sgemm_strided_batched(kRowMajor, a_trans, b_trans, g.m, g.n, g.k, 1.0f, x_, 0, g.ld_a(),
                                            g.batch_stride_a(), w_, 0, g.ld_b(), g.batch_stride_b(), beta, y_, 0,
                                            g.ld_c(), g.batch_stride_c(), g.batch, &queue, event);
      } else {
        throw Unsupported("this CLBlast lacks CLBlastSgemmStridedBatched");
      }
      if (status != 0)
        throw BackendError(fmt::format("CLBlast GEMM failed with status {} for {} on {}", status_text(status),
                                       problem_.to_string(), device_->info().id));
    });
  }

  ClblastLibrary& lib_;
  Problem problem_;
  Device* device_ = nullptr;
  opencl::OpenCLQueue* queue_ = nullptr;
  cl_mem x_ = nullptr, w_ = nullptr, y_ = nullptr;
  bool timed_from_marker_ = false;
};

}  // namespace

std::unique_ptr<ReferenceLibrary> make_clblast_reference() { return std::make_unique<ClblastReference>(); }
#else
std::unique_ptr<ReferenceLibrary> make_clblast_reference() {
  return make_unbuilt_reference("clblast", "convtune was built without its OpenCL backend, which CLBlast needs");
}
#endif

}  // namespace convtune::reference
