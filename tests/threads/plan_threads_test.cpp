// One plan called from several threads at once, on the CPU backend and on the first OpenCL device (PoCL): every
// output compared element by element (bit for bit) with what a single-threaded run of the same plan gave for the
// same inputs. Also the compute() helper's cached plans, a plan's copies, a plan with the caller's workspace, and
// timing on one queue from two threads.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "convtune/convtune.h"
#include "convtune/rounding.h"
#include "src/harness/workload.h"
#include "tests/support/opencl_device.h"

#ifdef CONVTUNE_WITH_OPENCL
#include "src/backend/opencl/opencl_loader.h"
#include "src/backend/opencl/opencl_queue.h"
#endif

using namespace convtune;

namespace {

// Threads and calls per thread: 8 x 25 = 200 concurrent runs per plan, each checked (ctest runs the binary once;
// scripts/thread_tests.sh repeats it).
constexpr int kThreads = 8;
constexpr int kCalls = 25;

// One call's operands as bytes of the problem's element type: the inputs random, the written operand random too
// (a GEMM that accumulates reads it).
struct Call {
  std::array<std::vector<std::byte>, Problem::kOperands> operands;
  std::vector<std::byte> expected;  // the written operand after a single-threaded run
};

std::vector<std::byte> random_bytes(const Problem& problem, int operand, uint64_t seed) {
  const int64_t count = problem.operand(operand).elements;
  const std::vector<float> values = harness::random_values(count, seed);
  std::vector<std::byte> bytes(static_cast<size_t>(count) * static_cast<size_t>(bytes_per_element(problem.type())));
  encode_elements(problem.type(), values.data(), bytes.data(), static_cast<size_t>(count));
  return bytes;
}

// Runs `plan` on `call`'s operands on `queue` and returns the written operand.
std::vector<std::byte> run_once(const Plan& plan, Queue& queue, const Call& call, Buffer* workspace = nullptr) {
  Device& device = plan.device();
  const Problem& problem = plan.problem();
  std::array<std::unique_ptr<Buffer>, Problem::kOperands> buffers;
  for (int i = 0; i < Problem::kOperands; ++i) {
    buffers[i] = device.allocate(call.operands[i].size());
    queue.write(*buffers[i], call.operands[i].data(), call.operands[i].size());
  }
  plan.run(queue, {buffers[0].get(), buffers[1].get(), buffers[2].get()}, workspace);
  const int written = problem.written_operand();
  std::vector<std::byte> out(call.operands[written].size());
  queue.read(*buffers[written], out.data(), out.size());
  return out;
}

// The largest difference between two outputs of `type`, for the failure message.
double max_difference(ElementType type, const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  const size_t count = a.size() / static_cast<size_t>(bytes_per_element(type));
  std::vector<float> fa(count), fb(count);
  decode_elements(type, a.data(), fa.data(), count);
  decode_elements(type, b.data(), fb.data(), count);
  double most = 0;
  for (size_t i = 0; i < count; ++i) most = std::max(most, std::abs(double(fa[i]) - double(fb[i])));
  return most;
}

// How a thread gets the queue and workspace it runs on.
struct RunWhere {
  std::function<Queue&(int thread)> queue;
  std::function<Buffer*(int thread)> workspace = [](int) -> Buffer* { return nullptr; };
};

// kThreads threads each run kCalls calls of `plan` (thread t of copies[t] when given) at once, all started together;
// every output must equal the single-threaded run's byte for byte. Returns a description of the mismatches (empty
// when none).
std::string hammer(const Plan& plan, const RunWhere& setup, const std::vector<Plan>* copies = nullptr) {
  const Problem& problem = plan.problem();
  std::vector<std::vector<Call>> calls(kThreads, std::vector<Call>(kCalls));
  for (int t = 0; t < kThreads; ++t) {
    for (int c = 0; c < kCalls; ++c) {
      Call& call = calls[t][c];
      const uint64_t seed = 1000u * static_cast<uint64_t>(t) + static_cast<uint64_t>(c) + 1;
      for (int i = 0; i < Problem::kOperands; ++i) call.operands[i] = random_bytes(problem, i, seed * 7 + i);
      call.expected = run_once(plan, setup.queue(0), call, setup.workspace(0));
    }
  }
  std::atomic<int> ready{0}, wrong{0};
  std::vector<std::string> first(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();  // all at once, not one after another
      try {
        for (int c = 0; c < kCalls; ++c) {
          const Plan& mine = copies ? (*copies)[static_cast<size_t>(t)] : plan;
          const std::vector<std::byte> out = run_once(mine, setup.queue(t), calls[t][c], setup.workspace(t));
          if (out != calls[t][c].expected) {
            ++wrong;
            if (first[t].empty())
              first[t] = fmt::format("thread {} call {}: max difference {}", t, c,
                                     max_difference(problem.type(), out, calls[t][c].expected));
          }
        }
      } catch (const std::exception& e) {
        ++wrong;
        first[t] = fmt::format("thread {}: {}", t, e.what());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (wrong == 0) return {};
  std::string text = fmt::format("{} of {} outputs of {} differ from the single-threaded run:", wrong.load(),
                                 kThreads * kCalls, plan.describe());
  for (const std::string& f : first)
    if (!f.empty()) text += "\n  " + f;
  return text;
}

Plan make_plan(Device& device, const std::string& problem, const std::string& family = "",
               bool external_workspace = false) {
  PlanRequest request;
  request.problem = parse_any_problem(problem);
  request.family = family;
  request.use_tuning = false;  // the built-in defaults: the test does not depend on a tuning database
  return Plan(device, PlanDescriptor::create(device.info(), request), external_workspace);
}

Device& cpu() { return Registry::instance().find("cpu"); }

RunWhere device_queue(Device& device) {
  return {[&device](int) -> Queue& { return device.queue(); }};
}

// The CPU families and directions: cpu_blocked packs weights into its own state and reuses them while they are
// unchanged, which the calls' differing weights exercise; widened_cpu_blocked stages 16-bit operands as FP32.
struct CpuCase {
  const char* problem;
  const char* family;
};
const CpuCase kCpuCases[] = {
    {"N=2,C=8,H=12,K=8,R=3,pad=1,dir=fwd", ""},  // the reproducer's layer (py-plan-thread-race.py), its default
    {"N=2,C=8,H=12,K=8,R=3,pad=1,dir=fwd", "cpu_blocked"},
    {"N=2,C=16,H=9,K=8,R=3,stride=2,pad=1,dir=bwd-data", "cpu_blocked"},
    {"N=2,C=8,H=10,K=16,R=3,pad=1,dir=bwd-filter", "cpu_blocked"},
    {"N=1,C=16,H=12,K=16,R=3,pad=1,dir=fwd", "cpu_blocked"},  // Winograd's 3x3 stride-1 default
    {"N=2,C=8,H=12,K=8,R=3,pad=1,dir=fwd", "cpu_direct"},
    {"N=2,C=16,H=10,K=16,R=3,pad=1,groups=16,dir=fwd", "cpu_depthwise"},
    {"N=2,C=8,H=12,K=8,R=3,pad=1,dir=fwd,type=bf16", "widened_cpu_blocked"},
    {"gemm:M=33,N=20,K=17", "cpu_gemm"},
};

}  // namespace

TEST(PlanThreads, OneCpuPlanFromManyThreadsGivesTheSingleThreadedOutputs) {
  for (const CpuCase& c : kCpuCases) {
    SCOPED_TRACE(fmt::format("{} {}", c.problem, c.family));
    const Plan plan = make_plan(cpu(), c.problem, c.family);
    EXPECT_EQ(hammer(plan, device_queue(cpu())), "");
  }
}

TEST(PlanThreads, CopiesOfOnePlanShareItsLock) {
  const Plan plan = make_plan(cpu(), "N=2,C=8,H=12,K=8,R=3,pad=1", "cpu_blocked");
  // Each thread through its own copy: the copies share the kernels' state (packed weights), so they must share
  // the lock too.
  const std::vector<Plan> copies(kThreads, plan);
  EXPECT_EQ(hammer(plan, device_queue(cpu()), &copies), "");
}

TEST(PlanThreads, ACpuPlanWithTheCallersWorkspacePerThread) {
  const Plan plan = make_plan(cpu(), "N=2,C=8,H=12,K=8,R=3,pad=1", "cpu_blocked", true);
  ASSERT_GT(plan.memory_bytes(), 0u);
  std::vector<std::unique_ptr<Buffer>> workspaces;
  for (int t = 0; t < kThreads; ++t) workspaces.push_back(cpu().allocate(plan.memory_bytes()));
  RunWhere setup = device_queue(cpu());
  setup.workspace = [&](int t) { return workspaces[static_cast<size_t>(t)].get(); };
  EXPECT_EQ(hammer(plan, setup), "");
}

TEST(PlanThreads, ComputesCachedPlansFromManyThreads) {
  const Problem problem = parse_any_problem("N=2,C=8,H=12,K=8,R=3,pad=1");
  const std::vector<float> x = harness::random_values(problem.operand(0).elements, 1);
  std::vector<std::vector<float>> weights;
  std::vector<std::vector<float>> expected;
  for (int t = 0; t < kThreads; ++t) {
    weights.push_back(harness::random_values(problem.operand(1).elements, 100 + t));
    std::vector<float> xx = x, y(static_cast<size_t>(problem.operand(2).elements));
    compute(cpu(), problem, {xx.data(), weights.back().data(), y.data()});
    expected.push_back(y);
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kCalls; ++c) {
        std::vector<float> xx = x, w = weights[t], y(expected[t].size());
        compute(cpu(), problem, {xx.data(), w.data(), y.data()});
        if (y != expected[t]) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

#ifdef CONVTUNE_WITH_OPENCL

namespace {

// Another in-order queue on the OpenCL device's own context: what a second stream of work on one device is.
std::unique_ptr<opencl::OpenCLQueue> second_queue(Device& device) {
  auto& queue = dynamic_cast<opencl::OpenCLQueue&>(device.queue());
  cl_context context = nullptr;
  cl_device_id id = nullptr;
  opencl::cl().clGetCommandQueueInfo(queue.handle(), CL_QUEUE_CONTEXT, sizeof context, &context, nullptr);
  opencl::cl().clGetCommandQueueInfo(queue.handle(), CL_QUEUE_DEVICE, sizeof id, &id, nullptr);
  return std::make_unique<opencl::OpenCLQueue>(context, id, device.info().id);
}

// Kernel families on PoCL: direct_tiled and implicit_gemm bind several buffers per launch; im2col_gemm's recipe has
// two steps per batch chunk and a workspace (the im2col columns), which runs on several queues must not share.
const char* const kOpenCLCases[][2] = {
    {"N=2,C=8,H=12,K=8,R=3,pad=1,dir=fwd", "implicit_gemm"},
    {"N=2,C=8,H=12,K=8,R=3,pad=1,dir=bwd-data", "direct_tiled"},
    {"N=2,C=8,H=12,K=8,R=3,pad=1,dir=fwd", "im2col_gemm"},
    {"N=2,C=8,H=10,K=8,R=3,pad=1,dir=bwd-filter", "im2col_gemm"},
};

}  // namespace

TEST(PlanThreads, OneOpenCLPlanFromManyThreadsOnOneQueue) {
  Device* device = test::opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device that compiles kernels";
  for (const auto& [problem, family] : kOpenCLCases) {
    SCOPED_TRACE(fmt::format("{} {}", problem, family));
    const Plan plan = make_plan(*device, problem, family);
    EXPECT_EQ(hammer(plan, device_queue(*device)), "");
  }
}

TEST(PlanThreads, OneOpenCLPlanOnAQueuePerThread) {
  Device* device = test::opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device that compiles kernels";
  for (const auto& [problem, family] : kOpenCLCases) {
    SCOPED_TRACE(fmt::format("{} {}", problem, family));
    const Plan plan = make_plan(*device, problem, family);
    // Thread 0 (and the single-threaded run) on the device's queue, the others on queues of their own: a plan with a
    // workspace gets one per queue, so runs on two queues never share it while both are in flight.
    std::vector<std::unique_ptr<opencl::OpenCLQueue>> queues;
    for (int t = 1; t < kThreads; ++t) queues.push_back(second_queue(*device));
    RunWhere setup{[&](int t) -> Queue& {
      return t == 0 ? device->queue() : static_cast<Queue&>(*queues[static_cast<size_t>(t - 1)]);
    }};
    EXPECT_EQ(hammer(plan, setup), "");
  }
}

TEST(PlanThreads, APlanWithItsOwnWorkspaceRefusesMoreQueuesThanItKeeps) {
  Device* device = test::opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device that compiles kernels";
  const Plan plan = make_plan(*device, "N=2,C=8,H=12,K=8,R=3,pad=1", "im2col_gemm");
  ASSERT_GT(plan.memory_bytes(), 0u);
  const Problem& problem = plan.problem();
  Call call;
  for (int i = 0; i < Problem::kOperands; ++i) call.operands[i] = random_bytes(problem, i, 5 + i);
  std::vector<std::unique_ptr<opencl::OpenCLQueue>> queues;
  for (size_t q = 0; q < Plan::kMaxQueues; ++q) {
    queues.push_back(second_queue(*device));
    run_once(plan, *queues.back(), call);
  }
  queues.push_back(second_queue(*device));
  try {
    run_once(plan, *queues.back(), call);
    FAIL() << "expected a refusal";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("make it with an external workspace"), std::string::npos) << e.what();
  }
  // The queues it has run on go on working.
  EXPECT_NO_THROW(run_once(plan, *queues.front(), call));
}

TEST(PlanThreads, TwoThreadsTimeOneOpenCLQueue) {
  Device* device = test::opencl_device();
  if (!device) GTEST_SKIP() << "no OpenCL device that compiles kernels";
  const Plan plan = make_plan(*device, "N=2,C=8,H=12,K=8,R=3,pad=1", "implicit_gemm");
  const Problem& problem = plan.problem();
  std::array<std::unique_ptr<Buffer>, Problem::kOperands> buffers;
  for (int i = 0; i < Problem::kOperands; ++i)
    buffers[i] = device->allocate(static_cast<size_t>(problem.operand(i).elements) * sizeof(float));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int c = 0; c < kCalls; ++c) {
        try {
          const double ms = device->queue().elapsed_ms(
              [&] { plan.run(device->queue(), {buffers[0].get(), buffers[1].get(), buffers[2].get()}); });
          if (!(ms >= 0)) ++failures;
        } catch (const std::exception&) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

#endif  // CONVTUNE_WITH_OPENCL
