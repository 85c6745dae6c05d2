// Plan creation (validation, compile through the program cache, workspace) and execution (bind by name, launch).
#include "convtune/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "convtune/error.h"
#include "src/tuning_db/tuning_database.h"

namespace convtune {

std::filesystem::path shipped_tuning_dir() {
  // Asked for by name: a missing folder is an error the database reports.
  if (const char* env = std::getenv("CONVTUNE_SHIPPED_TUNING_DIR"); env && *env) return env;
  // A binary moved away from its source tree simply has no shipped defaults.
  if (std::filesystem::is_directory(CONVTUNE_SHIPPED_TUNING_DIR)) return CONVTUNE_SHIPPED_TUNING_DIR;
  return {};
}

const TuningDatabase& default_tuning_database() {
  // Plans only look entries up: a damaged file is named once on stderr and left out, never fatal.
  static const TuningDatabase database =
      TuningDatabase::open_for_lookups(TuningDatabase::default_user_file(), shipped_tuning_dir());
  return database;
}

std::string config_problem(const KernelFamily& family, const Config& config, const ConvProblem& problem,
                           const DeviceInfo& device) {
  const auto parameters = family.parameters(problem);
  for (const Parameter& p : parameters) {
    const auto it = config.find(p.name);
    if (it == config.end()) return fmt::format("{}: parameter {} is missing", family.name(), p.name);
    if (std::find(p.values.begin(), p.values.end(), it->second) == p.values.end()) {
      std::string allowed;
      for (int64_t v : p.values) allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", v);
      return fmt::format("{}: {}={} is not a candidate value (expected one of {})", family.name(), p.name, it->second,
                         allowed);
    }
  }
  for (const auto& [name, value] : config) {
    bool known = false;
    for (const Parameter& p : parameters) known = known || p.name == name;
    if (!known) return fmt::format("{}: unknown parameter {}={}", family.name(), name, value);
  }
  const ConstraintContext context{config, problem, device};
  for (const Constraint& c : family.constraints(problem)) {
    if (!c.holds(context)) return fmt::format("{}: constraint '{}' fails for {}", family.name(), c.name, to_string(config));
  }
  return {};
}

Plan Plan::create(Device& device, const PlanRequest& request) { return create_impl(device, request, nullptr); }

Plan Plan::create(Device& device, const KernelFamily& family, const PlanRequest& request) {
  return create_impl(device, request, &family);
}

Plan Plan::create_impl(Device& device, const PlanRequest& request, const KernelFamily* given) {
  request.problem.validate();
  const DeviceInfo& info = device.info();
  if (!info.can_run_kernels) {
    throw Unsupported(fmt::format("{} runs no kernels ({})", info.id, info.cannot_run_reason));
  }
  // The families that can compute the problem: the named one, or every one that supports it.
  std::vector<const KernelFamily*> candidates;
  std::string reasons;
  if (given || !request.family.empty()) {
    const KernelFamily& named = given ? *given : kernel_family(request.family);
    if (const std::string why = named.unsupported_reason(request.problem, request.epilogue, info); !why.empty()) {
      throw Unsupported(fmt::format("{} does not compute {} (epilogue {}): {}", named.name(),
                                    request.problem.to_string(), to_string(request.epilogue), why));
    }
    candidates.push_back(&named);
  } else {
    for (const auto& f : kernel_families()) {
      const std::string why = f->unsupported_reason(request.problem, request.epilogue, info);
      if (why.empty()) candidates.push_back(f.get());
      else reasons += fmt::format("\n  {}: {}", f->name(), why);
    }
    if (candidates.empty()) {
      throw Unsupported(fmt::format("no kernel family computes {} (epilogue {}):{}", request.problem.to_string(),
                                    to_string(request.epilogue), reasons));
    }
  }
  Plan plan;
  plan.device_ = &device;
  plan.problem_ = request.problem;
  plan.epilogue_ = request.epilogue;
  const KernelFamily* family = candidates.front();
  if (request.config) {
    plan.config_ = *request.config;
    plan.config_source_ = plan.config_tier_ = "given";
  } else {
    std::optional<LookupResult> found;
    if (request.tuning) {
      std::map<std::string, std::string> hashes;
      for (const KernelFamily* f : candidates) hashes[f->name()] = kernel_source_hash(*f, request.problem, info);
      LookupOptions options;
      // A tuned shape's parameters are carried to this problem: a split rescaled, what no longer fits repaired.
      options.fit = [&](const TuningEntry& e) {
        return carry_config(given ? *given : kernel_family(e.family), e.parameters, e.problem, request.problem, info);
      };
      found = request.tuning->lookup(request.problem, info, hashes, options);
    }
    if (found && found->entry) {
      family = given ? given : &kernel_family(found->entry->family);
      plan.config_ = found->parameters;
      plan.config_tier_ = std::string(to_string(found->tier));
      plan.config_source_ = found->explain();
    } else {
      plan.config_source_ = found ? found->explain() : "built-in default (no tuning database consulted)";
      // Untuned, a family known to suit the problem badly gives way to the next one that supports it.
      if (!given && request.family.empty()) {
        std::string passed_over;
        for (const KernelFamily* f : candidates) {
          const std::string why = f->untuned_poor_fit(request.problem);
          if (why.empty()) {
            family = f;
            plan.config_source_ += passed_over;
            break;
          }
          passed_over += fmt::format("; {} passed over: {}", f->name(), why);
        }
      }
      plan.config_ = family->default_config(request.problem, info);
      plan.config_tier_ = "built-in default";
    }
  }
  plan.family_ = family->name();
  if (const std::string why = config_problem(*family, plan.config_, request.problem, info); !why.empty()) {
    throw InvalidArgument(fmt::format("{} on {}", why, request.problem.to_string()));
  }
  KernelRecipe recipe = family->recipe(request.problem, request.epilogue, plan.config_, info);
  plan.program_ = device.build(recipe.source);
  plan.from_cache_ = plan.program_->from_cache();
  for (size_t bytes : recipe.workspace_bytes) plan.workspace_.push_back(device.allocate(std::max<size_t>(bytes, 4)));
  for (const LaunchStep& step : recipe.steps) plan.kernels_.push_back(plan.program_->kernel(step.kernel));
  plan.steps_ = std::move(recipe.steps);
  return plan;
}

void Plan::run(Queue& queue, const DeviceOperands& operands) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    const LaunchStep& step = steps_[i];
    Kernel& kernel = *kernels_[i];
    for (size_t a = 0; a < step.args.size(); ++a) {
      const std::string& name = step.args[a];
      const int index = static_cast<int>(a);
      const Buffer* buffer = nullptr;
      if (name == "x") buffer = operands.x;
      else if (name == "w") buffer = operands.w;
      else if (name == "y") buffer = operands.y;
      else if (name == "bias") buffer = operands.bias;
      else if (name.rfind("workspace", 0) == 0) buffer = workspace_.at(std::stoul(name.substr(9))).get();
      else {
        const auto it = step.scalars.find(name);
        if (it == step.scalars.end()) {
          throw Error(fmt::format("{}: kernel {} argument '{}' has no value", describe(), step.kernel, name));
        }
        kernel.set_arg(index, it->second);
        continue;
      }
      if (!buffer) throw InvalidArgument(fmt::format("{}: operand '{}' was not given", describe(), name));
      kernel.set_arg(index, buffer);
    }
    queue.launch(kernel, step.geometry);
  }
}

size_t Plan::workspace_bytes() const {
  size_t total = 0;
  for (const auto& b : workspace_) total += b->bytes();
  return total;
}

std::string Plan::describe() const {
  std::string text = fmt::format("{}[{}]", family_, to_string(config_));
  if (epilogue_.any()) text += "+" + to_string(epilogue_);
  return text;
}

int64_t Plan::y_elements() const {
  return problem_.n * problem_.k * pooled_extent(problem_.p(), epilogue_) * pooled_extent(problem_.q(), epilogue_);
}

}  // namespace convtune
