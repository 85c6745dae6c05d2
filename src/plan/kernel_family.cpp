// Config text form, epilogue helpers and the shape defines every family's kernels see.
#include "convtune/extension/kernel_family.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "convtune/error.h"
#include "convtune/plan.h"

namespace convtune {

std::string to_string(const Config& config) {
  std::string text;
  for (const auto& [name, value] : config) text += fmt::format("{}{}={}", text.empty() ? "" : ",", name, value);
  return text;
}

Config parse_config(std::string_view text) {
  Config config;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    int64_t value = 0;
    if (eq == std::string_view::npos || eq == 0 ||
        std::from_chars(item.data() + eq + 1, item.data() + item.size(), value).ptr != item.data() + item.size()) {
      throw InvalidArgument(fmt::format("parameter '{}' is not NAME=INTEGER", item));
    }
    config[std::string(item.substr(0, eq))] = value;
  }
  return config;
}

std::string to_string(const Epilogue& e) {
  std::string text;
  if (e.bias) text += "+bias";
  if (e.residual) text += "+residual";
  if (e.relu && e.relu_max == 6.0f) text += "+relu6";
  else if (e.relu && e.relu_max > 0) text += fmt::format("+relu-max={}", e.relu_max);
  else if (e.relu) text += "+relu";
  if (e.pool > 1) text += fmt::format("+maxpool{}", e.pool);
  return text.empty() ? "none" : text.substr(1);
}

Epilogue parse_epilogue(std::string_view text) {
  Epilogue e;
  if (text == "none" || text.empty()) return e;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('+', start), text.size());
    const std::string_view part = text.substr(start, end - start);
    if (part == "bias") {
      e.bias = true;
    } else if (part == "residual") {
      e.residual = true;
    } else if (part == "relu") {
      e.relu = true;
    } else if (part == "relu6") {
      e.relu = true;
      e.relu_max = 6.0f;
    } else if (part.substr(0, 9) == "relu-max=") {
      const std::string value(part.substr(9));
      char* stop = nullptr;
      const float cap = std::strtof(value.c_str(), &stop);
      if (value.empty() || *stop != '\0' || !(cap > 0) || !std::isfinite(cap))
        throw InvalidArgument(fmt::format("epilogue '{}': relu-max must be a positive number, got '{}'", text, value));
      e.relu = true;
      e.relu_max = cap;
    } else if (part == "maxpool2") {
      e.pool = 2;
    } else {
      throw InvalidArgument(fmt::format("epilogue '{}': unknown part '{}' (expected bias, residual, relu, relu6, "
                                        "relu-max=X, maxpool2 or none, joined by '+')",
                                        text, part));
    }
    start = end + 1;
  }
  return e;
}

std::string fp32_only_reason(std::string_view family, const Problem& problem) {
  // A math mode sets the accuracy a result needs at least (tf32: TF32 multiplies allowed; 3xtf32: FP32-accurate),
  // so FP32 math serves every mode, as cuDNN's TF32 mode also runs FMA algorithms where they are faster.
  if (problem.type() == ElementType::F32) return {};
  return fmt::format("{} computes fp32 tensors (in fp32 math), not {} tensors", family, to_string(problem.type()));
}

std::string fp32_kernel_conv_reason(std::string_view family, const Problem& problem, const DeviceInfo& device) {
  if (!problem.is_conv()) return "computes convolutions, not matrix products";
  if (!device.can_run_kernels) return fmt::format("needs a device that compiles kernels: {}", device.cannot_run_reason);
  return fp32_only_reason(family, problem);
}

std::string family_name(const KernelFamily& family) { return family.name(); }

std::vector<FamilySummary> family_summaries() {
  std::vector<FamilySummary> out;
  for (const auto& f : kernel_families())
    out.push_back({f->name(), f->description(), f->problem_kind(), f->runs_on_cpu_backend()});
  return out;
}

int64_t pooled_extent(int64_t extent, const Epilogue& e) { return e.pool > 1 ? extent / e.pool : extent; }

std::map<std::string, std::string> problem_defines(const ConvProblem& p) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return {{"N", s(p.n)},           {"C", s(p.c)},           {"H", s(p.h)},           {"W", s(p.w)},
          {"K", s(p.k)},           {"R", s(p.r)},           {"S", s(p.s)},           {"P", s(p.p())},
          {"Q", s(p.q())},         {"STRIDE_H", s(p.stride.h)}, {"STRIDE_W", s(p.stride.w)},
          {"PAD_H", s(p.pad.h)},   {"PAD_W", s(p.pad.w)},   {"DILATION_H", s(p.dilation.h)},
          {"DILATION_W", s(p.dilation.w)}, {"GROUPS", s(p.groups)}, {"C_PER_GROUP", s(p.c_per_group())},
          {"K_PER_GROUP", s(p.k_per_group())},
          // 0 forward, 1 backward-data, 2 backward-filter: one kernel source can serve several directions.
          {"DIRECTION", s(static_cast<int>(p.direction))}};
}

}  // namespace convtune
