// An OpenCL device: lazy context and queue, checked allocations, and builds through the program cache.
#include "src/backend/opencl/opencl_device.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <iostream>

#include "convtune/error.h"
#include "src/backend/kernel_sources.h"
#include "src/backend/opencl/opencl_buffer.h"
#include "src/backend/opencl/opencl_device_info.h"
#include "src/backend/opencl/opencl_error.h"
#include "src/backend/opencl/opencl_program.h"
#include "src/backend/opencl/opencl_program_key.h"
#include "src/backend/program_cache.h"
#include "src/core/resources.h"

namespace convtune::opencl {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The -D options and extra options as the compiler sees them, e.g. "-DSCALE=3 -cl-fast-relaxed-math".
std::string build_options(const ProgramSource& source) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : source.defines) {
    // OpenCL splits build options at spaces, so a space would silently turn into a second option.
    auto has_space = [](const std::string& s) { return std::any_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }); };
    if (name.empty() || has_space(name) || has_space(value)) {
      throw InvalidArgument(fmt::format("{}: parameter '{}={}' must be a name and a value without spaces",
                                        source.file, name, value));
    }
    parts.push_back(fmt::format("-D{}={}", name, value));
  }
  parts.insert(parts.end(), source.options.begin(), source.options.end());
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (cl().clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS) {
    return "(the build log could not be read)";
  }
  std::string log(size, '\0');
  if (cl().clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS) {
    return "(the build log could not be read)";
  }
  log.erase(std::find(log.begin(), log.end(), '\0'), log.end());
  return log.find_first_not_of(" \t\n") == std::string::npos ? "(the compiler wrote no log)" : log;
}

// CPU devices compile each program in a context of its own (see take_compile_context); the environment variable
// CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT=1 turns that off, to measure what it gains
// (scripts/compile_throughput.sh).
bool separate_compile_contexts(const DeviceInfo& info) {
  const char* shared = std::getenv("CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT");
  return !info.is_gpu && !(shared && std::string_view(shared) == "1");
}

std::vector<std::byte> program_binary(cl_program program, const std::string& file) {
  size_t size = 0;  // the program has one device, so one size
  check_cl(cl().clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr), "clGetProgramInfo",
           "reading the binary size of " + file);
  std::vector<std::byte> binary(size);
  if (size > 0) {
    auto* destination = reinterpret_cast<unsigned char*>(binary.data());
    check_cl(cl().clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(destination), &destination, nullptr),
             "clGetProgramInfo", "reading the binary of " + file);
  }
  return binary;
}

}  // namespace

OpenCLDevice::OpenCLDevice(cl_platform_id platform, cl_device_id device, int index, ProgramCache& cache)
    : platform_(platform),
      device_(device),
      info_(describe_device(platform, device, index)),
      max_allocation_bytes_(device_u64(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE)),
      cache_(cache),
      separate_compile_contexts_(separate_compile_contexts(info_)) {}

namespace {

template <typename T>
T queue_info(cl_command_queue queue, cl_command_queue_info what, const char* name) {
  T value{};
  check_cl(cl().clGetCommandQueueInfo(queue, what, sizeof value, &value, nullptr), "clGetCommandQueueInfo",
           std::string("reading ") + name + " of a wrapped command queue");
  return value;
}

}  // namespace

OpenCLDevice::OpenCLDevice(cl_command_queue queue, ProgramCache& cache)
    : platform_(nullptr), device_(queue_info<cl_device_id>(queue, CL_QUEUE_DEVICE, "its device")), cache_(cache) {
  check_cl(cl().clGetDeviceInfo(device_, CL_DEVICE_PLATFORM, sizeof platform_, &platform_, nullptr), "clGetDeviceInfo",
           "reading the platform of a wrapped command queue's device");
  info_ = describe_device(platform_, device_, 0);
  info_.id = "opencl:wrapped";
  separate_compile_contexts_ = separate_compile_contexts(info_);
  max_allocation_bytes_ = device_u64(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  const cl_context context = queue_info<cl_context>(queue, CL_QUEUE_CONTEXT, "its context");
  check_cl(cl().clRetainContext(context), "clRetainContext", "keeping the wrapped queue's context");
  context_ = ClHandle<cl_context>(context);
  check_cl(cl().clRetainCommandQueue(queue), "clRetainCommandQueue", "keeping the wrapped queue");
  queue_ = std::make_unique<OpenCLQueue>(ClHandle<cl_command_queue>(queue), context, info_.id);
}

std::unique_ptr<Buffer> OpenCLDevice::wrap_memory(cl_mem memory, size_t bytes) {
  runtime();
  cl_context owner = nullptr;
  size_t size = 0;
  check_cl(cl().clGetMemObjectInfo(memory, CL_MEM_CONTEXT, sizeof owner, &owner, nullptr), "clGetMemObjectInfo",
           "reading the context of a wrapped cl_mem");
  check_cl(cl().clGetMemObjectInfo(memory, CL_MEM_SIZE, sizeof size, &size, nullptr), "clGetMemObjectInfo",
           "reading the size of a wrapped cl_mem");
  if (owner != context_.get()) {
    throw InvalidArgument(fmt::format("the cl_mem to wrap belongs to another OpenCL context than {}'s: wrap the "
                                      "queue of its context (convtune::wrap_opencl_queue) and use that device",
                                      describe()));
  }
  if (bytes > size) {
    throw InvalidArgument(fmt::format("wrapping {} bytes of a cl_mem that holds {} bytes on {}", bytes, size, describe()));
  }
  check_cl(cl().clRetainMemObject(memory), "clRetainMemObject", "keeping a wrapped cl_mem");
  return std::make_unique<OpenCLBuffer>(ClHandle<cl_mem>(memory), bytes == 0 ? size : bytes, context_.get());
}

std::string OpenCLDevice::describe() const { return fmt::format("{} ({})", info_.id, info_.name); }

OpenCLQueue& OpenCLDevice::runtime() {
  std::lock_guard lock(runtime_mutex_);
  if (!queue_) {
    if (!info_.can_run_kernels) {
      throw BackendError(fmt::format("{} cannot be used: {}", describe(), info_.cannot_run_reason));
    }
    const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                                reinterpret_cast<cl_context_properties>(platform_), 0};
    cl_int status = CL_SUCCESS;
    ClHandle<cl_context> context(cl().clCreateContext(properties, 1, &device_, nullptr, nullptr, &status));
    check_cl(status, "clCreateContext", "creating a context on " + describe());
    queue_ = std::make_unique<OpenCLQueue>(context.get(), device_, info_.id);
    context_ = std::move(context);
  }
  return *queue_;
}

Queue& OpenCLDevice::queue() { return runtime(); }

std::unique_ptr<Buffer> OpenCLDevice::allocate(size_t bytes) {
  const uint64_t global_mib = info_.global_memory_bytes >> 20;
  if (bytes > max_allocation_bytes_) {
    throw BackendError(fmt::format("cannot allocate {} bytes ({:.1f} MiB) on {}: one buffer may hold at most {} bytes "
                                   "({:.1f} MiB, CL_DEVICE_MAX_MEM_ALLOC_SIZE) of {} MiB global memory",
                                   bytes, bytes / kMiB, describe(), max_allocation_bytes_,
                                   max_allocation_bytes_ / kMiB, global_mib));
  }
  // A CPU device's (PoCL's) global memory is host memory, which OpenCL reports only as a total: check what is free,
  // so an impossible buffer ends here with both figures rather than with the OOM killer when it is first touched.
  if (!info_.is_gpu) require_host_memory(bytes, fmt::format("a buffer of {} bytes on {}", bytes, describe()));
  OpenCLQueue& queue = runtime();
  cl_int status = CL_SUCCESS;
  // OpenCL forbids empty buffers; a zero-byte Buffer still has to be a valid kernel argument.
  ClHandle<cl_mem> memory(
      cl().clCreateBuffer(context_.get(), CL_MEM_READ_WRITE, std::max<size_t>(bytes, 1), nullptr, &status));
  std::string failed_call = "clCreateBuffer";
  if (status == CL_SUCCESS) {
    // Some drivers (NVIDIA's) reserve memory only on first use. Touching one byte makes a failed allocation
    // show up here, with the size in the message, instead of as an error from some later launch.
    const cl_uchar zero = 0;
    cl_event touched = nullptr;
    status = cl().clEnqueueFillBuffer(queue.handle(), memory.get(), &zero, 1, 0, 1, 0, nullptr, &touched);
    failed_call = "clEnqueueFillBuffer";
    if (status == CL_SUCCESS) {
      ClHandle<cl_event> event(touched);
      status = cl().clWaitForEvents(1, &touched);
      failed_call = "clWaitForEvents";
    }
  }
  if (status != CL_SUCCESS) {
    throw BackendError(fmt::format("cannot allocate {} bytes ({:.1f} MiB) on {} of {} MiB global memory: {} failed "
                                   "with {} (OpenCL cannot report how much memory is free)",
                                   bytes, bytes / kMiB, describe(), global_mib, failed_call, cl_error_name(status)));
  }
  return std::make_unique<OpenCLBuffer>(std::move(memory), bytes, context_.get());
}

ClHandle<cl_context> OpenCLDevice::take_compile_context() {
  {
    std::lock_guard lock(compile_contexts_mutex_);
    if (!idle_compile_contexts_.empty()) {
      ClHandle<cl_context> context = std::move(idle_compile_contexts_.back());
      idle_compile_contexts_.pop_back();
      return context;
    }
  }
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform_),
                                              0};
  cl_int status = CL_SUCCESS;
  ClHandle<cl_context> context(cl().clCreateContext(properties, 1, &device_, nullptr, nullptr, &status));
  check_cl(status, "clCreateContext", "creating a compile context on " + describe());
  return context;
}

void OpenCLDevice::return_compile_context(ClHandle<cl_context> context) {
  std::lock_guard lock(compile_contexts_mutex_);
  idle_compile_contexts_.push_back(std::move(context));
}

ClHandle<cl_program> OpenCLDevice::compile_source(cl_context context, const std::string& text,
                                                  const std::string& options, const ProgramSource& source) {
  const char* text_pointer = text.c_str();
  const size_t text_size = text.size();
  cl_int status = CL_SUCCESS;
  ClHandle<cl_program> program(cl().clCreateProgramWithSource(context, 1, &text_pointer, &text_size, &status));
  check_cl(status, "clCreateProgramWithSource", fmt::format("loading {} on {}", source.file, describe()));
  // -w (an OpenCL build option every implementation takes): PoCL's clang prints warnings and "1 warning generated."
  // straight to the process's stderr, into the middle of a command's progress; CONVTUNE_KERNEL_WARNINGS=1 (the
  // command line's --verbose) keeps them for whoever works on the kernels.
  const char* warnings = std::getenv("CONVTUNE_KERNEL_WARNINGS");
  const bool show_warnings = warnings && *warnings && std::string_view(warnings) != "0";
  const std::string build_with = show_warnings ? options : (options.empty() ? "-w" : options + " -w");
  status = cl().clBuildProgram(program.get(), 1, &device_, build_with.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    throw BackendError(fmt::format("cannot compile {} for {} with {}: clBuildProgram failed with {}\ncompiler log:\n{}",
                                   source.file, describe(), options.empty() ? "no parameters" : options,
                                   cl_error_name(status), build_log(program.get(), device_)));
  }
  return program;
}

ClHandle<cl_program> OpenCLDevice::load_binary(const std::vector<std::byte>& binary, const std::string& options,
                                               std::string& problem) {
  if (binary.empty()) {
    problem = "the platform returned an empty binary when it was compiled";
    return {};
  }
  const auto* pointer = reinterpret_cast<const unsigned char*>(binary.data());
  const size_t size = binary.size();
  cl_int binary_status = CL_SUCCESS, status = CL_SUCCESS;
  ClHandle<cl_program> program(
      cl().clCreateProgramWithBinary(context(), 1, &device_, &size, &pointer, &binary_status, &status));
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS) {
    problem = fmt::format("clCreateProgramWithBinary failed with {}",
                          cl_error_name(status != CL_SUCCESS ? status : binary_status));
    return {};
  }
  // -w (an OpenCL build option every implementation takes): PoCL's clang prints warnings and "1 warning generated."
  // straight to the process's stderr, into the middle of a command's progress; CONVTUNE_KERNEL_WARNINGS=1 (the
  // command line's --verbose) keeps them for whoever works on the kernels.
  const char* warnings = std::getenv("CONVTUNE_KERNEL_WARNINGS");
  const bool show_warnings = warnings && *warnings && std::string_view(warnings) != "0";
  const std::string build_with = show_warnings ? options : (options.empty() ? "-w" : options + " -w");
  status = cl().clBuildProgram(program.get(), 1, &device_, build_with.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    problem = fmt::format("clBuildProgram of the binary failed with {}: {}", cl_error_name(status),
                          build_log(program.get(), device_));
    return {};
  }
  return program;
}

std::shared_ptr<Program> OpenCLDevice::build(const ProgramSource& source) {
  const std::string text = load_kernel_source(source.file);
  const std::string options = build_options(source);
  const ProgramCacheKey key = opencl_program_key(info_, source, text);
  const std::string hash = key.hash();

  auto make_program = [&](std::shared_ptr<const ClHandle<cl_program>> program, bool from_cache) {
    return std::make_shared<OpenCLProgram>(std::move(program), from_cache, source.file, info_.id, context(), device_);
  };
  {
    std::lock_guard lock(programs_mutex_);
    if (auto it = programs_.find(hash); it != programs_.end()) return make_program(it->second, true);
  }
  // Runs `work` with a compile context of its own, given back whether or not the source compiles.
  auto in_own_context = [this](auto&& work) {
    ClHandle<cl_context> own = take_compile_context();
    try {
      auto result = work(own.get());
      return_compile_context(std::move(own));
      return result;
    } catch (...) {
      return_compile_context(std::move(own));
      throw;
    }
  };
  // Compiled without holding programs_mutex_, so a tuner's threads compile different candidates in parallel.
  if (source.transient && separate_compile_contexts_ && !cache_.find(key)) {
    // No binary for the program cache (PoCL compiles every kernel again to write one): the build in a context of
    // its own fills PoCL's kernel cache, so the device's context, building the same source, finds it there
    // (milliseconds) instead of holding its compiler lock for the whole build. A binary already cached is loaded
    // as usual below.
    in_own_context([&](cl_context own) { return compile_source(own, text, options, source); });
    auto shared = std::make_shared<const ClHandle<cl_program>>(compile_source(context(), text, options, source));
    std::lock_guard lock(programs_mutex_);
    const auto [it, inserted] = programs_.emplace(hash, shared);
    return make_program(it->second, false);
  }

  // A program compiled just now is used as is: reloading it from its own binary would only cost time.
  ClHandle<cl_program> compiled;
  bool from_cache = false;
  const std::vector<std::byte> binary = cache_.get_or_build(
      key,
      [&] {
        if (separate_compile_contexts_) {
          // In a context of its own, so other threads' builds are not queued behind this one; the device's
          // context then loads the binary (milliseconds).
          return in_own_context([&](cl_context own) {
            return program_binary(compile_source(own, text, options, source).get(), source.file);
          });
        }
        compiled = compile_source(context(), text, options, source);
        return program_binary(compiled.get(), source.file);
      },
      &from_cache);
  ClHandle<cl_program> program = std::move(compiled);
  if (!program) {
    std::string problem;
    program = load_binary(binary, options, problem);
    if (!program) {
      if (!reported_rejected_binary_.exchange(true)) {
        std::cerr << fmt::format("convtune: {} rejected the cached binary of {} ({}); compiling from source instead "
                                 "(further rejections on this device are not reported)\n",
                                 describe(), source.file, problem);
      }
      program = compile_source(context(), text, options, source);
      cache_.replace(key, program_binary(program.get(), source.file));  // so later processes load it again
      from_cache = false;
    }
  }
  auto shared = std::make_shared<const ClHandle<cl_program>>(std::move(program));
  std::lock_guard lock(programs_mutex_);
  const auto [it, inserted] = programs_.emplace(hash, shared);  // another thread may have built it meanwhile
  return make_program(it->second, from_cache && inserted);
}

}  // namespace convtune::opencl
