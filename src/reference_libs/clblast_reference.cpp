// CLBlast's Convgemm (forward, FP32) as a reference on convtune's own OpenCL device, queue and cl_mem buffers.
// Loaded with dlopen; the one prototype is declared here so the adapter builds without clblast_c.h (the GPU
// machine has the library carried in, not the -dev package).
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
  std::string error;
  std::string version;
  ClblastLibrary() {
    if (!library.loaded()) {
      error = library.error() + " (install Debian's libclblast1, or set CONVTUNE_CLBLAST_LIBRARY)";
      return;
    }
    sconvgemm = reinterpret_cast<SconvgemmFunction>(library.symbol("CLBlastSconvgemm"));
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

  std::string unsupported_reason(const ConvProblem& pb, const DeviceInfo& device) const override {
    if (!lib_.error.empty()) return lib_.error;
    if (device.backend != BackendKind::OpenCL)
      return fmt::format("CLBlast needs convtune on an OpenCL device, not {}", device.id);
    if (pb.direction != Direction::Forward) return "CLBlast's Convgemm computes the forward pass only";
    if (pb.groups != 1) return fmt::format("CLBlast's Convgemm has no groups (groups={})", pb.groups);
    if (pb.precision != Precision::FP32) return "only FP32 (Sconvgemm) is wired up";
    return {};
  }

  void prepare(const ConvProblem& pb, const SharedOperands& operands, MathMode) override {
    if (const std::string why = unsupported_reason(pb, operands.device->info()); !why.empty()) throw Unsupported(why);
    problem_ = pb;
    device_ = operands.device;
    queue_ = dynamic_cast<opencl::OpenCLQueue*>(&device_->queue());
    auto memory = [&](const Buffer* b, const char* role) {
      const auto* cl = dynamic_cast<const opencl::OpenCLBuffer*>(b);
      if (!cl) throw BackendError(fmt::format("CLBlast needs convtune's OpenCL buffer for {} of {}", role, pb.to_string()));
      return cl->memory();
    };
    if (!queue_) throw BackendError("CLBlast needs convtune's OpenCL queue on " + device_->info().id);
    x_ = memory(operands.device_buffers.x, "x");
    w_ = memory(operands.device_buffers.w, "w");
    y_ = memory(operands.device_buffers.y, "y");
    y_buffer_ = operands.device_buffers.y;
    // Probed now, outside any timed region (the probe waits for a marker).
    timed_from_marker_ = queue_->markers_are_timed();
  }

  std::vector<float> run_and_read() override {
    std::vector<float> y(static_cast<size_t>(problem_.y_elements()), std::numeric_limits<float>::quiet_NaN());
    // y still holds convtune's result: poisoned first, so only what CLBlast writes comes back.
    device_->queue().write(*const_cast<Buffer*>(y_buffer_), y.data(), y.size() * sizeof(float));
    enqueue();
    device_->queue().read(*y_buffer_, y.data(), y.size() * sizeof(float));
    return y;
  }

  Timing time(int warmup, int repeats) override {
    return measure(*queue_, [&] { enqueue(); }, warmup, repeats);
  }

  std::string algorithm() const override {
    return timed_from_marker_ ? "Sconvgemm" : "Sconvgemm (timed by its last event: markers carry no timestamps here)";
  }

 private:
  void enqueue() {
    const ConvProblem& pb = problem_;
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

  ClblastLibrary& lib_;
  ConvProblem problem_;
  Device* device_ = nullptr;
  opencl::OpenCLQueue* queue_ = nullptr;
  cl_mem x_ = nullptr, w_ = nullptr, y_ = nullptr;
  const Buffer* y_buffer_ = nullptr;
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
