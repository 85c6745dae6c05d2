// The CPU backend's batch norm (host program "host/batch_norm"): kernels/common/batch_norm.cl's six kernels with
// the same arguments and arithmetic, computed on the host's threads.
#include "src/plan/batch_norm_host.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "convtune/rounding.h"
#include "src/backend/cpu/host_program.h"
#include "src/core/parallel_for.h"

namespace convtune {

namespace {

// What the program's defines say, once per build.
struct BnShape {
  int elem = 0;  // 0 FP32, 1 BF16, 2 FP16
  bool nhwc = false, residual = false, relu = false;
  float relu_max = 0;
};

float bn_load(const BnShape& s, const void* p, int64_t i) {
  if (s.elem == 0) return static_cast<const float*>(p)[i];
  const uint16_t bits = static_cast<const uint16_t*>(p)[i];
  return s.elem == 1 ? bf16_to_fp32(bits) : fp16_to_fp32(bits);
}

void bn_store(const BnShape& s, void* p, int64_t i, float v) {
  if (s.elem == 0) {
    static_cast<float*>(p)[i] = v;
  } else {
    static_cast<uint16_t*>(p)[i] = s.elem == 1 ? fp32_to_bf16(v) : fp32_to_fp16(v);
  }
}

float bn_through_relu(const BnShape& s, float da, float a) {
  if (!s.relu) return da;
  return a > 0.0f && (s.relu_max <= 0 || a < s.relu_max) ? da : 0.0f;
}

int64_t bn_int(const KernelArg& arg) {
  if (const auto* v = std::get_if<int32_t>(&arg)) return *v;
  return std::get<int64_t>(arg);
}

// Element j of channel k (bn_index in the kernel).
int64_t bn_index(const BnShape& s, int64_t j, int64_t k, int64_t c, int64_t hw) {
  if (s.nhwc) return j * c + k;
  const int64_t image = j / hw;
  return (image * c + k) * hw + (j - image * hw);
}

// Partial sums of two functions of element i of channel k, per chunk of rows: partial[chunk][0..1][k]. `value`
// returns both for one element; each chunk accumulates in double and stores float, as the kernel's partials are.
template <class Value>
void bn_partials(const BnShape& s, float* partial, int64_t n, int64_t c, int64_t hw, int64_t chunks, Value value) {
  const int64_t rows = n * hw, per_chunk = (rows + chunks - 1) / chunks;
  parallel_for(chunks, hardware_threads(), [&](int64_t g) {
    std::vector<double> sum(static_cast<size_t>(c)), second(static_cast<size_t>(c));
    const int64_t end = std::min(rows, (g + 1) * per_chunk);
    const auto add = [&](int64_t i, int64_t k) {
      const auto [v1, v2] = value(i, k);
      sum[static_cast<size_t>(k)] += v1;
      second[static_cast<size_t>(k)] += v2;
    };
    if (s.nhwc) {
      for (int64_t j = g * per_chunk; j < end; ++j)
        for (int64_t k = 0; k < c; ++k) add(j * c + k, k);
    } else {  // the chunk's rows image by image, each channel's pixels contiguous
      for (int64_t j = g * per_chunk; j < end;) {
        const int64_t image = j / hw, first = j - image * hw, last = std::min(hw, first + end - j);
        for (int64_t k = 0; k < c; ++k)
          for (int64_t p = first; p < last; ++p) add((image * c + k) * hw + p, k);
        j += last - first;
      }
    }
    for (int64_t k = 0; k < c; ++k) {
      partial[(g * 2) * c + k] = static_cast<float>(sum[static_cast<size_t>(k)]);
      partial[(g * 2 + 1) * c + k] = static_cast<float>(second[static_cast<size_t>(k)]);
    }
  });
}

std::map<std::string, cpu::HostKernel> bn_kernels(const BnShape& s) {
  std::map<std::string, cpu::HostKernel> kernels;
  kernels["bn_forward_partial"] = [s](const std::vector<KernelArg>& a) {
    const void* y = cpu::host_floats(a.at(0), "y");
    float* partial = cpu::host_floats(a.at(1), "workspace");
    const int64_t n = bn_int(a.at(2)), c = bn_int(a.at(3)), hw = bn_int(a.at(4)), chunks = bn_int(a.at(5));
    bn_partials(s, partial, n, c, hw, chunks, [&](int64_t i, int64_t k) {
      const float v = bn_load(s, y, i) - bn_load(s, y, bn_index(s, 0, k, c, hw));
      return std::pair<double, double>(v, static_cast<double>(v) * v);
    });
  };
  kernels["bn_forward_finalize"] = [s](const std::vector<KernelArg>& a) {
    const void* y = cpu::host_floats(a.at(0), "y");
    const float* params = cpu::host_floats(a.at(1), "params");
    float* stats = cpu::host_floats(a.at(2), "stats");
    const float* partial = cpu::host_floats(a.at(3), "workspace");
    const int64_t n = bn_int(a.at(4)), c = bn_int(a.at(5)), hw = bn_int(a.at(6)), chunks = bn_int(a.at(7));
    const float eps = std::get<float>(a.at(8));
    float* coeffs = cpu::host_floats(a.at(3), "workspace") + chunks * 2 * c;
    for (int64_t k = 0; k < c; ++k) {
      double sum = 0, squares = 0;
      for (int64_t g = 0; g < chunks; ++g) {
        sum += partial[(g * 2) * c + k];
        squares += partial[(g * 2 + 1) * c + k];
      }
      const double count = static_cast<double>(n * hw), shifted_mean = sum / count;
      const double var = std::max(squares / count - shifted_mean * shifted_mean, 0.0);
      const double mean = bn_load(s, y, bn_index(s, 0, k, c, hw)) + shifted_mean;
      const double scale = params[k] / std::sqrt(var + eps);
      stats[k] = static_cast<float>(mean);
      stats[c + k] = static_cast<float>(var);
      coeffs[k] = static_cast<float>(scale);
      coeffs[c + k] = static_cast<float>(params[c + k] - mean * scale);
    }
  };
  kernels["bn_forward_apply"] = [s](const std::vector<KernelArg>& a) {
    size_t next = 0;
    const void* y = cpu::host_floats(a.at(next++), "y");
    const float* workspace = cpu::host_floats(a.at(next++), "workspace");
    const void* residual = s.residual ? cpu::host_floats(a.at(next++), "residual") : nullptr;
    void* out = cpu::host_floats(a.at(next++), "a");
    const int64_t count = bn_int(a.at(next)), c = bn_int(a.at(next + 1)), hw = bn_int(a.at(next + 2));
    const float* coeffs = workspace + bn_int(a.at(next + 3)) * 2 * c;
    constexpr int64_t kChunk = 16384;
    parallel_for((count + kChunk - 1) / kChunk, hardware_threads(), [&](int64_t chunk) {
      const int64_t end = std::min(count, (chunk + 1) * kChunk);
      for (int64_t i = chunk * kChunk; i < end; ++i) {
        const int64_t k = s.nhwc ? i % c : (i / hw) % c;
        float v = std::fma(bn_load(s, y, i), coeffs[k], coeffs[c + k]);
        if (residual) v += bn_load(s, residual, i);
        if (s.relu) v = std::max(v, 0.0f);
        if (s.relu && s.relu_max > 0) v = std::min(v, s.relu_max);
        bn_store(s, out, i, v);
      }
    });
  };
  kernels["bn_backward_partial"] = [s](const std::vector<KernelArg>& a) {
    const void* da = cpu::host_floats(a.at(0), "da");
    const void* out = cpu::host_floats(a.at(1), "a");
    const void* y = cpu::host_floats(a.at(2), "y");
    const float* stats = cpu::host_floats(a.at(3), "stats");
    float* partial = cpu::host_floats(a.at(4), "workspace");
    const int64_t n = bn_int(a.at(5)), c = bn_int(a.at(6)), hw = bn_int(a.at(7)), chunks = bn_int(a.at(8));
    bn_partials(s, partial, n, c, hw, chunks, [&](int64_t i, int64_t k) {
      const float dz = bn_through_relu(s, bn_load(s, da, i), bn_load(s, out, i));
      return std::pair<double, double>(dz, static_cast<double>(dz) * (bn_load(s, y, i) - stats[k]));
    });
  };
  kernels["bn_backward_finalize"] = [](const std::vector<KernelArg>& a) {
    const float* stats = cpu::host_floats(a.at(0), "stats");
    const float* params = cpu::host_floats(a.at(1), "params");
    float* dparams = cpu::host_floats(a.at(2), "dparams");
    const float* partial = cpu::host_floats(a.at(3), "workspace");
    const int64_t n = bn_int(a.at(4)), c = bn_int(a.at(5)), hw = bn_int(a.at(6)), chunks = bn_int(a.at(7));
    const float eps = std::get<float>(a.at(8));
    float* coeffs = cpu::host_floats(a.at(3), "workspace") + chunks * 2 * c;
    for (int64_t k = 0; k < c; ++k) {
      double sum = 0, products = 0;
      for (int64_t g = 0; g < chunks; ++g) {
        sum += partial[(g * 2) * c + k];
        products += partial[(g * 2 + 1) * c + k];
      }
      const double count = static_cast<double>(n * hw), inv_sigma = 1.0 / std::sqrt(stats[c + k] + double{eps});
      const double dgamma = products * inv_sigma, scale = params[k] * inv_sigma;
      dparams[k] = static_cast<float>(dgamma);
      dparams[c + k] = static_cast<float>(sum);
      coeffs[k] = static_cast<float>(scale);
      coeffs[c + k] = static_cast<float>(-scale * dgamma * inv_sigma / count);
      coeffs[2 * c + k] = static_cast<float>(-scale * sum / count);
    }
  };
  kernels["bn_backward_apply"] = [s](const std::vector<KernelArg>& a) {
    size_t next = 0;
    const void* da = cpu::host_floats(a.at(next++), "da");
    const void* out = cpu::host_floats(a.at(next++), "a");
    const void* y = cpu::host_floats(a.at(next++), "y");
    const float* stats = cpu::host_floats(a.at(next++), "stats");
    const float* workspace = cpu::host_floats(a.at(next++), "workspace");
    void* dy = cpu::host_floats(a.at(next++), "dy");
    void* dresidual = s.residual ? cpu::host_floats(a.at(next++), "dresidual") : nullptr;
    const int64_t count = bn_int(a.at(next)), c = bn_int(a.at(next + 1)), hw = bn_int(a.at(next + 2));
    const float* coeffs = workspace + bn_int(a.at(next + 3)) * 2 * c;
    constexpr int64_t kChunk = 16384;
    parallel_for((count + kChunk - 1) / kChunk, hardware_threads(), [&](int64_t chunk) {
      const int64_t end = std::min(count, (chunk + 1) * kChunk);
      for (int64_t i = chunk * kChunk; i < end; ++i) {
        const int64_t k = s.nhwc ? i % c : (i / hw) % c;
        const float dz = bn_through_relu(s, bn_load(s, da, i), bn_load(s, out, i));
        bn_store(s, dy, i,
                 std::fma(coeffs[k], dz, std::fma(coeffs[c + k], bn_load(s, y, i) - stats[k], coeffs[2 * c + k])));
        if (dresidual) bn_store(s, dresidual, i, dz);
      }
    });
  };
  return kernels;
}

}  // namespace

void register_batch_norm_host_program() {
  static std::once_flag once;
  std::call_once(once, [] {
    cpu::register_host_program(kBatchNormHostProgram, [](const ProgramSource& source) {
      BnShape s;
      s.elem = static_cast<int>(cpu::define_int(source, "ELEM"));
      s.nhwc = cpu::define_int(source, "LAYOUT_NHWC") != 0;
      s.residual = cpu::define_int(source, "HAS_RESIDUAL") != 0;
      s.relu = cpu::define_int(source, "HAS_RELU") != 0;
      if (cpu::define_int(source, "HAS_RELU_MAX") != 0) s.relu_max = std::stof(source.defines.at("RELU_MAX"));
      return bn_kernels(s);
    });
  });
}

}  // namespace convtune
