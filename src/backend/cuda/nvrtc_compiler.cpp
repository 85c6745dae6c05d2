// NVRTC compilation: create, compile, fetch the log and the cubin.
#include "src/backend/cuda/nvrtc_compiler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "convtune/error.h"
#include "src/backend/cuda/nvrtc_api.h"

namespace convtune::cuda {

namespace {

// Destroys the NVRTC program on every path out, errors included.
class ProgramHandle {
 public:
  explicit ProgramHandle(const NvrtcApi& api) : api_(api) {}
  ~ProgramHandle() {
    if (program_) api_.nvrtcDestroyProgram(&program_);
  }
  ProgramHandle(const ProgramHandle&) = delete;
  ProgramHandle& operator=(const ProgramHandle&) = delete;
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  const NvrtcApi& api_;
  nvrtcProgram program_ = nullptr;
};

std::string program_log(const NvrtcApi& api, nvrtcProgram program) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (api.nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "(nvrtcGetProgramLog failed)";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

std::vector<std::string> cuda_compile_options(std::string_view architecture) {
  return {fmt::format("--gpu-architecture={}", architecture), "-std=c++17", "-default-device"};
}

std::vector<std::byte> compile_cuda_to_cubin(std::string_view source_text, const std::vector<std::string>& options,
                                             const std::string& program_name, std::string* log) {
  std::string load_error;
  const NvrtcApi* api = NvrtcApi::instance(&load_error);
  if (!api) throw BackendError(fmt::format("cannot compile {}: {}", program_name, load_error));

  const std::string text(source_text);  // NVRTC wants a NUL-terminated string
  ProgramHandle program(*api);
  if (const nvrtcResult created =
          api->nvrtcCreateProgram(program.out(), text.c_str(), program_name.c_str(), 0, nullptr, nullptr);
      created != NVRTC_SUCCESS) {
    throw BackendError(fmt::format("nvrtcCreateProgram failed for {}: {}", program_name,
                                   api->nvrtcGetErrorString(created)));
  }
  std::vector<const char*> option_pointers;
  option_pointers.reserve(options.size());
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  const nvrtcResult compiled =
      api->nvrtcCompileProgram(program.get(), static_cast<int>(option_pointers.size()), option_pointers.data());
  if (compiled != NVRTC_SUCCESS) {
    throw BackendError(fmt::format("nvrtcCompileProgram failed with {}: {} does not compile with {} and options {}:\n{}",
                                   api->nvrtcGetErrorString(compiled), program_name, api->version(),
                                   fmt::join(options, " "), program_log(*api, program.get())));
  }
  if (log) *log = program_log(*api, program.get());
  size_t size = 0;
  if (const nvrtcResult sized = api->nvrtcGetCUBINSize(program.get(), &size); sized != NVRTC_SUCCESS) {
    throw BackendError(fmt::format("nvrtcGetCUBINSize failed for {}: {}", program_name,
                                   api->nvrtcGetErrorString(sized)));
  }
  if (size == 0) {
    // NVRTC emits only PTX for a virtual architecture (compute_XY); convtune loads cubins, never JIT-compiled PTX.
    throw BackendError(fmt::format("{} compiled to no cubin with options {}: --gpu-architecture must name a real "
                                   "GPU (sm_XY), not a virtual one (compute_XY)",
                                   program_name, fmt::join(options, " ")));
  }
  std::vector<std::byte> cubin(size);
  if (const nvrtcResult fetched = api->nvrtcGetCUBIN(program.get(), reinterpret_cast<char*>(cubin.data()));
      fetched != NVRTC_SUCCESS) {
    throw BackendError(fmt::format("nvrtcGetCUBIN failed for {}: {}", program_name, api->nvrtcGetErrorString(fetched)));
  }
  return cubin;
}

std::vector<std::string> cuda_program_options(std::string_view architecture, const std::map<std::string, std::string>& defines,
                                              const std::vector<std::string>& extra) {
  // A recipe may name the target itself (the wgmma kernels need the arch-specific sm_90a): it replaces the device's.
  for (const std::string& option : extra) {
    if (option.rfind("--gpu-architecture=", 0) == 0) architecture = std::string_view(option).substr(19);
  }
  std::vector<std::string> options = cuda_compile_options(architecture);
  for (const auto& [name, value] : defines) options.push_back("-D" + name + "=" + value);
  for (const std::string& option : extra)
    if (option.rfind("--gpu-architecture=", 0) != 0) options.push_back(option);
  return options;
}

}  // namespace convtune::cuda
