// Workload: one problem's operands on one device, made to check and time implementations on. It holds seeded random
// inputs (never all zero, rounded to the problem's element type) on the host and in device buffers (stored as that
// type) followed by canary values, knows which operand the
// problem writes, poisons it before a run (NaN: an unwritten element cannot pass), reads it back and verifies it
// against the float64 reference, at sampled elements or in full. Conformance, bench, bench --against and the tuner
// all check through it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/plan.h"
#include "convtune/problem.h"

namespace convtune::harness {

// Allowed relative L2 error ||out - ref|| / ||ref|| for a problem: the type and math mode's unit roundoff, grown
// with the square root of the reduction length as rounding errors of random-sign sums do; at least 1e-6. 16-bit
// tensors (inputs exact, FP32 accumulation): twice the type's unit roundoff for the output's rounding, plus the
// FP32 sum's error, which truncating tensor-core accumulation lets grow linearly (2^-24 x length).
double tolerance(const Problem& problem);

struct Check {
  bool passed = false;
  double rel_l2_error = 0;
  double max_abs_error = 0;
  std::string message;  // why it failed, or a one-line summary
};

// Seeded uniform values in [-1, 1) (splitmix64): cheap, reproducible, never all zero.
std::vector<float> random_values(int64_t count, uint64_t seed);

class Workload {
 public:
  static constexpr size_t kCanaries = 64;

  // Allocates each operand (plus canaries) on `device` and uploads the inputs drawn from `seed`; the same problem
  // and seed give the same values on every device, so a library running on the host can be handed a CPU-device
  // workload with the very inputs convtune's device saw.
  Workload(Device& device, const Problem& problem, uint64_t seed = 1);
  // The same with a forward convolution's fused epilogue: a seeded bias (K floats) and residual (y's shape, layout and
  // type) beside the operands, and the reference applies the epilogue to the float64 sum. Pooling is not checked.
  Workload(Device& device, const Problem& problem, uint64_t seed, const Epilogue& epilogue);
  ~Workload();
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  Device& device() const { return *device_; }
  Queue& queue() const { return device_->queue(); }
  const Problem& problem() const { return problem_; }
  uint64_t seed() const { return seed_; }
  const Epilogue& epilogue() const { return epilogue_; }
  // The device buffers in Problem::operand order, then the epilogue's bias and residual where it has them.
  Operands operands() const;
  // Host values of an operand as uploaded (the written one's initial values matter only when it is also read); for
  // 16-bit element types these are the FP32 values of the 16-bit elements the device holds.
  const std::vector<float>& initial(int operand) const { return host_[static_cast<size_t>(operand)]; }
  // Bytes of an operand's elements in its device buffer (without canaries): elements x the element type's size.
  size_t operand_bytes(int operand) const;

  // Makes the written operand ready for a run: NaN everywhere, or its initial values where the problem reads it
  // too (a GEMM that accumulates).
  void poison();
  // The written operand as the device holds it now (its whole buffer, without canaries).
  std::vector<float> output();
  // Throws Error naming the operand when a canary after it was overwritten (an out-of-bounds write).
  void check_canaries();

  // Checks the written operand now on the device: every logical element finite, and the relative L2 error against
  // the float64 reference within tolerance(problem) (`tolerance` overrides it). Sampled: `samples` random elements
  // plus the first and last, the reference values computed once per workload; full: every element (the whole
  // reference computed once). Both check the canaries too.
  Check verify_sampled(int samples = 512, std::optional<double> tolerance = std::nullopt);
  Check verify_full(std::optional<double> tolerance = std::nullopt);
  // The same checks of an output that came from elsewhere (another library's, read back by it).
  Check verify_sampled(const std::vector<float>& out, int samples = 512, std::optional<double> tolerance = std::nullopt);
  Check verify_full(const std::vector<float>& out, std::optional<double> tolerance = std::nullopt);

 private:
  struct Sampled;
  Check compare(const std::vector<float>& out, const std::vector<int64_t>& positions, const std::vector<double>& want,
                double tol, const char* what) const;
  // The float64 reference `sum` of logical output element i with the epilogue applied.
  double with_epilogue(double sum, int64_t i) const;

  Device* device_;
  Problem problem_;
  uint64_t seed_;
  Epilogue epilogue_;
  std::vector<std::vector<float>> host_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<float> bias_, residual_;
  std::unique_ptr<Buffer> bias_buffer_, residual_buffer_;
  std::unique_ptr<Sampled> sampled_;
  std::vector<double> full_reference_;
};

// ||a - b|| / ||b|| over every element (infinite when the sizes differ).
double relative_l2(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace convtune::harness
