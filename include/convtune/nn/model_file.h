// Model files: a network's architecture, layer list, parameter shapes and values with a checksum, written
// atomically; loading checks all of it. The byte layout is documented in docs/MODEL_FORMAT.md.
// Part of libconvtune_nn (CMake: convtune::nn), the seed networks' trainer: a library of its own on top of libconvtune.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "convtune/nn/network.h"

namespace convtune::nn {

inline constexpr char kModelMagic[9] = "CVTMODEL";
// Version 2 ends in a SHA-256 of the file (OpenSSL's libcrypto); version 1 files (FNV-1a 64) are still read.
inline constexpr uint32_t kModelFormatVersion = 2;

struct ModelHeader {
  uint32_t version = 0;
  std::string architecture;
  nlohmann::json header;  // the whole JSON header (layers, parameters, metadata)
};

// Writes the network's parameters (downloaded from its device) with `metadata` (training options, accuracy)
// into the header. Atomic: a reader sees the old file or the new one.
void save_model(const std::string& path, const Network& network, const nlohmann::json& metadata = {});

// Reads and validates magic, version, sizes and checksum; throws InvalidArgument naming the file and what is
// wrong ("truncated", "checksum mismatch", "format version 7, this convtune reads versions 1 to 2").
ModelHeader read_model_header(const std::string& path);

// Loads parameters into a network of the same architecture; a different architecture, layer list or
// parameter shape throws InvalidArgument naming the file and the first difference.
void load_model(const std::string& path, Network& network);

// The same from a file's bytes already in memory (tests, the fuzz harness); `path` names them in errors. Every
// size and offset is checked before use, and the network is left unchanged when the file is refused.
void load_model_bytes(std::string bytes, const std::string& path, Network& network);
// A model file's bytes: a regular file of at most 1 GiB (FIFOs and devices refused), errors naming the path.
std::string read_model_bytes(const std::string& path);

// Builds the file's architecture on `runtime` (convolutions of conv_family) and loads it.
std::unique_ptr<Network> load_network(const std::string& path, Runtime& runtime,
                                      const std::string& conv_family = "");

}  // namespace convtune::nn
