// ReferenceLibrary: a vendor or third-party convolution (cuDNN, CLBlast, oneDNN) run on the same machine, in the
// same process and on the same inputs as convtune, so `convtune bench --against` can set the two side by side.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/backend.h"
#include "convtune/host_convolution.h"
#include "convtune/plan.h"

namespace convtune::reference {

// FP32: every multiply in full FP32 (cuDNN's CUDNN_FMA_MATH, tensor cores off). TF32: tensor cores allowed with
// 10-bit-mantissa inputs, the setting frameworks default to on Ampere and later.
enum class MathMode { FP32, TF32 };
MathMode parse_math_mode(std::string_view text);  // "fp32" or "tf32"; throws InvalidArgument otherwise
std::string_view to_string(MathMode mode);

// The operands a reference computes on: convtune's own device buffers (when convtune ran on a device) and host
// copies of the same inputs. The reference overwrites only the operand the direction writes.
struct SharedOperands {
  Device* device = nullptr;        // convtune's device
  DeviceOperands device_buffers;   // null pointers on the CPU backend
  ConvOperands host;               // the inputs on the host; the written operand's contents are not used
};

class ReferenceLibrary {
 public:
  virtual ~ReferenceLibrary() = default;
  virtual std::string name() const = 0;  // "cudnn", "clblast", "onednn"
  // Empty when the library loaded; else why not (the file not found, a symbol absent, built without headers).
  virtual std::string unavailable_reason() const = 0;
  // "cuDNN 9.1.0 (/path/libcudnn.so.9)" once loaded.
  virtual std::string version() const = 0;
  // Where it runs relative to convtune's device: "device" (same device and queue) or "host CPU".
  virtual bool runs_on_host() const = 0;
  // Empty when it computes `problem` next to convtune on `device`; else why not ("forward only", "groups=2").
  virtual std::string unsupported_reason(const ConvProblem& problem, const DeviceInfo& device) const = 0;
  // Descriptors, algorithm search (cuDNN's benchmark mode), workspace; nothing is timed here.
  virtual void prepare(const ConvProblem& problem, const SharedOperands& operands, MathMode math) = 0;
  // Runs once and returns the written operand on the host, for the agreement check.
  virtual std::vector<float> run_and_read() = 0;
  // Median of `repeats` after `warmup`, with the same measure() convtune's own plans are timed with.
  virtual Timing time(int warmup, int repeats) = 0;
  // What it chose: "IMPLICIT_PRECOMP_GEMM (ws 12.0 MiB)", "jit:avx2", "convgemm".
  virtual std::string algorithm() const = 0;
};

// The libraries --against takes, in the order their columns appear.
std::vector<std::string> reference_library_names();
// Throws InvalidArgument naming the known libraries for an unknown name. Never throws for a missing library:
// that is reported through unavailable_reason().
std::unique_ptr<ReferenceLibrary> make_reference_library(std::string_view name);

// One adapter per library, each in its own file.
std::unique_ptr<ReferenceLibrary> make_cudnn_reference();
std::unique_ptr<ReferenceLibrary> make_clblast_reference();
std::unique_ptr<ReferenceLibrary> make_onednn_reference();
// An adapter for a library this binary was built without (its headers were absent).
std::unique_ptr<ReferenceLibrary> make_unbuilt_reference(std::string name, std::string why);

}  // namespace convtune::reference
