// CUDA backend tests: NVRTC compiles every embedded .cu kernel (no GPU needed), the backend explains why it is
// unavailable, and on a GPU kernels run, come from the cache, are timed and fail with actionable messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "src/backend/cuda/cuda_backend.h"
#include "src/backend/cuda/cuda_launch_dims.h"
#include "src/backend/cuda/nvrtc_compiler.h"
#include "src/backend/kernel_sources.h"
#include "src/backend/program_cache.h"

using namespace convtune;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool starts_with_elf_magic(const std::vector<std::byte>& binary) {
  return binary.size() >= 4 && binary[0] == std::byte{0x7f} && binary[1] == std::byte{'E'} &&
         binary[2] == std::byte{'L'} && binary[3] == std::byte{'F'};
}

// The message of the BackendError that `action` throws; fails the test when it throws nothing.
template <typename Action>
std::string backend_error_of(Action&& action) {
  try {
    action();
  } catch (const BackendError& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a BackendError";
  return {};
}

// ---- NVRTC alone: runs on machines without a GPU, and must not skip there ----

TEST(CudaNvrtc, CompilesEveryEmbeddedCudaKernelToAnSm90Cubin) {
  int compiled = 0;
  for (const std::string& file : embedded_kernel_files()) {
    if (!file.ends_with(".cu")) continue;
    // The wgmma families' sources need their shapes and parameters as defines (and sm_90a):
    // tensor_core_nvrtc_test builds them the way their recipes do (fft/fft_wgmma.cu sits beside fft_tc.cl).
    if (file.starts_with("tensor_core/") || file.ends_with("_wgmma.cu")) continue;
    SCOPED_TRACE(file);
    try {
      const auto cubin =
          cuda::compile_cuda_to_cubin(load_kernel_source(file), cuda::cuda_compile_options("sm_90"), file);
      EXPECT_TRUE(starts_with_elf_magic(cubin)) << file << " did not compile to an ELF cubin";
      ++compiled;
    } catch (const Error& error) {
      ADD_FAILURE() << error.what();
    }
  }
  EXPECT_GE(compiled, 1) << "no .cu kernel is embedded (expected at least test/axpy.cu)";
}

TEST(CudaNvrtc, SyntaxErrorThrowsWithTheCompilerLog) {
  const std::string source = "extern \"C\" __global__ void broken(float* p) {\n  p[0] = 1.0f\n}\n";
  const std::string message = backend_error_of(
      [&] { cuda::compile_cuda_to_cubin(source, cuda::cuda_compile_options("sm_90"), "broken.cu"); });
  EXPECT_TRUE(contains(message, "nvrtcCompileProgram")) << message;
  EXPECT_TRUE(contains(message, "broken.cu(")) << "the log's file(line) position is missing: " << message;
  EXPECT_TRUE(contains(message, "error")) << message;
  EXPECT_TRUE(contains(message, "--gpu-architecture=sm_90")) << "the options are missing: " << message;
}

TEST(CudaNvrtc, DefinesReachTheSource) {
  const std::string source =
      "#ifndef WIDTH\n#error WIDTH must be defined\n#endif\n"
      "extern \"C\" __global__ void fill(float* p) { p[threadIdx.x] = WIDTH; }\n";
  auto options = cuda::cuda_compile_options("sm_90");
  const std::string message =
      backend_error_of([&] { cuda::compile_cuda_to_cubin(source, options, "needs_width.cu"); });
  EXPECT_TRUE(contains(message, "WIDTH must be defined")) << message;
  options.push_back("-DWIDTH=4");
  EXPECT_TRUE(starts_with_elf_magic(cuda::compile_cuda_to_cubin(source, options, "needs_width.cu")));
}

TEST(CudaNvrtc, VirtualArchitectureIsRejectedBecauseItGivesNoCubin) {
  const std::string message = backend_error_of([] {
    cuda::compile_cuda_to_cubin("extern \"C\" __global__ void k() {}\n", {"--gpu-architecture=compute_90"}, "k.cu");
  });
  EXPECT_TRUE(contains(message, "sm_XY")) << message;
}

// ---- Launch geometry: pure conversion, no GPU needed ----

TEST(CudaLaunchDims, AllZeroLocalUsesTheDefaultBlockAndRoundsTheGridUp) {
  LaunchGeometry geometry;
  geometry.dims = 2;
  geometry.global = {1000, 3, 1};
  const auto dims = cuda::cuda_launch_dims(geometry, "k");
  EXPECT_EQ(dims.block, (std::array<unsigned, 3>{cuda::kDefaultBlockThreads, 1, 1}));
  EXPECT_EQ(dims.grid, (std::array<unsigned, 3>{4, 3, 1}));
}

TEST(CudaLaunchDims, GridIsGlobalOverLocalAndAxesPastDimsAreOne) {
  LaunchGeometry geometry;
  geometry.dims = 2;
  geometry.global = {64, 32, 99};
  geometry.local = {16, 8, 0};
  const auto dims = cuda::cuda_launch_dims(geometry, "k");
  EXPECT_EQ(dims.block, (std::array<unsigned, 3>{16, 8, 1}));
  EXPECT_EQ(dims.grid, (std::array<unsigned, 3>{4, 4, 1}));
}

TEST(CudaLaunchDims, BadGeometryNamesTheKernelAndTheProblem) {
  LaunchGeometry not_multiple;
  not_multiple.global = {1000, 1, 1};
  not_multiple.local = {256, 0, 0};
  std::string message = backend_error_of([&] { cuda::cuda_launch_dims(not_multiple, "axpy"); });
  EXPECT_TRUE(contains(message, "axpy") && contains(message, "not a multiple")) << message;

  LaunchGeometry partly_zero;
  partly_zero.dims = 2;
  partly_zero.global = {64, 64, 1};
  partly_zero.local = {16, 0, 0};
  message = backend_error_of([&] { cuda::cuda_launch_dims(partly_zero, "k"); });
  EXPECT_TRUE(contains(message, "zero on some axes")) << message;

  LaunchGeometry too_many_threads;
  too_many_threads.dims = 2;
  too_many_threads.global = {64, 64, 1};
  too_many_threads.local = {64, 32, 0};
  message = backend_error_of([&] { cuda::cuda_launch_dims(too_many_threads, "k"); });
  EXPECT_TRUE(contains(message, "2048 threads per block")) << message;

  LaunchGeometry no_dims;
  no_dims.dims = 0;
  message = backend_error_of([&] { cuda::cuda_launch_dims(no_dims, "k"); });
  EXPECT_TRUE(contains(message, "dims is 0")) << message;
}

// ---- The backend without a usable driver ----

TEST(CudaBackend, MissingDriverLibraryGivesTheReason) {
  const auto backend = cuda::make_cuda_backend("libconvtune-no-such-driver.so.1");
  EXPECT_EQ(backend->kind(), BackendKind::Cuda);
  EXPECT_FALSE(backend->available());
  EXPECT_EQ(backend->unavailable_reason(), "libconvtune-no-such-driver.so.1 not found: no NVIDIA driver on this machine");
  EXPECT_EQ(backend->device_count(), 0u);
  EXPECT_THROW(backend->device(0), InvalidArgument);
}

TEST(CudaBackend, DefaultBackendEitherListsDevicesOrSaysWhyNot) {
  const auto backend = cuda::make_cuda_backend();
  if (!backend->available()) {
    EXPECT_FALSE(backend->unavailable_reason().empty());
    EXPECT_EQ(backend->device_count(), 0u);
    std::printf("CUDA unavailable here: %s\n", backend->unavailable_reason().c_str());
    return;
  }
  ASSERT_GT(backend->device_count(), 0u);
  for (size_t i = 0; i < backend->device_count(); ++i) {
    const DeviceInfo& info = backend->device(i).info();
    EXPECT_EQ(info.id, "cuda:" + std::to_string(i));
    EXPECT_EQ(info.vendor, "NVIDIA");
    EXPECT_TRUE(info.architecture.starts_with("sm_")) << info.architecture;
    EXPECT_TRUE(info.is_gpu);
    EXPECT_GT(info.compute_units, 0);
    EXPECT_GT(info.clock_mhz, 0);
    EXPECT_GT(info.global_memory_bytes, 0u);
    EXPECT_GE(info.local_memory_bytes, 48u * 1024);
    EXPECT_GE(info.max_work_group_size, 1024u);
    EXPECT_TRUE(contains(info.driver_version, ".")) << info.driver_version;
    if (info.can_run_kernels) EXPECT_TRUE(info.compiler.starts_with("NVRTC ")) << info.compiler;
    else EXPECT_FALSE(info.cannot_run_reason.empty());
  }
}

// Runs in a child process: once a process has loaded the stub, dlopen("libcuda.so.1") would return the stub
// too (same soname), and every later CUDA test in it would lose the real driver.
TEST(CudaBackendDeathTest, StubDriverNamesTheCuInitError) {
  // The build's toolkit first, then the usual install location (the binary may run where it was not built).
  std::filesystem::path stub;
  for (const char* candidate : {CONVTUNE_CUDA_STUB_LIBRARY, "/usr/local/cuda/lib64/stubs/libcuda.so"}) {
    if (std::filesystem::exists(candidate)) {
      stub = candidate;
      break;
    }
  }
  if (stub.empty()) {
    GTEST_SKIP() << "no CUDA toolkit stub libcuda at " << CONVTUNE_CUDA_STUB_LIBRARY
                 << " or /usr/local/cuda/lib64/stubs/libcuda.so";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const auto backend = cuda::make_cuda_backend(stub.string());
        std::fprintf(stderr, "%s\n", backend->unavailable_reason().c_str());
        std::exit(backend->available() ? 1 : 0);
      },
      testing::ExitedWithCode(0), "cuInit failed: CUDA_ERROR_STUB_LIBRARY");
}

// ---- On a GPU ----

class CudaGpuTest : public testing::Test {
 protected:
  void SetUp() override {
    Backend* backend = Registry::instance().backend(BackendKind::Cuda);
    if (!backend) GTEST_SKIP() << "the CUDA backend is not in the registry";
    if (!backend->available()) GTEST_SKIP() << "no CUDA device: " << backend->unavailable_reason();
    device_ = &backend->device(0);
    if (!device_->info().can_run_kernels) GTEST_SKIP() << device_->info().cannot_run_reason;
  }

  std::vector<float> random_floats(size_t count, unsigned seed) {
    std::mt19937 generator(seed);
    std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
    std::vector<float> values(count);
    for (float& v : values) v = distribution(generator);
    return values;
  }

  std::unique_ptr<Buffer> upload(const std::vector<float>& values) {
    auto buffer = device_->allocate(values.size() * sizeof(float));
    device_->queue().write(*buffer, values.data(), values.size() * sizeof(float));
    return buffer;
  }

  std::vector<float> download(const Buffer& buffer, size_t count) {
    std::vector<float> values(count);
    device_->queue().read(buffer, values.data(), count * sizeof(float));
    return values;
  }

  Device* device_ = nullptr;
};

TEST_F(CudaGpuTest, AxpyMatchesTheHost) {
  // Not a multiple of the default 256-thread block, so the rounded-up grid's extra threads must do nothing.
  const int n = 100003;
  const float alpha = 1.5f;
  const auto x = random_floats(n, 1), y = random_floats(n, 2);
  auto x_buffer = upload(x), y_buffer = upload(y);
  auto kernel = device_->build({"test/axpy.cu", {}, {}})->kernel("axpy");
  kernel->set_arg(0, int32_t{n});
  kernel->set_arg(1, alpha);
  kernel->set_arg(2, x_buffer.get());
  kernel->set_arg(3, y_buffer.get());
  LaunchGeometry default_local;
  default_local.global = {static_cast<size_t>(n), 1, 1};
  device_->queue().launch(*kernel, default_local);
  std::vector<float> expected(n);
  for (int i = 0; i < n; ++i) expected[i] = alpha * x[i] + y[i];
  auto tolerance = [](float v) { return 1e-6f * std::max(1.0f, std::abs(v)); };  // fma or not
  auto result = download(*y_buffer, n);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(result[i], expected[i], tolerance(expected[i])) << "element " << i;

  // An explicit block over the first 8192 elements: those update again, the rest must stay as they were.
  const int head = 128 * 64;
  kernel->set_arg(0, int32_t{head});
  LaunchGeometry explicit_local;
  explicit_local.global = {static_cast<size_t>(head), 1, 1};
  explicit_local.local = {128, 1, 1};
  device_->queue().launch(*kernel, explicit_local);
  result = download(*y_buffer, n);
  for (int i = 0; i < n; ++i) {
    const float want = i < head ? alpha * x[i] + expected[i] : expected[i];
    ASSERT_NEAR(result[i], want, tolerance(want)) << "element " << i;
  }
}

TEST_F(CudaGpuTest, SecondBuildComesFromTheCache) {
  auto first = device_->build({"test/axpy.cu", {}, {}});
  const int compiles = ProgramCache::instance().compiles();
  auto second = device_->build({"test/axpy.cu", {}, {}});
  EXPECT_TRUE(second->from_cache());
  EXPECT_EQ(ProgramCache::instance().compiles(), compiles);
  EXPECT_NO_THROW(second->kernel("axpy"));
}

TEST_F(CudaGpuTest, ElapsedTimeOfAKernelIsPositive) {
  const int n = 1 << 24;
  auto x_buffer = device_->allocate(n * sizeof(float)), y_buffer = device_->allocate(n * sizeof(float));
  auto kernel = device_->build({"test/axpy.cu", {}, {}})->kernel("axpy");
  kernel->set_arg(0, int32_t{n});
  kernel->set_arg(1, 2.0f);
  kernel->set_arg(2, x_buffer.get());
  kernel->set_arg(3, y_buffer.get());
  LaunchGeometry geometry;
  geometry.global = {static_cast<size_t>(n), 1, 1};
  geometry.local = {256, 1, 1};
  const double ms = device_->queue().elapsed_ms([&] { device_->queue().launch(*kernel, geometry); });
  EXPECT_GT(ms, 0.0);
  const Timing timing = measure(device_->queue(), [&] { device_->queue().launch(*kernel, geometry); }, 1, 5);
  EXPECT_GT(timing.median_ms, 0.0);
}

TEST_F(CudaGpuTest, AbsurdAllocationNamesTheBytesAndFreeMemory) {
  const size_t absurd = size_t{1} << 50;  // 1 PiB
  const std::string message = backend_error_of([&] { device_->allocate(absurd); });
  EXPECT_TRUE(contains(message, std::to_string(absurd))) << message;
  EXPECT_TRUE(contains(message, "free")) << message;
  EXPECT_TRUE(contains(message, "cuMemAlloc")) << message;
}

TEST_F(CudaGpuTest, WriteCopyReadRoundTripAndRangeChecks) {
  const auto values = random_floats(1000, 3);
  auto source = upload(values);
  auto destination = device_->allocate(values.size() * sizeof(float));
  device_->queue().copy(*source, *destination, values.size() * sizeof(float));
  EXPECT_EQ(download(*destination, values.size()), values);
  std::vector<float> tail(10);
  device_->queue().read(*destination, tail.data(), 10 * sizeof(float), 990 * sizeof(float));
  EXPECT_EQ(tail, std::vector<float>(values.end() - 10, values.end()));
  const std::string message =
      backend_error_of([&] { device_->queue().read(*destination, tail.data(), 10 * sizeof(float), 991 * sizeof(float)); });
  EXPECT_TRUE(contains(message, "overruns")) << message;
}

TEST_F(CudaGpuTest, DynamicSharedMemoryBeyondTheDefaultIsOptedInto) {
  const size_t shared_bytes = 64 * 1024;  // above the 48 KiB default, below the opt-in maximum of sm_70+
  const int count = static_cast<int>(shared_bytes / sizeof(float));
  const auto input = random_floats(count, 4);
  auto input_buffer = upload(input);
  auto output_buffer = device_->allocate(shared_bytes);
  auto kernel = device_->build({"test/dynamic_shared.cu", {}, {}})->kernel("reverse_through_shared");
  kernel->set_arg(0, input_buffer.get());
  kernel->set_arg(1, output_buffer.get());
  kernel->set_arg(2, int32_t{count});
  LaunchGeometry geometry;
  geometry.global = {1024, 1, 1};
  geometry.local = {1024, 1, 1};
  geometry.dynamic_local_bytes = shared_bytes;
  device_->queue().launch(*kernel, geometry);
  const auto output = download(*output_buffer, count);
  for (int i = 0; i < count; ++i) ASSERT_EQ(output[i], input[count - 1 - i]) << "element " << i;

  geometry.dynamic_local_bytes = 1024 * 1024;  // more than any GPU's shared memory per block
  const std::string message = backend_error_of([&] { device_->queue().launch(*kernel, geometry); });
  EXPECT_TRUE(contains(message, "reverse_through_shared") && contains(message, "shared memory")) << message;
}

TEST_F(CudaGpuTest, ArgumentMistakesAreReportedBeforeTheLaunch) {
  auto kernel = device_->build({"test/axpy.cu", {}, {}})->kernel("axpy");
  // Arguments are checked only where the driver reports the kernel's signature (CUDA 12.4 and later); without
  // it a missing argument cannot be detected, and launching would fault, so the test stops there.
  try {
    kernel->set_arg(0, int64_t{1});
    GTEST_SKIP() << "this driver does not report kernel signatures (cuFuncGetParamInfo)";
  } catch (const BackendError& error) {
    EXPECT_TRUE(contains(error.what(), "argument 0 of kernel axpy is 4 bytes")) << error.what();
  }
  std::string message = backend_error_of([&] { kernel->set_arg(4, int32_t{0}); });
  EXPECT_TRUE(contains(message, "takes 4 arguments")) << message;

  kernel->set_arg(0, int32_t{1});
  kernel->set_arg(1, 1.0f);
  kernel->set_arg(2, static_cast<const Buffer*>(nullptr));
  message = backend_error_of([&] { device_->queue().launch(*kernel, LaunchGeometry{}); });
  EXPECT_TRUE(contains(message, "argument 3 was never set")) << message;
}

TEST_F(CudaGpuTest, UnknownKernelNameSaysHowToDeclareIt) {
  auto program = device_->build({"test/axpy.cu", {}, {}});
  const std::string message = backend_error_of([&] { program->kernel("no_such_kernel"); });
  EXPECT_TRUE(contains(message, "no_such_kernel") && contains(message, "extern \"C\"")) << message;
}

TEST_F(CudaGpuTest, CompileFailureNamesTheFileTheDefinesAndTheLog) {
  const auto directory = std::filesystem::temp_directory_path() / "convtune_cuda_broken_kernel";
  std::filesystem::create_directories(directory);
  std::ofstream(directory / "broken.cu") << "extern \"C\" __global__ void broken(float* p) {\n  p[0] = TILE\n}\n";
  setenv("CONVTUNE_KERNEL_DIR", directory.c_str(), 1);
  const std::string message = backend_error_of([&] { device_->build({"broken.cu", {{"TILE", "4"}}, {}}); });
  unsetenv("CONVTUNE_KERNEL_DIR");
  std::filesystem::remove_all(directory);
  EXPECT_TRUE(contains(message, "broken.cu -DTILE=4")) << message;
  EXPECT_TRUE(contains(message, "broken.cu(")) << "the compiler log is missing: " << message;
  EXPECT_TRUE(contains(message, device_->info().id)) << message;
}

}  // namespace
