// CPU ceilings: the Highway FMA loop on one thread and on every pool thread at once (rates over each thread's
// CPU time), and copy / read bandwidth over buffers larger than the caches (wall clock), each the best of a few
// runs.
#include "src/measure/cpu_ceilings.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <vector>

#include "src/core/parallel_for.h"
#include "src/core/thread_pool.h"

namespace convtune {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Iterations per timed FMA run: about 20 ms of work on a current core (long enough that timer and wake-up costs
// vanish, short enough that a busy machine's interruptions often miss a run).
constexpr int64_t kCpuFmaIterations = 3'000'000;

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Each thread's FMA rate over the CPU time it ran, summed: the cores' ceiling even when other processes share
// them (wall-clock rates on the 2-core developer machine under a load of 4-10 read 110-200 GFLOP/s for two cores
// that do 350 when free, and kernels timed in a quiet moment then showed over 100% of it). Best of `repeats`.
double fma_gflops(cpu::Isa isa, unsigned threads, int repeats) {
  double best = 0;
  std::vector<float> sinks(threads);
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> rates(threads, 0.0);
    ThreadPool::instance().run(threads, [&](unsigned t, unsigned) {
      const double start = thread_cpu_seconds();
      const double flops = cpu_measure::fma_loop(isa, kCpuFmaIterations, &sinks[t]);
      rates[t] = flops / (thread_cpu_seconds() - start) / 1e9;
    });
    double total = 0;
    for (double rate : rates) total += rate;
    best = std::max(best, total);
  }
  return best;
}

}  // namespace

CpuCeilings measure_cpu_ceilings(const CpuCeilingOptions& options) {
  CpuCeilings c;
  const cpu::Isa isa = options.isa ? *options.isa : cpu::active_isa();
  c.isa = std::string(cpu::to_string(isa));
  c.lanes = cpu::vector_lanes(isa);
  c.threads = ThreadPool::instance().size();
  const int repeats = std::max(1, options.repeats);
  float sink = 0;
  cpu_measure::fma_loop(isa, kCpuFmaIterations / 10, &sink);  // warm-up: clocks up, code paged in
  c.fma_gflops_one = fma_gflops(isa, 1, repeats);
  c.fma_gflops_all = fma_gflops(isa, c.threads, repeats);
  if (!options.bandwidth) return c;

  c.buffer_bytes = (options.buffer_bytes ? options.buffer_bytes : size_t{1} << 30) / 64 * 64;
  const size_t count = c.buffer_bytes / sizeof(float);
  std::unique_ptr<float[]> src(new float[count]);
  std::unique_ptr<float[]> dst(new float[count]);
  // Touch every page first (in parallel, as the runs will) so page faults are not timed.
  const unsigned threads = c.threads;
  auto part = [&](unsigned t, unsigned n) {
    const size_t begin = count * t / n, end = count * (t + 1) / n;
    return std::pair{begin, end};
  };
  ThreadPool::instance().run(threads, [&](unsigned t, unsigned n) {
    const auto [b, e] = part(t, n);
    std::fill(src.get() + b, src.get() + e, 1.0f);
    std::fill(dst.get() + b, dst.get() + e, 0.0f);
  });
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    ThreadPool::instance().run(threads, [&](unsigned t, unsigned n) {
      const auto [b, e] = part(t, n);
      std::memcpy(dst.get() + b, src.get() + b, (e - b) * sizeof(float));
    });
    c.copy_gbs = std::max(c.copy_gbs, 2.0 * static_cast<double>(c.buffer_bytes) / seconds_since(start) / 1e9);
    std::vector<float> sums(threads);
    start = Clock::now();
    ThreadPool::instance().run(threads, [&](unsigned t, unsigned n) {
      const auto [b, e] = part(t, n);
      // Eight partial sums so the adds do not serialise on their latency; the compiler vectorises them.
      float s[8] = {};
      size_t i = b;
      for (; i + 8 <= e; i += 8)
        for (int k = 0; k < 8; ++k) s[k] += dst[i + k];
      for (; i < e; ++i) s[0] += dst[i];
      for (int k = 1; k < 8; ++k) s[0] += s[k];
      sums[t] = s[0];
    });
    c.read_gbs = std::max(c.read_gbs, static_cast<double>(c.buffer_bytes) / seconds_since(start) / 1e9);
    if (sums[0] < 0) c.read_gbs = 0;  // never: keeps the sums from being optimised away
  }
  return c;
}

double cpu_fp32_peak_gflops() {
  static std::once_flag once;
  static double peak = 0;
  std::call_once(once, [] {
    CpuCeilingOptions options;
    options.bandwidth = false;
    options.isa = cpu::available_isas().front();
    peak = measure_cpu_ceilings(options).fma_gflops_all;
  });
  return peak;
}

double cpu_fp32_peak_again() {
  return fma_gflops(cpu::available_isas().front(), ThreadPool::instance().size(), 2);
}

double cpu_fp32_peak_once() { return fma_gflops(cpu::available_isas().front(), ThreadPool::instance().size(), 1); }

double avx2_over_avx512_fma_rate() {
  static std::once_flag once;
  static double ratio = 0;
  std::call_once(once, [] {
    const std::vector<cpu::Isa> isas = cpu::available_isas();
    const auto has = [&](cpu::Isa isa) { return std::find(isas.begin(), isas.end(), isa) != isas.end(); };
    if (!has(cpu::Isa::Avx512) || !has(cpu::Isa::Avx2)) return;
    // On the calling thread, alternated, best of five each: about 2 ms of FMAs a run.
    constexpr int64_t kIterations = kCpuFmaIterations / 10;
    float sink = 0;
    double best[2] = {0, 0};
    for (int r = 0; r < 5; ++r) {
      for (int i = 0; i < 2; ++i) {
        const double start = thread_cpu_seconds();
        const double flops =
            cpu_measure::fma_loop(i == 0 ? cpu::Isa::Avx2 : cpu::Isa::Avx512, kIterations, &sink);
        best[i] = std::max(best[i], flops / (thread_cpu_seconds() - start));
      }
    }
    ratio = best[1] > 0 ? best[0] / best[1] : 0;
  });
  return ratio;
}

}  // namespace convtune
