// Per-family ridge regressions of log(time) on problem features, their cache per database and device, and their
// leave-one-shape-out check.
#include "src/tuning_db/cost_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "src/core/linear_solve.h"

namespace convtune {

namespace {

// log(min(x, 64) / 64): 0 for a dimension that fills a 64-wide tile, negative as most of the tile idles. This is
// what lets a fit on C=3 backward-data (implicit_gemm 60-90x slower than im2col_gemm on the H200) speak for
// depthwise layers, whose GEMM views are slivers too.
double fill(double x) { return std::log(std::min(std::max(x, 1.0), 64.0) / 64.0); }

std::string types_of(const ConvProblem& p) { return fmt::format("{}/{}", to_string(p.type), to_string(p.math)); }

// Order-independent identity of a sample, so fits do not depend on the order of files or entries.
std::string sample_key(const CostSample& s) { return s.family + "|" + s.problem.to_string(); }

std::string shape_key(const ConvProblem& p) { return p.with_direction(Direction::Forward).to_string(); }

// Fastest time per (family, problem), sorted by key.
std::vector<CostSample> fastest_per_problem(std::vector<CostSample> samples) {
  std::map<std::string, CostSample> best;
  for (CostSample& s : samples) {
    if (!(s.time_ms > 0) || !std::isfinite(s.time_ms)) continue;
    std::string key = sample_key(s);
    auto it = best.find(key);
    if (it == best.end()) best.emplace(std::move(key), std::move(s));
    else if (s.time_ms < it->second.time_ms) it->second = std::move(s);
  }
  std::vector<CostSample> out;
  out.reserve(best.size());
  for (auto& kv : best) out.push_back(std::move(kv.second));
  return out;
}

std::optional<CostModel::FamilyFit> fit_one(const std::string& family, const std::string& types,
                                            const std::vector<const CostSample*>& samples, double ridge) {
  const size_t m = samples.size();
  if (m < kCostModelMinSamples) return std::nullopt;
  const size_t d = CostModel::feature_names().size();
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const CostSample* s : samples) {
    x.push_back(CostModel::features(s->problem));
    y.push_back(std::log(s->time_ms));
  }
  CostModel::FamilyFit fit;
  fit.family = family;
  fit.types = types;
  fit.samples = m;
  fit.center.assign(d, 0);
  fit.scale.assign(d, 0);
  fit.low = fit.high = x.front();
  for (const std::vector<double>& row : x) {
    for (size_t j = 0; j < d; ++j) fit.low[j] = std::min(fit.low[j], row[j]), fit.high[j] = std::max(fit.high[j], row[j]);
  }
  for (double v : y) fit.mean_log += v / static_cast<double>(m);
  for (size_t j = 0; j < d; ++j) {
    for (size_t i = 0; i < m; ++i) fit.center[j] += x[i][j] / static_cast<double>(m);
    double var = 0;
    for (size_t i = 0; i < m; ++i) var += (x[i][j] - fit.center[j]) * (x[i][j] - fit.center[j]);
    const double sd = std::sqrt(var / static_cast<double>(m));
    // A feature that does not vary among the samples says nothing: weight 0 (scale 0 marks it).
    fit.scale[j] = sd > 1e-9 ? sd : 0;
  }
  // Normal equations on standardized features, centered target: the intercept (the mean) is not shrunk.
  std::vector<double> ata(d * d, 0.0), aty(d, 0.0);
  std::vector<double> z(d);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < d; ++j) z[j] = fit.scale[j] > 0 ? (x[i][j] - fit.center[j]) / fit.scale[j] : 0;
    for (size_t a = 0; a < d; ++a) {
      aty[a] += z[a] * (y[i] - fit.mean_log);
      for (size_t b = 0; b < d; ++b) ata[a * d + b] += z[a] * z[b];
    }
  }
  for (size_t j = 0; j < d; ++j) ata[j * d + j] += ridge;
  if (!solve_spd(ata, aty, d)) return std::nullopt;
  fit.weight = std::move(aty);
  double sq = 0;
  for (size_t i = 0; i < m; ++i) {
    double pred = fit.mean_log;
    for (size_t j = 0; j < d; ++j)
      if (fit.scale[j] > 0) pred += (x[i][j] - fit.center[j]) / fit.scale[j] * fit.weight[j];
    sq += (pred - y[i]) * (pred - y[i]);
  }
  fit.rms_log_error = std::sqrt(sq / static_cast<double>(m));
  return fit;
}

}  // namespace

const std::vector<std::string>& CostModel::feature_names() {
  static const std::vector<std::string> names = {
      "log FLOPs",     "log bytes",        "M fill",          "N fill",       "reduction fill",
      "log stride",    "log filter area",  "log groups",      "log dilation", "forward",
      "backward-data", "backward-filter"};
  return names;
}

std::vector<double> CostModel::features(const ConvProblem& p) {
  const double n = static_cast<double>(p.n), c = static_cast<double>(p.c_per_group()),
               k = static_cast<double>(p.k_per_group()), rs = static_cast<double>(p.r * p.s),
               stride = static_cast<double>(p.stride.h * p.stride.w), pq = static_cast<double>(p.p() * p.q()),
               hw = static_cast<double>(p.h * p.w);
  const double bytes = static_cast<double>(bytes_per_element(p.type)) *
                       static_cast<double>(p.x_elements() + p.w_elements() + p.y_elements());
  // The direction's GEMM view per group (rows M, columns N, reduction): what tile-based families are shaped by.
  // Backward-data's reduction is strided: each input pixel gathers from only 1/stride^2 of the filter taps.
  double gm = k, gn = n * pq, gk = c * rs;
  if (p.direction == Direction::BackwardData) gm = c, gn = n * hw, gk = k * rs / stride;
  if (p.direction == Direction::BackwardFilter) gm = k, gn = c * rs, gk = n * pq;
  return {std::log(std::max(p.flops(), 1.0)),
          std::log(std::max(bytes, 1.0)),
          fill(gm),
          fill(gn),
          fill(gk),
          std::log(stride),
          std::log(rs),
          std::log(static_cast<double>(p.groups)),
          std::log(static_cast<double>(p.dilation.h * p.dilation.w)),
          p.direction == Direction::Forward ? 1.0 : 0.0,
          p.direction == Direction::BackwardData ? 1.0 : 0.0,
          p.direction == Direction::BackwardFilter ? 1.0 : 0.0};
}

CostModel CostModel::fit(std::vector<CostSample> samples, double ridge) {
  CostModel model;
  const std::vector<CostSample> unique = fastest_per_problem(std::move(samples));
  model.sample_count_ = unique.size();
  std::map<std::pair<std::string, std::string>, std::vector<const CostSample*>> groups;
  for (const CostSample& s : unique) groups[{s.family, types_of(s.problem)}].push_back(&s);
  for (const auto& [key, group] : groups) {
    if (std::optional<FamilyFit> f = fit_one(key.first, key.second, group, ridge)) model.fits_.push_back(std::move(*f));
  }
  return model;
}

std::vector<CostSample> cost_samples(const std::vector<ListedEntry>& entries,
                                     const std::function<bool(const TuningEntry&)>& keep) {
  std::vector<CostSample> samples;
  for (const ListedEntry& l : entries) {
    if (!l.entry.problem.is_conv() || !keep(l.entry)) continue;
    samples.push_back({l.entry.family, l.entry.problem.conv(), l.entry.time_ms});
  }
  return samples;
}

CostModel CostModel::fit_for_device(const std::vector<ListedEntry>& entries, const DeviceInfo& device) {
  std::vector<CostSample> own = cost_samples(entries, [&](const TuningEntry& e) { return e.device.same_hardware(device); });
  std::vector<CostSample> architecture;
  std::string other;
  if (device.backend != BackendKind::Cpu && !device.architecture.empty()) {
    architecture = cost_samples(entries, [&](const TuningEntry& e) {
      if (e.device.same_hardware(device)) return false;
      // The architecture's entries through this backend, and this chip's through the other (as the lookup's
      // architecture tier takes them).
      const bool same = (e.device.backend == to_string(device.backend) && e.device.architecture == device.architecture) ||
                        e.device.same_chip_other_backend(device);
      if (same && other.empty()) other = e.device.name;
      return same;
    });
  }
  // Per element type and math mode, the source whose samples cover more families: families compete only by
  // predictions from one source, and a device tuned for a few families of a mode (an H100 with FP32 entries for
  // fft and winograd alone) would otherwise hand fft every FP32 layer in its range, the other families unpredicted.
  std::map<std::string, std::set<std::string>> own_families, architecture_families;
  for (const CostSample& s : own) own_families[types_of(s.problem)].insert(s.family);
  for (const CostSample& s : architecture) architecture_families[types_of(s.problem)].insert(s.family);
  std::vector<CostSample> samples;
  std::set<std::string> borrowed;
  bool own_used = false;
  for (const CostSample& s : own) {
    if (own_families[types_of(s.problem)].size() < architecture_families[types_of(s.problem)].size()) continue;
    samples.push_back(s);
    own_used = true;
  }
  for (const CostSample& s : architecture) {
    const std::string types = types_of(s.problem);
    if (own_families[types].size() >= architecture_families[types].size()) continue;
    samples.push_back(s);
    borrowed.insert(types);
  }
  std::string source = fmt::format("{} (this device)", device.name);
  if (!own_used && !borrowed.empty()) {
    source = fmt::format("{} (same architecture {})", other, device.architecture);
  } else if (!borrowed.empty()) {
    source = fmt::format("{} (this device), {} (same architecture {}) for {}", device.name, other, device.architecture,
                         fmt::join(borrowed, ", "));
  }
  CostModel model = fit(std::move(samples));
  model.source_ = fmt::format("{}, {} measured (family, problem) pair{}", source, model.sample_count_,
                              model.sample_count_ == 1 ? "" : "s");
  return model;
}

std::optional<double> CostModel::predict_ms(std::string_view family, const ConvProblem& problem) const {
  // FP16 tensors without a fit of their own take BF16's: the same 2-byte storage, the same tensor-core rate and
  // kernels (on the H100 the fp16 and bf16 tables track each other), where the rank order alone took
  // col2im_wgmma for strided backward-data of 32-128 channels at 1.7x cuDNN's time, the bf16 model's choice 1.0-1.5x.
  std::string types = types_of(problem);
  if (problem.type == ElementType::F16 &&
      std::none_of(fits_.begin(), fits_.end(), [&](const FamilyFit& f) { return f.family == family && f.types == types; })) {
    ConvProblem as_bf16 = problem;
    as_bf16.type = ElementType::BF16;
    types = types_of(as_bf16);
  }
  for (const FamilyFit& f : fits_) {
    if (f.family != family || f.types != types) continue;
    const std::vector<double> x = features(problem);
    for (size_t j = 0; j < x.size(); ++j) {
      const double reach = f.scale[j] > 0 ? kCostModelReach : 1e-9;
      if (x[j] < f.low[j] - reach || x[j] > f.high[j] + reach) return std::nullopt;
    }
    double log_ms = f.mean_log;
    for (size_t j = 0; j < x.size(); ++j)
      if (f.scale[j] > 0) log_ms += (x[j] - f.center[j]) / f.scale[j] * f.weight[j];
    return std::exp(log_ms);
  }
  return std::nullopt;
}

std::optional<std::string> cost_model_choice(const CostModel& model, const std::vector<std::string>& families,
                                             const ConvProblem& problem,
                                             const std::function<bool(const std::string&)>& vetoed,
                                             std::string* why, const std::function<bool(const std::string&)>& claimed) {
  // The first claimant in the rank order decides: unpredicted, it goes ahead of the predictions; predicted, the
  // predictions decide, and a later claimant does not jump ahead of it. (With later claimants taken too, fft's H100
  // entries at 13x13 and 27x27 made fft predictable on ucla5x5, and winograd's claim, which the model could not
  // predict, took the layer at 2.3-3.2x fft's time.)
  if (claimed) {
    for (const std::string& family : families) {
      if ((vetoed && vetoed(family)) || !claimed(family)) continue;
      if (model.predict_ms(family, problem)) break;
      if (why) *why = fmt::format("{} claims the problem, which the model cannot predict for it", family);
      return family;
    }
  }
  std::vector<std::pair<double, std::string>> predicted;
  for (const std::string& family : families) {
    if (vetoed && vetoed(family)) continue;
    if (const std::optional<double> ms = model.predict_ms(family, problem)) predicted.emplace_back(*ms, family);
  }
  if (predicted.empty()) return std::nullopt;
  // Stable: equal predictions keep the rank order.
  std::stable_sort(predicted.begin(), predicted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (why) {
    why->clear();
    for (const auto& [ms, family] : predicted) *why += fmt::format("{}{} {:.3g} ms", why->empty() ? "" : ", ", family, ms);
  }
  return predicted.front().second;
}

std::shared_ptr<const CostModel> cost_model_for(const TuningDatabase& database, const DeviceInfo& device) {
  static std::mutex mutex;
  static std::map<std::pair<uint64_t, std::string>, std::shared_ptr<const CostModel>> cache;
  const std::pair<uint64_t, std::string> key{database.revision(), device.fingerprint()};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto model = std::make_shared<CostModel>(CostModel::fit_for_device(database.list(), device));
  std::shared_ptr<const CostModel> result = model->empty() ? nullptr : std::move(model);
  const std::lock_guard<std::mutex> lock(mutex);
  // Revisions only grow: old ones are never asked for again once a database changed.
  if (cache.size() >= 64) cache.clear();
  cache.emplace(key, result);
  return result;
}

size_t CostModelCheck::unpredicted() const {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const CostModelCheckRow& r) {
    return !r.modelled;
  }));
}

size_t CostModelCheck::best_picked() const {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const CostModelCheckRow& r) {
    return r.chosen == r.best;
  }));
}

size_t CostModelCheck::within(double ratio) const {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [&](const CostModelCheckRow& r) {
    return r.ratio() >= ratio;
  }));
}

CostModelCheck leave_one_shape_out(const std::vector<CostSample>& samples,
                                   const std::function<bool(const std::string&, const ConvProblem&)>& vetoed,
                                   const std::function<int(const std::string&)>& rank, double ridge,
                                   const std::function<bool(const std::string&, const ConvProblem&)>& claimed) {
  const std::vector<CostSample> unique = fastest_per_problem(samples);
  // Problems (in key order) and their measured families.
  std::map<std::string, std::vector<const CostSample*>> by_problem;
  for (const CostSample& s : unique) by_problem[s.problem.to_string()].push_back(&s);
  CostModelCheck check;
  std::map<std::string, CostModel> refits;  // one per held-out shape
  for (const auto& [text, measured] : by_problem) {
    if (measured.size() < 2) continue;
    const ConvProblem& problem = measured.front()->problem;
    const std::string shape = shape_key(problem);
    auto refit = refits.find(shape);
    if (refit == refits.end()) {
      std::vector<CostSample> rest;
      for (const CostSample& s : unique)
        if (shape_key(s.problem) != shape) rest.push_back(s);
      refit = refits.emplace(shape, CostModel::fit(std::move(rest), ridge)).first;
    }
    std::vector<std::string> families;
    for (const CostSample* s : measured) families.push_back(s->family);
    auto is_vetoed = [&](const std::string& f) { return vetoed && vetoed(f, problem); };
    // Every measured family a poor fit: a plan would take one not measured here, so the row cannot judge it.
    if (std::all_of(families.begin(), families.end(), is_vetoed)) continue;
    auto is_claimed = [&](const std::string& f) { return claimed && claimed(f, problem); };
    // Plans offer the families in rank order, so the first claimant wins there too.
    std::stable_sort(families.begin(), families.end(),
                     [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
    std::optional<std::string> chosen =
        cost_model_choice(refit->second, families, problem, is_vetoed, nullptr, is_claimed);
    const bool modelled = chosen.has_value();
    // Where the model predicts nothing, plans take the first claimant (not a poor fit) ahead of the rank order.
    if (!chosen) {
      const auto claimant = std::find_if(families.begin(), families.end(),
                                         [&](const std::string& f) { return !is_vetoed(f) && is_claimed(f); });
      if (claimant != families.end()) chosen = *claimant;
    }
    CostModelCheckRow row;
    row.problem = problem;
    row.modelled = modelled;
    if (!chosen) {
      // The plans' rules: the first family in rank order that is not a poor fit, else the first.
      std::vector<std::string> ordered = families;
      std::stable_sort(ordered.begin(), ordered.end(),
                       [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
      const auto fit = std::find_if(ordered.begin(), ordered.end(), [&](const std::string& f) { return !is_vetoed(f); });
      chosen = fit != ordered.end() ? *fit : ordered.front();
    }
    row.chosen = *chosen;
    const CostSample* best = *std::min_element(measured.begin(), measured.end(), [](const CostSample* a, const CostSample* b) {
      return a->time_ms < b->time_ms;
    });
    row.best = best->family;
    row.best_ms = best->time_ms;
    for (const CostSample* s : measured)
      if (s->family == *chosen) row.chosen_ms = s->time_ms;
    row.predicted_ms = row.modelled ? refit->second.predict_ms(*chosen, problem).value_or(0) : 0;
    check.rows.push_back(std::move(row));
  }
  return check;
}

}  // namespace convtune
