// Ceilings and the fill experiment, measured with the peak/peak.cl kernels through the backend interface.
#include "src/measure/device_ceilings.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "convtune/error.h"
#include "src/core/parallel_for.h"

namespace convtune {

namespace {

constexpr const char* kPeakFile = "peak/peak.cl";
constexpr int kFmaIterations = 4096;

void require_kernels(Device& device) {
  if (!device.info().can_run_kernels) {
    throw Unsupported(fmt::format("{} ({}) cannot run kernels: {}", device.info().id, device.info().name,
                                  device.info().cannot_run_reason));
  }
}

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

LaunchGeometry geometry_1d(size_t items, size_t local) {
  LaunchGeometry g;
  g.dims = 1;
  g.global = {local ? round_up(items, local) : items, 1, 1};
  g.local = {local, 0, 0};
  return g;
}

double median_host_us(int repeats, const std::function<void()>& body) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void say(const std::function<void(const std::string&)>& progress, const std::string& text) {
  if (progress) progress(text);
}

}  // namespace

Ceilings measure_ceilings(Device& device, const CeilingOptions& options) {
  require_kernels(device);
  const DeviceInfo& info = device.info();
  Queue& queue = device.queue();
  Ceilings c;
  c.buffer_bytes = options.buffer_bytes ? options.buffer_bytes
                                        : std::min<size_t>(size_t{1} << 30, info.global_memory_bytes / 8);
  c.buffer_bytes = c.buffer_bytes / 16 * 16;
  const int64_t count4 = static_cast<int64_t>(c.buffer_bytes / 16);
  auto program = device.build({kPeakFile, {{"FMA_ITERATIONS", std::to_string(kFmaIterations)}}, {}});
  const size_t local = info.is_gpu ? 256 : 0;

  say(options.progress, "fill bandwidth");
  auto src = device.allocate(c.buffer_bytes);
  auto dst = device.allocate(c.buffer_bytes);
  auto fill = program->kernel("fill_vec4");
  fill->set_arg(0, src.get());
  fill->set_arg(1, 1.5f);
  fill->set_arg(2, count4);
  const Timing fill_t = measure(queue, [&] { queue.launch(*fill, geometry_1d(static_cast<size_t>(count4), local)); },
                                2, options.repeats);
  c.fill_gbs = static_cast<double>(c.buffer_bytes) / (fill_t.median_ms * 1e6);

  say(options.progress, "copy bandwidth");
  auto copy = program->kernel("copy_vec4");
  copy->set_arg(0, src.get());
  copy->set_arg(1, dst.get());
  copy->set_arg(2, count4);
  // A grid of a few waves with a grid-stride loop: as fast as one item per vector, with fewer blocks.
  const size_t copy_items = info.is_gpu ? std::min<size_t>(static_cast<size_t>(count4),
                                                           static_cast<size_t>(info.compute_units) * 2048 * 4)
                                        : static_cast<size_t>(count4);
  const Timing copy_t =
      measure(queue, [&] { queue.launch(*copy, geometry_1d(copy_items, local)); }, 2, options.repeats);
  c.copy_gbs = 2.0 * static_cast<double>(c.buffer_bytes) / (copy_t.median_ms * 1e6);
  const Timing api_t = measure(queue, [&] { queue.copy(*src, *dst, c.buffer_bytes); }, 2, options.repeats);
  c.copy_api_gbs = 2.0 * static_cast<double>(c.buffer_bytes) / (api_t.median_ms * 1e6);
  // The copy must be right for its time to count.
  std::vector<float> probe(1024);
  queue.read(*dst, probe.data(), probe.size() * sizeof(float), c.buffer_bytes - probe.size() * sizeof(float));
  for (float v : probe)
    if (v != 1.5f) throw BackendError(fmt::format("{}: copy benchmark produced {} instead of 1.5", info.id, v));

  say(options.progress, "FP32 FMA throughput");
  const size_t fma_items = static_cast<size_t>(info.compute_units) * (info.is_gpu ? 2048 * 8 : 1024);
  auto fma_out = device.allocate(fma_items * sizeof(float));
  auto fma = program->kernel("fma_throughput");
  fma->set_arg(0, fma_out.get());
  fma->set_arg(1, 0.999f);
  fma->set_arg(2, 0.001f);
  const Timing fma_t = measure(queue, [&] { queue.launch(*fma, geometry_1d(fma_items, local)); }, 2, options.repeats);
  c.fma_gflops = static_cast<double>(fma_items) * kFmaIterations * 8 * 2 / (fma_t.median_ms * 1e6);

  say(options.progress, "launch latency");
  auto empty = program->kernel("empty_kernel");
  empty->set_arg(0, fma_out.get());
  const LaunchGeometry one = geometry_1d(1, 1);
  queue.launch(*empty, one);
  queue.finish();
  c.launch_latency_us = median_host_us(101, [&] {
    queue.launch(*empty, one);
    queue.finish();
  });
  constexpr int burst = 1000;
  c.launch_rate_us = median_host_us(5, [&] {
                       for (int i = 0; i < burst; ++i) queue.launch(*empty, one);
                       queue.finish();
                     }) / burst;
  return c;
}

namespace {

// Seed 001's baseline: the 2-D loop with compiler optimisations off, as the article measured it.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O0")))
#endif
void fill_cpu_2d_unoptimised(float* table, float value, int64_t size) {
  for (int64_t row = 0; row < size; ++row)
    for (int64_t col = 0; col < size; ++col) table[row * size + col] = value;
}

void fill_cpu_1d(float* table, float value, int64_t count) {
  for (int64_t i = 0; i < count; ++i) table[i] = value;
}

}  // namespace

void check_fill_size(int64_t size) {
  if (size < 1 || size > 46340) {
    throw InvalidArgument(fmt::format("--size={} is invalid: expected 1 to 46340 (the table must stay under 2^31 floats)", size));
  }
}

std::vector<FillRow> run_fill_experiment(Device* device, int64_t size, int repeats,
                                         const std::function<void(const std::string&)>& progress) {
  check_fill_size(size);
  const int64_t count = size * size;
  const double bytes = static_cast<double>(count) * sizeof(float);
  std::vector<FillRow> rows;
  auto add = [&](std::string method, double ms, std::string note = {}) {
    rows.push_back({std::move(method), ms, ms > 0 ? bytes / (ms * 1e6) : 0, 0, std::move(note)});
  };
  std::vector<float> host(static_cast<size_t>(count));
  auto host_ms = [&](const std::function<void()>& body) { return median_host_us(repeats, body) / 1000.0; };

  say(progress, "CPU loops");
  add("CPU 2D loop (sequential, unoptimised)", host_ms([&] { fill_cpu_2d_unoptimised(host.data(), 1.0f, size); }));
  add("CPU 1D loop (optimised, 1 thread)", host_ms([&] { fill_cpu_1d(host.data(), 2.0f, count); }));
  const unsigned threads = hardware_threads();
  add(fmt::format("CPU 1D loop (optimised, {} threads)", threads), host_ms([&] {
        const int64_t chunk = (count + threads - 1) / threads;
        parallel_for(threads, threads, [&](int64_t t) {
          const int64_t begin = t * chunk;
          fill_cpu_1d(host.data() + begin, 3.0f, std::max<int64_t>(0, std::min(chunk, count - begin)));
        });
      }));

  if (device && device->info().can_run_kernels) {
    const DeviceInfo& info = device->info();
    Queue& queue = device->queue();
    auto program = device->build({kPeakFile, {}, {}});
    auto table = device->allocate(static_cast<size_t>(count) * sizeof(float));
    auto time_kernel = [&](Kernel& k, const LaunchGeometry& g) {
      return measure(queue, [&] { queue.launch(k, g); }, 1, repeats).median_ms;
    };
    say(progress, "device 2D kernel");
    auto fill2d = program->kernel("fill_2d");
    fill2d->set_arg(0, table.get());
    fill2d->set_arg(1, 4.0f);
    fill2d->set_arg(2, static_cast<int32_t>(size));
    fill2d->set_arg(3, static_cast<int32_t>(size));
    LaunchGeometry g2;
    g2.dims = 2;
    g2.global = {static_cast<size_t>(size), static_cast<size_t>(size), 1};
    if (info.backend == BackendKind::Cuda) {  // CUDA needs a block shape; 16x16 is the usual first choice
      g2.local = {16, 16, 1};
      g2.global = {round_up(static_cast<size_t>(size), 16), round_up(static_cast<size_t>(size), 16), 1};
    }
    add(fmt::format("{} 2D kernel", info.id), time_kernel(*fill2d, g2));

    auto fill1d = program->kernel("fill_1d");
    fill1d->set_arg(0, table.get());
    fill1d->set_arg(1, 5.0f);
    fill1d->set_arg(2, count);
    say(progress, "device 1D kernel");
    add(fmt::format("{} 1D kernel (runtime work-group size)", info.id),
        time_kernel(*fill1d, geometry_1d(static_cast<size_t>(count), 0)),
        info.backend == BackendKind::Cuda ? "CUDA has no runtime choice: 256 threads per block" : "");
    for (size_t wg : {16, 64, 128, 256, 512, 1024}) {
      const std::string method = fmt::format("{} 1D kernel, work-group {}", info.id, wg);
      if (wg > info.max_work_group_size) {
        add(method, 0, fmt::format("n/a: the device allows at most {}", info.max_work_group_size));
        continue;
      }
      say(progress, method);
      const bool divides = count % static_cast<int64_t>(wg) == 0;
      add(method, time_kernel(*fill1d, geometry_1d(static_cast<size_t>(count), wg)),
          divides ? "" : "global size rounded up to a multiple of the work-group; the kernel bounds-checks");
    }
    say(progress, "device float4 kernel");
    auto fill4 = program->kernel("fill_vec4");
    fill4->set_arg(0, table.get());
    fill4->set_arg(1, 6.0f);
    fill4->set_arg(2, count / 4);
    add(fmt::format("{} 1D float4 kernel", info.id), time_kernel(*fill4, geometry_1d(static_cast<size_t>(count / 4), 0)),
        count % 4 ? fmt::format("covers {} of {} floats (count not a multiple of 4)", count / 4 * 4, count) : "");
    // The result must be right for the time to count: the float4 kernel wrote 6.0 everywhere it covers.
    std::vector<float> probe(static_cast<size_t>(std::min<int64_t>(count / 4 * 4, 4096)));
    queue.read(*table, probe.data(), probe.size() * sizeof(float));
    for (float v : probe)
      if (v != 6.0f) throw BackendError(fmt::format("{}: fill kernel wrote {} instead of 6", info.id, v));
  }
  const double base = rows.front().ms;
  for (auto& r : rows) r.speedup = r.ms > 0 ? base / r.ms : 0;
  return rows;
}

}  // namespace convtune
