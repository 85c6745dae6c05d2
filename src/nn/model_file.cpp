// Model file writer and validating reader (format: docs/MODEL_FORMAT.md).
#include "convtune/nn/model_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "convtune/error.h"
#include "src/core/atomic_file.h"
#include "src/core/hash.h"

namespace convtune::nn {

namespace {

constexpr size_t kPrefixBytes = 16;   // magic (8), version (4), header length (4)
constexpr size_t kChecksumBytes = 8;  // trailing FNV-1a 64 of everything before it

template <typename T>
void append_le(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff));
}

template <typename T>
T read_le(const std::string& in, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return static_cast<T>(v);
}

struct ParsedModel {
  ModelHeader header;
  std::string bytes;
  size_t payload_at = 0;
};

ParsedModel parse(const std::string& path) {
  ParsedModel m;
  try {
    m.bytes = read_file(path);
  } catch (const std::exception& e) {
    throw InvalidArgument(fmt::format("model file {}: cannot read it: {}", path, e.what()));
  }
  const std::string& b = m.bytes;
  if (b.size() < 8 || std::memcmp(b.data(), kModelMagic, 8) != 0) {
    throw InvalidArgument(fmt::format("model file {}: not a convtune model (expected the magic '{}' at the start)",
                                      path, kModelMagic));
  }
  if (b.size() < kPrefixBytes + kChecksumBytes) {
    throw InvalidArgument(fmt::format("model file {}: truncated ({} bytes, shorter than the fixed header)", path, b.size()));
  }
  m.header.version = read_le<uint32_t>(b, 8);
  if (m.header.version != kModelFormatVersion) {
    throw InvalidArgument(fmt::format("model file {}: format version {}, this convtune reads version {}", path,
                                      m.header.version, kModelFormatVersion));
  }
  const uint32_t header_bytes = read_le<uint32_t>(b, 12);
  if (kPrefixBytes + header_bytes + kChecksumBytes > b.size()) {
    throw InvalidArgument(fmt::format("model file {}: truncated (the header says {} bytes of JSON, the file has {} bytes)",
                                      path, header_bytes, b.size()));
  }
  const uint64_t stored = read_le<uint64_t>(b, b.size() - kChecksumBytes);
  const uint64_t actual = fnv1a64(b.data(), b.size() - kChecksumBytes);
  try {
    m.header.header = nlohmann::json::parse(b.substr(kPrefixBytes, header_bytes));
  } catch (const std::exception&) {
    m.header.header = nullptr;
  }
  // A truncated payload also fails the checksum; say "truncated" when the header shows it was cut short.
  if (m.header.header.is_object() && m.header.header.contains("payload_bytes")) {
    const uint64_t want = kPrefixBytes + header_bytes + m.header.header["payload_bytes"].get<uint64_t>() + kChecksumBytes;
    if (want > b.size()) {
      throw InvalidArgument(fmt::format("model file {}: truncated ({} bytes, the header describes {})", path, b.size(), want));
    }
  }
  if (stored != actual) {
    throw InvalidArgument(fmt::format("model file {}: checksum mismatch (stored {}, computed {}): the file is damaged",
                                      path, hex64(stored), hex64(actual)));
  }
  if (!m.header.header.is_object()) throw InvalidArgument(fmt::format("model file {}: the JSON header does not parse", path));
  m.header.architecture = m.header.header.value("architecture", "");
  m.payload_at = kPrefixBytes + header_bytes;
  return m;
}

}  // namespace

void save_model(const std::string& path, const Network& network, const nlohmann::json& metadata) {
  nlohmann::json header;
  header["architecture"] = network.architecture();
  header["input"] = network.input_shape();
  header["layers"] = nlohmann::json::array();
  for (const auto& layer : network.layers()) header["layers"].push_back({{"name", layer->name()}, {"spec", layer->spec()}});
  header["parameters"] = nlohmann::json::array();
  std::string payload;
  for (const Parameter* p : network.parameters()) {
    header["parameters"].push_back({{"name", p->name}, {"shape", p->value.shape}, {"offset", payload.size()}});
    const std::vector<float> values = network.runtime().download(p->value);
    for (float v : values) {
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      append_le(payload, bits);
    }
  }
  header["payload_bytes"] = payload.size();
  header["metadata"] = metadata;
  const std::string json = header.dump();
  std::string file(kModelMagic, 8);
  append_le(file, kModelFormatVersion);
  append_le(file, static_cast<uint32_t>(json.size()));
  file += json;
  file += payload;
  append_le(file, fnv1a64(file.data(), file.size()));
  write_file_atomic(path, file);
}

ModelHeader read_model_header(const std::string& path) { return parse(path).header; }

void load_model(const std::string& path, Network& network) {
  const ParsedModel m = parse(path);
  const nlohmann::json& h = m.header.header;
  if (m.header.architecture != network.architecture()) {
    throw InvalidArgument(fmt::format("model file {}: architecture '{}', expected '{}'", path, m.header.architecture,
                                      network.architecture()));
  }
  const auto& layers = h.at("layers");
  if (layers.size() != network.layers().size()) {
    throw InvalidArgument(fmt::format("model file {}: {} layers, the {} network has {}", path, layers.size(),
                                      network.architecture(), network.layers().size()));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& layer = *network.layers()[i];
    const std::string spec = layers[i].value("spec", "");
    if (layers[i].value("name", "") != layer.name() || spec != layer.spec()) {
      throw InvalidArgument(fmt::format("model file {}: layer {} is {} '{}', expected {} '{}'", path, i,
                                        layers[i].value("name", ""), spec, layer.name(), layer.spec()));
    }
  }
  const auto& params = h.at("parameters");
  const std::vector<Parameter*> targets = network.parameters();
  if (params.size() != targets.size()) {
    throw InvalidArgument(fmt::format("model file {}: {} parameter tensors, expected {}", path, params.size(), targets.size()));
  }
  const uint64_t payload_bytes = h.at("payload_bytes").get<uint64_t>();
  for (size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *targets[i];
    const auto shape = params[i].at("shape").get<std::vector<int64_t>>();
    if (params[i].value("name", "") != p.name || shape != p.value.shape) {
      throw InvalidArgument(fmt::format("model file {}: parameter {} is {} {}, expected {} {}", path, i,
                                        params[i].value("name", ""), shape_string(shape), p.name,
                                        shape_string(p.value.shape)));
    }
    const uint64_t offset = params[i].at("offset").get<uint64_t>();
    if (offset + p.value.bytes() > payload_bytes) {
      throw InvalidArgument(fmt::format("model file {}: parameter {} lies beyond the payload", path, p.name));
    }
    std::vector<float> values(static_cast<size_t>(p.value.size()));
    for (size_t j = 0; j < values.size(); ++j) {
      const uint32_t bits = read_le<uint32_t>(m.bytes, m.payload_at + offset + 4 * j);
      std::memcpy(&values[j], &bits, sizeof bits);
    }
    network.runtime().upload(p.value, values);
  }
}

std::unique_ptr<Network> load_network(const std::string& path, Runtime& runtime, const std::string& conv_family) {
  const ModelHeader header = read_model_header(path);
  const auto names = architecture_names();
  if (std::find(names.begin(), names.end(), header.architecture) == names.end()) {
    throw InvalidArgument(fmt::format("model file {}: unknown architecture '{}'", path, header.architecture));
  }
  auto network = make_network(runtime, header.architecture, conv_family);
  load_model(path, *network);
  return network;
}

}  // namespace convtune::nn
