// FFT tiling with the per-bin GEMMs on Hopper's wgmma (tf32 or 3xtf32 math; the fft_wgmma family): fft.cl's
// transform kernels and workspace layout unchanged, and fft_gemm_wgmma (tensor_core/wg_workspace_gemm.h) over the U,
// V and M blocks that fft.cl's layout macros describe, batched over (slices,) groups, frequency bins (and Gauss's
// planes) on work-group axis 2 as fft.cl's gemm step is. CUDA only (sm_90a). Defines come from
// src/families/fft_wgmma/fft_wgmma_family.cpp (the file does not compile alone).
#include "tensor_core/wgmma.h"

// fft.cl ends by including gemm/gemm.cl, its FP32 GEMM, which this program does not use: naming it here first,
// inside #if 0, makes that include expand to nothing (fft_tc.cl does the same; the include expander takes each file
// once per program).
#if 0
#include "gemm/gemm.cl"
#endif
#include "fft/fft.cl"

#define WG_WORKSPACE_GEMM_NAME fft_gemm_wgmma
#include "tensor_core/wg_workspace_gemm.h"
