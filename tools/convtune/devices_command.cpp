// `convtune devices`: every device of every backend, and why a backend is unavailable.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "convtune/backend.h"
#include "tools/convtune/commands.h"
#include "tools/convtune/device_choice.h"

namespace convtune::cli {

namespace {

std::string mib(uint64_t bytes) { return bytes ? fmt::format("{} MiB", bytes >> 20) : "-"; }
std::string kib(uint64_t bytes) { return bytes ? fmt::format("{} KiB", bytes >> 10) : "-"; }

// Every backend with its devices, raw numbers in bytes and MHz, and the device `best` means (device_choice.h).
nlohmann::ordered_json devices_json() {
  Registry& registry = Registry::instance();
  nlohmann::ordered_json doc = {{"convtune", version_text()}, {"backends", nlohmann::ordered_json::array()}};
  for (const auto& backend : registry.backends()) {
    nlohmann::ordered_json entry = {{"backend", std::string(to_string(backend->kind()))},
                                    {"available", backend->available()}};
    if (!backend->available()) entry["unavailable_reason"] = backend->unavailable_reason();
    entry["devices"] = nlohmann::ordered_json::array();
    for (size_t i = 0; backend->available() && i < backend->device_count(); ++i) {
      const DeviceInfo& d = backend->device(i).info();
      entry["devices"].push_back({{"id", d.id},
                                  {"name", d.name},
                                  {"vendor", d.vendor},
                                  {"driver", d.driver_version},
                                  {"compiler", d.compiler},
                                  {"architecture", d.architecture},
                                  {"is_gpu", d.is_gpu},
                                  {"compute_units", d.compute_units},
                                  {"clock_mhz", d.clock_mhz},
                                  {"global_memory_bytes", d.global_memory_bytes},
                                  {"local_memory_bytes", d.local_memory_bytes},
                                  {"max_work_group_size", d.max_work_group_size},
                                  {"runs_kernels", d.can_run_kernels},
                                  {"cannot_run_reason", d.cannot_run_reason}});
    }
    doc["backends"].push_back(entry);
  }
  const DeviceInfo& best = choose_device(kDefaultDevice, "devices").info();
  doc["best"] = {{"id", best.id}, {"name", best.name}, {"is_gpu", best.is_gpu}};
  return doc;
}

void print_devices(bool json) {
  if (json) {
    std::cout << devices_json().dump(2) << "\n";
    return;
  }
  Registry& registry = Registry::instance();
  for (const auto& backend : registry.backends()) {
    const std::string name(to_string(backend->kind()));
    if (!backend->available()) {
      std::cout << fmt::format("{}: unavailable: {}\n\n", name, backend->unavailable_reason());
      continue;
    }
    std::cout << fmt::format("{}: {} device(s)\n", name, backend->device_count());
    for (size_t i = 0; i < backend->device_count(); ++i) {
      const DeviceInfo& d = backend->device(i).info();
      std::cout << fmt::format("  {}  {}\n", d.id, d.name);
      std::cout << fmt::format("    vendor            {}\n", d.vendor);
      std::cout << fmt::format("    driver            {}\n", d.driver_version);
      std::cout << fmt::format("    compiler          {}\n", d.compiler);
      std::cout << fmt::format("    architecture      {}\n", d.architecture);
      std::cout << fmt::format("    type              {}\n", d.is_gpu ? "GPU" : "CPU");
      std::cout << fmt::format("    compute units     {}\n", d.compute_units);
      std::cout << fmt::format("    clock             {}\n", d.clock_mhz ? fmt::format("{} MHz", d.clock_mhz) : "-");
      std::cout << fmt::format("    global memory     {}\n", mib(d.global_memory_bytes));
      std::cout << fmt::format("    local memory      {}\n", kib(d.local_memory_bytes));
      std::cout << fmt::format("    max work-group    {}\n", d.max_work_group_size ? std::to_string(d.max_work_group_size) : "-");
      std::cout << fmt::format("    runs kernels      {}\n",
                               d.can_run_kernels ? "yes" : fmt::format("no ({})", d.cannot_run_reason));
    }
    std::cout << "\n";
  }
  // What --device best picks in every command (device_choice.h).
  std::cout << fmt::format("best device: {}\n", choose_device(kDefaultDevice, "devices").info().id);
}

}  // namespace

void add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "List every device of every backend (CPU, OpenCL, CUDA)");
  auto json = std::make_shared<bool>(false);
  add_json_flag(cmd, *json);
  cmd->callback([json] { print_devices(*json); });
}

}  // namespace convtune::cli
