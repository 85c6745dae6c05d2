// An in-order CUDA stream with event timing: the CUDA backend's Queue.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "convtune/backend.h"
#include "src/backend/cuda/cuda_context.h"

namespace convtune::cuda {

class CudaQueue final : public Queue {
 public:
  explicit CudaQueue(std::shared_ptr<const CudaContext> context);
  // A queue on a stream the caller owns (PyTorch's current stream, say): convtune's work is enqueued there, in
  // order with the caller's, and the stream is neither synchronised nor destroyed by this queue's destruction.
  CudaQueue(std::shared_ptr<const CudaContext> context, CUstream foreign_stream);
  ~CudaQueue() override;
  CudaQueue(const CudaQueue&) = delete;
  CudaQueue& operator=(const CudaQueue&) = delete;

  // write and read return once the host memory may be reused or read: the caller's pointer may be pageable
  // or pinned, and only a synchronised copy is safe for both.
  void write(Buffer& dst, const void* src, size_t bytes, size_t offset) override;
  void read(const Buffer& src, void* dst, size_t bytes, size_t offset) override;
  // Device-to-device copies stay asynchronous: they touch no host memory.
  void copy(const Buffer& src, Buffer& dst, size_t bytes) override;
  // See cuda_launch_dims.h for how the geometry becomes a grid (and the all-zero-local default).
  void launch(Kernel& kernel, const LaunchGeometry& geometry) override;
  void finish() override;
  double elapsed_ms(const std::function<void()>& work) override;

  // For libraries that run on convtune's stream and primary context (cuDNN in bench --against): the context
  // must be made current before each of their calls, and their work goes to this stream so events time it.
  CUstream stream() const { return stream_; }
  const CudaContext& context() const { return *context_; }

 private:
  void synchronize(const char* after);

  std::shared_ptr<const CudaContext> context_;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr;  // one pair of events for every elapsed_ms: timings from two threads take turns
  CUevent stop_ = nullptr;
  std::mutex timing_;
  std::atomic<std::thread::id> timing_thread_{};  // the thread in elapsed_ms, to refuse a nested call
  bool owns_stream_ = true;
};

}  // namespace convtune::cuda
