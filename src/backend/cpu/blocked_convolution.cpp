// The "blocked" CPU path: cpu_blocked's SIMD convolution behind HostConvolution, prepared once per problem and
// reused while the problem stays the same (bench, conformance and the nn layers call run() per batch).
#include <fmt/format.h>

#include <optional>
#include <vector>

#include "convtune/error.h"
#include "src/backend/cpu/cpu_convolutions.h"
#include "src/cpu_kernels/cpu_blocked.h"

namespace convtune::cpu {

namespace {

class BlockedConvolution final : public HostConvolution {
 public:
  explicit BlockedConvolution(std::optional<Config> config) : config_(std::move(config)) {}

  std::string name() const override {
    return config_ ? fmt::format("blocked[{}]", to_string(*config_)) : std::string("blocked");
  }

  std::string unsupported_reason(const ConvProblem& problem) const override {
    if (std::string why = cpu_blocked::unsupported_reason(problem); !why.empty()) return why;
    if (config_) return cpu_blocked::invalid_reason(problem, *config_);
    return {};
  }

  void run(const ConvProblem& problem, const ConvOperands& op) override {
    // Weights are packed on every run: a caller may change them between runs (training).
    if (!conv_ || conv_->problem() != problem || isa_ != cpu_blocked::active_isa()) {
      conv_.reset();
      conv_.emplace(problem, config_ ? *config_ : cpu_blocked::default_config(problem));
      isa_ = conv_->isa();
      workspace_.resize((conv_->workspace_bytes() + sizeof(float) - 1) / sizeof(float));
    }
    conv_->run(op.x, op.w, op.y, workspace_.data());
  }

 private:
  std::optional<Config> config_;
  std::optional<cpu_blocked::Convolution> conv_;
  cpu_blocked::Isa isa_ = cpu_blocked::Isa::Scalar;
  std::vector<float> workspace_;
};

}  // namespace

std::unique_ptr<HostConvolution> make_blocked_convolution(std::optional<Config> config) {
  return std::make_unique<BlockedConvolution>(std::move(config));
}

}  // namespace convtune::cpu
