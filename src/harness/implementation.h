// Implementation: one way to compute a problem on a Workload — a convtune plan (any family, CPU backend included)
// or a reference library (cuDNN, cuBLAS, CLBlast, oneDNN) — behind one interface, so conformance, bench,
// bench --against and the tuner check and time them all the same way (check_once, time_runs below).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/plan.h"
#include "src/harness/workload.h"

namespace convtune::harness {

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual std::string name() const = 0;  // "convtune", "cudnn", "cublas", "clblast", "onednn"
  // Empty when it can run at all here (a library that failed to load says why).
  virtual std::string unavailable_reason() const { return {}; }
  // Empty when it computes `problem` on `device`; else why not ("forward only", "groups=2").
  virtual std::string unsupported_reason(const Problem& problem, const DeviceInfo& device) const = 0;
  // True when it computes on the host whatever device convtune uses (oneDNN): it is then given a workload on the
  // CPU device with the same inputs.
  virtual bool runs_on_host() const { return false; }
  // Asks for a forward convolution's fused epilogue on the problems to come (unsupported_reason then judges the
  // problem with it, and prepare() binds the workload's bias and residual); false where the implementation has no
  // such epilogue (the reference libraries): only the empty one is accepted.
  virtual bool set_epilogue(const Epilogue& epilogue) { return !epilogue.any(); }
  // Binds to the workload's operands: compiles, searches (cuDNN's Find), allocates workspace. Nothing is timed.
  virtual void prepare(Workload& workload) = 0;
  // Enqueues one computation on the workload's queue, writing the problem's written operand.
  virtual void run() = 0;
  // A library that computes in its own memory layout (oneDNN) leaves the last run's result there; this converts it
  // into the workload's operand. Called before a result is checked, never inside timed runs.
  virtual void collect_output() {}
  // How many times the direct sum's tolerance its results are held to (KernelFamily::error_factor for a plan);
  // check_once multiplies the tolerance by it. Valid after prepare().
  virtual double error_factor() const { return 1.0; }
  // Floating-point operations one run performs (KernelFamily::performed_flops for a plan; the direct sum for a
  // library, whose algorithm is not known): the numerator of `% peak`. Valid after prepare().
  virtual double performed_flops(const Problem& problem) const { return problem.flops(); }
  // What it chose: "implicit_gemm[TILE_M=64,...] (exact)", "IMPLICIT_PRECOMP_GEMM (ws 12.0 MiB)", "jit:avx2".
  virtual std::string algorithm() const = 0;
};

// A convtune plan: the request's family and configuration (empty: the tuning database's choice), made for the
// workload's problem on its device by prepare().
class PlanImplementation final : public Implementation {
 public:
  explicit PlanImplementation(PlanRequest request, const KernelFamily* family = nullptr)
      : request_(std::move(request)), family_(family) {}
  std::string name() const override { return "convtune"; }
  std::string unsupported_reason(const Problem& problem, const DeviceInfo& device) const override;
  bool set_epilogue(const Epilogue& epilogue) override {
    request_.epilogue = epilogue;
    return true;
  }
  void prepare(Workload& workload) override;
  void run() override;
  std::string algorithm() const override;
  double error_factor() const override { return plan_ ? plan_->error_factor() : 1.0; }
  double performed_flops(const Problem& problem) const override {
    return plan_ ? plan_->performed_flops() : problem.flops();
  }
  const Plan& plan() const { return *plan_; }

 private:
  PlanRequest request_;
  const KernelFamily* family_;
  Workload* workload_ = nullptr;
  std::unique_ptr<Plan> plan_;
};

// Poisons the written operand, runs once, checks the canaries and the result against the float64 reference
// (sampled, or in full when `samples` is 0). Exceptions from the run come back as a failed Check.
Check check_once(Implementation& implementation, Workload& workload, int samples = 512,
                 std::optional<double> tolerance = std::nullopt);
// Median of `repeats` runs after `warmup`, timed on the workload's queue (device events, or the host clock).
Timing time_runs(Implementation& implementation, Workload& workload, int warmup, int repeats);

// One of several ways to compute a problem timed side by side (bench --against, cpu_blocked_sweep).
struct RoundSide {
  std::function<void()> run;                                 // one computation, finished when it returns
  std::function<double(const std::function<void()>&)> time;  // ms the given work takes (device events, a clock)
  // The machine needs time to settle after each of its runs, so the next side warms up for 50 ms before its timed
  // run: oneDNN's OpenMP workers spin 7-11 ms of CPU after each call, and after the FMA ceiling probe (every core's
  // AVX-512 loop for about 20 ms) a 0.4 ms layer's next runs took twice their time (see implementation.cpp).
  bool settle_after = false;
  std::vector<double> samples;  // the timed runs, ms, in order
  std::string failure;          // set when a run threw: the side leaves the rounds
};
// `warmup` untimed runs of each side, then `repeats` rounds of one timed run of each side in turn, so that a slow
// spell of a shared machine lands on every side alike. Before each timed run a side whose runs take under 50 ms
// runs once untimed (threads awake, data in cache, as in back-to-back use), and the side after one that
// settle_after runs untimed for 50 ms (unless its runs take over 200 ms), never idle: see implementation.cpp.
void time_in_rounds(std::vector<RoundSide>& sides, int warmup, int repeats);
double median_ms(std::vector<double> samples);

}  // namespace convtune::harness
