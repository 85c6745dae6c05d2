// Linked into the kernel-sweep tests (the conformance harness and the per-family tests, thousands of PoCL programs
// each compiled once, and the reference-library test, whose CLBlast compiles its own): PoCL compiles their kernels
// unoptimised and unspecialised, into caches of their own.
//
// Why: nearly all of the suite's time on a 2-core CI host was PoCL compiling kernels with a cold cache (48 min under
// `ctest -j 2`); the kernels run on tiny problems, so compile time is what counts. Measured on the 2-core AVX-512
// host, family_conformance_test direct_tiled_fwd (46 programs) cold: 72.9 s as users compile, 49.9 s unspecialised
// (POCL_WORK_GROUP_SPECIALIZATION=0: one work-group function per kernel instead of one per local size and offset),
// 20.6 s unspecialised and unoptimised (-cl-opt-disable); ReferenceLibrary.Clblast* 89 s -> 20 s. Not for tests
// that run kernels for long: SixteenBitConv.Bf16LenetSmallLearns (training on PoCL) took 73 s as users compile and
// 177 s this way. -cl-opt-disable does not change what a kernel computes;
// the command-line, tuner, backend, network and Python tests keep compiling as users do (optimised, specialised, in
// the user's caches), and the tuner checks every candidate it times against the float64 reference there too.
// Own caches: the programs built this way must not reach a user's runs through ~/.cache/convtune or ~/.cache/pocl.
// A variable already set wins (e.g. POCL_EXTRA_BUILD_FLAGS= to test optimised builds); the NVIDIA OpenCL driver on
// the GPU machine ignores the POCL_ ones.
#include <cstdlib>
#include <string>

namespace {

const bool kernel_sweep_environment = [] {
  const std::string cache = CONVTUNE_TEST_KERNEL_CACHE;
  setenv("POCL_WORK_GROUP_SPECIALIZATION", "0", 0);
  setenv("POCL_EXTRA_BUILD_FLAGS", "-cl-opt-disable", 0);
  setenv("POCL_CACHE_DIR", (cache + "/pocl").c_str(), 0);
  setenv("CONVTUNE_CACHE_DIR", (cache + "/convtune").c_str(), 0);
  return true;
}();

}  // namespace
