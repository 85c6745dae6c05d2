// Optimiser steps on a device against the host, and model files: round trip, wrong architecture, damage,
// the reliability issue's forged files, both format versions.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "convtune/error.h"
#include "convtune/nn/model_file.h"
#include "convtune/nn/optimizer.h"
#include "src/core/atomic_file.h"
#include "src/core/hash.h"
#include "tests/nn/nn_test_support.h"

namespace convtune::nn {
namespace {

using testing::random_values;
using testing::test_devices;

// Three steps of an optimiser on one parameter with changing gradients; returns the final values.
std::vector<float> run_steps(Device& device, Optimizer& optimizer) {
  Runtime runtime(device);
  Parameter p{"w", runtime.allocate({37}), runtime.allocate({37})};
  runtime.upload(p.value, random_values(37, 1));
  for (int step = 0; step < 3; ++step) {
    runtime.upload(p.grad, random_values(37, 100 + step));
    optimizer.step(runtime, {&p});
  }
  return runtime.download(p.value);
}

TEST(Optimizer, SgdMomentumAndAdamStepTheSameOnEveryDevice) {
  // Seed 002's rule by hand for SGD: v = m v - lr g, w += v.
  std::vector<float> w = random_values(37, 1), v(37, 0.0f);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = random_values(37, 100 + step);
    for (size_t i = 0; i < w.size(); ++i) {
      v[i] = 0.9f * v[i] - 0.1f * g[i];
      w[i] += v[i];
    }
  }
  for (Device* device : test_devices()) {
    SCOPED_TRACE(device->info().id);
    auto sgd = make_sgd(0.1, 0.9);
    const std::vector<float> got = run_steps(*device, *sgd);
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-5f) << i;
  }
  // Adam: the textbook form in double on the host.
  std::vector<double> wd(37), m(37, 0.0), s(37, 0.0);
  const std::vector<float> w0 = random_values(37, 1);
  std::copy(w0.begin(), w0.end(), wd.begin());
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> g = random_values(37, 100 + step - 1);
    for (size_t i = 0; i < wd.size(); ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      s[i] = 0.999 * s[i] + 0.001 * g[i] * g[i];
      const double mh = m[i] / (1 - std::pow(0.9, step)), sh = s[i] / (1 - std::pow(0.999, step));
      wd[i] -= 0.01 * mh / (std::sqrt(sh) + 1e-8);
    }
  }
  for (Device* device : test_devices()) {
    SCOPED_TRACE(device->info().id);
    auto adam = make_adam(0.01);
    const std::vector<float> got = run_steps(*device, *adam);
    for (size_t i = 0; i < wd.size(); ++i) EXPECT_NEAR(got[i], wd[i], 1e-5) << i;
  }
}

class ModelFile : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    const auto dir = std::filesystem::temp_directory_path() / fmt::format("convtune_model_test_{}", getpid());
    std::filesystem::create_directories(dir);
    return (dir / name).string();
  }
  void expect_error(const std::function<void()>& load, const std::string& file, const std::string& phrase) {
    try {
      load();
      ADD_FAILURE() << "no error; expected one mentioning '" << phrase << "'";
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(file), std::string::npos) << message;
      EXPECT_NE(message.find(phrase), std::string::npos) << message;
    }
  }
  Runtime runtime_{Registry::instance().find("cpu")};
};

TEST_F(ModelFile, RoundTripKeepsEveryParameterAndTheMetadata) {
  auto net = make_network(runtime_, "lenet-small");
  net->initialize(42);
  const std::string file = path("round_trip.model");
  save_model(file, *net, {{"test_accuracy", 0.5}});
  auto loaded = load_network(file, runtime_);
  ASSERT_EQ(loaded->parameters().size(), net->parameters().size());
  for (size_t i = 0; i < net->parameters().size(); ++i) {
    EXPECT_EQ(runtime_.download(loaded->parameters()[i]->value), runtime_.download(net->parameters()[i]->value));
  }
  EXPECT_EQ(read_model_header(file).header["metadata"]["test_accuracy"].get<double>(), 0.5);
}

TEST_F(ModelFile, AnotherArchitectureIsRefusedNamingBoth) {
  auto small = make_network(runtime_, "lenet-small");
  small->initialize(1);
  const std::string file = path("small.model");
  save_model(file, *small);
  auto big = make_network(runtime_, "lenet");
  expect_error([&] { load_model(file, *big); }, file, "architecture 'lenet-small', expected 'lenet'");
}

TEST_F(ModelFile, DamagedTruncatedVersionAndForeignFilesAreRefused) {
  auto net = make_network(runtime_, "lenet-small");
  net->initialize(1);
  const std::string file = path("good.model");
  save_model(file, *net);
  const std::string bytes = read_file(file);

  std::string damaged = bytes;
  damaged[bytes.size() / 2] ^= 0x5a;  // a payload byte
  write_file_atomic(path("damaged.model"), damaged);
  expect_error([&] { load_network(path("damaged.model"), runtime_); }, path("damaged.model"), "checksum mismatch");

  write_file_atomic(path("truncated.model"), bytes.substr(0, bytes.size() - 1000));
  expect_error([&] { load_network(path("truncated.model"), runtime_); }, path("truncated.model"), "truncated");

  std::string future = bytes;
  future[8] = 7;  // format version 7
  write_file_atomic(path("future.model"), future);
  expect_error([&] { load_network(path("future.model"), runtime_); }, path("future.model"), "format version 7");

  write_file_atomic(path("foreign.model"), "P5\n28 28\n255\n");
  expect_error([&] { load_network(path("foreign.model"), runtime_); }, path("foreign.model"), "not a convtune model");

  expect_error([&] { load_network(path("missing.model"), runtime_); }, path("missing.model"), "cannot read");
}

// The reliability issue's model files (tests/data/repro): each was accepted or crashed; each is now refused by name.
TEST_F(ModelFile, ReproducersAreRefusedNamingTheFieldAndWhatWasExpected) {
  const std::string repro = std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/";
  // Valid FNV-1a checksum, payload_bytes = 2^64-1: the size check used to wrap around and read out of bounds.
  expect_error([&] { load_network(repro + "model-offset-wrap-oob-read.model", runtime_); },
               "model-offset-wrap-oob-read.model", "truncated");
  // offset -4 used to load, reading header bytes as weights (accuracy 0.28 instead of 0.81).
  expect_error([&] { load_network(repro + "model-negative-offset-accepted.model", runtime_); },
               "model-negative-offset-accepted.model", "parameters[0].offset is -4, expected an integer of 0 or more");
  // payload_bytes 1e30: a float converted to uint64_t (undefined behaviour).
  expect_error([&] { load_network(repro + "model-payload-bytes-float-ub.model", runtime_); },
               "model-payload-bytes-float-ub.model", "header.payload_bytes is 1e+30, expected an integer of 0 or more");
}

// A model file of version 1 (FNV-1a checksum, which a test can compute) with `header` and `payload`: a forged file
// whose checksum is right, so only the reader's checks of what it says stand between it and the network.
std::string forged_model(const nlohmann::json& header, const std::string& payload) {
  const std::string json = header.dump();
  std::string file = "CVTMODEL";
  for (uint32_t v : {uint32_t{1}, static_cast<uint32_t>(json.size())})
    for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  file += json + payload;
  const uint64_t fnv = fnv1a64(file.data(), file.size());
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((fnv >> (8 * i)) & 0xff));
  return file;
}

// model-nan-weights-accepted.model (issue 55): a valid checksum over all-NaN weights loaded, "accuracy 0.0800".
// Weights must be finite, and every header field the writer puts there must be there and describe this network.
TEST_F(ModelFile, HeadersThatDoNotDescribeTheNetworkAndWeightsThatAreNotFiniteAreRefused) {
  const std::string repro = std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/";
  expect_error([&] { load_network(repro + "model-nan-weights-accepted.model", runtime_); },
               "model-nan-weights-accepted.model",
               "parameter conv1.weight (parameters[0]) holds NaN at element 0: expected finite weights");

  auto net = make_network(runtime_, "lenet-small");
  net->initialize(2);
  const std::string file = path("fields.model");
  save_model(file, *net, {{"epochs", 1}});
  const nlohmann::json header = read_model_header(file).header;
  const std::string bytes = read_file(file);
  const std::string payload = bytes.substr(16 + header.dump().size(), bytes.size() - 16 - header.dump().size() - 32);
  ASSERT_EQ(payload.size(), header["payload_bytes"].get<size_t>());
  write_file_atomic(path("forged.model"), forged_model(header, payload));
  EXPECT_NO_THROW(load_network(path("forged.model"), runtime_));  // the forgery itself is sound

  auto refused = [&](const nlohmann::json& h, const std::string& p, const std::string& phrase) {
    write_file_atomic(path("forged.model"), forged_model(h, p));
    auto target = make_network(runtime_, "lenet-small");
    target->initialize(5);
    const std::vector<float> before = runtime_.download(target->parameters().front()->value);
    expect_error([&] { load_model(path("forged.model"), *target); }, path("forged.model"), phrase);
    EXPECT_EQ(runtime_.download(target->parameters().front()->value), before) << phrase;  // nothing loaded
  };
  nlohmann::json h = header;
  h.erase("input");
  refused(h, payload, "header has no field 'input'");
  h = header;
  h["input"] = {3, 28, 28};
  refused(h, payload, "header.input is 3x28x28, expected 1x28x28");
  h["input"] = {1, 28.5, 28};
  refused(h, payload, "header.input holds 28.5, expected integers");
  h = header;
  h.erase("metadata");
  refused(h, payload, "header has no field 'metadata'");
  h["metadata"] = "trained";
  refused(h, payload, "header.metadata is \"trained\", expected an object");
  std::string infinite = payload;
  const size_t second = header["parameters"][1]["offset"].get<size_t>();
  for (int i = 0; i < 4; ++i) infinite[second + 12 + i] = "\x00\x00\x80\x7f"[i];  // +inf, little-endian
  refused(header, infinite, fmt::format("parameter {} (parameters[1]) holds an infinity at element 3",
                                        header["parameters"][1]["name"].get<std::string>()));
}

TEST_F(ModelFile, VersionTwoEndsInSha256AndVersionOneFilesStillLoad) {
  auto net = make_network(runtime_, "lenet-small");
  net->initialize(3);
  const std::string file = path("v2.model");
  save_model(file, *net);
  const std::string bytes = read_file(file);
  EXPECT_EQ(read_model_header(file).version, 2u);

  // The same file as version 1 wrote it: version field 1, FNV-1a 64 in place of the 32-byte SHA-256.
  std::string v1 = bytes.substr(0, bytes.size() - 32);
  v1[8] = 1;
  const uint64_t fnv = fnv1a64(v1.data(), v1.size());
  for (int i = 0; i < 8; ++i) v1.push_back(static_cast<char>((fnv >> (8 * i)) & 0xff));
  write_file_atomic(path("v1.model"), v1);
  auto loaded = load_network(path("v1.model"), runtime_, "implicit_gemm");
  EXPECT_EQ(runtime_.download(loaded->parameters().back()->value), runtime_.download(net->parameters().back()->value));

  // Recomputing an FNV-1a over a changed version 2 file no longer passes as a checksum.
  std::string forged = bytes;
  forged[bytes.size() / 2] ^= 0x01;
  write_file_atomic(path("forged.model"), forged);
  expect_error([&] { load_network(path("forged.model"), runtime_); }, path("forged.model"),
               "checksum mismatch (stored SHA-256");
}

TEST_F(ModelFile, ARefusedFileLeavesTheNetworkAsItWas) {
  auto net = make_network(runtime_, "lenet-small");
  net->initialize(5);
  const std::vector<float> before = runtime_.download(net->parameters().front()->value);
  const std::string repro = std::string(CONVTUNE_TEST_DATA_DIR) + "/repro/model-negative-offset-accepted.model";
  EXPECT_THROW(load_model(repro, *net), InvalidArgument);
  EXPECT_EQ(runtime_.download(net->parameters().front()->value), before);
}

TEST_F(ModelFile, SpecialFilesAreRefusedWithoutReading) {
  expect_error([&] { read_model_header("/dev/zero"); }, "/dev/zero", "character device, expected a regular file");
  const std::string fifo = path("model.fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { read_model_header(fifo); }, fifo, "FIFO");  // returns at once: no writer needed
}

}  // namespace
}  // namespace convtune::nn
