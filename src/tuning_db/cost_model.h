// The cost model: predicts each kernel family's tuned time for a convolution from the problem's features, fitted on
// the tuning database's measured entries for one device, so a plan with no tuned shape near picks a family by
// prediction rather than by a fixed rank (docs/ARCHITECTURE.md, "Cost model").
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/backend.h"
#include "convtune/conv_problem.h"
#include "convtune/tuning.h"

namespace convtune {

// One measurement the model learns from: a family's best time on a convolution.
struct CostSample {
  std::string family;
  ConvProblem problem;
  double time_ms = 0;
};

// How strongly the coefficients are shrunk (ridge, on standardized features). Chosen before validation, which
// (`convtune db fit`, leaving one shape out) checks the model at this value.
inline constexpr double kCostModelRidge = 1.0;
// How far beyond the measured range of each feature a fit still predicts: a factor of 4 in FLOPs, bytes, tile fill,
// stride or filter area (log 4 on those log-scale features). A feature that never varied in the samples (groups
// and dilation on the shipped data) must match exactly.
inline constexpr double kCostModelReach = 1.3862943611198906;  // log(4)
// A family (for one element type and math mode) needs this many distinct measured problems for a fit.
inline constexpr size_t kCostModelMinSamples = 6;

class CostModel {
 public:
  // The problem's features, in the order of feature_names(): log FLOPs, log bytes moved, how much of a 64-wide tile
  // the direction's GEMM view fills along M, N and the reduction, log stride area, log filter area, log groups,
  // log dilation area, and the direction.
  static std::vector<double> features(const ConvProblem& problem);
  static const std::vector<std::string>& feature_names();

  // One ridge regression of log(time) per family and element type/math, on the fastest time per (family,
  // problem) among `samples`. The result does not depend on the samples' order.
  static CostModel fit(std::vector<CostSample> samples, double ridge = kCostModelRidge);

  // The model for `device` from a database's entries: per element type and math mode, those of the same hardware,
  // or those of other devices of the same backend and architecture (GPUs only, as the lookup's architecture tier)
  // where these cover more families. Stale
  // entries count too: a kernel-source change moves a family's times less than the shapes do, and without them
  // a family whose kernel changed would have no model until it is retuned.
  static CostModel fit_for_device(const std::vector<ListedEntry>& entries, const DeviceInfo& device);

  bool empty() const { return fits_.empty(); }
  // Predicted tuned time of `family` on `problem`; nullopt when the model has no fit for that family and the
  // problem's element type and math mode (FP16 tensors without their own fit take BF16's), or when the problem lies outside what the fit was measured on (see
  // kCostModelReach): a regression extrapolated far says nothing (on the shipped H200 entries, whose layers all take
  // 10-160 GFLOP, a depthwise layer of 0.1 GFLOP got predictions of microseconds that changed family with every
  // refit), and the plan keeps its rules there.
  std::optional<double> predict_ms(std::string_view family, const ConvProblem& problem) const;

  struct FamilyFit {
    std::string family;
    std::string types;  // "fp32/fp32": element type / math mode
    size_t samples = 0;
    double mean_log = 0;                     // of log(time ms): the intercept
    std::vector<double> center, scale, weight;  // per feature; scale 0 for a feature constant in the samples
    std::vector<double> low, high;              // per feature: the range the samples cover
    double rms_log_error = 0;                // in-sample, of log(time)
  };
  const std::vector<FamilyFit>& fits() const { return fits_; }
  // "NVIDIA H200 (this device), 186 measured (family, problem) pairs", or the architecture fallback's device.
  const std::string& source() const { return source_; }
  size_t sample_count() const { return sample_count_; }

 private:
  std::vector<FamilyFit> fits_;
  std::string source_;
  size_t sample_count_ = 0;
};

// The model for `device` from `database`, fitted once per database revision and device and then shared, so a plan
// pays only the prediction (microseconds). Null when the database holds no fit for the device.
std::shared_ptr<const CostModel> cost_model_for(const TuningDatabase& database, const DeviceInfo& device);

// The family a plan without a near tuned entry takes by the model: among `families` (names, in the plans' rank
// order) those `vetoed` does not refuse and the model predicts, the fastest predicted. nullopt when the model
// predicts none of them. `why` gets the predictions, fastest first ("winograd 0.41 ms, implicit_gemm 0.80 ms").
// `claimed` (optional): the first family in the rank order that claims the problem (KernelFamily::untuned_claim), if
// the model cannot predict it (too few samples of its own), goes ahead of the predictions: the claim is measured
// knowledge the data lacks. If the model predicts it, the predictions decide (later claimants do not jump ahead).
std::optional<std::string> cost_model_choice(const CostModel& model, const std::vector<std::string>& families,
                                             const ConvProblem& problem,
                                             const std::function<bool(const std::string&)>& vetoed, std::string* why,
                                             const std::function<bool(const std::string&)>& claimed = {});

// Leave-one-shape-out validation: for each shape (a problem in all its directions) the model is refitted without
// it, and each of its problems on which two or more families were measured is one row: the family the model picks
// against the measured best.
struct CostModelCheckRow {
  ConvProblem problem;
  bool modelled = true;  // false: the refitted model predicted none of the families, the rules chose
  std::string chosen, best;
  double chosen_ms = 0, best_ms = 0;  // measured (tuned) times
  double predicted_ms = 0;            // of the chosen family
  double ratio() const { return chosen_ms > 0 ? best_ms / chosen_ms : 0; }  // 1 when the best is picked
};
struct CostModelCheck {
  std::vector<CostModelCheckRow> rows;
  size_t unpredicted() const;  // rows where the refitted model predicted none of the measured families
  size_t best_picked() const;
  size_t within(double ratio) const;  // rows whose pick runs at >= ratio of the best's speed
};
// `vetoed` is the plans' poor-fit rule; where the model predicts none of a problem's families, `rank` (the plans'
// untuned order, lower first) picks among those not vetoed, as a plan would. Problems whose measured families are all
// vetoed are left out: a plan would take a family the samples did not measure.
// `claimed` (optional) applies the families' claims as plans do: ahead of the model where it predicts the claimant
// not, ahead of the rank order where it predicts nothing.
CostModelCheck leave_one_shape_out(const std::vector<CostSample>& samples,
                                   const std::function<bool(const std::string&, const ConvProblem&)>& vetoed,
                                   const std::function<int(const std::string&)>& rank,
                                   double ridge = kCostModelRidge,
                                   const std::function<bool(const std::string&, const ConvProblem&)>& claimed = {});

// The samples a database's entries give for one device fingerprint (every entry of that hardware, stale ones too).
std::vector<CostSample> cost_samples(const std::vector<ListedEntry>& entries,
                                     const std::function<bool(const TuningEntry&)>& keep);

}  // namespace convtune
