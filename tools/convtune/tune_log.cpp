// Tuning log: JSON (read back by `convtune report`) or CSV (for spreadsheets).
#include "tools/convtune/tune_log.h"

#include <fmt/format.h>

#include "convtune/error.h"
#include "src/core/atomic_file.h"

namespace convtune::cli {

namespace {

std::string status_of(const TuneTrial& trial) {
  if (trial.ms) return "ok";
  const auto colon = trial.failure.find(':');
  // CandidateEvaluator prefixes its failures with their kind; anything else is an unclassified failure.
  const std::string kind = colon == std::string::npos ? "" : trial.failure.substr(0, colon);
  return kind == "compile error" || kind == "launch error" || kind == "wrong result" ? kind : "failed";
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
  return quoted + "\"";
}

nlohmann::json config_json(const Config& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : config) j[name] = value;
  return j;
}

}  // namespace

void TuneLog::add_trial(const TaskSummary& task, const TuneTrial& trial) {
  LoggedTrial row;
  row.layer = task.layer;
  row.problem = task.problem;
  row.family = task.family;
  row.config = trial.config;
  row.status = status_of(trial);
  row.ms = trial.ms.value_or(0);
  row.gflops = trial.ms ? task.problem.flops() / (*trial.ms * 1e6) : 0;
  row.wall_ms = trial.wall_ms;
  row.note = trial.note;
  row.failure = trial.failure;
  trials.push_back(std::move(row));
}

void TuneLog::save() const {
  const std::string ext = path_.extension().string();
  std::string text;
  if (ext == ".json") {
    nlohmann::ordered_json j;
    j["metadata"] = metadata;
    j["tasks"] = nlohmann::json::array();
    for (const TaskSummary& t : tasks) {
      j["tasks"].push_back({{"layer", t.layer},
                            {"direction", std::string(t.problem.operation())},
                            {"problem", t.problem.to_string()},
                            {"family", t.family},
                            {"space", t.space},
                            {"tried", t.tried},
                            {"failed", t.failed},
                            {"default_ms", t.default_ms},
                            {"best_ms", t.best_ms},
                            {"best_parameters", config_json(t.best_config)},
                            {"stop_reason", t.stop_reason}});
    }
    j["trials"] = nlohmann::json::array();
    for (const LoggedTrial& r : trials) {
      j["trials"].push_back({{"layer", r.layer},
                             {"direction", std::string(r.problem.operation())},
                             {"problem", r.problem.to_string()},
                             {"family", r.family},
                             {"parameters", config_json(r.config)},
                             {"status", r.status},
                             {"ms", r.ms},
                             {"gflops", r.gflops},
                             {"wall_ms", r.wall_ms},
                             {"note", r.note},
                             {"failure", r.failure}});
    }
    text = j.dump(1) + "\n";
  } else if (ext == ".csv") {
    text = "layer,direction,problem,family,parameters,status,ms,gflops,wall_ms,note,failure\n";
    for (const LoggedTrial& r : trials) {
      text += fmt::format("{},{},{},{},{},{},{:.6f},{:.3f},{:.1f},{},{}\n", csv_field(r.layer),
                          std::string(r.problem.operation()), csv_field(r.problem.to_string()), r.family,
                          csv_field(to_string(r.config)), r.status, r.ms, r.gflops, r.wall_ms, csv_field(r.note),
                          csv_field(r.failure));
    }
  } else {
    throw InvalidArgument(fmt::format("tuning log {}: expected a .json or .csv file name", path_.string()));
  }
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path());
  write_file_atomic(path_, text);
}

TuneLog TuneLog::load(const std::filesystem::path& path) {
  if (path.extension() != ".json") {
    throw InvalidArgument(fmt::format("{}: report reads the JSON form of a tuning log (tune --log FILE.json)",
                                      path.string()));
  }
  TuneLog log(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("{}: not a tuning log: {}", path.string(), e.what()));
  }
  if (!j.is_object() || !j.contains("trials") || !j["trials"].is_array()) {
    throw InvalidArgument(fmt::format("{}: not a tuning log: expected an object with a \"trials\" array", path.string()));
  }
  log.metadata = j.value("metadata", nlohmann::json::object());
  size_t index = 0;
  auto read_config = [&](const nlohmann::json& params) {
    Config c;
    for (const auto& [name, value] : params.items()) c[name] = value.get<int64_t>();
    return c;
  };
  try {
    for (const auto& t : j["trials"]) {
      ++index;
      LoggedTrial r;
      r.layer = t.at("layer").get<std::string>();
      r.problem = parse_any_problem(t.at("problem").get<std::string>());
      r.family = t.at("family").get<std::string>();
      r.config = read_config(t.at("parameters"));
      r.status = t.at("status").get<std::string>();
      r.ms = t.at("ms").get<double>();
      r.gflops = t.at("gflops").get<double>();
      r.wall_ms = t.value("wall_ms", 0.0);
      r.note = t.value("note", "");
      r.failure = t.value("failure", "");
      log.trials.push_back(std::move(r));
    }
    index = 0;
    for (const auto& t : j.value("tasks", nlohmann::json::array())) {
      ++index;
      TaskSummary s;
      s.layer = t.at("layer").get<std::string>();
      s.problem = parse_any_problem(t.at("problem").get<std::string>());
      s.family = t.at("family").get<std::string>();
      s.space = t.at("space").get<size_t>();
      s.tried = t.at("tried").get<size_t>();
      s.failed = t.at("failed").get<size_t>();
      s.default_ms = t.at("default_ms").get<double>();
      s.best_ms = t.at("best_ms").get<double>();
      s.best_config = read_config(t.at("best_parameters"));
      s.stop_reason = t.value("stop_reason", "");
      log.tasks.push_back(std::move(s));
    }
  } catch (const std::exception& e) {
    throw InvalidArgument(fmt::format("{}: entry {}: {}", path.string(), index, e.what()));
  }
  return log;
}

}  // namespace convtune::cli
