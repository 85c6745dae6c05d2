// CUDA stream operations: transfers, kernel launches and event timing.
#include "src/backend/cuda/cuda_queue.h"

#include <fmt/format.h>

#include "convtune/error.h"
#include "src/backend/cuda/cuda_buffer.h"
#include "src/backend/cuda/cuda_kernel.h"
#include "src/backend/cuda/cuda_launch_dims.h"

namespace convtune::cuda {

namespace {

void check_range(const Buffer& buffer, size_t bytes, size_t offset, const char* what) {
  if (offset > buffer.bytes() || bytes > buffer.bytes() - offset) {
    throw BackendError(fmt::format("{} of {} bytes at offset {} overruns a {}-byte buffer", what, bytes, offset,
                                   buffer.bytes()));
  }
}

}  // namespace

CudaQueue::CudaQueue(std::shared_ptr<const CudaContext> context) : context_(std::move(context)) {
  const CurrentContext current = context_->make_current();
  const DriverApi& api = context_->api();
  const std::string where = fmt::format("creating the queue of {}", context_->device_id());
  api.check(api.cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate", where);
  // Events with timing enabled (the default flags); elapsed_ms reuses the pair.
  api.check(api.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate", where);
  api.check(api.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate", where);
}

CudaQueue::CudaQueue(std::shared_ptr<const CudaContext> context, CUstream foreign_stream)
    : context_(std::move(context)), stream_(foreign_stream), owns_stream_(false) {
  const CurrentContext current = context_->make_current();
  const DriverApi& api = context_->api();
  const std::string where = fmt::format("wrapping a stream of {}", context_->device_id());
  api.check(api.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate", where);
  api.check(api.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate", where);
}

CudaQueue::~CudaQueue() {
  // A destructor has no one to report to; at process exit the driver may already be gone.
  const CurrentContext current = context_->make_current_noexcept();
  const DriverApi& api = context_->api();
  if (stream_ && owns_stream_) api.cuStreamSynchronize(stream_);
  if (start_) api.cuEventDestroy(start_);
  if (stop_) api.cuEventDestroy(stop_);
  if (stream_ && owns_stream_) api.cuStreamDestroy(stream_);
}

void CudaQueue::synchronize(const char* after) {
  context_->api().check(context_->api().cuStreamSynchronize(stream_), "cuStreamSynchronize",
                        fmt::format("{} on {} (an error here may come from an earlier kernel on this queue)", after,
                                    context_->device_id()));
}

void CudaQueue::write(Buffer& dst, const void* src, size_t bytes, size_t offset) {
  check_range(dst, bytes, offset, "write");
  const CudaBuffer& buffer = as_cuda_buffer(dst, "write");
  const CurrentContext current = context_->make_current();
  context_->api().check(context_->api().cuMemcpyHtoDAsync(buffer.pointer() + offset, src, bytes, stream_),
                        "cuMemcpyHtoDAsync", fmt::format("writing {} bytes to {}", bytes, context_->device_id()));
  synchronize("write");
}

void CudaQueue::read(const Buffer& src, void* dst, size_t bytes, size_t offset) {
  check_range(src, bytes, offset, "read");
  const CudaBuffer& buffer = as_cuda_buffer(src, "read");
  const CurrentContext current = context_->make_current();
  context_->api().check(context_->api().cuMemcpyDtoHAsync(dst, buffer.pointer() + offset, bytes, stream_),
                        "cuMemcpyDtoHAsync", fmt::format("reading {} bytes from {}", bytes, context_->device_id()));
  synchronize("read");
}

void CudaQueue::copy(const Buffer& src, Buffer& dst, size_t bytes) {
  check_range(src, bytes, 0, "copy source");
  check_range(dst, bytes, 0, "copy destination");
  const CudaBuffer& from = as_cuda_buffer(src, "copy source");
  const CudaBuffer& to = as_cuda_buffer(dst, "copy destination");
  const CurrentContext current = context_->make_current();
  context_->api().check(context_->api().cuMemcpyDtoDAsync(to.pointer(), from.pointer(), bytes, stream_),
                        "cuMemcpyDtoDAsync", fmt::format("copying {} bytes on {}", bytes, context_->device_id()));
}

void CudaQueue::launch(Kernel& kernel, const LaunchGeometry& geometry) {
  auto* cuda_kernel = dynamic_cast<CudaKernel*>(&kernel);
  if (!cuda_kernel) {
    throw BackendError(fmt::format("kernel {} was not built by a CUDA device, so {}'s queue cannot launch it",
                                   kernel.name(), context_->device_id()));
  }
  if (&cuda_kernel->context() != context_.get()) {
    throw BackendError(fmt::format("kernel {} was built for {} but launched on {}'s queue", kernel.name(),
                                   cuda_kernel->context().device_id(), context_->device_id()));
  }
  const CudaLaunchDims dims = cuda_launch_dims(geometry, kernel.name());
  const CurrentContext current = context_->make_current();
  void** arguments = cuda_kernel->prepare_launch(dims, geometry.dynamic_local_bytes);
  const DriverApi& api = context_->api();
  api.check(api.cuLaunchKernel(cuda_kernel->function(), dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0],
                               dims.block[1], dims.block[2], static_cast<unsigned>(geometry.dynamic_local_bytes),
                               stream_, arguments, nullptr),
            "cuLaunchKernel",
            fmt::format("launching {} on {} with a grid of {}x{}x{} blocks of {}x{}x{} threads and {} bytes of "
                        "dynamic shared memory",
                        kernel.name(), context_->device_id(), dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0],
                        dims.block[1], dims.block[2], geometry.dynamic_local_bytes));
}

void CudaQueue::finish() {
  const CurrentContext current = context_->make_current();
  synchronize("finish");
}

double CudaQueue::elapsed_ms(const std::function<void()>& work) {
  if (timing_thread_.load() == std::this_thread::get_id())
    throw BackendError(fmt::format("elapsed_ms calls on {} cannot be nested", context_->device_id()));
  const std::lock_guard timing(timing_);
  timing_thread_ = std::this_thread::get_id();
  struct Done {
    std::atomic<std::thread::id>& thread;
    ~Done() { thread = std::thread::id(); }
  } done{timing_thread_};
  const CurrentContext current = context_->make_current();
  const DriverApi& api = context_->api();
  api.check(api.cuEventRecord(start_, stream_), "cuEventRecord", "start of a timed region");
  work();
  const CurrentContext again = context_->make_current();  // work() may have made another device current
  api.check(api.cuEventRecord(stop_, stream_), "cuEventRecord", "end of a timed region");
  api.check(api.cuEventSynchronize(stop_), "cuEventSynchronize",
            fmt::format("waiting for timed work on {} (an error here may come from a kernel it launched)",
                        context_->device_id()));
  float milliseconds = 0;
  api.check(api.cuEventElapsedTime(&milliseconds, start_, stop_), "cuEventElapsedTime", "timed region");
  return milliseconds;
}

}  // namespace convtune::cuda
