// Example 2: tune one layer in-process within a few seconds, store the best configuration in a tuning database
// file, and show that a plan made afterwards takes it (the "exact" tier).
#include <convtune/convtune.h>

#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) try {
  const std::filesystem::path file = argc > 1 ? argv[1] : std::filesystem::temp_directory_path() / "convtune_example_db.json";
  convtune::Device& device = convtune::device("best");
  const convtune::ConvProblem layer = convtune::parse_problem("N=2,C=8,H=12,K=8,R=3,pad=1");

  convtune::TuningDatabase database(file);
  const std::vector<convtune::TuneTask> tasks = convtune::make_tune_tasks(device.info(), {{"example", layer}});
  convtune::TuneOptions options;
  options.budget_seconds = 6;
  options.max_candidates = 4;
  convtune::TuneCallbacks callbacks;
  callbacks.task_done = [](const convtune::TuneTaskResult& r) {
    std::printf("%s %s: %zu tried, best %.4f ms (default %.4f ms)\n", r.task.name.c_str(),
                convtune::family_name(*r.task.family).c_str(), r.tried, r.best_ms, r.default_ms);
  };
  const auto results = convtune::tune(device, tasks, database, options, callbacks);  // saves after every task

  // A plan with this database now finds the tuned entry for exactly this layer on this device.
  convtune::TuningDatabase reloaded(file);
  convtune::PlanRequest request;
  request.problem = layer;
  request.tuning = &reloaded;
  const convtune::Plan plan = convtune::Plan::create(device, request);
  std::printf("%zu task(s) tuned on %s; %s holds %zu entr%s; the plan: %s (%s)\n", results.size(),
              device.info().id.c_str(), file.string().c_str(), reloaded.user_entry_count(),
              reloaded.user_entry_count() == 1 ? "y" : "ies", plan.describe().c_str(),
              std::string(convtune::to_string(plan.tier())).c_str());
  return plan.tier() == convtune::ConfigTier::Exact ? 0 : 1;
} catch (const convtune::Error& e) {
  std::fprintf(stderr, "tune_layer: %s\n", e.what());
  return 2;
}
