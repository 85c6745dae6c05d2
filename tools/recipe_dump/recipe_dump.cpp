// recipe_dump: every family's recipes (program file, defines, options, launches, workspace) for its default and
// sampled configurations on a fixed set of problems and described devices (Hopper, Ampere, an OpenCL CPU), no
// device needed. Run it from two builds and diff the outputs: a change to family host code that should change no
// kernel (a merge of shared code) shows every recipe unchanged, on GPU families this machine cannot run.
//   build/recipe_dump > before.txt; (change, build) build/recipe_dump > after.txt; cmp before.txt after.txt
// Arguments: family names to limit it to (default: all).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <variant>
#include "convtune/conv_problem.h"
#include "convtune/gemm_problem.h"
#include "convtune/extension/kernel_family.h"
#include "src/tuner/search_space.h"
#include "tests/support/hopper_device.h"
using namespace convtune;
static std::string arg_text(const ArgSource& a) {
  switch (a.kind) {
    case ArgSource::Kind::Operand: return fmt::format("op{}", a.operand);
    case ArgSource::Kind::Workspace: return "ws";
    case ArgSource::Kind::Staging: return fmt::format("st{}", a.operand);
    default: break;
  }
  return std::visit([](const auto& v) -> std::string {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, const Buffer*>) return "buf";
    else if constexpr (std::is_same_v<T, RawArg>) return "raw";
    else return fmt::format("{}", v);
  }, a.value);
}
static void print_source(const ProgramSource& s) {
  std::cout << "  file " << s.file << "\n";
  for (const auto& [k, v] : s.defines) std::cout << "   -D" << k << "=" << v << "\n";
  for (const auto& o : s.options) std::cout << "   opt " << o << "\n";
}
int main(int argc, char** argv) {
  const std::vector<std::string> only(argv + 1, argv + argc);
  DeviceInfo hopper = test::described_hopper();
  DeviceInfo ampere = hopper; ampere.architecture = "sm_80"; ampere.compute_units = 108; ampere.local_memory_optin_bytes = 163 << 10;
  DeviceInfo pocl; pocl.backend = BackendKind::OpenCL; pocl.id = "opencl:0"; pocl.name = "cpu (described)"; pocl.is_gpu = false;
  pocl.compute_units = 2; pocl.global_memory_bytes = 8ull << 30; pocl.local_memory_bytes = 256 << 10; pocl.local_memory_optin_bytes = 256 << 10;
  pocl.max_work_group_size = 4096; pocl.can_run_kernels = true;
  std::vector<std::pair<std::string, DeviceInfo>> devices = {{"hopper", hopper}, {"ampere", ampere}, {"pocl", pocl}};
  std::vector<Problem> problems;
  for (const char* t : {"N=2,C=32,H=14,W=14,K=64,R=3,pad=1", "N=4,C=64,H=28,W=28,K=64,R=3,pad=1", "N=2,C=48,H=9,W=9,K=32,R=5,pad=2",
                        "N=2,C=64,H=16,W=16,K=128,R=1", "N=2,C=32,H=15,W=15,K=48,R=3,stride=2,pad=1"})
    for (Direction d : {Direction::Forward, Direction::BackwardData, Direction::BackwardFilter})
      for (const char* ty : {"", ",type=bf16", ",math=tf32"})
        for (Layout l : {Layout::NCHW, Layout::NHWC})
          problems.push_back(parse_problem(std::string(t) + ty).with_direction(d).with_layout(l));
  for (const char* g : {"M=128,N=256,K=512", "M=100,N=70,K=3000,trans_b=1", "M=256,N=256,K=256,type=bf16", "M=256,N=512,K=1024,type=bf16,trans_b=1", "M=512,N=512,K=2048,math=tf32,trans_b=1"})
    problems.push_back(parse_gemm(g));
  for (const auto& f : kernel_families()) {
    if (!only.empty() && std::find(only.begin(), only.end(), f->name()) == only.end()) continue;
    for (const auto& [dn, dev] : devices) {
      for (const Problem& pb : problems) {
        const Epilogue ep{};
        std::string why;
        try { why = f->unsupported_reason(pb, ep, dev); } catch (const std::exception& e) { why = std::string("throws ") + e.what(); }
        if (!why.empty()) continue;
        std::vector<Config> configs;
        try {
          configs.push_back(f->default_config(pb, dev));
          SearchSpace space(*f, pb, dev, {}, 400);
          const auto& all = space.configs();
          for (size_t i = 0; i < all.size(); i += std::max<size_t>(1, all.size() / 12)) configs.push_back(all[i]);
        } catch (const std::exception& e) { std::cout << f->name() << " " << dn << " space throws " << e.what() << "\n"; continue; }
        for (const Config& c : configs) {
          std::cout << "== " << f->name() << " v" << f->kernel_version() << " " << dn << " " << pb.to_string() << " " << to_string(c) << "\n";
          try {
            const KernelRecipe r = f->recipe(pb, ep, c, dev);
            print_source(r.source);
            for (const auto& e : r.extra_sources) print_source(e);
            std::cout << "  ws " << r.workspace_bytes << " host " << r.host_bytes << " staging";
            for (auto b : r.staging_bytes) std::cout << " " << b;
            std::cout << "\n";
            for (const auto& s : r.steps) {
              std::cout << "  step " << s.kernel << " p" << s.program << " dims " << s.geometry.dims << " g " << s.geometry.global[0] << "," << s.geometry.global[1] << "," << s.geometry.global[2]
                        << " l " << s.geometry.local[0] << "," << s.geometry.local[1] << "," << s.geometry.local[2] << " dyn " << s.geometry.dynamic_local_bytes << " args";
              for (const auto& a : s.args) std::cout << " " << arg_text(a);
              std::cout << "\n";
            }
          } catch (const std::exception& e) { std::cout << "  throws " << e.what() << "\n"; }
        }
      }
    }
  }
}
