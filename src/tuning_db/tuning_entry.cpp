// TuningEntry construction, staleness and strict JSON (de)serialisation with errors that name the field.
#include "src/tuning_db/tuning_entry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <ctime>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "convtune/error.h"
#include "src/core/json_reader.h"

#ifndef CONVTUNE_VERSION
// The project version (CMakeLists.txt project()); a build that defines CONVTUNE_VERSION overrides it.
#define CONVTUNE_VERSION "0.1.0"
#endif

namespace convtune {

TuningDevice TuningDevice::from(const DeviceInfo& info) {
  return {info.fingerprint(), std::string(to_string(info.backend)), info.name, info.vendor, info.architecture,
          info.driver_version};
}

bool TuningDevice::same_hardware(const DeviceInfo& info) const {
  return backend == to_string(info.backend) && name == info.name && vendor == info.vendor &&
         architecture == info.architecture;
}

bool TuningDevice::same_chip_other_backend(const DeviceInfo& info) const {
  const std::string_view other = to_string(info.backend);
  auto kernel_backend = [](std::string_view b) { return b == "cuda" || b == "opencl"; };
  return backend != other && kernel_backend(backend) && kernel_backend(other) && !name.empty() && name == info.name &&
         !architecture.empty() && architecture == info.architecture;
}

std::string TuningEntry::key() const {
  return fmt::format("{}\n{}\nv{}\n{}", device.fingerprint, family, kernel_version, problem.to_string());
}

std::string_view convtune_version() { return CONVTUNE_VERSION; }

std::string utc_date_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

TuningEntry make_tuning_entry(const DeviceInfo& device, std::string family, int kernel_version,
                              const Problem& problem, Config parameters, double time_ms) {
  if (!(time_ms > 0))
    throw InvalidArgument(fmt::format("tuning entry for {} {}: time {} ms is invalid: expected a positive time",
                                      family, problem.to_string(), time_ms));
  TuningEntry e;
  e.device = TuningDevice::from(device);
  e.family = std::move(family);
  e.kernel_version = kernel_version;
  e.problem = problem;
  e.parameters = std::move(parameters);
  e.time_ms = time_ms;
  e.gflops = problem.flops() / (time_ms * 1e6);
  e.date = utc_date_now();
  e.convtune_version = std::string(convtune_version());
  return e;
}

std::string stale_reason(const TuningEntry& entry, const DeviceInfo& device, int current_kernel_version) {
  if (entry.kernel_version == 0)
    return fmt::format("measured before kernel versions were declared (kernel version {} now): retune",
                       current_kernel_version);
  if (entry.kernel_version != current_kernel_version)
    return fmt::format("kernel version changed: entry measured with version {}, now {}", entry.kernel_version,
                       current_kernel_version);
  if (entry.device.same_hardware(device) && entry.device.fingerprint != device.fingerprint()) {
    if (entry.device.driver_version != device.driver_version)
      return fmt::format("driver changed: entry measured with {}, now {}", entry.device.driver_version,
                         device.driver_version);
    return fmt::format("device fingerprint changed: entry '{}', now '{}'", entry.device.fingerprint,
                       device.fingerprint());
  }
  return {};
}

namespace {

// The "shape" object's fields, in the order the files hold them.
std::vector<std::pair<const char*, int64_t>> shape_fields(const Problem& problem) {
  if (problem.is_conv()) {
    const ConvProblem& p = problem.conv();
    return {{"N", p.n}, {"C", p.c}, {"H", p.h}, {"W", p.w}, {"K", p.k}, {"R", p.r}, {"S", p.s},
            {"stride_h", p.stride.h}, {"stride_w", p.stride.w}, {"pad_h", p.pad.h}, {"pad_w", p.pad.w},
            {"dilation_h", p.dilation.h}, {"dilation_w", p.dilation.w}, {"groups", p.groups}};
  }
  const GemmProblem& g = problem.gemm();
  return {{"M", g.m}, {"N", g.n}, {"K", g.k}, {"batch", g.batch}};
}

}  // namespace

nlohmann::ordered_json to_json(const TuningEntry& e) {
  nlohmann::ordered_json parameters = nlohmann::ordered_json::object();
  for (const auto& [name, value] : e.parameters) parameters[name] = value;
  // The shape fields duplicate the problem text so the file can be read and filtered without parsing it;
  // loading checks that both agree.
  nlohmann::ordered_json shape = nlohmann::ordered_json::object();
  for (const auto& [name, value] : shape_fields(e.problem)) shape[name] = value;
  nlohmann::ordered_json device = {{"fingerprint", e.device.fingerprint},
                                   {"backend", e.device.backend},
                                   {"name", e.device.name},
                                   {"vendor", e.device.vendor},
                                   {"architecture", e.device.architecture},
                                   {"driver_version", e.device.driver_version}};
  return {
      {"family", e.family},
      {"problem", e.problem.to_string()},
      {"direction", std::string(e.problem.operation())},
      {"type", std::string(to_string(e.problem.type()))},
      {"math", std::string(to_string(e.problem.math()))},
      {"shape", std::move(shape)},
      {"parameters", std::move(parameters)},
      {"time_ms", e.time_ms},
      {"gflops", e.gflops},
      {"device", std::move(device)},
      {"kernel_version", e.kernel_version},
      {"date", e.date},
      {"convtune_version", e.convtune_version},
  };
}

namespace {

// Reads fields of one JSON object and names the entry and the field in every error.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {}

  void describe_as(const std::string& what) { what_ = what; }

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InvalidArgument(fmt::format("{}{}: field '{}' {}", where_, what_, field, problem));
  }

  const nlohmann::json& require(const nlohmann::json& object, const std::string& field,
                                const std::string& path) const {
    const auto it = object.find(field);
    if (it == object.end()) fail(path, "is missing");
    return *it;
  }

  std::string text(const std::string& field, const nlohmann::json* within = nullptr,
                   const std::string& prefix = {}) const {
    const nlohmann::json& v = require(within ? *within : object_, field, prefix + field);
    if (!v.is_string()) fail(prefix + field, fmt::format("must be a string, found {}", json_excerpt(v)));
    return v.get<std::string>();
  }

  double number(const std::string& field) const {
    const nlohmann::json& v = require(object_, field, field);
    if (!v.is_number()) fail(field, fmt::format("must be a number, found {}", json_excerpt(v)));
    return v.get<double>();
  }

  const nlohmann::json& object(const std::string& field) const {
    const nlohmann::json& v = require(object_, field, field);
    if (!v.is_object()) fail(field, fmt::format("must be an object, found {}", json_excerpt(v)));
    return v;
  }

 private:
  const nlohmann::json& object_;
  std::string where_;
  std::string what_;
};

}  // namespace

TuningEntry tuning_entry_from_json(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object())
    throw InvalidArgument(fmt::format("{}: must be an object, found {}", where, json_excerpt(json)));
  FieldReader read(json, where);
  TuningEntry e;
  // Family and problem first, so every later error names the entry by what it is.
  e.family = read.text("family");
  if (e.family.empty()) read.fail("family", "is empty");
  const std::string problem_text = read.text("problem");
  read.describe_as(fmt::format(" ({} {})", e.family, problem_text));
  try {
    e.problem = parse_any_problem(problem_text);
    e.problem.validate();
  } catch (const Error& error) {
    read.fail("problem", fmt::format("is not a valid problem: {}", error.what()));
  }

  const nlohmann::json& device = read.object("device");
  e.device.fingerprint = read.text("fingerprint", &device, "device.");
  e.device.backend = read.text("backend", &device, "device.");
  e.device.name = read.text("name", &device, "device.");
  e.device.vendor = read.text("vendor", &device, "device.");
  e.device.architecture = read.text("architecture", &device, "device.");
  e.device.driver_version = read.text("driver_version", &device, "device.");
  if (e.device.fingerprint.empty()) read.fail("device.fingerprint", "is empty");
  if (json.contains("kernel_version")) {
    const nlohmann::json& v = json["kernel_version"];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > INT32_MAX)
      read.fail("kernel_version", fmt::format("must be an integer from 0 to {}, found {}", INT32_MAX, json_excerpt(v)));
    e.kernel_version = static_cast<int>(v.get<uint64_t>());
  } else if (json.contains("source_hash")) {
    // Written before families declared kernel versions: kept (the cost model still learns from its time) but
    // never trusted for a plan, as an entry of another kernel version.
    read.text("source_hash");
    e.kernel_version = 0;
  } else {
    read.fail("kernel_version", "is missing");
  }

  // Optional duplicates of the problem text must agree with it: a hand edit of one but not the other would
  // otherwise silently mean two different things.
  if (json.contains("direction")) {
    const std::string direction = read.text("direction");
    if (direction != e.problem.operation())
      read.fail("direction", fmt::format("is '{}' but the problem says '{}'", direction, e.problem.operation()));
  }
  for (const auto& [field, expected] : {std::pair{"type", to_string(e.problem.type())},
                                        std::pair{"math", to_string(e.problem.math())}}) {
    if (!json.contains(field)) continue;
    const std::string value = read.text(field);
    if (value != expected) read.fail(field, fmt::format("is '{}' but the problem says '{}'", value, expected));
  }
  if (json.contains("precision")) {
    // Files written before type and math were separate fields: "tf32" meant FP32 tensors with TF32 math.
    const std::string precision = read.text("precision");
    const std::string expected = e.problem.math() == MathMode::TF32 ? "tf32" : std::string(to_string(e.problem.type()));
    if (precision != expected)
      read.fail("precision", fmt::format("is '{}' but the problem says '{}'", precision, expected));
  }
  if (json.contains("shape")) {
    const nlohmann::json& shape = read.object("shape");
    for (const auto& [name, expected] : shape_fields(e.problem)) {
      const std::string field = std::string("shape.") + name;
      // Every field or none (the shape is optional): a shape missing some says less than it seems to.
      const auto it = shape.find(name);
      if (it == shape.end()) read.fail(field, "is missing (a shape gives every extent of its problem)");
      if (!it->is_number_integer()) read.fail(field, fmt::format("must be an integer, found {}", json_excerpt(*it)));
      if (*it != expected) read.fail(field, fmt::format("is {} but the problem says {}", json_excerpt(*it), expected));
    }
  }

  const nlohmann::json& parameters = read.object("parameters");
  for (const auto& [name, value] : parameters.items()) {
    // Names become -DNAME=value compiler options: only identifiers, so a shared file cannot smuggle in others.
    const bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                            std::all_of(name.begin(), name.end(), [](char ch) {
                              return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                            });
    if (!identifier)
      read.fail("parameters", fmt::format("has the name {}: expected an identifier such as TILE_M",
                                          json_excerpt(nlohmann::json(name))));
    // An unsigned value above INT64_MAX would wrap around to a negative parameter.
    if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX))
      read.fail("parameters." + name, fmt::format("must be a 64-bit integer, found {}", json_excerpt(value)));
    e.parameters[name] = value.get<int64_t>();
  }
  e.time_ms = read.number("time_ms");
  if (!(e.time_ms > 0)) read.fail("time_ms", fmt::format("must be a positive time, found {}", e.time_ms));
  e.gflops = read.number("gflops");
  if (!(e.gflops > 0)) read.fail("gflops", fmt::format("must be a positive rate, found {}", e.gflops));
  e.date = read.text("date");
  e.convtune_version = read.text("convtune_version");
  return e;
}

}  // namespace convtune
