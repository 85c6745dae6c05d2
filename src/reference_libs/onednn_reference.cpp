// oneDNN (DNNL v2 C API) on the CPU as a reference: all three directions, groups included. Loaded with dlopen.
// oneDNN chooses its own memory layouts (format "any"); the inputs are reordered from convtune's layout (NCHW/OIHW
// or NHWC/OHWI) before
// timing and the output back after it, so the timed region is the convolution alone, as for convtune.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "convtune/error.h"
#include "src/reference_libs/reference_library.h"
#include "src/reference_libs/shared_library.h"
#include "src/backend/cpu/cpu_backend.h"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define CONVTUNE_HAVE_DNNL_HEADERS 1
#endif

namespace convtune::reference {

#ifdef CONVTUNE_HAVE_DNNL_HEADERS
namespace {

#define CONVTUNE_DNNL_FUNCTIONS(X)                  \
  X(dnnl_version)                                   \
  X(dnnl_engine_create)                             \
  X(dnnl_engine_destroy)                            \
  X(dnnl_stream_create)                             \
  X(dnnl_stream_destroy)                            \
  X(dnnl_stream_wait)                               \
  X(dnnl_memory_desc_init_by_tag)                   \
  X(dnnl_memory_desc_equal)                         \
  X(dnnl_memory_create)                             \
  X(dnnl_memory_destroy)                            \
  X(dnnl_dilated_convolution_forward_desc_init)     \
  X(dnnl_dilated_convolution_backward_data_desc_init) \
  X(dnnl_dilated_convolution_backward_weights_desc_init) \
  X(dnnl_primitive_desc_create)                     \
  X(dnnl_primitive_desc_destroy)                    \
  X(dnnl_primitive_desc_query)                      \
  X(dnnl_primitive_desc_query_md)                   \
  X(dnnl_primitive_create)                          \
  X(dnnl_primitive_destroy)                         \
  X(dnnl_primitive_execute)                         \
  X(dnnl_reorder_primitive_desc_create)

struct DnnlApi {
#define CONVTUNE_DNNL_DECLARE(function) decltype(&::function) function = nullptr;
  CONVTUNE_DNNL_FUNCTIONS(CONVTUNE_DNNL_DECLARE)
#undef CONVTUNE_DNNL_DECLARE
};

// Opened once per process: oneDNN keeps a thread pool and caches that must outlive every adapter.
struct DnnlLibrary {
  SharedLibrary library{"CONVTUNE_DNNL_LIBRARY", {"libdnnl.so.2", "libdnnl.so"}};
  DnnlApi api;
  std::string error;
  std::string version;
  DnnlLibrary() {
    if (!library.loaded()) {
      error = library.error() + " (install Debian's libdnnl2 / libdnnl-dev, or set CONVTUNE_DNNL_LIBRARY)";
      return;
    }
#define CONVTUNE_DNNL_RESOLVE(function) CONVTUNE_RESOLVE_SYMBOL(library, api, function);
    CONVTUNE_DNNL_FUNCTIONS(CONVTUNE_DNNL_RESOLVE)
#undef CONVTUNE_DNNL_RESOLVE
    if (!library.missing().empty()) {
      // Names moved between v2 and v3 (v3 drops the *_desc_init functions): say which API this adapter needs.
      error = fmt::format("{} lacks {} (convtune's adapter needs the oneDNN v2 C API)", library.resolved_path(),
                          library.missing());
      return;
    }
    const dnnl_version_t* v = api.dnnl_version();
    version = fmt::format("oneDNN {}.{}.{} ({})", v->major, v->minor, v->patch, library.resolved_path());
  }
  static DnnlLibrary& instance() {
    static DnnlLibrary lib;
    return lib;
  }
};

void check(dnnl_status_t status, const char* call, const std::string& context) {
  if (status != dnnl_success)
    throw BackendError(fmt::format("oneDNN {} failed with status {} for {}", call, static_cast<int>(status), context));
}

class OneDnnReference final : public ReferenceLibrary {
 public:
  OneDnnReference() : lib_(DnnlLibrary::instance()), api_(lib_.api) {}
  ~OneDnnReference() override { release(); }

  std::string name() const override { return "onednn"; }
  std::string unavailable_reason() const override { return lib_.error; }
  std::string version() const override { return lib_.version; }
  bool runs_on_host() const override { return true; }
  std::string unsupported_reason(const Problem& problem, const DeviceInfo&) const override {
    if (!lib_.error.empty()) return lib_.error;
    if (!problem.is_conv()) return "the oneDNN adapter computes convolutions only";
    if (problem.type() != ElementType::F32)
      return fmt::format("only FP32 is wired up, not {}", to_string(problem.type()));
    return {};
  }

  void prepare(harness::Workload& workload) override {
    if (const std::string why = unsupported_reason(workload.problem(), workload.device().info()); !why.empty())
      throw Unsupported(why);
    if (workload.device().info().backend != BackendKind::Cpu)
      throw InvalidArgument("oneDNN runs on a workload of the CPU device (runs_on_host)");
    const ConvProblem& pb = workload.problem().conv();
    const Operands operands = workload.operands();
    release();
    problem_ = pb;
    context_ = pb.to_string();
    // TF32 does not exist on CPUs; both math modes run FP32 here.
    check(api_.dnnl_engine_create(&engine_, dnnl_cpu, 0), "dnnl_engine_create", context_);
    check(api_.dnnl_stream_create(&stream_, engine_, dnnl_stream_default_flags), "dnnl_stream_create", context_);

    const dnnl_dims_t x_dims = {pb.n, pb.c, pb.h, pb.w};
    const dnnl_dims_t y_dims = {pb.n, pb.k, pb.p(), pb.q()};
    dnnl_memory_desc_t x_md, w_md, y_md, any_x, any_w, any_y;
    // convtune's operands in the problem's layout (NHWC: x and y channels-last, the filters OHWI / GOHWI).
    const bool nhwc = pb.layout == Layout::NHWC;
    init_md(x_md, 4, x_dims, nhwc ? dnnl_nhwc : dnnl_nchw);
    init_md(y_md, 4, y_dims, nhwc ? dnnl_nhwc : dnnl_nchw);
    init_md(any_x, 4, x_dims, dnnl_format_tag_any);
    init_md(any_y, 4, y_dims, dnnl_format_tag_any);
    if (pb.groups == 1) {
      const dnnl_dims_t dims = {pb.k, pb.c, pb.r, pb.s};
      init_md(w_md, 4, dims, nhwc ? dnnl_ohwi : dnnl_oihw);
      init_md(any_w, 4, dims, dnnl_format_tag_any);
    } else {
      const dnnl_dims_t dims = {pb.groups, pb.k_per_group(), pb.c_per_group(), pb.r, pb.s};
      init_md(w_md, 5, dims, nhwc ? dnnl_gohwi : dnnl_goihw);
      init_md(any_w, 5, dims, dnnl_format_tag_any);
    }
    // oneDNN counts dilation from 0 (0 = dense); the right/bottom padding equal to the left gives the same
    // floor((H + 2 pad - extent) / stride) + 1 output size convtune uses.
    const dnnl_dims_t strides = {pb.stride.h, pb.stride.w};
    const dnnl_dims_t dilates = {pb.dilation.h - 1, pb.dilation.w - 1};
    const dnnl_dims_t pads = {pb.pad.h, pb.pad.w};

    dnnl_convolution_desc_t forward_desc;
    const auto forward_kind = pb.direction == Direction::Forward ? dnnl_forward_inference : dnnl_forward_training;
    check(api_.dnnl_dilated_convolution_forward_desc_init(&forward_desc, forward_kind, dnnl_convolution_auto, &any_x,
                                                          &any_w, nullptr, &any_y, strides, dilates, pads, pads),
          "dnnl_dilated_convolution_forward_desc_init", context_);
    check(api_.dnnl_primitive_desc_create(&forward_pd_, &forward_desc, nullptr, engine_, nullptr),
          "dnnl_primitive_desc_create (forward)", context_);

    auto host = [&](int i) { return reinterpret_cast<float*>(cpu::host_memory(const_cast<Buffer&>(*operands[i]))); };
    float* x = host(0);
    float* w = host(1);
    float* y = host(2);
    switch (pb.direction) {
      case Direction::Forward:
        pd_ = forward_pd_;
        forward_pd_ = nullptr;
        bind_input(DNNL_ARG_SRC, dnnl_query_src_md, x_md, x);
        bind_input(DNNL_ARG_WEIGHTS, dnnl_query_weights_md, w_md, w);
        bind_output(DNNL_ARG_DST, dnnl_query_dst_md, y_md, y);
        break;
      case Direction::BackwardData: {
        dnnl_convolution_desc_t desc;
        check(api_.dnnl_dilated_convolution_backward_data_desc_init(&desc, dnnl_convolution_auto, &any_x, &any_w,
                                                                    &any_y, strides, dilates, pads, pads),
              "dnnl_dilated_convolution_backward_data_desc_init", context_);
        check(api_.dnnl_primitive_desc_create(&pd_, &desc, nullptr, engine_, forward_pd_),
              "dnnl_primitive_desc_create (backward data)", context_);
        bind_input(DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, y_md, y);
        bind_input(DNNL_ARG_WEIGHTS, dnnl_query_weights_md, w_md, w);
        bind_output(DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md, x_md, x);
        break;
      }
      case Direction::BackwardFilter: {
        dnnl_convolution_desc_t desc;
        check(api_.dnnl_dilated_convolution_backward_weights_desc_init(&desc, dnnl_convolution_auto, &any_x, &any_w,
                                                                       nullptr, &any_y, strides, dilates, pads, pads),
              "dnnl_dilated_convolution_backward_weights_desc_init", context_);
        check(api_.dnnl_primitive_desc_create(&pd_, &desc, nullptr, engine_, forward_pd_),
              "dnnl_primitive_desc_create (backward weights)", context_);
        bind_input(DNNL_ARG_SRC, dnnl_query_src_md, x_md, x);
        bind_input(DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, y_md, y);
        bind_output(DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md, w_md, w);
        break;
      }
    }
    check(api_.dnnl_primitive_create(&primitive_, pd_), "dnnl_primitive_create", context_);
    const char* impl = nullptr;
    api_.dnnl_primitive_desc_query(pd_, dnnl_query_impl_info_str, 0, &impl);
    algorithm_ = fmt::format("{}{}", impl ? impl : "?", reordered_ ? " (own layouts, reorders untimed)"
                                                                  : problem_.layout == Layout::NHWC ? " (NHWC)" : " (NCHW)");
  }

  // The convolution alone: an output in oneDNN's own layout stays there until collect_output().
  void run() override { execute(); }

  void collect_output() override {
    if (!output_reorder_) return;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, output_.library}, {DNNL_ARG_TO, output_.user}};
    check(api_.dnnl_primitive_execute(output_reorder_, stream_, 2, args), "dnnl_primitive_execute (reorder)",
          context_);
    check(api_.dnnl_stream_wait(stream_), "dnnl_stream_wait", context_);
  }

  std::string algorithm() const override { return algorithm_; }

 private:
  // The workload's plain array and, when oneDNN prefers another layout, its own memory in that layout.
  struct Operand {
    dnnl_memory_t user = nullptr;
    dnnl_memory_t library = nullptr;  // == user when no reorder is needed
  };

  void init_md(dnnl_memory_desc_t& md, int ndims, const dnnl_dims_t dims, dnnl_format_tag_t tag) {
    check(api_.dnnl_memory_desc_init_by_tag(&md, ndims, dims, dnnl_f32, tag), "dnnl_memory_desc_init_by_tag",
          context_);
  }

  // Memory for an argument in the layout the primitive chose; user memory wraps convtune's array.
  dnnl_memory_t library_memory(dnnl_query_t query, const dnnl_memory_desc_t& plain, dnnl_memory_t user) {
    const dnnl_memory_desc_t* chosen = api_.dnnl_primitive_desc_query_md(pd_, query, 0);
    if (!chosen) throw BackendError(fmt::format("oneDNN chose no memory layout for an operand of {}", context_));
    if (api_.dnnl_memory_desc_equal(chosen, &plain)) return user;
    reordered_ = true;
    dnnl_memory_t memory = nullptr;
    check(api_.dnnl_memory_create(&memory, chosen, engine_, DNNL_MEMORY_ALLOCATE), "dnnl_memory_create", context_);
    owned_.push_back(memory);
    return memory;
  }

  dnnl_primitive_t make_reorder(const dnnl_memory_desc_t* from_md, const dnnl_memory_desc_t* to_md) {
    dnnl_primitive_desc_t pd = nullptr;
    check(api_.dnnl_reorder_primitive_desc_create(&pd, from_md, engine_, to_md, engine_, nullptr),
          "dnnl_reorder_primitive_desc_create", context_);
    dnnl_primitive_t reorder = nullptr;
    const dnnl_status_t status = api_.dnnl_primitive_create(&reorder, pd);
    api_.dnnl_primitive_desc_destroy(pd);
    check(status, "dnnl_primitive_create (reorder)", context_);
    return reorder;
  }

  void bind_input(int arg, dnnl_query_t query, const dnnl_memory_desc_t& plain, float* data) {
    dnnl_memory_t user = nullptr;
    check(api_.dnnl_memory_create(&user, &plain, engine_, data), "dnnl_memory_create", context_);
    owned_.push_back(user);
    dnnl_memory_t memory = library_memory(query, plain, user);
    if (memory != user) {
      // Reordered once here, outside the timed region: the inputs do not change between runs.
      dnnl_primitive_t reorder = make_reorder(&plain, api_.dnnl_primitive_desc_query_md(pd_, query, 0));
      dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, memory}};
      const dnnl_status_t status = api_.dnnl_primitive_execute(reorder, stream_, 2, args);
      api_.dnnl_stream_wait(stream_);
      api_.dnnl_primitive_destroy(reorder);
      check(status, "dnnl_primitive_execute (input reorder)", context_);
    }
    args_.push_back({arg, memory});
  }

  void bind_output(int arg, dnnl_query_t query, const dnnl_memory_desc_t& plain, float* data) {
    check(api_.dnnl_memory_create(&output_.user, &plain, engine_, data), "dnnl_memory_create", context_);
    owned_.push_back(output_.user);
    output_.library = library_memory(query, plain, output_.user);
    if (output_.library != output_.user)
      output_reorder_ = make_reorder(api_.dnnl_primitive_desc_query_md(pd_, query, 0), &plain);
    args_.push_back({arg, output_.library});
  }

  void execute() {
    check(api_.dnnl_primitive_execute(primitive_, stream_, static_cast<int>(args_.size()), args_.data()),
          "dnnl_primitive_execute", context_);
    check(api_.dnnl_stream_wait(stream_), "dnnl_stream_wait", context_);
  }

  void release() {
    if (primitive_) api_.dnnl_primitive_destroy(primitive_);
    if (output_reorder_) api_.dnnl_primitive_destroy(output_reorder_);
    for (dnnl_memory_t m : owned_) api_.dnnl_memory_destroy(m);
    if (pd_) api_.dnnl_primitive_desc_destroy(pd_);
    if (forward_pd_) api_.dnnl_primitive_desc_destroy(forward_pd_);
    if (stream_) api_.dnnl_stream_destroy(stream_);
    if (engine_) api_.dnnl_engine_destroy(engine_);
    primitive_ = output_reorder_ = nullptr;
    owned_.clear();
    args_.clear();
    pd_ = forward_pd_ = nullptr;
    stream_ = nullptr;
    engine_ = nullptr;
    output_ = {};
    reordered_ = false;
  }

  DnnlLibrary& lib_;
  const DnnlApi& api_;
  ConvProblem problem_;
  std::string context_;
  std::string algorithm_;
  dnnl_engine_t engine_ = nullptr;
  dnnl_stream_t stream_ = nullptr;
  dnnl_primitive_desc_t forward_pd_ = nullptr;  // the hint backward primitives are created from
  dnnl_primitive_desc_t pd_ = nullptr;
  dnnl_primitive_t primitive_ = nullptr;
  dnnl_primitive_t output_reorder_ = nullptr;
  std::vector<dnnl_memory_t> owned_;
  std::vector<dnnl_exec_arg_t> args_;
  Operand output_;
  bool reordered_ = false;
};

}  // namespace

std::unique_ptr<ReferenceLibrary> make_onednn_reference() { return std::make_unique<OneDnnReference>(); }
#else
std::unique_ptr<ReferenceLibrary> make_onednn_reference() {
  return make_unbuilt_reference("onednn", "convtune was built without oneDNN's headers (Debian's libdnnl-dev)");
}
#endif

}  // namespace convtune::reference
