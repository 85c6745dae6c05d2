// The "blocked" CPU path: cpu_blocked's SIMD convolution behind HostConvolution, prepared once per problem and
// reused while the problem stays the same (bench, conformance and the nn layers call run() per batch); packed
// weights are reused while the weights' bytes equal those last packed.
#include <fmt/format.h>

#include <cstring>
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
    if (!conv_ || conv_->problem() != problem || isa_ != cpu_blocked::active_isa()) {
      conv_.reset();
      conv_.emplace(problem, config_ ? *config_ : cpu_blocked::default_config(problem));
      isa_ = conv_->isa();
      workspace_.resize((conv_->workspace_bytes() + sizeof(float) - 1) / sizeof(float));
      packed_from_.clear();
    }
    if (problem.direction != Direction::BackwardFilter) {
      // Packing (and Winograd's filter transform) is skipped while the weights are byte for byte the ones last
      // packed: an exact test (a training step's new weights differ within the first bytes, so it costs little
      // then), and the same footing as oneDNN's weight reorder, which bench runs once outside its timing.
      const size_t count = static_cast<size_t>(problem.w_elements());
      if (packed_from_.size() != count || std::memcmp(packed_from_.data(), op.w, count * sizeof(float)) != 0) {
        conv_->pack_weights(op.w);
        packed_from_.assign(op.w, op.w + count);
      }
    }
    conv_->run(op.x, op.w, op.y, workspace_.data());
  }

 private:
  std::optional<Config> config_;
  std::optional<cpu_blocked::Convolution> conv_;
  cpu_blocked::Isa isa_ = cpu_blocked::Isa::Scalar;
  std::vector<float> workspace_;
  std::vector<float> packed_from_;  // the weights conv_'s packed copy was made from
};

}  // namespace

std::unique_ptr<HostConvolution> make_blocked_convolution(std::optional<Config> config) {
  return std::make_unique<BlockedConvolution>(std::move(config));
}

}  // namespace convtune::cpu
