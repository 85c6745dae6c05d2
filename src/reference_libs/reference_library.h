// ReferenceLibrary: a vendor or third-party library (cuDNN, cuBLAS, CLBlast, oneDNN) run on the same machine, in
// the same process and on the same Workload as convtune, so `convtune bench --against` can set the two side by
// side. Each is a harness::Implementation: checked and timed exactly like convtune's own plans.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "convtune/backend.h"
#include "convtune/types.h"
#include "src/harness/implementation.h"

namespace convtune::reference {

class ReferenceLibrary : public harness::Implementation {
 public:
  // "cuDNN 9.1.0 (/path/libcudnn.so.9)" once loaded.
  virtual std::string version() const = 0;
  // FP32: every multiply in full FP32 (cuDNN's CUDNN_FMA_MATH, tensor cores off). TF32: tensor cores allowed with
  // 10-bit-mantissa inputs, the setting frameworks default to on Ampere and later. Libraries without such a
  // switch (oneDNN on CPUs, CLBlast) compute FP32 in both. Takes effect at the next prepare().
  void set_math(MathMode math) { math_ = math; }
  MathMode math() const { return math_; }

 protected:
  MathMode math_ = MathMode::FP32;
};

// The libraries --against takes, in the order their columns appear.
std::vector<std::string> reference_library_names();
// Throws InvalidArgument naming the known libraries for an unknown name. Never throws for a missing library:
// that is reported through unavailable_reason().
std::unique_ptr<ReferenceLibrary> make_reference_library(std::string_view name);

// One adapter per library, each in its own file.
std::unique_ptr<ReferenceLibrary> make_cudnn_reference();
std::unique_ptr<ReferenceLibrary> make_cublas_reference();
std::unique_ptr<ReferenceLibrary> make_clblast_reference();
std::unique_ptr<ReferenceLibrary> make_onednn_reference();
// An adapter for a library this binary was built without (its headers were absent).
std::unique_ptr<ReferenceLibrary> make_unbuilt_reference(std::string name, std::string why);

}  // namespace convtune::reference
