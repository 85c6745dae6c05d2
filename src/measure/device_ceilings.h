// Measured device ceilings (copy and fill bandwidth, FP32 FMA throughput, launch latency) and seed 001's fill
// experiment: the figures every kernel is judged against.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "convtune/backend.h"

namespace convtune {

struct Ceilings {
  double copy_gbs = 0;           // device copy kernel, bytes read + written per second
  double copy_api_gbs = 0;       // the runtime's own device-to-device copy (clEnqueueCopyBuffer, cuMemcpyDtoD)
  double fill_gbs = 0;           // float4 fill kernel, bytes written per second
  double fma_gflops = 0;         // FP32 FMA throughput, 2 FLOP per FMA
  double launch_latency_us = 0;  // one empty launch and wait, host clock
  double launch_rate_us = 0;     // per launch in a burst of back-to-back empty launches
  size_t buffer_bytes = 0;       // size of each buffer the bandwidth tests used
};

struct CeilingOptions {
  size_t buffer_bytes = 0;  // 0: 1 GiB, or less on a device with little memory
  int repeats = 10;
  std::function<void(const std::string&)> progress;  // called before each measurement
};

// Throws BackendError/Unsupported when the device cannot run kernels.
Ceilings measure_ceilings(Device& device, const CeilingOptions& options = {});

// One row of seed 001's table: filling a size x size float table.
struct FillRow {
  std::string method;
  double ms = 0;        // one fill, median of repeats
  double gbs = 0;       // bytes written per second
  double speedup = 0;   // over the sequential CPU 2-D loop, as the seed reports
  std::string note;     // why a row did not run ("work-group 1024 exceeds the device's 512")
};

// Throws InvalidArgument unless the fill table's side is 1 to 46340 (under 2^31 floats): callers check before
// anything else is measured, so a bad --size fails at once.
void check_fill_size(int64_t size);
// The CPU loops always run; the device kernels run when `device` is non-null and runs kernels.
std::vector<FillRow> run_fill_experiment(Device* device, int64_t size, int repeats,
                                         const std::function<void(const std::string&)>& progress = {});

}  // namespace convtune
