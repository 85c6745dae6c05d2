// Example 1: a forward convolution on the best device, with the plan the tuning database picks, checked against a
// plain loop; then, where OpenCL is present, the same convolution on an OpenCL context, queue and cl_mem buffers
// this program created itself, wrapped by convtune without copies.
#include <convtune/convtune.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#ifdef EXAMPLE_WITH_OPENCL
#include <CL/cl.h>
#endif

namespace {

// y[n][k][p][q] = sum over c, r, s of x[n][c][p+r-pad][q+s-pad] * w[k][c][r][s], the naive way.
std::vector<float> naive_forward(const convtune::ConvProblem& p, const std::vector<float>& x,
                                 const std::vector<float>& w) {
  std::vector<float> y(static_cast<size_t>(p.y_elements()));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t i = 0; i < p.p(); ++i)
        for (int64_t j = 0; j < p.q(); ++j) {
          double sum = 0;
          for (int64_t c = 0; c < p.c; ++c)
            for (int64_t r = 0; r < p.r; ++r)
              for (int64_t s = 0; s < p.s; ++s) {
                const int64_t h = i - p.pad.h + r, v = j - p.pad.w + s;
                if (h < 0 || h >= p.h || v < 0 || v >= p.w) continue;
                sum += double(x[static_cast<size_t>(((n * p.c + c) * p.h + h) * p.w + v)]) *
                       w[static_cast<size_t>(((k * p.c + c) * p.r + r) * p.s + s)];
              }
          y[static_cast<size_t>(((n * p.k + k) * p.p() + i) * p.q() + j)] = static_cast<float>(sum);
        }
  return y;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) err += (a[i] - b[i]) * double(a[i] - b[i]), ref += double(b[i]) * b[i];
  return std::sqrt(err / ref);
}

}  // namespace

int main() try {
  const convtune::ConvProblem problem = convtune::parse_problem("N=4,C=16,H=20,W=20,K=32,R=3,pad=1");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> x(static_cast<size_t>(problem.x_elements())), w(static_cast<size_t>(problem.w_elements()));
  for (float& v : x) v = uniform(rng);
  for (float& v : w) v = uniform(rng);
  const std::vector<float> expected = naive_forward(problem, x, w);

  // The common case: one call on host arrays. The plan comes from the tuning database (the user's file and the
  // defaults convtune ships), or the family's built-in default.
  convtune::Device& device = convtune::device("best");
  std::vector<float> y(expected.size());
  convtune::compute(device, problem, {x.data(), w.data(), y.data()});
  const convtune::PlanDescriptor decision = convtune::PlanDescriptor::create(device.info(), {problem});
  std::printf("convtune %s on %s (%s): %s, parameters from: %s\n", std::string(convtune::version()).c_str(),
              device.info().id.c_str(), device.info().name.c_str(), decision.describe().c_str(),
              std::string(convtune::to_string(decision.tier())).c_str());
  const double error = relative_error(y, expected);
  std::printf("compute(): relative error %.2e against a plain loop\n", error);
  if (!(error < 1e-5)) return 1;

#ifdef EXAMPLE_WITH_OPENCL
  // The program's own OpenCL objects: a context and queue on the first device, and cl_mem buffers it fills.
  cl_platform_id platform = nullptr;
  cl_device_id cl_device = nullptr;
  cl_uint count = 0;
  if (clGetPlatformIDs(1, &platform, &count) != CL_SUCCESS || count == 0 ||
      clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &cl_device, &count) != CL_SUCCESS || count == 0) {
    std::printf("no OpenCL device: the wrapped-buffer part is skipped\n");
    return 0;
  }
  cl_int status = CL_SUCCESS;
  cl_context context = clCreateContext(nullptr, 1, &cl_device, nullptr, nullptr, &status);
  cl_command_queue queue = clCreateCommandQueue(context, cl_device, 0, &status);
  auto make_buffer = [&](std::vector<float>& host) {
    return clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, host.size() * sizeof(float),
                          host.data(), &status);
  };
  std::vector<float> y_cl(expected.size(), 0.0f);
  cl_mem xb = make_buffer(x), wb = make_buffer(w), yb = make_buffer(y_cl);
  {
    // convtune on those very objects: nothing is copied, the launches go to the program's queue.
    std::unique_ptr<convtune::Device> wrapped = convtune::wrap_opencl_queue(queue);
    std::unique_ptr<convtune::Buffer> cx = convtune::wrap_opencl_buffer(*wrapped, xb);
    std::unique_ptr<convtune::Buffer> cw = convtune::wrap_opencl_buffer(*wrapped, wb);
    std::unique_ptr<convtune::Buffer> cy = convtune::wrap_opencl_buffer(*wrapped, yb);
    const convtune::Plan plan = convtune::Plan::create(*wrapped, {problem});
    plan.run({cx.get(), cw.get(), cy.get()});
    std::printf("wrapped OpenCL queue on %s: %s\n", wrapped->info().name.c_str(), plan.describe().c_str());
  }
  clEnqueueReadBuffer(queue, yb, CL_TRUE, 0, y_cl.size() * sizeof(float), y_cl.data(), 0, nullptr, nullptr);
  const double cl_error = relative_error(y_cl, expected);
  std::printf("wrapped cl_mem buffers: relative error %.2e against a plain loop\n", cl_error);
  clReleaseMemObject(xb), clReleaseMemObject(wb), clReleaseMemObject(yb);
  clReleaseCommandQueue(queue), clReleaseContext(context);
  if (!(cl_error < 1e-5)) return 1;
#endif
  return 0;
} catch (const convtune::Error& e) {
  std::fprintf(stderr, "forward_convolution: %s\n", e.what());
  return 2;
}
