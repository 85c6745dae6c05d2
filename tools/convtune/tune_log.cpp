// Tuning log: JSON (read back by `convtune report`) or CSV (for spreadsheets).
#include "tools/convtune/tune_log.h"

#include <fmt/format.h>

#include <limits>

#include "convtune/error.h"
#include "src/core/atomic_file.h"
#include "src/core/json_reader.h"

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
  write_file_atomic(path_, text);
}

namespace {

// Reads fields of a tuning log with their types and ranges checked; every error names the log, the entry and
// the field. (Reading with nlohmann's get<int64_t>() would convert a float such as 6.4e21 with undefined
// behaviour, and at() throws exceptions that name neither the file nor the entry.)
class LogReader {
 public:
  explicit LogReader(const std::filesystem::path& path) : path_(path.string()) {}

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    throw InvalidArgument(fmt::format("tuning log {}: {}: {}", path_, where, message));
  }
  const nlohmann::json& field(const nlohmann::json& object, const char* name, const std::string& where) const {
    if (!object.is_object()) fail(where, fmt::format("expected an object, found {}", json_excerpt(object)));
    const auto it = object.find(name);
    if (it == object.end()) fail(where, fmt::format("field '{}' is missing", name));
    return *it;
  }
  std::string text(const nlohmann::json& object, const char* name, const std::string& where) const {
    const nlohmann::json& v = field(object, name, where);
    if (!v.is_string()) fail(where, fmt::format("field '{}' is {}, expected a string", name, json_excerpt(v)));
    return v.get<std::string>();
  }
  std::string optional_text(const nlohmann::json& object, const char* name, const std::string& where) const {
    return object.contains(name) ? text(object, name, where) : std::string();
  }
  // Times and rates: finite (JSON cannot hold anything else) and not negative.
  double amount(const nlohmann::json& object, const char* name, const std::string& where) const {
    const nlohmann::json& v = field(object, name, where);
    if (!v.is_number() || !(v.get<double>() >= 0)) {
      fail(where, fmt::format("field '{}' is {}, expected a number of 0 or more", name, json_excerpt(v)));
    }
    return v.get<double>();
  }
  double optional_amount(const nlohmann::json& object, const char* name, const std::string& where) const {
    return object.contains(name) ? amount(object, name, where) : 0.0;
  }
  size_t count(const nlohmann::json& object, const char* name, const std::string& where) const {
    const nlohmann::json& v = field(object, name, where);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > std::numeric_limits<size_t>::max()) {
      fail(where, fmt::format("field '{}' is {}, expected a count of 0 or more", name, json_excerpt(v)));
    }
    return static_cast<size_t>(v.get<uint64_t>());
  }
  Problem problem(const nlohmann::json& object, const std::string& where) const {
    const std::string text_form = text(object, "problem", where);
    try {
      return parse_any_problem(text_form);
    } catch (const InvalidArgument& e) {
      fail(where, fmt::format("field 'problem' is not a valid problem: {}", e.what()));
    }
  }
  Config config(const nlohmann::json& object, const char* name, const std::string& where) const {
    const nlohmann::json& params = field(object, name, where);
    if (!params.is_object()) fail(where, fmt::format("field '{}' is {}, expected an object", name, json_excerpt(params)));
    Config c;
    for (const auto& [key, value] : params.items()) {
      if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX)) {
        fail(where, fmt::format("parameter {} is {}, expected a 64-bit integer", key, json_excerpt(value)));
      }
      c[key] = value.get<int64_t>();
    }
    return c;
  }

 private:
  std::string path_;
};

}  // namespace

TuneLog TuneLog::load(const std::filesystem::path& path) {
  if (path.extension() != ".json") {
    throw InvalidArgument(fmt::format("{}: report reads the JSON form of a tuning log (tune --log FILE.json)",
                                      path.string()));
  }
  std::string text;
  try {
    text = read_file(path, kMaxTuneLogBytes);
  } catch (const Error& e) {
    throw InvalidArgument(fmt::format("tuning log {}: {}", path.string(), e.what()));
  }
  return parse(text, path);
}

TuneLog TuneLog::parse(std::string_view text, const std::filesystem::path& path) {
  TuneLog log(path);
  nlohmann::json j;
  try {
    j = parse_json(text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: not a tuning log: {}", path.string(), e.what()));
  }
  if (!j.is_object() || !j.contains("trials") || !j["trials"].is_array()) {
    throw InvalidArgument(fmt::format("{}: not a tuning log: expected an object with a \"trials\" array", path.string()));
  }
  const LogReader read(path);
  if (j.contains("metadata")) {
    if (!j["metadata"].is_object()) read.fail("metadata", fmt::format("expected an object, found {}", json_excerpt(j["metadata"])));
    log.metadata = j["metadata"];
  }
  const nlohmann::json& trials = j["trials"];
  for (size_t i = 0; i < trials.size(); ++i) {
    const nlohmann::json& t = trials[i];
    const std::string where = fmt::format("trials[{}]", i);
    LoggedTrial r;
    r.layer = read.text(t, "layer", where);
    r.problem = read.problem(t, where);
    r.family = read.text(t, "family", where);
    r.config = read.config(t, "parameters", where);
    r.status = read.text(t, "status", where);
    r.ms = read.amount(t, "ms", where);
    r.gflops = read.amount(t, "gflops", where);
    r.wall_ms = read.optional_amount(t, "wall_ms", where);
    r.note = read.optional_text(t, "note", where);
    r.failure = read.optional_text(t, "failure", where);
    log.trials.push_back(std::move(r));
  }
  if (j.contains("tasks")) {
    const nlohmann::json& tasks = j["tasks"];
    if (!tasks.is_array()) read.fail("tasks", fmt::format("expected an array, found {}", json_excerpt(tasks)));
    for (size_t i = 0; i < tasks.size(); ++i) {
      const nlohmann::json& t = tasks[i];
      const std::string where = fmt::format("tasks[{}]", i);
      TaskSummary s;
      s.layer = read.text(t, "layer", where);
      s.problem = read.problem(t, where);
      s.family = read.text(t, "family", where);
      s.space = read.count(t, "space", where);
      s.tried = read.count(t, "tried", where);
      s.failed = read.count(t, "failed", where);
      s.default_ms = read.amount(t, "default_ms", where);
      s.best_ms = read.amount(t, "best_ms", where);
      s.best_config = read.config(t, "best_parameters", where);
      s.stop_reason = read.optional_text(t, "stop_reason", where);
      log.tasks.push_back(std::move(s));
    }
  }
  return log;
}

}  // namespace convtune::cli
