// Plan descriptors (family choice, tuning database lookup, validation, recipe) and plans (compile through the
// program cache, arguments resolved once, operand checks, launches).
#include "convtune/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/interop.h"
#include "src/core/install_paths.h"
#include "src/tuning_db/cost_model.h"
#include "src/tuning_db/shape_distance.h"
#include "src/tuning_db/tuning_database.h"

namespace convtune {

std::string_view to_string(ConfigTier tier) {
  switch (tier) {
    case ConfigTier::Given: return "given";
    case ConfigTier::Exact: return "exact";
    case ConfigTier::Nearest: return "nearest";
    case ConfigTier::Architecture: return "architecture";
    case ConfigTier::Vendor: return "vendor";
    case ConfigTier::BuiltInDefault: return "built-in default";
  }
  return "?";
}

std::filesystem::path shipped_tuning_dir() {
  // Asked for by name: a missing folder is an error the database reports.
  if (const char* env = std::getenv("CONVTUNE_SHIPPED_TUNING_DIR"); env && *env) return env;
  const std::filesystem::path dir = data_dir() / "tuning";
  if (!data_dir().empty() && std::filesystem::is_directory(dir)) return dir;
  return {};  // a library moved away from its data has no shipped defaults
}

const TuningDatabase& default_tuning_database() {
  // Plans only look entries up: a damaged file is named once on stderr and left out, never fatal.
  static const TuningDatabase database =
      TuningDatabase::open_for_lookups(TuningDatabase::default_user_file(), shipped_tuning_dir());
  return database;
}

std::string config_problem(const KernelFamily& family, const Config& config, const Problem& problem,
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
  // Families keep their less accurate variants out of modes that do not admit them through a constraint of their own
  // (so searches prune them early); this holds every family to it whatever its constraints say.
  if (const double factor = family.error_factor(problem, config);
      factor > max_error_factor(problem.type(), problem.math())) {
    return fmt::format("{}: {} is held to {:g}x the FP32 tolerance, more than {} math admits ({:g}x; fp32-fast admits "
                       "{:g}x)", family.name(), to_string(config), factor, to_string(problem.math()),
                       max_error_factor(problem.type(), problem.math()), kFp32FastErrorFactor);
  }
  return {};
}

namespace {

// The cost model's family for an untuned problem (see src/tuning_db/cost_model.h); nullopt when the device has no
// model or it predicts none of the candidates. Appends what it predicted to `explanation`.
std::optional<std::string> model_choice(const TuningDatabase& database, const DeviceInfo& info,
                                        const std::vector<const KernelFamily*>& candidates, const ConvProblem& problem,
                                        std::string* explanation) {
  const std::shared_ptr<const CostModel> model = cost_model_for(database, info);
  if (!model) return std::nullopt;
  std::vector<std::string> names;
  std::map<std::string, std::string> poor_fit;
  for (const KernelFamily* f : candidates) {
    names.push_back(f->name());
    if (std::string why = f->untuned_poor_fit(Problem(problem), info); !why.empty()) poor_fit[f->name()] = std::move(why);
  }
  std::set<std::string> claims;
  for (const KernelFamily* f : candidates)
    if (!f->untuned_claim(Problem(problem), info).empty()) claims.insert(f->name());
  std::string predicted;
  std::optional<std::string> chosen = cost_model_choice(
      *model, names, problem, [&](const std::string& f) { return poor_fit.count(f) > 0; }, &predicted,
      [&](const std::string& f) { return claims.count(f) > 0; });
  if (chosen) {
    *explanation += fmt::format("; family by the cost model fitted on {}: predicted {}", model->source(), predicted);
    for (const auto& [family, why] : poor_fit) *explanation += fmt::format("; {} passed over: {}", family, why);
  }
  return chosen;
}

// The families an untuned plan chooses among: for a channels-last convolution, those that read channels-last
// themselves where one suits the problem (the others' copies cost a pass over each operand, more than the
// differences between families an untuned choice can tell apart); otherwise all of them.
std::vector<const KernelFamily*> untuned_candidates(const PlanRequest& request, const DeviceInfo& info,
                                                    const std::vector<const KernelFamily*>& candidates,
                                                    bool free_choice) {
  if (!free_choice || !request.problem.is_conv() || request.problem.conv().layout != Layout::NHWC) return candidates;
  std::vector<const KernelFamily*> native;
  for (const KernelFamily* f : candidates)
    if (f->computes_nhwc() && f->untuned_poor_fit(request.problem, info).empty()) native.push_back(f);
  return native.empty() ? candidates : native;
}

// An untuned plan's family and configuration, and what to add to its explanation.
struct DefaultChoice {
  const KernelFamily* family;
  Config config;
  std::string explanation;
};

// Untuned: the cost model fitted on this device's tuning entries picks the family it predicts fastest (families
// known to suit the problem badly left out); a device without a model keeps the rank order, where a family that
// claims the problem (untuned_claim: Winograd on wide 3x3 layers) goes first and a family known to suit the
// problem badly gives way to the next one that supports it. A family whose default needs more
// workspace than the limit (one whose constraints do not bound it) gives way to the next as well, named in
// `over_limit`.
DefaultChoice choose_default(const PlanRequest& request, const DeviceInfo& info,
                             std::vector<const KernelFamily*> candidates, const TuningDatabase* database,
                             bool free_choice, std::string* over_limit) {
  const uint64_t limit = workspace_limit(info);
  for (;;) {
    const KernelFamily* chosen = candidates.front();
    std::string how;
    std::optional<std::string> modelled;
    if (free_choice && database && request.problem.is_conv()) {
      modelled = model_choice(*database, info, candidates, request.problem.conv(), &how);
    }
    if (modelled) {
      chosen = &kernel_family(*modelled);
    } else if (free_choice) {
      const KernelFamily* claimed = nullptr;
      for (const KernelFamily* f : candidates) {
        const std::string claim = f->untuned_claim(request.problem, info);
        if (!claim.empty() && f->untuned_poor_fit(request.problem, info).empty()) {
          claimed = chosen = f;
          how = fmt::format("; {} ahead of the rank order: {}", f->name(), claim);
          break;
        }
      }
      std::string passed_over;
      for (const KernelFamily* f : candidates) {
        if (claimed) break;
        const std::string why = f->untuned_poor_fit(request.problem, info);
        if (why.empty()) {
          chosen = f;
          how = passed_over;
          break;
        }
        passed_over += fmt::format("; {} passed over: {}", f->name(), why);
      }
    }
    Config config = chosen->default_config(request.problem, info);
    if (free_choice && candidates.size() > 1 && config_problem(*chosen, config, request.problem, info).empty()) {
      const size_t bytes = chosen->recipe(request.problem, request.epilogue, config, info).limited_bytes();
      if (bytes > limit) {
        *over_limit += fmt::format("; {} default skipped: its workspace ({} bytes) is over the workspace limit ({} bytes)",
                                   chosen->name(), bytes, limit);
        candidates.erase(std::find(candidates.begin(), candidates.end(), chosen));
        continue;
      }
    }
    return {chosen, std::move(config), std::move(how)};
  }
}

}  // namespace

PlanDescriptor PlanDescriptor::create(const DeviceInfo& device, const PlanRequest& request) {
  return create_impl(device, request, nullptr);
}

PlanDescriptor PlanDescriptor::create(const DeviceInfo& device, const KernelFamily& family, const PlanRequest& request) {
  return create_impl(device, request, &family);
}

PlanDescriptor PlanDescriptor::create_impl(const DeviceInfo& device, const PlanRequest& request,
                                           const KernelFamily* given) {
  request.problem.validate();
  // The families see the device as this request may use it: its workspace limit applied.
  const DeviceInfo info = with_workspace_limit(device, request.workspace_limit);
  const uint64_t limit = workspace_limit(info);
  // What the workspace limit kept out, for the explanation: families, entries and defaults, with both sizes.
  std::string over_limit;
  // The families that can compute the problem: the named one, or every one that supports it.
  std::vector<const KernelFamily*> candidates;
  if (given || !request.family.empty()) {
    const KernelFamily& named = given ? *given : kernel_family(request.family);
    if (const std::string why = named.unsupported_reason(request.problem, request.epilogue, info); !why.empty()) {
      throw Unsupported(fmt::format("{} does not compute {} (epilogue {}) on {}: {}", named.name(),
                                    request.problem.to_string(), to_string(request.epilogue), info.id, why));
    }
    candidates.push_back(&named);
  } else {
    std::string reasons;
    const DeviceInfo unlimited = with_workspace_limit(info, std::numeric_limits<uint64_t>::max());
    for (const auto& f : kernel_families()) {
      if (f->problem_kind() != request.problem.kind()) continue;
      const std::string why = f->unsupported_reason(request.problem, request.epilogue, info);
      if (why.empty()) {
        candidates.push_back(f.get());
        continue;
      }
      reasons += fmt::format("\n  {}: {}", f->name(), why);
      // A family the limit alone keeps out is named: a larger limit would let it compete.
      if (f->unsupported_reason(request.problem, request.epilogue, unlimited).empty())
        over_limit += fmt::format("; {} skipped for the workspace limit: {}", f->name(), why);
    }
    if (candidates.empty()) {
      throw Unsupported(fmt::format("no kernel family computes {} (epilogue {}) on {}:{}", request.problem.to_string(),
                                    to_string(request.epilogue), info.id, reasons));
    }
  }
  PlanDescriptor d;
  d.problem_ = request.problem;
  d.epilogue_ = request.epilogue;
  d.family_ = candidates.front();
  if (request.config) {
    d.config_ = *request.config;
    d.tier_ = ConfigTier::Given;
    d.explanation_ = "given";
  } else {
    std::optional<LookupResult> found;
    const TuningDatabase* database = request.tuning;
    if (!database && request.use_tuning) database = &default_tuning_database();
    const auto family_of = [&](const TuningEntry& e) -> const KernelFamily& {
      return given ? *given : kernel_family(e.family);
    };
    if (database) {
      KernelVersions versions;
      for (const KernelFamily* f : candidates) versions[f->name()] = f->kernel_version();
      LookupOptions options;
      // A tuned shape's parameters are carried to this problem: a split rescaled, what no longer fits repaired. A
      // limit tighter than the device's default does not take part: an entry over it is skipped as measured
      // (refuse, below) rather than refitted into a variant nobody timed.
      const DeviceInfo carried_on = with_workspace_limit(info, std::max(limit, default_workspace_limit(device)));
      options.fit = [&](const TuningEntry& e) {
        return carry_config(family_of(e), e.parameters, e.problem, request.problem, carried_on);
      };
      const bool free_choice = !given && request.family.empty();
      options.refuse = [&](const TuningEntry& e, const Config& fitted) -> std::string {
        const KernelFamily& family = family_of(e);
        // An entry measured on a variant the asked mode does not admit (an fp32 entry of Winograd's alpha 8, tuned
        // before fp32-fast existed) describes no variant this plan may run: skipped, never refitted into one.
        const double admitted = max_error_factor(request.problem.type(), request.problem.math());
        if (const double factor = family.error_factor(request.problem, e.parameters); factor > admitted) {
          return fmt::format("held to {:g}x the FP32 tolerance, more than {} math admits ({:g}x)", factor,
                             to_string(request.problem.math()), admitted);
        }
        // Another shape's entry is an extrapolation, as an untuned default is: where the plan chooses the family,
        // one its untuned rules call a poor fit for this problem is not carried to it (on an H100, fft_wgmma's
        // 13x13 3x3 entries run a 7x7 3x3 layer at 1.6-2.1x cuDNN's time). Its own shape's entries, measurements of
        // exactly this problem, still choose it.
        if (free_choice && !same_shape(e.problem, request.problem)) {
          if (std::string why = family.untuned_poor_fit(request.problem, info); !why.empty())
            return fmt::format("tuned for another shape, and a poor fit here untuned ({})", why);
        }
        // A family that computes channels-last problems on NCHW copies adds the copies' time to what an NCHW
        // entry measured (and saves it from what an NHWC one did): its time says little in the other layout.
        if (e.problem.is_conv() && request.problem.is_conv() &&
            e.problem.conv().layout != request.problem.conv().layout && !family.computes_nhwc()) {
          return fmt::format("tuned in {}, and {} computes {} problems through copies the entry did not time",
                             to_string(e.problem.conv().layout), family.name(),
                             to_string(request.problem.conv().layout));
        }
        const size_t bytes = family.recipe(request.problem, request.epilogue, fitted, info).limited_bytes();
        if (bytes > limit) {
          return fmt::format("its workspace ({} bytes) is over the workspace limit ({} bytes)", bytes, limit);
        }
        return {};
      };
      found = database->lookup(request.problem, info, versions, options);
    }
    if (found && found->entry) {
      d.family_ = &family_of(*found->entry);
      d.config_ = found->parameters;
      d.tier_ = found->tier;
      d.explanation_ = found->explain();
    } else {
      d.explanation_ = found ? found->explain()
                             : request.use_tuning ? "built-in default (no tuning database)"
                                                  : "built-in default (tuning database not consulted)";
      const bool free_choice = !given && request.family.empty();
      DefaultChoice choice = choose_default(request, info, untuned_candidates(request, info, candidates, free_choice),
                                            database, free_choice, &over_limit);
      d.family_ = choice.family;
      d.config_ = std::move(choice.config);
      d.explanation_ += choice.explanation;
      d.tier_ = ConfigTier::BuiltInDefault;
    }
  }
  d.explanation_ += over_limit;
  if (request.problem.is_conv() && request.problem.conv().layout == Layout::NHWC && !d.family_->computes_nhwc())
    d.explanation_ += fmt::format("; {} reads NCHW: the channels-last operands are transposed into NCHW copies and the "
                                  "result back", d.family_->name());
  if (const std::string why = config_problem(*d.family_, d.config_, request.problem, info); !why.empty()) {
    throw InvalidArgument(fmt::format("{} on {}", why, request.problem.to_string()));
  }
  d.recipe_ = std::make_shared<const KernelRecipe>(d.family_->recipe(request.problem, request.epilogue, d.config_, info));
  // Families whose constraints bound their workspace never get here over the limit; this holds the others to it,
  // before anything is allocated.
  if (d.recipe_->limited_bytes() > limit) {
    throw InvalidArgument(fmt::format("{} on {} needs {} bytes of workspace{}, over the workspace limit of {} bytes",
                                      d.describe(), request.problem.to_string(), d.recipe_->limited_bytes(),
                                      d.recipe_->host_bytes ? fmt::format(" and host memory ({} of them host memory)",
                                                                         d.recipe_->host_bytes)
                                                           : std::string(),
                                      limit));
  }
  return d;
}

const KernelRecipe& PlanDescriptor::recipe() const {
  static const KernelRecipe none;
  return recipe_ ? *recipe_ : none;
}
size_t PlanDescriptor::workspace_bytes() const { return recipe().workspace_bytes; }
size_t PlanDescriptor::memory_bytes() const { return recipe().memory_bytes(); }

double Plan::error_factor() const { return descriptor_.family().error_factor(problem(), config()); }
double Plan::performed_flops() const { return descriptor_.family().performed_flops(problem(), config()); }
bool Plan::uses_tensor_cores() const { return descriptor_.family().uses_tensor_cores(); }

std::string PlanDescriptor::describe() const {
  std::string text = fmt::format("{}[{}]", family_->name(), to_string(config_));
  if (epilogue_.any()) text += "+" + to_string(epilogue_);
  return text;
}

size_t PlanDescriptor::operand_bytes(int index) const {
  const size_t element = static_cast<size_t>(bytes_per_element(problem_.type()));
  // The bias is K floats whatever the tensors' type: every kernel's epilogue adds it in FP32 before the one rounding
  // (the 16-bit ones too), and the nn layers keep it in FP32.
  if (index == kBiasOperand) return epilogue_.bias ? static_cast<size_t>(problem_.conv().k) * sizeof(float) : 0;
  if (index == kResidualOperand) return epilogue_.residual ? operand_bytes(2) : 0;  // y's shape, layout and type
  int64_t elements = problem_.operand(index).elements;
  if (problem_.is_conv() && index == 2 && epilogue_.pool > 1) {
    const ConvProblem& c = problem_.conv();
    elements = c.n * c.k * pooled_extent(c.p(), epilogue_) * pooled_extent(c.q(), epilogue_);
  }
  return static_cast<size_t>(elements) * element;
}

Plan Plan::create(Device& device, const PlanRequest& request) {
  return Plan(device, PlanDescriptor::create(device.info(), request));
}

Plan Plan::create(Device& device, const KernelFamily& family, const PlanRequest& request) {
  return Plan(device, PlanDescriptor::create(device.info(), family, request));
}

// What runs on one queue use: the launch steps' kernels, their fixed arguments set (buffers are bound per run),
// and the workspace and staging buffers unless the caller brings them.
struct PlanResources {
  const Queue* queue = nullptr;  // the queue whose runs use them; null until a run takes them
  std::vector<std::shared_ptr<Kernel>> kernels;
  std::shared_ptr<Buffer> workspace;
  std::vector<std::shared_ptr<Buffer>> staging;
};

// A kernel object's arguments are set and then enqueued, so two threads binding one kernel at once would launch
// each other's operands (1-5 of 1,000 outputs wrong with 10 threads on one plan: data/repro/py-plan-thread-race.py
// under tests/); a workspace shared by
// two runs in flight at once is overwritten by the other. The lock makes binding and enqueueing one step; the
// resources are per queue where runs on two queues could overlap on the device.
struct Plan::Runs {
  std::mutex mutex;
  std::vector<PlanResources> resources;  // the first made with the plan
};

namespace {

PlanResources make_resources(Device& device, const PlanDescriptor& descriptor,
                             const std::vector<std::shared_ptr<Program>>& programs, bool external_workspace) {
  const KernelRecipe& recipe = descriptor.recipe();
  PlanResources r;
  if (!external_workspace && recipe.workspace_bytes > 0) r.workspace = device.allocate(recipe.workspace_bytes);
  if (!external_workspace)
    for (size_t bytes : recipe.staging_bytes) r.staging.push_back(device.allocate(std::max<size_t>(bytes, 1)));
  for (const LaunchStep& step : recipe.steps) {
    if (step.program < 0 || static_cast<size_t>(step.program) >= programs.size()) {
      throw InvalidArgument(fmt::format("{}: step {} names program {}, the recipe has {}", descriptor.describe(),
                                        step.kernel, step.program, programs.size()));
    }
    std::shared_ptr<Kernel> kernel = programs[static_cast<size_t>(step.program)]->kernel(step.kernel);
    // Values never change between runs: set once here. Buffers are set by run(), which may get other operands.
    for (size_t a = 0; a < step.args.size(); ++a) {
      if (step.args[a].kind == ArgSource::Kind::Value) kernel->set_arg(static_cast<int>(a), step.args[a].value);
    }
    r.kernels.push_back(std::move(kernel));
  }
  return r;
}

}  // namespace

Plan::Plan(Device& device, PlanDescriptor descriptor, bool external_workspace)
    : device_(&device), descriptor_(std::move(descriptor)), family_name_(descriptor_.family().name()),
      external_workspace_(external_workspace), runs_(std::make_shared<Runs>()) {
  const KernelRecipe& recipe = descriptor_.recipe();
  programs_.push_back(device.build(recipe.source));
  from_cache_ = programs_.front()->from_cache();
  for (const ProgramSource& extra : recipe.extra_sources) programs_.push_back(device.build(extra));
  // With the caller's workspace, staging buffers are ranges of it, made per run (so one plan may run on several
  // streams at once, each call with its own workspace); only devices with buffer views can carve them.
  if (external_workspace_ && !recipe.staging_bytes.empty() && device.info().backend == BackendKind::OpenCL) {
    throw Unsupported(fmt::format("{} on {}: its staging buffers would be ranges of the caller's workspace, and {} has "
                                  "no views of its buffers: make the plan with its own workspace",
                                  describe(), problem().to_string(), device.info().id));
  }
  runs_->resources.push_back(make_resources(device, descriptor_, programs_, external_workspace_));
}

void Plan::run(Queue& queue, const Operands& operands, const Buffer* workspace) const {
  const Problem& problem = descriptor_.problem();
  // Every operand the launches use must be there and large enough: a short buffer would be overrun silently.
  for (int i = 0; i <= kResidualOperand; ++i) {
    const size_t needed = descriptor_.operand_bytes(i);
    if (needed == 0) continue;
    const char* name = i == kBiasOperand ? "bias" : i == kResidualOperand ? "residual" : problem.operand(i).name;
    if (!operands[i]) {
      throw InvalidArgument(fmt::format("{} on {}: operand {} was not given (expected a buffer of {} bytes)",
                                        describe(), problem.to_string(), name, needed));
    }
    if (operands[i]->bytes() < needed) {
      throw InvalidArgument(fmt::format("{} on {}: operand {} holds {} bytes, expected at least {}", describe(),
                                        problem.to_string(), name, operands[i]->bytes(), needed));
    }
  }
  const KernelRecipe& recipe = descriptor_.recipe();
  std::vector<std::unique_ptr<Buffer>> views;  // staging buffers carved from the caller's workspace, this run's
  if (external_workspace_ && descriptor_.memory_bytes() > 0) {
    if (!workspace || workspace->bytes() < descriptor_.memory_bytes()) {
      throw InvalidArgument(fmt::format("{} on {}: the workspace holds {} bytes, expected at least {}", describe(),
                                        problem.to_string(), workspace ? workspace->bytes() : 0,
                                        descriptor_.memory_bytes()));
    }
    for (size_t i = 0; i < recipe.staging_bytes.size(); ++i)
      views.push_back(buffer_view(*device_, *workspace, recipe.staging_offset(i), recipe.staging_bytes[i]));
  }

  // Held while the steps are bound and enqueued; on the CPU device the launches compute before they return, so
  // there it covers the whole run (the host programs' own state, cpu_blocked's packed weights, included).
  const std::lock_guard lock(runs_->mutex);
  // Runs on one queue share its resources: an in-order queue runs them one after another. Where the plan owns
  // memory and runs may overlap on the device (two queues of a kernel device), each queue has its own.
  const bool per_queue =
      !external_workspace_ && descriptor_.memory_bytes() > 0 && device_->info().backend != BackendKind::Cpu;
  PlanResources* resources = &runs_->resources.front();
  if (per_queue) {
    resources = nullptr;
    for (PlanResources& r : runs_->resources)
      if (r.queue == &queue) resources = &r;
    for (PlanResources& r : runs_->resources)
      if (!resources && r.queue == nullptr) resources = &r;
    if (!resources) {
      if (runs_->resources.size() >= kMaxQueues) {
        throw Unsupported(fmt::format("{} on {}: this plan has run on {} queues of {}, each with a workspace of its "
                                      "own ({} bytes): make it with an external workspace to run on more queues "
                                      "(each call then brings its own)",
                                      describe(), problem.to_string(), kMaxQueues, device_->info().id,
                                      descriptor_.memory_bytes()));
      }
      runs_->resources.push_back(make_resources(*device_, descriptor_, programs_, external_workspace_));
      resources = &runs_->resources.back();
    }
    resources->queue = &queue;
  }
  const Buffer* scratch = external_workspace_ ? workspace : resources->workspace.get();
  std::vector<const Buffer*> staging;  // filled only for recipes with staging buffers (widened families)
  for (const auto& owned : resources->staging) staging.push_back(owned.get());
  for (const auto& view : views) staging.push_back(view.get());
  const std::vector<LaunchStep>& steps = recipe.steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    Kernel& kernel = *resources->kernels[i];
    const std::vector<ArgSource>& args = steps[i].args;
    for (size_t a = 0; a < args.size(); ++a) {
      switch (args[a].kind) {
        case ArgSource::Kind::Operand: kernel.set_arg(static_cast<int>(a), operands[args[a].operand]); break;
        case ArgSource::Kind::Workspace: kernel.set_arg(static_cast<int>(a), scratch); break;
        case ArgSource::Kind::Staging: kernel.set_arg(static_cast<int>(a), staging.at(args[a].operand)); break;
        case ArgSource::Kind::Value: break;  // set when the plan was made
      }
    }
    queue.launch(kernel, steps[i].geometry);
  }
}

}  // namespace convtune
