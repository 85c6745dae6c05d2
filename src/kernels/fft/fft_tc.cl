// FFT tiling with the per-bin GEMMs on TF32 tensor cores (tf32 or 3xtf32 math; the fft_tc family): fft.cl's
// transform kernels and workspace layout unchanged, and fft_gemm_tc (tensor_core/tc_workspace_gemm.h) over the U, V
// and M blocks that fft.cl's layout macros (A_BASE, B_LD, C_BASE, ACCUMULATE...) describe, batched over (slices,)
// groups, frequency bins (and Gauss's planes) on work-group axis 2 as fft.cl's gemm step is.
// Defines come from src/families/fft_tc/fft_tc_family.cpp (the file does not compile alone).
#include "common/compat.h"
#include "tensor_core/tc_common.h"

// fft.cl ends by including gemm/gemm.cl, its FP32 GEMM, which this program does not use. The include expander
// (src/backend/kernel_sources.cpp) is textual and takes each file once per program, so naming gemm.cl here first,
// inside #if 0, puts its text where the preprocessor drops it and makes fft.cl's own include of it expand to
// nothing (as winograd_tc.cl does with winograd.cl). Whatever gemm.cl includes must be expanded above this block
// (compat.h is), or it would be dropped with it.
#if 0
#include "gemm/gemm.cl"
#endif
#include "fft/fft.cl"

#define TC_WORKSPACE_GEMM_NAME fft_gemm_tc
#include "tensor_core/tc_workspace_gemm.h"
