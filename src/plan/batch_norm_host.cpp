// The CPU backend's batch norm (host program "host/batch_norm"): kernels/common/batch_norm.cl's six kernels with
// the same arguments and arithmetic (multiply-adds unfused: the library is built for baseline x86-64, where fmaf is a
// call), computed on the host's threads in loops the compiler vectorises (one channel's pixels in NCHW, one pixel's
// channels in NHWC).
#include "src/plan/batch_norm_host.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "convtune/rounding.h"
#include "src/core/bf16_inline.h"
#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"
#include "src/plan/batch_norm_rows.h"

namespace convtune {

namespace {

// Element access by type: 0 FP32, 1 BF16 (inline, so loops over them vectorise), 2 FP16.
template <int E>
struct BnElem {
  using T = uint16_t;
  static float load(const T* p, int64_t i) { return fp16_to_fp32(p[i]); }
  static void store(T* p, int64_t i, float v) { p[i] = fp32_to_fp16(v); }
};
template <>
struct BnElem<0> {
  using T = float;
  static float load(const T* p, int64_t i) { return p[i]; }
  static void store(T* p, int64_t i, float v) { p[i] = v; }
};
template <>
struct BnElem<1> {
  using T = uint16_t;
  static float load(const T* p, int64_t i) { return bf16_bits_to_fp32(p[i]); }
  static void store(T* p, int64_t i, float v) { p[i] = fp32_to_bf16_bits(v); }
};

// What the program's defines say, once per build.
struct BnBlock {
  int elem = 0;
  bool nhwc = false, residual = false, relu = false;
  float relu_max = 0;
  // The activation as a clamp to [lo, hi] (no ReLU: the whole line), and the gradient's mask: open strictly inside.
  float lo() const { return relu ? 0.0f : -std::numeric_limits<float>::infinity(); }
  float hi() const { return relu && relu_max > 0 ? relu_max : std::numeric_limits<float>::infinity(); }
};

struct BnSizes {
  int64_t n, c, hw, chunks;
  int64_t rows() const { return n * hw; }
};

// Threads for a pass over `elements` values: one below about 64K, where waking the pool costs more than the pass.
unsigned bn_threads(int64_t elements) { return elements < (int64_t{1} << 16) ? 1u : hardware_threads(); }

int64_t bn_int(const KernelArg& arg) {
  if (const auto* v = std::get_if<int32_t>(&arg)) return *v;
  return std::get<int64_t>(arg);
}

template <class T>
T* bn_buffer(const KernelArg& arg, const char* what) {
  return reinterpret_cast<T*>(cpu::host_floats(arg, what));
}

// body(begin, end) over [0, count) cut into about four ranges a thread: one claim of the pool's counter per range,
// where a claim per channel plane (16K planes of 9 values in a ResNeXt's last stage) spent most of the pass passing
// the counter's cache line between the cores.
template <class Body>
void bn_ranges(int64_t count, unsigned threads, Body body) {
  const int64_t tasks = std::min<int64_t>(count, threads <= 1 ? 1 : 4 * static_cast<int64_t>(threads));
  parallel_for(tasks, threads, [&](int64_t t) { body(t * count / tasks, (t + 1) * count / tasks); });
}

// Per-channel sums of two values of each element, in double per channel: NCHW a range of channels per task,
// `plane(base, count, k, l1, l2)` adding an image's channel plane into 16 float lanes, folded into double every 4096
// values or so (not per image: small maps would spend more on the fold than on the sums); NHWC a range of row blocks
// per task, `row(row, f1, f2)` adding one row's channels, float over 64 rows at a time. The totals go to chunk 0 of
// `partial` and zeros to the others (the finalize step sums every chunk).
template <class Plane, class Row>
void bn_channel_sums(const BnBlock& b, const BnSizes& s, float* partial, Plane plane, Row row) {
  const int64_t c = s.c;
  const unsigned threads = bn_threads(s.rows() * c);
  std::vector<double> first(static_cast<size_t>(c)), second(static_cast<size_t>(c));
  if (!b.nhwc) {
    bn_ranges(c, threads, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        double t1 = 0, t2 = 0;
        float l1[16] = {}, l2[16] = {};
        int64_t unfolded = 0;
        const auto fold = [&] {
          for (int l = 0; l < 16; ++l) t1 += l1[l], t2 += l2[l], l1[l] = l2[l] = 0.0f;
          unfolded = 0;
        };
        for (int64_t image = 0; image < s.n; ++image) {
          plane((image * c + k) * s.hw, s.hw, k, l1, l2);
          unfolded += s.hw;
          if (unfolded >= 4096) fold();
        }
        fold();
        first[static_cast<size_t>(k)] = t1;
        second[static_cast<size_t>(k)] = t2;
      }
    });
  } else {
    constexpr int64_t kRows = 64;
    const int64_t blocks = (s.rows() + kRows - 1) / kRows;
    const int64_t tasks = std::min<int64_t>(blocks, 4 * static_cast<int64_t>(threads));
    std::vector<double> d1(static_cast<size_t>(tasks * c)), d2(static_cast<size_t>(tasks * c));
    parallel_for(tasks, threads, [&](int64_t task) {
      std::vector<float> f1(static_cast<size_t>(c)), f2(static_cast<size_t>(c));
      double* t1 = &d1[static_cast<size_t>(task * c)];
      double* t2 = &d2[static_cast<size_t>(task * c)];
      for (int64_t block = task * blocks / tasks; block < (task + 1) * blocks / tasks; ++block) {
        std::fill(f1.begin(), f1.end(), 0.0f);
        std::fill(f2.begin(), f2.end(), 0.0f);
        for (int64_t r = block * kRows; r < std::min(s.rows(), (block + 1) * kRows); ++r) row(r, f1.data(), f2.data());
        for (int64_t k = 0; k < c; ++k) t1[k] += f1[static_cast<size_t>(k)], t2[k] += f2[static_cast<size_t>(k)];
      }
    });
    for (int64_t task = 0; task < tasks; ++task)
      for (int64_t k = 0; k < c; ++k) {
        first[static_cast<size_t>(k)] += d1[static_cast<size_t>(task * c + k)];
        second[static_cast<size_t>(k)] += d2[static_cast<size_t>(task * c + k)];
      }
  }
  std::fill(partial, partial + s.chunks * 2 * c, 0.0f);
  for (int64_t k = 0; k < c; ++k) {
    partial[k] = static_cast<float>(first[static_cast<size_t>(k)]);
    partial[c + k] = static_cast<float>(second[static_cast<size_t>(k)]);
  }
}

// The same sums with `value(i, k)` giving both values of element i (channel k): the 16-bit element types.
template <class Value>
void bn_channel_sums(const BnBlock& b, const BnSizes& s, float* partial, Value value) {
  bn_channel_sums(
      b, s, partial,
      [&](int64_t base, int64_t count, int64_t k, float* l1, float* l2) {
        for (int64_t p = 0; p < count; ++p) {
          const auto [v1, v2] = value(base + p, k);
          l1[p % 16] += v1;
          l2[p % 16] += v2;
        }
      },
      [&](int64_t r, float* f1, float* f2) {
        for (int64_t k = 0; k < s.c; ++k) {
          const auto [v1, v2] = value(r * s.c + k, k);
          f1[k] += v1;
          f2[k] += v2;
        }
      });
}

// Channel k's two partial sums over every chunk (the finalize steps).
std::pair<double, double> bn_chunk_sums(const float* partial, const BnSizes& s, int64_t k) {
  double first = 0, second = 0;
  for (int64_t g = 0; g < s.chunks; ++g) first += partial[(g * 2) * s.c + k], second += partial[(g * 2 + 1) * s.c + k];
  return {first, second};
}

// In parallel over every element: NCHW `plane(base, count, k)` on ranges of images' channel planes, NHWC
// `row(row)` on ranges of rows.
template <class Plane, class Row>
void bn_each(const BnBlock& b, const BnSizes& s, Plane plane, Row row) {
  const int64_t c = s.c;
  const unsigned threads = bn_threads(s.rows() * c);
  if (!b.nhwc) {
    bn_ranges(s.n * c, threads, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) plane(p * s.hw, s.hw, p % c);
    });
  } else {
    bn_ranges(s.rows(), threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) row(r);
    });
  }
}

// `body(i, k)` on every element (the 16-bit element types).
template <class Body>
void bn_each(const BnBlock& b, const BnSizes& s, Body body) {
  bn_each(
      b, s,
      [&](int64_t base, int64_t count, int64_t k) {
        for (int64_t p = 0; p < count; ++p) body(base + p, k);
      },
      [&](int64_t r) {
        for (int64_t k = 0; k < s.c; ++k) body(r * s.c + k, k);
      });
}

template <int E>
std::map<std::string, cpu::HostKernel> bn_kernels(const BnBlock& b) {
  using El = BnElem<E>;
  using T = typename El::T;
  std::map<std::string, cpu::HostKernel> kernels;
  kernels["bn_forward_partial"] = [b](const std::vector<KernelArg>& a) {
    const T* y = bn_buffer<const T>(a.at(0), "y");
    float* partial = bn_buffer<float>(a.at(1), "workspace");
    const BnSizes s{bn_int(a.at(2)), bn_int(a.at(3)), bn_int(a.at(4)), bn_int(a.at(5))};
    std::vector<float> y0(static_cast<size_t>(s.c));  // each channel's first element: the sums' shift
    for (int64_t k = 0; k < s.c; ++k) y0[static_cast<size_t>(k)] = El::load(y, b.nhwc ? k : k * s.hw);
    if constexpr (E == 0) {
      bn_channel_sums(
          b, s, partial,
          [&](int64_t base, int64_t count, int64_t k, float* l1, float* l2) {
            bn_rows::plane_sums(y + base, count, y0[static_cast<size_t>(k)], l1, l2);
          },
          [&](int64_t r, float* f1, float* f2) { bn_rows::row_sums(y + r * s.c, s.c, y0.data(), f1, f2); });
    } else {
      bn_channel_sums(b, s, partial, [&](int64_t i, int64_t k) {
        const float v = El::load(y, i) - y0[static_cast<size_t>(k)];
        return std::pair<float, float>(v, v * v);
      });
    }
  };
  kernels["bn_forward_finalize"] = [b](const std::vector<KernelArg>& a) {
    const T* y = bn_buffer<const T>(a.at(0), "y");
    const float* gamma = bn_buffer<const float>(a.at(1), "gamma");
    const float* beta = bn_buffer<const float>(a.at(2), "beta");
    float* stats = bn_buffer<float>(a.at(3), "stats");
    float* workspace = bn_buffer<float>(a.at(4), "workspace");
    const BnSizes s{bn_int(a.at(7)), bn_int(a.at(8)), bn_int(a.at(9)), bn_int(a.at(10))};
    const float eps = std::get<float>(a.at(11)), factor = std::get<float>(a.at(12));
    // The running statistics' buffers are read only when updated (else they are the stats buffer).
    float* running_mean = bn_int(a.at(13)) ? bn_buffer<float>(a.at(5), "running_mean") : nullptr;
    float* running_var = running_mean ? bn_buffer<float>(a.at(6), "running_var") : nullptr;
    const int64_t c = s.c;
    float* coeffs = workspace + s.chunks * 2 * c;
    for (int64_t k = 0; k < c; ++k) {
      const auto [sum, squares] = bn_chunk_sums(workspace, s, k);
      const double count = static_cast<double>(s.rows()), shifted_mean = sum / count;
      const double var = std::max(squares / count - shifted_mean * shifted_mean, 0.0);
      const double mean = El::load(y, b.nhwc ? k : k * s.hw) + shifted_mean;
      const double scale = gamma[k] / std::sqrt(var + eps);
      stats[k] = static_cast<float>(mean);
      stats[c + k] = static_cast<float>(var);
      coeffs[k] = static_cast<float>(scale);
      coeffs[c + k] = static_cast<float>(beta[k] - mean * scale);
      if (running_mean) {
        const float unbiased = stats[c + k] * (static_cast<float>(s.rows()) / static_cast<float>(s.rows() - 1));
        running_mean[k] = (1.0f - factor) * running_mean[k] + factor * stats[k];
        running_var[k] = (1.0f - factor) * running_var[k] + factor * unbiased;
      }
    }
  };
  kernels["bn_forward_apply"] = [b](const std::vector<KernelArg>& a) {
    size_t next = 0;
    const T* y = bn_buffer<const T>(a.at(next++), "y");
    const float* workspace = bn_buffer<const float>(a.at(next++), "workspace");
    const T* residual = b.residual ? bn_buffer<const T>(a.at(next++), "residual") : nullptr;
    T* out = bn_buffer<T>(a.at(next++), "a");
    const int64_t count = bn_int(a.at(next)), c = bn_int(a.at(next + 1)), hw = bn_int(a.at(next + 2));
    const BnSizes s{count / (c * hw), c, hw, bn_int(a.at(next + 3))};
    const float* scale = workspace + s.chunks * 2 * c;
    const float* shift = scale + c;
    const float lo = b.lo(), hi = b.hi();
    if constexpr (E == 0) {
      bn_each(
          b, s,
          [&](int64_t base, int64_t n, int64_t k) {
            bn_rows::plane_apply(y + base, residual ? residual + base : nullptr, out + base, n, scale[k], shift[k], lo,
                                 hi);
          },
          [&](int64_t r) {
            const int64_t base = r * c;
            bn_rows::row_apply(y + base, residual ? residual + base : nullptr, out + base, c, scale, shift, lo, hi);
          });
    } else if (residual) {
      bn_each(b, s, [&](int64_t i, int64_t k) {
        const float v = El::load(y, i) * scale[k] + shift[k] + El::load(residual, i);
        El::store(out, i, std::min(std::max(v, lo), hi));
      });
    } else {
      bn_each(b, s, [&](int64_t i, int64_t k) {
        El::store(out, i, std::min(std::max(El::load(y, i) * scale[k] + shift[k], lo), hi));
      });
    }
  };
  kernels["bn_backward_partial"] = [b](const std::vector<KernelArg>& a) {
    const T* da = bn_buffer<const T>(a.at(0), "da");
    const T* out = bn_buffer<const T>(a.at(1), "a");
    const T* y = bn_buffer<const T>(a.at(2), "y");
    const float* stats = bn_buffer<const float>(a.at(3), "stats");
    float* partial = bn_buffer<float>(a.at(4), "workspace");
    const BnSizes s{bn_int(a.at(5)), bn_int(a.at(6)), bn_int(a.at(7)), bn_int(a.at(8))};
    const float hi = b.hi();
    const bool relu = b.relu;
    if constexpr (E == 0) {
      const bn_rows::Mask mask{relu, hi};
      bn_channel_sums(
          b, s, partial,
          [&](int64_t base, int64_t count, int64_t k, float* l1, float* l2) {
            bn_rows::plane_grad_sums(da + base, out + base, y + base, count, stats[k], mask, l1, l2);
          },
          [&](int64_t r, float* f1, float* f2) {
            const int64_t base = r * s.c;
            bn_rows::row_grad_sums(da + base, out + base, y + base, s.c, stats, mask, f1, f2);
          });
    } else {
      bn_channel_sums(b, s, partial, [&](int64_t i, int64_t k) {
        const float av = El::load(out, i), d = El::load(da, i);  // both loaded: a select, not a branch
        const bool open = (!relu) | ((av > 0.0f) & (av < hi));
        const float dz = open ? d : 0.0f;
        return std::pair<float, float>(dz, dz * (El::load(y, i) - stats[k]));
      });
    }
  };
  kernels["bn_backward_finalize"] = [](const std::vector<KernelArg>& a) {
    const float* stats = bn_buffer<const float>(a.at(0), "stats");
    const float* gamma = bn_buffer<const float>(a.at(1), "gamma");
    float* dgamma_out = bn_buffer<float>(a.at(2), "dgamma");
    float* dbeta_out = bn_buffer<float>(a.at(3), "dbeta");
    float* workspace = bn_buffer<float>(a.at(4), "workspace");
    const BnSizes s{bn_int(a.at(5)), bn_int(a.at(6)), bn_int(a.at(7)), bn_int(a.at(8))};
    const float eps = std::get<float>(a.at(9));
    const int64_t c = s.c;
    float* coeffs = workspace + s.chunks * 2 * c;
    for (int64_t k = 0; k < c; ++k) {
      const auto [sum, products] = bn_chunk_sums(workspace, s, k);
      const double count = static_cast<double>(s.rows()), inv_sigma = 1.0 / std::sqrt(stats[c + k] + double{eps});
      const double dgamma = products * inv_sigma, scale = gamma[k] * inv_sigma;
      dgamma_out[k] = static_cast<float>(dgamma);
      dbeta_out[k] = static_cast<float>(sum);
      coeffs[k] = static_cast<float>(scale);
      coeffs[c + k] = static_cast<float>(-scale * dgamma * inv_sigma / count);
      coeffs[2 * c + k] = static_cast<float>(-scale * sum / count);
    }
  };
  kernels["bn_backward_apply"] = [b](const std::vector<KernelArg>& a) {
    size_t next = 0;
    const T* da = bn_buffer<const T>(a.at(next++), "da");
    const T* out = bn_buffer<const T>(a.at(next++), "a");
    const T* y = bn_buffer<const T>(a.at(next++), "y");
    const float* stats = bn_buffer<const float>(a.at(next++), "stats");
    const float* workspace = bn_buffer<const float>(a.at(next++), "workspace");
    T* dy = bn_buffer<T>(a.at(next++), "dy");
    T* dresidual = b.residual ? bn_buffer<T>(a.at(next++), "dresidual") : nullptr;
    const int64_t count = bn_int(a.at(next)), c = bn_int(a.at(next + 1)), hw = bn_int(a.at(next + 2));
    const BnSizes s{count / (c * hw), c, hw, bn_int(a.at(next + 3))};
    const float* coeffs = workspace + s.chunks * 2 * c;
    const float hi = b.hi();
    const bool relu = b.relu;
    const auto gradient = [&](int64_t i, int64_t k) {
      const float av = El::load(out, i), d = El::load(da, i);  // both loaded: a select, not a branch
      const bool open = (!relu) | ((av > 0.0f) & (av < hi));
      const float dz = open ? d : 0.0f;
      El::store(dy, i, coeffs[k] * dz + (coeffs[c + k] * (El::load(y, i) - stats[k]) + coeffs[2 * c + k]));
      return dz;
    };
    if constexpr (E == 0) {
      const bn_rows::Mask mask{relu, hi};
      bn_each(
          b, s,
          [&](int64_t base, int64_t n, int64_t k) {
            const bn_rows::GradCoeffs g{stats[k], coeffs[k], coeffs[c + k], coeffs[2 * c + k]};
            bn_rows::plane_grad(da + base, out + base, y + base, dy + base, dresidual ? dresidual + base : nullptr, n, g,
                                mask);
          },
          [&](int64_t r) {
            const int64_t base = r * c;
            bn_rows::row_grad(da + base, out + base, y + base, dy + base, dresidual ? dresidual + base : nullptr, c,
                              stats, coeffs, coeffs + c, coeffs + 2 * c, mask);
          });
    } else if (dresidual) {
      bn_each(b, s, [&](int64_t i, int64_t k) { El::store(dresidual, i, gradient(i, k)); });
    } else {
      bn_each(b, s, [&](int64_t i, int64_t k) { gradient(i, k); });
    }
  };
  return kernels;
}

}  // namespace

void register_batch_norm_host_program() {
  static std::once_flag once;
  std::call_once(once, [] {
    cpu::register_host_program(kBatchNormHostProgram, [](const ProgramSource& source) {
      BnBlock b;
      b.elem = static_cast<int>(cpu::define_int(source, "ELEM"));
      b.nhwc = cpu::define_int(source, "LAYOUT_NHWC") != 0;
      b.residual = cpu::define_int(source, "HAS_RESIDUAL") != 0;
      b.relu = cpu::define_int(source, "HAS_RELU") != 0;
      if (cpu::define_int(source, "HAS_RELU_MAX") != 0) b.relu_max = std::stof(source.defines.at("RELU_MAX"));
      return b.elem == 0 ? bn_kernels<0>(b) : b.elem == 1 ? bn_kernels<1>(b) : bn_kernels<2>(b);
    });
  });
}

}  // namespace convtune
