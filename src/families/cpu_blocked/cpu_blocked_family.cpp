// The cpu_blocked family: the SIMD convolution module of this folder (cpu_blocked.h) as a kernel family of the CPU
// backend. Its host program prepares one Convolution per plan and reuses the packed weights while the weights'
// bytes stay the ones last packed, so plans, bench, the tuner and the nn layers run it like any other family.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "convtune/plan.h"
#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"
#include "src/families/cpu_blocked/cpu_blocked.h"
#include "src/families/cpu_family.h"
#include "src/families/families.h"

namespace convtune {

namespace {

constexpr const char* kProgram = "cpu/blocked";

// One plan's prepared convolution and the weights its packed copy was made from.
struct BlockedState {
  cpu_blocked::Convolution conv;
  std::vector<float> packed_from;

  void run(float* x, float* w, float* y, void* workspace) {
    const ConvProblem& pb = conv.problem();
    if (pb.direction != Direction::BackwardFilter) {
      // Packing (and Winograd's filter transform) is skipped while the weights are byte for byte the ones last
      // packed: an exact test on content, never on the buffer's address, so weights changed in place (a
      // training step) are packed again. A changed weight usually differs within the first bytes, so the test
      // costs little then; unchanged weights (inference, timed repeats) cost one read of w, the footing of
      // oneDNN's weight reorder, which its users run once outside the convolution.
      const size_t count = static_cast<size_t>(pb.w_elements());
      if (packed_from.size() != count || !same_weights(w, count)) {
        conv.pack_weights(w);
        packed_from.assign(w, w + count);
      }
    }
    conv.run(x, w, y, workspace);
  }

  // packed_from == w[0, count). Large weights are compared in pieces over the thread pool: the compare reads two
  // copies from L3 or memory (alex3: 2 x 2.65 MB, 0.28-0.36 ms on one core, 5% of a two-thread Winograd run) while
  // the other thread waits, and one core's stream of misses does not fill the memory bandwidth (a read loop here:
  // 13.9 GB/s on one core, 25.4 on two). The first 4 KB are compared on their own first, so changed weights (a
  // training step) usually stop there.
  bool same_weights(const float* w, size_t count) const {
    constexpr size_t kPiece = size_t{1} << 16;  // floats: 256 KB
    const size_t first = std::min(count, size_t{1024});
    if (std::memcmp(packed_from.data(), w, first * sizeof(float)) != 0) return false;
    if (count - first < 2 * kPiece)
      return std::memcmp(packed_from.data() + first, w + first, (count - first) * sizeof(float)) == 0;
    const int64_t pieces = static_cast<int64_t>((count - first + kPiece - 1) / kPiece);
    std::atomic<bool> same{true};
    parallel_for(pieces, hardware_threads(), [&](int64_t i) {
      if (!same.load(std::memory_order_relaxed)) return;
      const size_t begin = first + static_cast<size_t>(i) * kPiece, end = std::min(count, begin + kPiece);
      if (std::memcmp(packed_from.data() + begin, w + begin, (end - begin) * sizeof(float)) != 0) same = false;
    });
    return same.load();
  }
};

Config read_config(const ProgramSource& source, const ConvProblem& problem) {
  Config config;
  for (const Parameter& p : cpu_blocked::parameter_table(problem).parameters())
    config[p.name] = cpu::define_int(source, p.name);
  return config;
}

class CpuBlockedFamily final : public CpuFamily {
 public:
  CpuBlockedFamily() : CpuFamily(Problem::Kind::Convolution) {
    cpu::register_host_program(kProgram, [](const ProgramSource& source) {
      const ConvProblem pb = parse_problem(source.defines.at("PROBLEM"));
      auto state = std::make_shared<BlockedState>(BlockedState{cpu_blocked::Convolution(pb, read_config(source, pb)), {}});
      return std::map<std::string, cpu::HostKernel>{{"convolve", [state](const std::vector<KernelArg>& args) {
                                                       state->run(cpu::host_floats(args.at(0), "x"),
                                                                  cpu::host_floats(args.at(1), "w"),
                                                                  cpu::host_floats(args.at(2), "y"),
                                                                  cpu::host_floats(args.at(3), "workspace"));
                                                     }}};
    });
  }
  std::string name() const override { return cpu_blocked::kFamilyName; }
  std::string description() const override {
    return "FP32 convolution on the CPU backend from register-blocked SIMD micro-kernels (Highway: AVX-512, AVX2, "
           "scalar) over packed, channel-blocked copies, Winograd F(4x4, 3x3) for 3x3 stride-1 layers, on the "
           "persistent thread pool";
  }
  // 2: broadcast blocks of 6 accumulators or fewer sum in two sets (other rounding), AVX-512's transposed stores.
  int kernel_version() const override { return 2; }
  std::vector<Parameter> parameters(const Problem& problem) const override {
    return cpu_blocked::parameter_table(problem.conv()).parameters();
  }
  std::vector<Constraint> constraints(const Problem& problem) const override {
    return cpu_blocked::constraints(problem.conv());
  }
  Config default_config(const Problem& problem, const DeviceInfo&) const override {
    return cpu_blocked::default_config(problem.conv());
  }
  // Another shape's entry is carried only from the same regime: channels filling vectors alike (see
  // vector_fill_change), and no register block its shape clamped (VECS 1 of a 16-channel layer, one AVX-512
  // vector, carried to 64 channels ran fmnist2's forward at 1.19x and backward-filter at 1.48x the default).
  std::string carry_refusal(const Config& tuned, const Problem& tuned_problem, const Problem& problem,
                            const DeviceInfo& device) const override {
    if (std::string why = cpu_blocked::vector_fill_change(tuned_problem.conv(), problem.conv()); !why.empty())
      return why;
    return clamped_by_shape(*this, tuned, tuned_problem, problem, device, {"VECS", "COLS"});
  }
  double performed_flops(const Problem& problem, const Config& config) const override {
    return cpu_blocked::Convolution(problem.conv(), config).performed_flops();
  }
  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config, const DeviceInfo&) const override {
    KernelRecipe recipe = cpu_recipe(kProgram, "convolve", problem, config);
    // The scratch a run needs (packed weights, padded copies, partial sums), sized by the very preparation the
    // host program makes: a Convolution is cheap to prepare (geometry only; nothing is allocated).
    recipe.workspace_bytes = cpu_blocked::Convolution(problem.conv(), config).workspace_bytes();
    // The copy of the weights last packed (BlockedState::packed_from), kept by the program beside the workspace.
    if (problem.conv().direction != Direction::BackwardFilter)
      recipe.host_bytes = static_cast<size_t>(problem.conv().w_elements()) * sizeof(float);
    recipe.steps.front().args.push_back(ArgSource::workspace());
    return recipe;
  }
  std::string untuned_poor_fit(const Problem& problem, const DeviceInfo& device) const override {
    return memory_out_of_proportion(recipe(problem, {}, default_config(problem, device), device), problem);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_cpu_blocked() { return std::make_unique<CpuBlockedFamily>(); }

}  // namespace convtune
