// The --against names, the math mode, and the stand-in for a library whose adapter was not compiled in.
#include "src/reference_libs/reference_library.h"

#include <fmt/format.h>

#include "convtune/error.h"

namespace convtune::reference {

std::vector<std::string> reference_library_names() { return {"cudnn", "cublas", "clblast", "onednn"}; }

std::unique_ptr<ReferenceLibrary> make_reference_library(std::string_view name) {
  if (name == "cudnn") return make_cudnn_reference();
  if (name == "cublas") return make_cublas_reference();
  if (name == "clblast") return make_clblast_reference();
  if (name == "onednn") return make_onednn_reference();
  throw InvalidArgument(fmt::format("--against: unknown library '{}': expected a comma-separated list of "
                                    "cudnn, cublas, clblast, onednn",
                                    name));
}

namespace {

class UnbuiltReference final : public ReferenceLibrary {
 public:
  UnbuiltReference(std::string name, std::string why) : name_(std::move(name)), why_(std::move(why)) {}
  std::string name() const override { return name_; }
  std::string unavailable_reason() const override { return why_; }
  std::string version() const override { return {}; }
  bool runs_on_host() const override { return false; }
  std::string unsupported_reason(const Problem&, const DeviceInfo&) const override { return why_; }
  void prepare(harness::Workload&) override { throw Unsupported(why_); }
  void run() override { throw Unsupported(why_); }
  std::string algorithm() const override { return {}; }

 private:
  std::string name_, why_;
};

}  // namespace

std::unique_ptr<ReferenceLibrary> make_unbuilt_reference(std::string name, std::string why) {
  return std::make_unique<UnbuiltReference>(std::move(name), std::move(why));
}

}  // namespace convtune::reference
