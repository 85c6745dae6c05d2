// convtune._convtune: the nanobind extension behind the Python package. Devices, problems, compiled plans run on
// DLPack arrays or raw addresses, the tuner (one device or several) with a progress callback, the tuning database,
// and convtune's errors as Python exceptions. The package's Python modules build the friendly API on top of it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <convtune/convtune.h>

#include "arrays.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace convtune::python {

namespace {

// The Python exception classes (convtune/_errors.py hands them over at import): each derives from convtune.Error
// and the builtin a Python user would catch for it. Until then convtune's errors reach Python as RuntimeError.
PyObject* error_type = nullptr;
PyObject* invalid_argument_type = nullptr;
PyObject* unsupported_type = nullptr;
PyObject* backend_error_type = nullptr;
PyObject* tuning_database_error_type = nullptr;

void set_error_types(nb::handle error, nb::handle invalid_argument, nb::handle unsupported, nb::handle backend_error,
                     nb::handle tuning_database_error) {
  // Kept for the life of the process: the translator may run until the interpreter exits.
  for (nb::handle type : {error, invalid_argument, unsupported, backend_error, tuning_database_error}) {
    if (!PyType_Check(type.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type.ptr()),
                                                       reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
      throw nb::type_error("_set_error_types: expected five exception classes");
    }
    type.inc_ref();
  }
  error_type = error.ptr();
  invalid_argument_type = invalid_argument.ptr();
  unsupported_type = unsupported.ptr();
  backend_error_type = backend_error.ptr();
  tuning_database_error_type = tuning_database_error.ptr();
}

void register_error_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    if (!error_type) std::rethrow_exception(p);
    try {
      std::rethrow_exception(p);
    } catch (const TuningDatabaseError& e) {
      PyErr_SetString(tuning_database_error_type, e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(invalid_argument_type, e.what());
    } catch (const Unsupported& e) {
      PyErr_SetString(unsupported_type, e.what());
    } catch (const BackendError& e) {
      PyErr_SetString(backend_error_type, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error_type, e.what());
    }
  });
}

std::vector<std::vector<int64_t>> operand_shapes(const Problem& p) {
  if (p.is_conv()) {
    const ConvProblem& c = p.conv();
    // As the operands lie in memory: channels-last arrays are (N, H, W, C), (K, R, S, C/groups), (N, P, Q, K).
    if (c.layout == Layout::NHWC)
      return {{c.n, c.h, c.w, c.c}, {c.k, c.r, c.s, c.c_per_group()}, {c.n, c.p(), c.q(), c.k}};
    return {{c.n, c.c, c.h, c.w}, {c.k, c.c_per_group(), c.r, c.s}, {c.n, c.k, c.p(), c.q()}};
  }
  const GemmProblem& g = p.gemm();
  return {{g.batch, g.a_rows(), g.a_cols()}, {g.batch, g.b_rows(), g.b_cols()}, {g.batch, g.m, g.n}};
}

nb::dict entry_dict(const ListedEntry& listed) {
  const TuningEntry& e = listed.entry;
  nb::dict d;
  d["device"] = e.device.name;
  d["fingerprint"] = e.device.fingerprint;
  d["backend"] = e.device.backend;
  d["family"] = e.family;
  d["problem"] = e.problem.to_string();
  d["parameters"] = e.parameters;
  d["time_ms"] = e.time_ms;
  d["gflops"] = e.gflops;
  d["date"] = e.date;
  d["convtune_version"] = e.convtune_version;
  d["origin"] = listed.origin;
  d["shipped"] = listed.shipped;
  return d;
}

nb::dict trial_dict(const TuneTrial& t) {
  nb::dict d;
  d["config"] = t.config;
  d["ms"] = t.ms;
  d["failure"] = t.failure;
  d["note"] = t.note;
  d["wall_ms"] = t.wall_ms;
  return d;
}

void describe_task(nb::dict& d, const TuneTask& task) {
  d["name"] = task.name;
  d["operation"] = std::string(task.problem.operation());
  d["problem"] = task.problem.to_string();
  d["family"] = family_name(*task.family);
}

nb::dict result_dict(const TuneTaskResult& r, bool with_trials) {
  nb::dict d;
  describe_task(d, r.task);
  d["device"] = r.device;
  d["space"] = r.space;
  d["tried"] = r.tried;
  d["failed"] = r.failed;
  d["default_ms"] = r.default_ms > 0 ? std::optional<double>(r.default_ms) : std::nullopt;
  d["best_ms"] = r.best_config ? std::optional<double>(r.best_ms) : std::nullopt;
  d["best_config"] = r.best_config;
  d["stop_reason"] = r.stop_reason;
  const char* stored = !r.stored ? nullptr
                       : *r.stored == InsertOutcome::Added    ? "added"
                       : *r.stored == InsertOutcome::Replaced ? "replaced"
                                                              : "kept existing";
  d["stored"] = stored ? nb::object(nb::str(stored)) : nb::none();
  // Today's plan stored as the problem's exact entry instead of the tuned results (on the problem's first task).
  const char* kept = !r.plan_kept ? nullptr
                     : *r.plan_kept == InsertOutcome::Added    ? "added"
                     : *r.plan_kept == InsertOutcome::Replaced ? "replaced"
                                                               : "kept existing";
  d["plan_kept"] = kept ? nb::object(nb::str(kept)) : nb::none();
  if (with_trials) {
    nb::list trials;
    for (const TuneTrial& t : r.trials) trials.append(trial_dict(t));
    d["trials"] = trials;
  }
  return d;
}

// A TuningDatabase is one C++ object that several Python threads may hold; tune() writes it and make_plan() reads
// it with the GIL released, so another thread could change it under them. Such overlaps are refused, naming both
// uses: readers may overlap each other, a writer overlaps nobody.
class DatabaseUse {
 public:
  DatabaseUse(const TuningDatabase& db, bool write, const char* what) : db_(&db), write_(write) {
    const std::lock_guard lock(mutex());
    Uses& uses = table()[db_];
    if (uses.writer || (write_ && uses.readers > 0)) {
      const std::string other = uses.writer ? uses.writer_what : uses.reader_what;
      if (uses.readers == 0 && !uses.writer) table().erase(db_);
      throw Error("TuningDatabase " + db.user_file().string() + ": " + what + " while " + other +
                  " is using it (another thread, or a callback of that call): a TuningDatabase that tune(), "
                  "merge_file(), prune_device() or save() changes is used by one of them at a time; wait for that "
                  "call to end, or give each thread its own TuningDatabase");
    }
    if (write_) {
      uses.writer = true;
      uses.writer_what = what;
    } else {
      ++uses.readers;
      uses.reader_what = what;
    }
  }
  ~DatabaseUse() {
    const std::lock_guard lock(mutex());
    Uses& uses = table()[db_];
    if (write_) uses.writer = false;
    else --uses.readers;
    if (!uses.writer && uses.readers == 0) table().erase(db_);
  }
  DatabaseUse(const DatabaseUse&) = delete;
  DatabaseUse& operator=(const DatabaseUse&) = delete;

 private:
  struct Uses {
    int readers = 0;
    bool writer = false;
    std::string writer_what, reader_what;
  };
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<const TuningDatabase*, Uses>& table() {
    static auto* uses = new std::map<const TuningDatabase*, Uses>();  // alive until the interpreter's last call
    return *uses;
  }
  const TuningDatabase* db_;
  bool write_;
};

// Two tune() calls timing candidates on one device at once slow each other's candidates down: every time either
// stores would be wrong. The second is refused while the first runs.
class DevicesTuning {
 public:
  explicit DevicesTuning(const std::vector<Device*>& devices) {
    const std::lock_guard lock(mutex());
    for (Device* d : devices) {
      if (busy().count(d)) {
        throw Error("tune: " + d->info().id + " is being tuned by another thread of this process: candidates timed "
                    "side by side slow each other down; wait for that tune() to end");
      }
    }
    for (Device* d : devices) busy().insert(d);
    devices_ = devices;
  }
  ~DevicesTuning() {
    const std::lock_guard lock(mutex());
    for (Device* d : devices_) busy().erase(d);
  }
  DevicesTuning(const DevicesTuning&) = delete;
  DevicesTuning& operator=(const DevicesTuning&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<Device*>& busy() {
    static auto* devices = new std::set<Device*>();
    return *devices;
  }
  std::vector<Device*> devices_;
};

// Calls the Python progress callback (None: only watches for Ctrl-C) from a tuning thread. A callback that raises,
// or a pending KeyboardInterrupt, stops the run: the error leaves tune() and reaches the caller.
class ProgressBridge {
 public:
  explicit ProgressBridge(nb::object callback) : callback_(std::move(callback)) {}
  template <class Fill>
  void emit(const char* event, Fill fill) const {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
    if (callback_.is_none()) return;
    nb::dict d;
    d["event"] = event;
    fill(d);
    callback_(d);
  }

 private:
  nb::object callback_;
};

nb::tuple run_tune(const std::vector<std::string>& device_specs, const std::vector<std::pair<std::string, Problem>>& problems,
                   TuningDatabase& database, const std::string& family, double budget_seconds, const std::string& strategy,
                   double max_fraction, size_t max_candidates, int warmup, int repeats, double abort_factor,
                   uint64_t seed, int jobs, const std::map<std::string, std::vector<int64_t>>& only, bool skip_tuned,
                   bool save, nb::object progress, std::optional<uint64_t> workspace_limit) {
  if (device_specs.empty()) throw InvalidArgument("tune: device: expected one device or a list of alike devices");
  std::vector<Device*> devices;
  for (const std::string& spec : device_specs) devices.push_back(&convtune::device(spec));
  std::vector<std::string> skipped;
  const std::vector<TuneTask> tasks =
      make_tune_tasks(with_workspace_limit(devices.front()->info(), workspace_limit), problems, family, &skipped);
  if (tasks.empty()) {
    std::string why = "no kernel family tunes any of the problems on " + devices.front()->info().id;
    for (const std::string& s : skipped) why += "; " + s;
    throw Unsupported(why);
  }
  TuneOptions options;
  options.budget_seconds = budget_seconds;
  options.workspace_limit = workspace_limit;
  options.strategy = strategy;
  options.max_fraction = max_fraction;
  options.max_candidates = max_candidates;
  options.warmup = warmup;
  options.repeats = repeats;
  options.abort_factor = abort_factor;
  options.seed = seed;
  options.jobs = jobs;
  options.only = only;
  options.skip_tuned = skip_tuned;
  options.save = save;

  const ProgressBridge bridge(std::move(progress));
  TuneCallbacks callbacks;
  callbacks.task_started = [&](const TuneTask& task, size_t index, size_t count) {
    bridge.emit("task_started", [&](nb::dict& d) {
      describe_task(d, task);
      d["index"] = index;
      d["count"] = count;
    });
  };
  callbacks.trial_done = [&](const TuneTaskResult& so_far, const TuneTrial& trial, double fraction) {
    bridge.emit("trial", [&](nb::dict& d) {
      describe_task(d, so_far.task);
      d["device"] = so_far.device;
      d["fraction"] = fraction;
      d["tried"] = so_far.trials.size();
      d["trial"] = trial_dict(trial);
    });
  };
  callbacks.task_done = [&](const TuneTaskResult& r) {
    bridge.emit("task_done", [&](nb::dict& d) { d["result"] = result_dict(r, false); });
  };
  std::vector<TuneTaskResult> results;
  {
    const DatabaseUse use(database, true, "tune()");
    const DevicesTuning tuning(devices);
    nb::gil_scoped_release released;
    results = tune_devices(devices, tasks, database, options, callbacks);
  }
  nb::list out;
  for (const TuneTaskResult& r : results) out.append(result_dict(r, true));
  return nb::make_tuple(out, skipped);
}

Plan make_plan(const std::string& device_spec, const Problem& problem, const std::optional<std::string>& family,
               const std::optional<Config>& config, bool use_tuning, const TuningDatabase* database,
               bool external_workspace, const std::optional<std::string>& math,
               std::optional<uint64_t> workspace_limit, const std::string& epilogue) {
  Device& device = convtune::device(device_spec);
  PlanRequest request;
  // As the command line's --math: the element type goes with it ('bf16' and 'fp16' are 16-bit tensors in fp32 math,
  // the others FP32 tensors), and PlanDescriptor validates the pair.
  request.problem = math ? problem.with_precision(parse_precision(*math)) : problem;
  request.workspace_limit = workspace_limit;
  request.epilogue = parse_epilogue(epilogue);
  if (family) request.family = *family;
  request.config = config;
  request.use_tuning = use_tuning;
  request.tuning = database;
  std::optional<DatabaseUse> use;
  if (database) use.emplace(*database, false, "making a plan");
  nb::gil_scoped_release released;  // describing may read the database; compiling may take seconds
  return Plan(device, PlanDescriptor::create(device.info(), request), external_workspace);
}

}  // namespace

}  // namespace convtune::python

using namespace convtune;
using namespace convtune::python;

// What the library is and how its errors reach Python: version, backends built, environment check, error classes.
static void bind_library(nb::module_& m) {
  m.def("_set_error_types", &set_error_types, "error"_a, "invalid_argument"_a, "unsupported"_a, "backend_error"_a,
        "tuning_database_error"_a, "The exception classes convtune's errors become (convtune/_errors.py).");

  m.def("version", [] { return std::string(convtune::version()); }, "The library's version, e.g. '0.1.0'.");
  m.def("_check_environment", &check_environment,
        "Raises InvalidArgument naming the first CONVTUNE_* variable whose value is unusable.");
  m.def("built_backends", [] { return std::string(convtune::built_backends()); },
        "The backends this build has, e.g. 'cpu opencl cuda'.");
}

// What this machine and build offer: devices, backends and kernel families.
static void bind_devices(nb::module_& m) {
  nb::class_<DeviceInfo>(m, "DeviceInfo", "A device convtune can run on (convtune.devices() lists them).")
      .def_ro("id", &DeviceInfo::id, "What device= takes: 'cpu', 'opencl:0', 'cuda:1'.")
      .def_ro("name", &DeviceInfo::name)
      .def_prop_ro("backend", [](const DeviceInfo& d) { return std::string(to_string(d.backend)); },
                   "'cpu', 'opencl' or 'cuda'.")
      .def_ro("index", &DeviceInfo::index, "Position within its backend (the CUDA ordinal for 'cuda').")
      .def_ro("vendor", &DeviceInfo::vendor)
      .def_ro("driver_version", &DeviceInfo::driver_version)
      .def_ro("compiler", &DeviceInfo::compiler)
      .def_ro("architecture", &DeviceInfo::architecture)
      .def_ro("is_gpu", &DeviceInfo::is_gpu)
      .def_ro("compute_units", &DeviceInfo::compute_units)
      .def_ro("clock_mhz", &DeviceInfo::clock_mhz)
      .def_ro("global_memory_bytes", &DeviceInfo::global_memory_bytes)
      .def_ro("can_run_kernels", &DeviceInfo::can_run_kernels)
      .def_ro("cannot_run_reason", &DeviceInfo::cannot_run_reason)
      .def_prop_ro("fingerprint", &DeviceInfo::fingerprint, "Backend, vendor, name, architecture and driver.")
      .def("__repr__", [](const DeviceInfo& d) { return "DeviceInfo(" + d.id + ": " + d.name + ")"; });

  m.def("devices", [] {
    std::vector<DeviceInfo> infos;
    for (Device* d : Registry::instance().all_devices()) infos.push_back(d->info());
    return infos;
  }, "Every device of every available backend.");
  m.def("backends", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& b : Registry::instance().backends())
      out.emplace_back(std::string(to_string(b->kind())), b->unavailable_reason());
    return out;
  }, "Each backend built in, with why it is unavailable ('' when it is available).");
  m.def("best_device", [] { return Registry::instance().best().info().id; },
        "The id of the fastest kind of device present (CUDA GPU, OpenCL GPU, any OpenCL device, the CPU).");
  m.def("families", [] {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const FamilySummary& f : family_summaries())
      out.emplace_back(f.name, f.problem_kind == Problem::Kind::Gemm ? "gemm" : "convolution", f.description);
    return out;
  }, "Every kernel family: (name, 'convolution' or 'gemm', description).");
}

// Problems: the Problem class and the functions that make one from text or sizes.
static void bind_problems(nb::module_& m) {
  nb::class_<Problem>(m, "Problem", "A convolution in one direction, or a matrix product.")
      .def_prop_ro("text", &Problem::to_string, "The text form convtune's command line reads.")
      .def_prop_ro("kind", [](const Problem& p) { return p.is_conv() ? "convolution" : "gemm"; })
      .def_prop_ro("operation", [](const Problem& p) { return std::string(p.operation()); },
                   "'fwd', 'bwd-data', 'bwd-filter' or 'gemm'.")
      .def_prop_ro("type", [](const Problem& p) { return std::string(to_string(p.type())); },
                   "The element type of every operand: 'fp32', 'fp16' or 'bf16'.")
      .def_prop_ro("math", [](const Problem& p) { return std::string(to_string(p.math())); },
                   "The math mode: 'fp32', 'tf32', '3xtf32' or 'fp32-fast' (16-bit types take 'fp32').")
      .def("with_precision",
           [](const Problem& p, const std::string& math) {
             Problem out = p.with_precision(parse_precision(math));
             out.validate();
             return out;
           },
           "math"_a,
           "The same problem in `math` as a Plan's math= takes it: 'bf16' or 'fp16' (16-bit tensors, FP32 "
           "accumulation), or 'fp32', 'tf32', '3xtf32', 'fp32-fast' (FP32 tensors).")
      .def_prop_ro("reduction_length", &Problem::reduction_length,
                   "Products summed into one output element: what rounding errors grow with.")
      .def_prop_ro("flops", &Problem::flops)
      .def_prop_ro("operand_names", [](const Problem& p) {
        return std::vector<std::string>{p.operand(0).name, p.operand(1).name, p.operand(2).name};
      })
      .def_prop_ro("written", &Problem::written_operand, "Index of the operand the operation writes.")
      .def_prop_ro("shapes", &operand_shapes,
                   "The dense shapes of the three operands as they lie in memory: x, w, y for a convolution ((N, C, H, "
                   "W), (K, C/groups, R, S), (N, K, P, Q); channels-last (N, H, W, C), (K, R, S, C/groups), (N, P, Q, "
                   "K)); (batch, rows, cols) as stored for a GEMM's a, b, c.")
      .def_prop_ro("layout",
                   [](const Problem& p) { return p.is_conv() ? std::string(to_string(p.conv().layout)) : "nchw"; },
                   "A convolution's layout: 'nchw', or 'nhwc' (channels-last).")
      .def("__eq__", [](const Problem& a, const Problem& b) { return a == b; })
      .def("__hash__", [](const Problem& p) { return std::hash<std::string>()(p.to_string()); })
      .def("__repr__", [](const Problem& p) { return "Problem('" + p.to_string() + "')"; });

  m.def("parse_problem", [](const std::string& text) { return parse_any_problem(text); }, "text"_a,
        "A problem from its text: 'N=8,C=64,H=56,K=64,R=3,pad=1,dir=fwd' or 'gemm:M=..,N=..,K=..'.");
  m.def("conv_problem",
        [](int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, std::pair<int64_t, int64_t> stride,
           std::pair<int64_t, int64_t> pad, std::pair<int64_t, int64_t> dilation, int64_t groups,
           const std::string& direction, const std::string& layout) {
          ConvProblem p;
          p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s;
          p.stride = {stride.first, stride.second};
          p.pad = {pad.first, pad.second};
          p.dilation = {dilation.first, dilation.second};
          p.groups = groups;
          p.direction = parse_direction(direction);
          p.layout = parse_layout(layout);
          p.validate();
          return Problem(p);
        },
        "n"_a, "c"_a, "h"_a, "w"_a, "k"_a, "r"_a, "s"_a, "stride"_a, "pad"_a, "dilation"_a, "groups"_a, "direction"_a,
        "layout"_a = "nchw",
        "A validated convolution problem (float32; Problem.with_precision makes it 16-bit) in layout 'nchw' or "
        "'nhwc' (channels-last).");
  m.def("gemm_problem",
        [](int64_t m_, int64_t n, int64_t k, bool trans_a, bool trans_b, int64_t batch, bool accumulate) {
          GemmProblem g;
          g.m = m_, g.n = n, g.k = k, g.trans_a = trans_a, g.trans_b = trans_b, g.batch = batch;
          g.accumulate = accumulate;
          g.validate();
          return Problem(g);
        },
        "m"_a, "n"_a, "k"_a, "trans_a"_a, "trans_b"_a, "batch"_a, "accumulate"_a,
        "A validated packed row-major matrix product C = op(A) op(B) (+C), float32 (Problem.with_precision makes it "
        "16-bit).");
}

// The tuning database, each use guarded against other threads' (DatabaseUse).
static void bind_tuning_database(nb::module_& m) {
  nb::class_<TuningDatabase>(m, "TuningDatabase",
                             "The tuning database: a user file plus the defaults shipped with convtune.")
      .def("__init__",
           [](TuningDatabase* self, std::optional<std::string> path, bool shipped) {
             // Cut at a NUL, the path would name another file.
             if (path && path->find('\0') != std::string::npos)
               throw InvalidArgument("TuningDatabase: path " + *path + " holds a NUL byte: expected a file path");
             const std::filesystem::path file = path ? std::filesystem::path(*path) : TuningDatabase::default_user_file();
             new (self) TuningDatabase(file, shipped ? shipped_tuning_dir() : std::filesystem::path());
           },
           "path"_a = nb::none(), "shipped"_a = true,
           "Loads `path` (default: $CONVTUNE_TUNING_DB, else ~/.local/share/convtune/tuning.json; a missing file is "
           "empty) and, with shipped=True, the shipped defaults. A damaged user file is reported by `error` and "
           "never overwritten.")
      .def_prop_ro("path", [](const TuningDatabase& db) { return db.user_file().string(); })
      .def_prop_ro("error",
                   [](const TuningDatabase& db) {
                     const DatabaseUse use(db, false, "reading .error");
                     return db.user_file_error();
                   },
                   "Why the user file could not be loaded; '' when it loaded.")
      .def_prop_ro("damaged",
                   [](const TuningDatabase& db) {
                     const DatabaseUse use(db, false, "reading .damaged");
                     return db.damaged_entries();
                   },
                   "The user file's entries left out as damaged, each naming the file, the entry and the field (the "
                   "file's other entries are loaded; save() refuses until they are fixed or removed).")
      .def("__len__",
           [](const TuningDatabase& db) {
             const DatabaseUse use(db, false, "len()");
             return db.user_entry_count();
           })
      .def_prop_ro("shipped_count", &TuningDatabase::shipped_entry_count)
      .def("entries",
           [](const TuningDatabase& db, bool shipped, const std::string& device, const std::string& family) {
             const DatabaseUse use(db, false, "entries()");
             EntryFilter filter;
             filter.device = device;
             filter.family = family;
             filter.include_shipped = shipped;
             nb::list out;
             for (const ListedEntry& e : db.list(filter)) out.append(entry_dict(e));
             return out;
           },
           "shipped"_a = false, "device"_a = "", "family"_a = "",
           "The entries as dicts (device, family, problem, parameters, time_ms, gflops, date, origin, ...), "
           "filtered by a substring of the device name or fingerprint and by family.")
      .def("merge_file",
           [](TuningDatabase& db, const std::string& path) {
             const DatabaseUse use(db, true, "merge_file()");
             const MergeCounts c = db.merge_file(path);
             nb::dict counts;
             counts["added"] = c.added;
             counts["replaced"] = c.replaced;
             counts["kept"] = c.kept;
             counts["damaged"] = c.damaged;
             return counts;
           },
           "path"_a,
           "Merges another database file, keeping the faster entry per key; returns the counts (added, replaced, "
           "kept) and the merged file's entries left out as damaged, each with why.")
      .def("prune_device",
           [](TuningDatabase& db, const std::string& device) {
             const DatabaseUse use(db, true, "prune_device()");
             return db.prune_device(device);
           },
           "device"_a, "Removes the user entries of a device (fingerprint or name); returns how many.")
      .def("save",
           [](TuningDatabase& db) {
             const DatabaseUse use(db, true, "save()");
             db.save();
           },
           "Writes the user file atomically (merging what others saved meanwhile).");
}

// Compiled plans: making one, running it on arrays or addresses, and asking why a problem has none.
static void bind_plans(nb::module_& m) {
  nb::class_<Plan>(m, "CompiledPlan", "A problem compiled for one device, ready to run on any operands of its sizes.")
      .def_prop_ro("problem", &Plan::problem)
      .def_prop_ro("device", [](const Plan& p) { return p.device().info(); })
      .def_prop_ro("family", &Plan::family)
      .def_prop_ro("config", &Plan::config)
      .def_prop_ro("tier", [](const Plan& p) { return std::string(to_string(p.tier())); },
                   "Where the configuration came from: 'given', 'exact', 'nearest', 'architecture', 'vendor', "
                   "'built-in default'.")
      .def_prop_ro("explanation", &Plan::explanation)
      .def_prop_ro("workspace_bytes", &Plan::workspace_bytes)
      .def_prop_ro("memory_bytes", &Plan::memory_bytes)
      .def_prop_ro("compiled_from_cache", &Plan::compiled_from_cache)
      .def("describe", &Plan::describe)
      .def("run",
           [](const Plan& plan, nb::handle a, nb::handle b, nb::handle c, intptr_t stream) {
             run_on_arrays(plan, {a, b, c}, stream);
           },
           "a"_a, "b"_a, "c"_a, "stream"_a = 0,
           "Runs on three DLPack arrays in operand order (x, w, y or a, b, c); CUDA memory on `stream`.")
      .def("run_pointers",
           [](const Plan& plan, std::tuple<uintptr_t, uintptr_t, uintptr_t> p, uintptr_t workspace, intptr_t stream,
              uintptr_t bias, uintptr_t residual) {
             run_on_pointers(plan, {std::get<0>(p), std::get<1>(p), std::get<2>(p), bias, residual}, workspace,
                             stream);
           },
           "pointers"_a, "workspace"_a = 0, "stream"_a = 0, "bias"_a = 0, "residual"_a = 0,
           "Runs on raw addresses (host memory on the CPU device, device memory on a CUDA device's `stream`, host "
           "memory on an OpenCL device through copies); an "
           "epilogue's bias (K floats) and residual (y's shape, layout and type) where the plan has them.");

  m.def("make_plan", &make_plan, "device"_a, "problem"_a, "family"_a = nb::none(), "config"_a = nb::none(),
        "use_tuning"_a = true, "database"_a = nb::none(), "external_workspace"_a = false, "math"_a = nb::none(),
        "workspace_limit"_a = nb::none(), "epilogue"_a = "none",
        "Describes and compiles a plan (the tuned family and configuration unless given), in `math` (fp32, tf32, "
        "3xtf32, fp32-fast, or bf16 and fp16 for 16-bit tensors; None: the problem's own) within `workspace_limit` "
        "bytes (None: the device's), with a forward convolution's fused `epilogue` ('bias+residual+relu', "
        "'bias+relu6', ...; 'none').");

  m.def("_unsupported_reason",
        [](const std::string& device_spec, const Problem& problem) -> std::string {
          Device& device = convtune::device(device_spec);
          PlanRequest request;
          request.problem = problem;
          request.use_tuning = false;
          try {
            PlanDescriptor::create(device.info(), request);
          } catch (const Unsupported& e) {
            return e.what();
          }
          return {};
        },
        "device"_a, "problem"_a,
        "'' when a kernel family computes `problem` on `device`, else the library's reason (Unsupported's message); "
        "describes a plan without compiling it.");
}

// Batch norm in training (convtune/batch_norm.h) on raw addresses, for the PyTorch integration's fused blocks.
struct BatchNormOnDevice {
  Device* device;
  BatchNormPlan plan;
};

static void bind_batch_norm(nb::module_& m) {
  nb::class_<BatchNormOnDevice>(m, "BatchNormPlan",
                                "A batch norm in training with its residual add and ReLU, compiled for one device.")
      .def("__init__",
           [](BatchNormOnDevice* self, const std::string& device_spec, const std::string& type,
              const std::string& layout, int64_t n, int64_t c, int64_t h, int64_t w, bool residual, bool relu,
              float relu_max) {
             Device& device = convtune::device(device_spec);
             BatchNormProblem p;
             p.type = parse_element_type(type);
             p.layout = parse_layout(layout);
             p.n = n, p.c = c, p.h = h, p.w = w;
             p.residual = residual, p.relu = relu, p.relu_max = relu_max;
             new (self) BatchNormOnDevice{&device, BatchNormPlan(device, p)};
           },
           "device"_a, "type"_a, "layout"_a, "n"_a, "c"_a, "h"_a, "w"_a, "residual"_a = false, "relu"_a = false,
           "relu_max"_a = 0.0f)
      .def_prop_ro("workspace_bytes", [](const BatchNormOnDevice& b) { return b.plan.workspace_bytes(); })
      .def_prop_ro("problem", [](const BatchNormOnDevice& b) { return b.plan.problem().to_string(); })
      .def_prop_ro("relu", [](const BatchNormOnDevice& b) { return b.plan.problem().relu; },
                   "Whether a ReLU follows (its output is then the backward pass's mask).")
      .def("forward_pointers",
           [](const BatchNormOnDevice& b, std::array<uintptr_t, 8> pointers, float eps, float momentum,
              uintptr_t workspace, intptr_t stream) {
             batch_norm_forward_on_pointers(b.plan, *b.device, pointers, eps, momentum, workspace, stream);
           },
           "pointers"_a, "eps"_a, "momentum"_a, "workspace"_a, "stream"_a = 0,
           "Forward on raw addresses (y, gamma, beta, residual or 0, stats, a, running_mean or 0, running_var or 0): "
           "stats = mean and biased variance, a = act(batch_norm(y) + residual), running statistics moved "
           "`momentum` of the way where given.")
      .def("backward_pointers",
           [](const BatchNormOnDevice& b, std::array<uintptr_t, 9> pointers, float eps, uintptr_t workspace,
              intptr_t stream) {
             batch_norm_backward_on_pointers(b.plan, *b.device, pointers, eps, workspace, stream);
           },
           "pointers"_a, "eps"_a, "workspace"_a, "stream"_a = 0,
           "Backward on raw addresses (da, a, y, stats, gamma, dy, dgamma, dbeta, dresidual or 0).");
}

// The tuner, one device or several alike ones, with a progress callback.
static void bind_tuner(nb::module_& m) {
  m.def("tune", &run_tune, "devices"_a, "problems"_a, "database"_a, "family"_a = "all", "budget_seconds"_a = 60.0,
        "strategy"_a = "annealing", "max_fraction"_a = 0.0, "max_candidates"_a = 0, "warmup"_a = 1, "repeats"_a = 5,
        "abort_factor"_a = 1.5, "seed"_a = 1, "jobs"_a = 0, "only"_a = std::map<std::string, std::vector<int64_t>>(),
        "skip_tuned"_a = false, "save"_a = true, "progress"_a = nb::none(), "workspace_limit"_a = nb::none(),
        "Tunes every (name, problem) x kernel family on one device or several alike ones; returns (results, "
        "skipped).");
}

NB_MODULE(_convtune, m) {
  m.doc() = "convtune's C++ library for Python: devices, problems, plans, the tuner and the tuning database";
  // The package keeps compiled plans in module-level caches for the life of the process, and PyTorch holds on to
  // its operators' closures: objects still alive at interpreter exit are expected, not reference-count bugs.
  nb::set_leak_warnings(false);
  register_error_translator();
  bind_library(m);
  bind_devices(m);
  bind_problems(m);
  bind_tuning_database(m);
  bind_plans(m);
  bind_batch_norm(m);
  bind_tuner(m);
}
