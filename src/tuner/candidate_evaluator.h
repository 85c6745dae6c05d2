// CandidateEvaluator: what the tuner does with one configuration on a device — compile (ahead, on worker
// threads), run on seeded random inputs, check against the reference, time — with each failure named by kind.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/extension/kernel_family.h"
#include "src/harness/workload.h"
#include "src/tuner/tune_loop.h"

namespace convtune {

struct CandidateOptions {
  int warmup = 1;
  int repeats = 5;
  // A candidate whose first timed run is slower than this many times the best so far is not timed further: its
  // single time is recorded (with a note) and it cannot win. 0 disables the early abort.
  double abort_factor = 1.5;
  int samples = 512;  // reference elements checked per candidate (plus the first and last)
  uint64_t seed = 7;
  std::optional<uint64_t> workspace_limit;  // PlanRequest::workspace_limit of every candidate's plan
};

class CandidateEvaluator {
 public:
  CandidateEvaluator(Device& device, const KernelFamily& family, const Problem& problem,
                     CandidateOptions options = {});
  ~CandidateEvaluator();  // waits for compiles still running
  CandidateEvaluator(const CandidateEvaluator&) = delete;
  CandidateEvaluator& operator=(const CandidateEvaluator&) = delete;

  // Starts compiling `config` on a worker thread; evaluate() later finds the program built.
  void prefetch(const Config& config);
  // Compile (or collect the prefetched program), run once on the workload with the output poisoned, verify at
  // sampled elements against the float64 reference, then time. Failures come back as Evaluation::failed("compile error: ...", "launch error: ...",
  // "wrong result: ...").
  Evaluation evaluate(const Config& config);
  // The fastest verified time so far (0 before the first).
  double best_ms() const { return best_ms_; }
  // A time measured elsewhere for this problem (an earlier evaluator's): candidates far behind it are aborted early.
  void note_best(double ms) {
    if (ms > 0 && (best_ms_ == 0 || ms < best_ms_)) best_ms_ = ms;
  }

 private:
  Device& device_;
  const KernelFamily& family_;
  Problem problem_;
  CandidateOptions options_;
  harness::Workload workload_;
  std::mutex mutex_;
  std::map<std::string, std::shared_future<std::shared_ptr<Program>>> compiles_;
  double best_ms_ = 0;
};

}  // namespace convtune
