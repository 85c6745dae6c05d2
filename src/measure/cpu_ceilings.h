// The CPU's measured ceilings: SIMD FP32 FMA throughput on one core and on all cores (widest ISA available, or
// the one CONVTUNE_CPU_ISA forces) and memory bandwidth, the figures CPU-side kernels (the CPU backend, PoCL)
// are judged against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "src/backend/cpu/isa.h"

namespace convtune {

struct CpuCeilings {
  std::string isa;              // "avx512", "avx2", "scalar"
  int lanes = 1;                // FP32 lanes per vector
  unsigned threads = 1;         // threads of the all-core figures (the thread pool's size)
  double fma_gflops_one = 0;    // one thread, 2 FLOP per FMA lane, over the thread's CPU time
  double fma_gflops_all = 0;    // every thread at once, each thread's rate over its own CPU time, summed
  double copy_gbs = 0;          // all threads copying disjoint parts, bytes read + written per second
  double read_gbs = 0;          // all threads summing disjoint parts, bytes read per second
  size_t buffer_bytes = 0;      // size of each bandwidth buffer
};

struct CpuCeilingOptions {
  size_t buffer_bytes = 0;  // 0: 1 GiB (larger than any L3, so memory is measured, not cache)
  int repeats = 5;          // best of this many (the ceiling: the least disturbed run on a shared machine)
  bool bandwidth = true;
  std::optional<cpu::Isa> isa;  // default: the ISA the CPU kernels run now (cpu::active_isa())
};

CpuCeilings measure_cpu_ceilings(const CpuCeilingOptions& options = {});

// The all-core FP32 FMA ceiling with the widest ISA this CPU runs, measured once per process (about half a
// second) and then remembered: what `% peak` divides by for the CPU backend and for OpenCL devices that are this
// CPU (PoCL), whatever ISA a test forces on the CPU kernels.
double cpu_fp32_peak_gflops();
// The same ceiling measured afresh (best of two runs, no warm-up: for a caller that has just kept the cores busy),
// for callers that keep the best of several readings over a long measurement (`bench`'s % peak column).
double cpu_fp32_peak_again();
// One reading of that ceiling (one FMA run per thread of the pool, about 20 ms): for callers that take a reading
// beside each timed run (`bench --against`'s rounds), so a row is judged against the cores' clock while it ran.
double cpu_fp32_peak_once();

// One core's FP32 FMA rate with 8-lane AVX2 vectors over its rate with 16-lane AVX-512 vectors, measured once per
// process (about 20 ms): about 0.5 on cores with two 512-bit FMA units (Intel Xeon), about 1 where a 512-bit FMA
// takes both 256-bit pipes (AMD Zen 4). 0 where the CPU lacks either ISA. cpu_blocked's default reads it to choose
// half-width vectors for channels that fill half an AVX-512 vector.
double avx2_over_avx512_fma_rate();

namespace cpu_measure {
// One FMA loop of `iterations` on `isa`; returns the FLOPs done (defined in cpu_fma.cpp, per Highway target).
double fma_loop(cpu::Isa isa, int64_t iterations, float* sink);
}  // namespace cpu_measure

}  // namespace convtune
