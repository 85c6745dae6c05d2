// The cpu_reference family: the float64 reference itself as a plan on the CPU backend (bench --family
// cpu_reference), for convolutions and GEMMs. It is the oracle, not a contender: untuned plans never pick it.
#include "src/backend/cpu/host_program.h"
#include "src/backend/cpu/reference.h"
#include "src/families/cpu_family.h"
#include "src/families/families.h"

namespace convtune {

namespace {

constexpr const char* kProgram = "cpu/reference";

class CpuReferenceFamily final : public CpuFamily {
 public:
  CpuReferenceFamily() : CpuFamily(Problem::Kind::Convolution) {
    cpu::register_host_program(kProgram, [](const ProgramSource& source) {
      const Problem problem = parse_any_problem(source.defines.at("PROBLEM"));
      return std::map<std::string, cpu::HostKernel>{{"reference", [problem](const std::vector<KernelArg>& args) {
                                                       cpu::HostOperands op;
                                                       for (int i = 0; i < Problem::kOperands; ++i)
                                                         op.data[static_cast<size_t>(i)] =
                                                             cpu::host_floats(args.at(static_cast<size_t>(i)), "operand");
                                                       cpu::compute_reference(problem, op);
                                                     }}};
    });
  }
  std::string name() const override { return "cpu_reference"; }
  std::string description() const override {
    return "the float64 reference convolution (element-wise gather sums), the oracle every kernel is checked against";
  }
  std::vector<Parameter> parameters(const Problem&) const override { return {}; }
  std::vector<Constraint> constraints(const Problem&) const override { return {}; }
  Config default_config(const Problem&, const DeviceInfo&) const override { return {}; }
  std::string untuned_poor_fit(const Problem&, const DeviceInfo&) const override {
    return "the float64 reference is an oracle, many times slower than cpu_direct";
  }
  KernelRecipe recipe(const Problem& problem, const Epilogue&, const Config& config, const DeviceInfo&) const override {
    return cpu_recipe(kProgram, "reference", problem, config);
  }
};

}  // namespace

std::unique_ptr<KernelFamily> families::make_cpu_reference() { return std::make_unique<CpuReferenceFamily>(); }

}  // namespace convtune
