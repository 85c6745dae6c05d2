// `convtune devices`: every device of every backend, and why a backend is unavailable.
#include <fmt/format.h>

#include <iostream>

#include "convtune/backend.h"
#include "tools/convtune/commands.h"

namespace convtune::cli {

namespace {

std::string mib(uint64_t bytes) { return bytes ? fmt::format("{} MiB", bytes >> 20) : "-"; }
std::string kib(uint64_t bytes) { return bytes ? fmt::format("{} KiB", bytes >> 10) : "-"; }

void print_devices() {
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
  std::cout << fmt::format("best device: {}\n", registry.best().info().id);
}

}  // namespace

void add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "List every device of every backend (CPU, OpenCL, CUDA)");
  cmd->callback(print_devices);
}

}  // namespace convtune::cli
