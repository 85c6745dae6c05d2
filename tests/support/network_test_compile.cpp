// Linked into the network tests (nn_tests, mlp_tests: layers and small networks trained on PoCL): PoCL builds one
// work-group function per kernel instead of one per local size, optimised as users compile.
//
// Why: compiling is most of those tests on a 2-core CI host with cold caches, and their kernels run long enough
// that unoptimised builds cost more than they save (SixteenBitConv.Bf16LenetSmallLearns: 67 s cold as users
// compile, 45.5 s unspecialised, 5.6 s warm, 177 s with -cl-opt-disable; 2-core AVX-512 host, 2026-12-03).
// Specialisation changes how PoCL lays out the work-group loop, not what a kernel computes. A variable already set
// wins; the NVIDIA OpenCL driver on the GPU machine ignores it.
#include <cstdlib>

namespace {

const bool network_test_environment = [] {
  setenv("POCL_WORK_GROUP_SPECIALIZATION", "0", 0);
  return true;
}();

}  // namespace
