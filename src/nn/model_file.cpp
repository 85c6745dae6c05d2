// Model file writer and validating reader (format: docs/MODEL_FORMAT.md). Every size and offset read from a file
// is checked before it is used, so a damaged or forged file ends in a message, never in a read out of bounds.
#include "convtune/nn/model_file.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "convtune/error.h"
#include "src/core/atomic_file.h"
#include "src/core/checked_math.h"
#include "src/core/hash.h"
#include "src/core/json_reader.h"

namespace convtune::nn {

namespace {

constexpr size_t kPrefixBytes = 16;           // magic (8), version (4), header length (4)
constexpr size_t kFnvChecksumBytes = 8;       // version 1: trailing FNV-1a 64 of everything before it
constexpr size_t kSha256Bytes = 32;           // version 2: trailing SHA-256 of everything before it
constexpr uint32_t kMaxHeaderBytes = 16 << 20;  // LeNet's header takes about 1 kB

template <typename T>
void append_le(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff));
}

// Callers check `at + sizeof(T) <= in.size()` first; at() would throw an exception without the file's name.
template <typename T>
T read_le(std::string_view in, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return static_cast<T>(v);
}

std::string sha256(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1 || length != kSha256Bytes) {
    throw Error("SHA-256 of a model file failed in OpenSSL's libcrypto");
  }
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

size_t checksum_bytes(uint32_t version) { return version == 1 ? kFnvChecksumBytes : kSha256Bytes; }

struct ParsedModel {
  ModelHeader header;
  std::string bytes;
  size_t payload_at = 0;
  uint64_t payload_bytes = 0;  // what the file holds between the header and the checksum
};

// The container: magic, version, lengths, checksum, a JSON header object. Each field of the header is checked
// where it is used (load_model).
ParsedModel parse_bytes(std::string bytes, const std::string& path) {
  ParsedModel m;
  m.bytes = std::move(bytes);
  const std::string_view b = m.bytes;
  auto fail = [&](const std::string& message) -> void {
    throw InvalidArgument(fmt::format("model file {}: {}", path, message));
  };
  if (b.size() < 8 || std::memcmp(b.data(), kModelMagic, 8) != 0) {
    fail(fmt::format("not a convtune model (expected the magic '{}' at the start)", kModelMagic));
  }
  if (b.size() < kPrefixBytes) fail(fmt::format("truncated ({} bytes, shorter than the fixed header)", b.size()));
  m.header.version = read_le<uint32_t>(b, 8);
  if (m.header.version != 1 && m.header.version != kModelFormatVersion) {
    fail(fmt::format("format version {}, this convtune reads versions 1 to {}", m.header.version, kModelFormatVersion));
  }
  const size_t trailer = checksum_bytes(m.header.version);
  const uint32_t header_bytes = read_le<uint32_t>(b, 12);
  if (header_bytes > kMaxHeaderBytes) {
    fail(fmt::format("the header length field says {} bytes of JSON: expected at most {}", header_bytes,
                     kMaxHeaderBytes));
  }
  // Every term is bounded (the file by read_file's limit, the header by kMaxHeaderBytes): no sum below wraps.
  const uint64_t fixed = kPrefixBytes + uint64_t{header_bytes} + trailer;
  if (fixed > b.size()) {
    fail(fmt::format("truncated (the header says {} bytes of JSON, the file has {} bytes)", header_bytes, b.size()));
  }
  m.payload_at = kPrefixBytes + header_bytes;
  m.payload_bytes = b.size() - fixed;
  try {
    m.header.header = parse_json(b.substr(kPrefixBytes, header_bytes));
  } catch (const InvalidArgument&) {
    m.header.header = nullptr;  // reported after the checksum, which says whether the file was damaged
  }
  // A truncated payload also fails the checksum; say "truncated" when the header shows it was cut short.
  if (m.header.header.is_object()) {
    const auto declared = m.header.header.find("payload_bytes");
    if (declared != m.header.header.end() && declared->is_number_unsigned() &&
        declared->get<uint64_t>() > m.payload_bytes) {
      fail(fmt::format("truncated ({} bytes, the header describes {} bytes of parameters and the file holds {})",
                       b.size(), declared->get<uint64_t>(), m.payload_bytes));
    }
  }
  const std::string_view covered = b.substr(0, b.size() - trailer);
  if (m.header.version == 1) {
    const uint64_t stored = read_le<uint64_t>(b, b.size() - trailer);
    const uint64_t actual = fnv1a64(covered.data(), covered.size());
    if (stored != actual) {
      fail(fmt::format("checksum mismatch (stored FNV-1a {}, computed {}): the file is damaged", hex64(stored),
                       hex64(actual)));
    }
  } else {
    const std::string_view stored = b.substr(b.size() - trailer);
    const std::string actual = sha256(covered);
    if (stored != actual) {
      fail(fmt::format("checksum mismatch (stored SHA-256 {}, computed {}): the file is damaged", hex(stored),
                       hex(actual)));
    }
  }
  if (!m.header.header.is_object()) {
    try {
      parse_json(b.substr(kPrefixBytes, header_bytes));
    } catch (const InvalidArgument& e) {
      fail(fmt::format("the JSON header does not parse: {}", e.what()));
    }
    fail(fmt::format("the JSON header is {}, expected an object", std::string(m.header.header.type_name())));
  }
  const auto architecture = m.header.header.find("architecture");
  if (architecture == m.header.header.end() || !architecture->is_string()) {
    fail("header field 'architecture' is missing or not a string");
  }
  m.header.architecture = architecture->get<std::string>();
  return m;
}

ParsedModel parse(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const Error& e) {
    throw InvalidArgument(fmt::format("model file {}: {}", path, e.what()));
  }
  return parse_bytes(std::move(bytes), path);
}

// Reads header fields with their types checked, naming the file and the field in every error.
class HeaderReader {
 public:
  explicit HeaderReader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw InvalidArgument(fmt::format("model file {}: {}", path_, message));
  }
  const nlohmann::json& field(const nlohmann::json& object, const char* name, const std::string& where) const {
    if (!object.is_object()) fail(fmt::format("{} is {}, expected an object", where, json_excerpt(object)));
    const auto it = object.find(name);
    if (it == object.end()) fail(fmt::format("{} has no field '{}'", where, name));
    return *it;
  }
  std::string text(const nlohmann::json& object, const char* name, const std::string& where) const {
    const nlohmann::json& v = field(object, name, where);
    if (!v.is_string()) fail(fmt::format("{}.{} is {}, expected a string", where, name, json_excerpt(v)));
    return v.get<std::string>();
  }
  const nlohmann::json& array(const nlohmann::json& object, const char* name, const std::string& where) const {
    const nlohmann::json& v = field(object, name, where);
    if (!v.is_array()) fail(fmt::format("{}.{} is {}, expected an array", where, name, json_excerpt(v)));
    return v;
  }
  // A non-negative integer; a negative or fractional number is refused, not wrapped or truncated.
  uint64_t count(const nlohmann::json& object, const char* name, const std::string& where) const {
    const nlohmann::json& v = field(object, name, where);
    if (!v.is_number_unsigned()) {
      fail(fmt::format("{}.{} is {}, expected an integer of 0 or more", where, name, json_excerpt(v)));
    }
    return v.get<uint64_t>();
  }

 private:
  const std::string& path_;
};

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
  file += sha256(file);
  // Only a writer that died between creating and renaming its temporary leaves one; its process is gone now.
  remove_stale_temporaries(path);
  write_file_atomic(path, file);
}

ModelHeader read_model_header(const std::string& path) { return parse(path).header; }

void load_model(const std::string& path, Network& network) { load_model_bytes(read_model_bytes(path), path, network); }

std::string read_model_bytes(const std::string& path) {
  try {
    return read_file(path);
  } catch (const Error& e) {
    throw InvalidArgument(fmt::format("model file {}: {}", path, e.what()));
  }
}

void load_model_bytes(std::string bytes, const std::string& path, Network& network) {
  const ParsedModel m = parse_bytes(std::move(bytes), path);
  const nlohmann::json& h = m.header.header;
  const HeaderReader read(path);
  if (m.header.architecture != network.architecture()) {
    read.fail(fmt::format("architecture '{}', expected '{}'", m.header.architecture, network.architecture()));
  }
  // Every field the writer puts in the header is there and says what the network is: a header that lacks one, or
  // describes another input, is not this network's file, whatever its checksum says.
  const nlohmann::json& input = read.array(h, "input", "header");
  std::vector<int64_t> input_shape;
  for (const nlohmann::json& d : input) {
    if (!d.is_number_integer()) read.fail(fmt::format("header.input holds {}, expected integers", json_excerpt(d)));
    input_shape.push_back(d.get<int64_t>());
  }
  if (input_shape != network.input_shape()) {
    read.fail(fmt::format("header.input is {}, expected {} (the {} network's input)", shape_string(input_shape),
                          shape_string(network.input_shape()), network.architecture()));
  }
  if (const nlohmann::json& metadata = read.field(h, "metadata", "header"); !metadata.is_object() && !metadata.is_null())
    read.fail(fmt::format("header.metadata is {}, expected an object", json_excerpt(metadata)));
  const nlohmann::json& layers = read.array(h, "layers", "header");
  if (layers.size() != network.layers().size()) {
    read.fail(fmt::format("{} layers, the {} network has {}", layers.size(), network.architecture(),
                          network.layers().size()));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& layer = *network.layers()[i];
    const std::string where = fmt::format("layers[{}]", i);
    const std::string name = read.text(layers[i], "name", where), spec = read.text(layers[i], "spec", where);
    if (name != layer.name() || spec != layer.spec()) {
      read.fail(fmt::format("layer {} is {} '{}', expected {} '{}'", i, name, spec, layer.name(), layer.spec()));
    }
  }
  const nlohmann::json& params = read.array(h, "parameters", "header");
  const std::vector<Parameter*> targets = network.parameters();
  if (params.size() != targets.size()) {
    read.fail(fmt::format("{} parameter tensors, expected {}", params.size(), targets.size()));
  }
  const uint64_t payload_bytes = read.count(h, "payload_bytes", "header");
  if (payload_bytes != m.payload_bytes) {
    read.fail(fmt::format("the header says payload_bytes={}, but {} bytes lie between the header and the checksum",
                          payload_bytes, m.payload_bytes));
  }
  // The writer lays the tensors out back to back in header order; any other offset (negative, overlapping, past
  // the payload) is damage or forgery, and would read the wrong bytes as weights.
  uint64_t expected_offset = 0;
  std::vector<std::vector<float>> values(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    Parameter& p = *targets[i];
    const std::string where = fmt::format("parameters[{}]", i);
    const std::string name = read.text(params[i], "name", where);
    const nlohmann::json& shape_json = read.array(params[i], "shape", where);
    std::vector<int64_t> shape;
    for (const nlohmann::json& d : shape_json) {
      if (!d.is_number_integer()) read.fail(fmt::format("{}.shape holds {}, expected integers", where, json_excerpt(d)));
      shape.push_back(d.get<int64_t>());
    }
    if (name != p.name || shape != p.value.shape) {
      read.fail(fmt::format("parameter {} is {} {}, expected {} {}", i, name, shape_string(shape), p.name,
                            shape_string(p.value.shape)));
    }
    const uint64_t offset = read.count(params[i], "offset", where);
    const uint64_t bytes = p.value.bytes();
    const auto end = checked_add(offset, bytes);
    if (offset != expected_offset || !end || *end > payload_bytes) {
      read.fail(fmt::format("parameter {} ({} bytes) has offset {}, expected {}: the payload holds the tensors back "
                            "to back in header order within its {} bytes",
                            p.name, bytes, offset, expected_offset, payload_bytes));
    }
    values[i].resize(static_cast<size_t>(p.value.size()));
    for (size_t j = 0; j < values[i].size(); ++j) {
      const uint32_t bits = read_le<uint32_t>(m.bytes, m.payload_at + offset + 4 * j);
      std::memcpy(&values[i][j], &bits, sizeof bits);
      // Training never stores a NaN or an infinity that works: such a network answers nothing, and a checksum
      // computed over the damage does not make it a model.
      if (!std::isfinite(values[i][j])) {
        read.fail(fmt::format("parameter {} (parameters[{}]) holds {} at element {}: expected finite weights",
                              p.name, i, std::isnan(values[i][j]) ? "NaN" : "an infinity", j));
      }
    }
    expected_offset = *end;
  }
  if (expected_offset != payload_bytes) {
    read.fail(fmt::format("the parameters take {} bytes, but the payload holds {}", expected_offset, payload_bytes));
  }
  // Nothing reaches the network until the whole file has been checked: a refused file leaves it as it was.
  for (size_t i = 0; i < params.size(); ++i) network.runtime().upload(targets[i]->value, values[i]);
}

std::unique_ptr<Network> load_network(const std::string& path, Runtime& runtime, const std::string& conv_family) {
  std::string bytes = read_model_bytes(path);
  const ModelHeader header = parse_bytes(bytes, path).header;
  const auto names = architecture_names();
  if (std::find(names.begin(), names.end(), header.architecture) == names.end()) {
    throw InvalidArgument(fmt::format("model file {}: unknown architecture '{}'", path, header.architecture));
  }
  auto network = make_network(runtime, header.architecture, conv_family);
  load_model_bytes(std::move(bytes), path, *network);
  return network;
}

}  // namespace convtune::nn
