// The OpenCL backend on whatever platform is installed (PoCL on CI machines): device listing, transfers,
// kernel builds with -D parameters, the program cache in memory and on disk, timing, and error messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <set>

#include "convtune/backend.h"
#include "convtune/error.h"
#include "src/backend/kernel_sources.h"
#include "src/backend/opencl/opencl_backend.h"
#include "src/backend/opencl/opencl_program_key.h"
#include "src/backend/program_cache.h"
#include "src/core/atomic_file.h"

using namespace convtune;

namespace {

std::filesystem::path fresh_temp_dir(const std::string& purpose) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test_name = test ? std::string(test->test_suite_name()) + "_" + test->name() : "global";
  auto path = std::filesystem::temp_directory_path() /
              ("convtune_opencl_" + purpose + "_" + std::to_string(getpid()) + "_" + test_name);
  std::filesystem::remove_all(path);
  return path;
}

// Sets an environment variable for one scope, restoring what was there before.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The process-wide program cache (used by Registry devices) goes to a temporary directory, never ~/.cache.
class ProcessCacheDirectory : public ::testing::Environment {
 public:
  void SetUp() override {
    path_ = fresh_temp_dir("process_cache");
    setenv("CONVTUNE_CACHE_DIR", path_.c_str(), 1);
  }
  void TearDown() override { std::filesystem::remove_all(path_); }
  static const std::filesystem::path& path() { return path_; }

 private:
  static inline std::filesystem::path path_;
};
[[maybe_unused]] const auto* const process_cache_directory =
    ::testing::AddGlobalTestEnvironment(new ProcessCacheDirectory);

// Inputs are never all zero: a kernel that writes nothing must not pass.
std::vector<float> random_nonzero(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.25f, 4.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (float& f : v) f = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return v;
}

ProgramSource axpy_source(const std::string& scale) { return {"test/axpy.cl", {{"SCALE", scale}}, {}}; }

class OpenCLBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_dir_ = fresh_temp_dir("cache");
    cache_ = std::make_unique<ProgramCache>(cache_dir_);
    backend_ = opencl::make_opencl_backend(*cache_);
    if (!backend_->available()) GTEST_SKIP() << "OpenCL unavailable: " << backend_->unavailable_reason();
    // CONVTUNE_OPENCL_TEST_DEVICE=N picks opencl:N; otherwise a GPU is tested where there is one, being the
    // device that matters most on that machine.
    if (const char* chosen = std::getenv("CONVTUNE_OPENCL_TEST_DEVICE"); chosen && *chosen) {
      device_index_ = std::stoul(chosen);
      ASSERT_LT(device_index_, backend_->device_count()) << "CONVTUNE_OPENCL_TEST_DEVICE=" << chosen;
      device_ = &backend_->device(device_index_);
      ASSERT_TRUE(device_->info().can_run_kernels) << device_->info().cannot_run_reason;
      return;
    }
    for (bool want_gpu : {true, false}) {
      for (size_t i = 0; i < backend_->device_count() && !device_; ++i) {
        const DeviceInfo& info = backend_->device(i).info();
        if (info.can_run_kernels && (info.is_gpu || !want_gpu)) {
          device_ = &backend_->device(i);
          device_index_ = i;
        }
      }
    }
    if (!device_) GTEST_SKIP() << "no OpenCL device can run kernels";
  }
  void TearDown() override {
    backend_.reset();  // before the cache it refers to
    cache_.reset();
    std::filesystem::remove_all(cache_dir_);
  }

  // Runs y = scale * a * x + y on `device` with `program` and returns y; local {0} lets the runtime choose.
  static std::vector<float> run_axpy(Device& device, Program& program, const std::vector<float>& x,
                                     const std::vector<float>& y, float a, size_t local = 0) {
    const size_t n = x.size(), bytes = n * sizeof(float);
    auto x_buffer = device.allocate(bytes), y_buffer = device.allocate(bytes);
    Queue& queue = device.queue();
    queue.write(*x_buffer, x.data(), bytes);
    queue.write(*y_buffer, y.data(), bytes);
    auto kernel = program.kernel("axpy");
    kernel->set_arg(0, x_buffer.get());
    kernel->set_arg(1, y_buffer.get());
    kernel->set_arg(2, a);
    kernel->set_arg(3, static_cast<int32_t>(n));
    LaunchGeometry geometry;
    geometry.global[0] = local ? (n + local - 1) / local * local : n;
    geometry.local[0] = local;
    queue.launch(*kernel, geometry);
    std::vector<float> out(n);
    queue.read(*y_buffer, out.data(), bytes);
    return out;
  }

  static void expect_axpy(const std::vector<float>& out, float scale, float a, const std::vector<float>& x,
                          const std::vector<float>& y) {
    ASSERT_EQ(out.size(), x.size());
    int mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float expected = scale * a * x[i] + y[i];
      // The device may fuse the multiply-add, so allow a few ulps.
      if (std::abs(out[i] - expected) > 1e-5f * std::max(1.0f, std::abs(expected)) && mismatches++ < 5) {
        ADD_FAILURE() << "y[" << i << "] = " << out[i] << ", expected " << expected;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }

  std::filesystem::path cache_dir_;
  std::unique_ptr<ProgramCache> cache_;
  std::unique_ptr<Backend> backend_;
  Device* device_ = nullptr;
  size_t device_index_ = 0;
};

}  // namespace

TEST_F(OpenCLBackendTest, EnumeratesDevicesWithTheirProperties) {
  ASSERT_GE(backend_->device_count(), 1u);
  EXPECT_EQ(backend_->kind(), BackendKind::OpenCL);
  std::set<std::string> ids;
  for (size_t i = 0; i < backend_->device_count(); ++i) {
    const DeviceInfo& info = backend_->device(i).info();
    SCOPED_TRACE(info.id + " " + info.name);
    EXPECT_EQ(info.backend, BackendKind::OpenCL);
    EXPECT_EQ(info.index, static_cast<int>(i));
    EXPECT_EQ(info.id, "opencl:" + std::to_string(i));
    EXPECT_TRUE(ids.insert(info.id).second);
    EXPECT_FALSE(info.name.empty());
    EXPECT_FALSE(info.vendor.empty());
    EXPECT_FALSE(info.driver_version.empty());
    EXPECT_FALSE(info.compiler.empty());
    EXPECT_FALSE(info.architecture.empty());
    EXPECT_GT(info.compute_units, 0);
    EXPECT_GT(info.global_memory_bytes, 0u);
    EXPECT_GT(info.local_memory_bytes, 0u);
    EXPECT_GT(info.max_work_group_size, 0u);
    EXPECT_EQ(info.can_run_kernels, info.cannot_run_reason.empty());
    EXPECT_EQ(info.fingerprint().rfind("opencl|", 0), 0u);
  }
  EXPECT_THROW(backend_->device(backend_->device_count()), InvalidArgument);

  // The registry sees the same devices under the same ids.
  Device& listed = Registry::instance().find("opencl:" + std::to_string(device_index_));
  EXPECT_EQ(listed.info().name, device_->info().name);
  EXPECT_EQ(listed.info().fingerprint(), device_->info().fingerprint());
}

TEST_F(OpenCLBackendTest, WriteReadRoundTrip) {
  const auto data = random_nonzero(1031, 1);
  const size_t bytes = data.size() * sizeof(float);
  auto buffer = device_->allocate(bytes);
  EXPECT_EQ(buffer->bytes(), bytes);
  Queue& queue = device_->queue();
  queue.write(*buffer, data.data(), bytes);
  std::vector<float> back(data.size(), 0.0f);
  queue.read(*buffer, back.data(), bytes);
  EXPECT_EQ(back, data);

  // Offsets address bytes within the buffer.
  const float patch[2] = {123.5f, -7.25f};
  queue.write(*buffer, patch, sizeof(patch), 10 * sizeof(float));
  float two[2] = {};
  queue.read(*buffer, two, sizeof(two), 10 * sizeof(float));
  EXPECT_EQ(two[0], 123.5f);
  EXPECT_EQ(two[1], -7.25f);
  queue.read(*buffer, back.data(), bytes);
  EXPECT_EQ(back[9], data[9]);
  EXPECT_EQ(back[12], data[12]);

  EXPECT_THROW(queue.write(*buffer, data.data(), bytes, sizeof(float)), BackendError);
  EXPECT_THROW(queue.read(*buffer, back.data(), bytes + 1), BackendError);
}

TEST_F(OpenCLBackendTest, CopiesBetweenBuffers) {
  const auto data = random_nonzero(4099, 2);
  const size_t bytes = data.size() * sizeof(float);
  auto source = device_->allocate(bytes), destination = device_->allocate(bytes + 64);
  Queue& queue = device_->queue();
  queue.write(*source, data.data(), bytes);
  queue.copy(*source, *destination, bytes);
  std::vector<float> back(data.size(), 0.0f);
  queue.read(*destination, back.data(), bytes);
  EXPECT_EQ(back, data);
  EXPECT_THROW(queue.copy(*destination, *source, bytes + 64), BackendError);
}

TEST_F(OpenCLBackendTest, BuffersFromAnotherBackendAreRejected) {
  Device& cpu = Registry::instance().find("cpu");
  auto host = cpu.allocate(16);
  float values[4] = {1, 2, 3, 4};
  EXPECT_THROW(device_->queue().write(*host, values, sizeof(values)), InvalidArgument);
  auto program = device_->build(axpy_source("1.0f"));
  auto kernel = program->kernel("axpy");
  EXPECT_THROW(kernel->set_arg(0, host.get()), InvalidArgument);
}

TEST_F(OpenCLBackendTest, AxpyKernelUsesItsDefine) {
  const auto x = random_nonzero(1000, 3), y = random_nonzero(1000, 4);
  auto program = device_->build(axpy_source("3.0f"));
  expect_axpy(run_axpy(*device_, *program, x, y, 0.75f), 3.0f, 0.75f, x, y);
  // An explicit work-group shape, with the global size rounded up past n.
  expect_axpy(run_axpy(*device_, *program, x, y, -1.5f, 64), 3.0f, -1.5f, x, y);
}

TEST_F(OpenCLBackendTest, RawArgumentsPassBytesByValue) {
  const auto x = random_nonzero(300, 10), y = random_nonzero(300, 11);
  const size_t bytes = x.size() * sizeof(float);
  auto program = device_->build(axpy_source("1.0f"));
  auto kernel = program->kernel("axpy");
  auto x_buffer = device_->allocate(bytes), y_buffer = device_->allocate(bytes);
  Queue& queue = device_->queue();
  queue.write(*x_buffer, x.data(), bytes);
  queue.write(*y_buffer, y.data(), bytes);
  const float a = -2.5f;
  RawArg raw;
  raw.bytes.resize(sizeof(a));
  std::memcpy(raw.bytes.data(), &a, sizeof(a));
  kernel->set_arg(0, x_buffer.get());
  kernel->set_arg(1, y_buffer.get());
  kernel->set_arg(2, raw);
  kernel->set_arg(3, static_cast<int32_t>(x.size()));
  LaunchGeometry geometry;
  geometry.global[0] = x.size();
  queue.launch(*kernel, geometry);
  std::vector<float> out(x.size());
  queue.read(*y_buffer, out.data(), bytes);
  expect_axpy(out, 1.0f, a, x, y);
  // A scalar of the wrong width is refused with the kernel and argument named.
  try {
    kernel->set_arg(2, static_cast<int64_t>(1));
    FAIL() << "an 8-byte argument for a float parameter was accepted";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 2 of kernel axpy"), std::string::npos) << e.what();
  }
}

TEST_F(OpenCLBackendTest, OversizedWorkGroupNamesTheKernelAndGeometry) {
  auto program = device_->build(axpy_source("1.0f"));
  auto kernel = program->kernel("axpy");
  auto buffer = device_->allocate(sizeof(float));
  kernel->set_arg(0, buffer.get());
  kernel->set_arg(1, buffer.get());
  kernel->set_arg(2, 1.0f);
  kernel->set_arg(3, 1);
  LaunchGeometry geometry;
  geometry.local[0] = device_->info().max_work_group_size * 2;
  geometry.global[0] = geometry.local[0];
  try {
    device_->queue().launch(*kernel, geometry);
    FAIL() << "a work-group larger than the device maximum was accepted";
  } catch (const BackendError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("clEnqueueNDRangeKernel"), std::string::npos) << message;
    EXPECT_NE(message.find("kernel axpy of test/axpy.cl"), std::string::npos) << message;
    EXPECT_NE(message.find("local " + std::to_string(geometry.local[0])), std::string::npos) << message;
  }
}

TEST_F(OpenCLBackendTest, UnknownKernelNameListsTheProgramsKernels) {
  auto program = device_->build(axpy_source("1.0f"));
  try {
    program->kernel("no_such_kernel");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("axpy"), std::string::npos) << e.what();
  }
}

TEST_F(OpenCLBackendTest, SecondBuildComesFromTheCache) {
  auto first = device_->build(axpy_source("2.0f"));
  EXPECT_FALSE(first->from_cache());
  auto second = device_->build(axpy_source("2.0f"));
  EXPECT_TRUE(second->from_cache());
  EXPECT_EQ(cache_->compiles(), 1);
  const auto x = random_nonzero(257, 5), y = random_nonzero(257, 6);
  expect_axpy(run_axpy(*device_, *second, x, y, 1.25f), 2.0f, 1.25f, x, y);

  // Another parameter value is another program.
  EXPECT_FALSE(device_->build(axpy_source("4.0f"))->from_cache());
  EXPECT_EQ(cache_->compiles(), 2);
}

TEST_F(OpenCLBackendTest, FreshCacheOnTheSameDirectoryLoadsTheBinaryFromDisk) {
  EXPECT_FALSE(device_->build(axpy_source("2.5f"))->from_cache());
  ASSERT_EQ(cache_->compiles(), 1);

  // A new cache and backend on the same directory: what a second process sees.
  ProgramCache second_cache(cache_dir_);
  auto second_backend = opencl::make_opencl_backend(second_cache);
  Device& device = second_backend->device(device_index_);
  auto program = device.build(axpy_source("2.5f"));
  EXPECT_TRUE(program->from_cache());
  EXPECT_EQ(second_cache.disk_hits(), 1);
  EXPECT_EQ(second_cache.compiles(), 0);
  // The program made from the cached binary computes the right thing.
  const auto x = random_nonzero(777, 7), y = random_nonzero(777, 8);
  expect_axpy(run_axpy(device, *program, x, y, -0.5f), 2.5f, -0.5f, x, y);
}

TEST_F(OpenCLBackendTest, BinaryTheDriverRejectsIsRebuiltFromSource) {
  // A well-formed cache entry whose payload is not a binary this driver accepts (say, written by another
  // driver build that reported the same version).
  const ProgramSource source = axpy_source("1.5f");
  const ProgramCacheKey key = opencl::opencl_program_key(device_->info(), source, load_kernel_source(source.file));
  std::vector<std::byte> garbage(256);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<std::byte>(i * 37 + 11);
  ProgramCache(cache_dir_).get_or_build(key, [&] { return garbage; });

  testing::internal::CaptureStderr();
  auto program = device_->build(source);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(program->from_cache());
  EXPECT_EQ(cache_->disk_hits(), 1);
  EXPECT_NE(said.find("rejected the cached binary of test/axpy.cl"), std::string::npos) << said;
  const auto x = random_nonzero(100, 12), y = random_nonzero(100, 13);
  expect_axpy(run_axpy(*device_, *program, x, y, 2.0f), 1.5f, 2.0f, x, y);
}

TEST_F(OpenCLBackendTest, RegistryDevicesUseTheProcessCacheDirectory) {
  ASSERT_FALSE(ProcessCacheDirectory::path().empty());
  EXPECT_EQ(ProgramCache::instance().directory(), ProcessCacheDirectory::path());
  Device& device = Registry::instance().find("opencl:" + std::to_string(device_index_));
  const int compiles_before = ProgramCache::instance().compiles();
  auto first = device.build(axpy_source("6.0f"));
  auto second = device.build(axpy_source("6.0f"));
  EXPECT_TRUE(second->from_cache());
  EXPECT_LE(ProgramCache::instance().compiles(), compiles_before + 1);
  bool stored = false;
  for (const auto& entry : std::filesystem::directory_iterator(ProcessCacheDirectory::path()))
    stored = stored || entry.path().extension() == ".bin";
  EXPECT_TRUE(stored) << "no .bin entry in " << ProcessCacheDirectory::path();
}

TEST_F(OpenCLBackendTest, CompileErrorNamesFileParametersAndCompilerLog) {
  const auto kernel_dir = fresh_temp_dir("kernels");
  std::filesystem::create_directories(kernel_dir / "test");
  write_file_atomic(kernel_dir / "test/broken_syntax.cl",
                    "__kernel void broken(__global float* y) {\n"
                    "  y[0] = SCALE * undeclared_identifier_in_test;\n"
                    "  y[1] = (1.0f + ;\n"
                    "}\n");
  ScopedEnv kernels("CONVTUNE_KERNEL_DIR", kernel_dir.string());
  std::string message;
  try {
    device_->build({"test/broken_syntax.cl", {{"SCALE", "3"}}, {}});
  } catch (const BackendError& e) {
    message = e.what();
  }
  std::filesystem::remove_all(kernel_dir);
  ASSERT_FALSE(message.empty()) << "a kernel with a syntax error built";
  EXPECT_NE(message.find("test/broken_syntax.cl"), std::string::npos) << message;
  EXPECT_NE(message.find("-DSCALE=3"), std::string::npos) << message;
  EXPECT_NE(message.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << message;
  EXPECT_NE(message.find("compiler log"), std::string::npos) << message;
  // The compiler's own words, naming the offending identifier.
  EXPECT_NE(message.find("undeclared_identifier_in_test"), std::string::npos) << message;
  EXPECT_EQ(cache_->compiles(), 0);  // nothing was stored for the failed build
}

TEST_F(OpenCLBackendTest, ElapsedMsMeasuresEnqueuedWork) {
  const size_t n = size_t(1) << 20;
  const auto x = random_nonzero(n, 9);
  auto x_buffer = device_->allocate(n * sizeof(float)), y_buffer = device_->allocate(n * sizeof(float));
  Queue& queue = device_->queue();
  queue.write(*x_buffer, x.data(), n * sizeof(float));
  queue.write(*y_buffer, x.data(), n * sizeof(float));
  auto program = device_->build(axpy_source("1.0f"));
  auto kernel = program->kernel("axpy");
  kernel->set_arg(0, x_buffer.get());
  kernel->set_arg(1, y_buffer.get());
  kernel->set_arg(2, 0.5f);
  kernel->set_arg(3, static_cast<int32_t>(n));
  LaunchGeometry geometry;
  geometry.global[0] = n;
  const double ms = queue.elapsed_ms([&] {
    for (int i = 0; i < 3; ++i) queue.launch(*kernel, geometry);
  });
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 60'000.0);
  const Timing timing = measure(queue, [&] { queue.launch(*kernel, geometry); }, 1, 3);
  EXPECT_GT(timing.min_ms, 0.0);
  EXPECT_LE(timing.min_ms, timing.median_ms);

  // Transfers are timed too: a write, a launch and a read in one measurement.
  std::vector<float> back(n);
  EXPECT_GT(queue.elapsed_ms([&] {
    queue.write(*x_buffer, x.data(), n * sizeof(float));
    queue.launch(*kernel, geometry);
    queue.read(*y_buffer, back.data(), n * sizeof(float));
  }),
            0.0);

  EXPECT_EQ(queue.elapsed_ms([] {}), 0.0);
  // A failing `work` leaves the queue usable for the next measurement.
  EXPECT_THROW(queue.elapsed_ms([&] {
    queue.launch(*kernel, geometry);
    throw std::runtime_error("work failed");
  }),
               std::runtime_error);
  EXPECT_GT(queue.elapsed_ms([&] { queue.launch(*kernel, geometry); }), 0.0);
}

TEST_F(OpenCLBackendTest, AbsurdAllocationThrowsWithTheByteCount) {
  const size_t absurd = size_t(1) << 60;
  try {
    device_->allocate(absurd);
    FAIL() << "allocating 2^60 bytes succeeded";
  } catch (const BackendError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(std::to_string(absurd)), std::string::npos) << message;
    EXPECT_NE(message.find("MiB"), std::string::npos) << message;
    EXPECT_NE(message.find(device_->info().id), std::string::npos) << message;
  }
  // Zero bytes is a valid, empty buffer.
  EXPECT_EQ(device_->allocate(0)->bytes(), 0u);
}
