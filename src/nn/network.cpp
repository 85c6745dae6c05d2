// Network: per-batch-size activation buffers, forward/backward through the layers, inference fusion.
#include "convtune/nn/network.h"

#include <fmt/format.h>

#include "convtune/error.h"
#include "convtune/extension/kernel_family.h"
#include "convtune/nn/layers.h"

namespace convtune::nn {

Network::Network(Runtime& runtime, std::string architecture, std::vector<int64_t> input)
    : runtime_(&runtime), architecture_(std::move(architecture)), input_(std::move(input)) {}

void Network::add(std::unique_ptr<Layer> layer) {
  layers_.push_back(std::move(layer));
  batches_.clear();
}

std::vector<Parameter*> Network::parameters() const {
  std::vector<Parameter*> all;
  for (const auto& layer : layers_) {
    for (Parameter* p : layer->parameters()) all.push_back(p);
  }
  return all;
}

void Network::initialize(uint64_t seed) {
  for (const auto& layer : layers_) layer->initialize(seed);
}

Network::Batch& Network::batch_state(int64_t batch) {
  auto it = batches_.find(batch);
  if (it != batches_.end()) return it->second;
  Batch state;
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), input_.begin(), input_.end());
  state.activations.push_back(runtime_->allocate(shape));
  state.gradients.push_back(runtime_->allocate(shape));
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DeviceTensor& in = state.activations.back();
    const DeviceTensor& in_grad = state.gradients.back();
    // A layer fused into the convolution before it passes that output through; Flatten reshapes in place.
    const bool passes_through = fused_away_.count(i) > 0 || layers_[i]->aliases_input();
    const std::vector<int64_t> out_shape = fused_away_.count(i) ? in.shape : layers_[i]->output_shape(in.shape);
    if (passes_through) {
      state.activations.push_back({out_shape, in.buffer});
      state.gradients.push_back({out_shape, in_grad.buffer});
    } else {
      state.activations.push_back(runtime_->allocate(out_shape));
      state.gradients.push_back(runtime_->allocate(out_shape));
    }
  }
  return batches_.emplace(batch, std::move(state)).first->second;
}

const DeviceTensor& Network::input(int64_t batch) { return batch_state(batch).activations.front(); }
const DeviceTensor& Network::output_grad(int64_t batch) { return batch_state(batch).gradients.back(); }

const DeviceTensor& Network::forward(int64_t batch, std::vector<double>* layer_ms) {
  Batch& state = batch_state(batch);
  if (layer_ms) layer_ms->clear();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (fused_away_.count(i) || layers_[i]->aliases_input()) continue;
    auto run = [&] { layers_[i]->forward(state.activations[i], state.activations[i + 1]); };
    if (layer_ms) {
      layer_ms->push_back(runtime_->queue().elapsed_ms(run));
    } else {
      run();
    }
  }
  return state.activations.back();
}

void Network::backward(int64_t batch) {
  if (fused()) throw Unsupported(fmt::format("network {}: backward after fuse_for_inference", architecture_));
  Batch& state = batch_state(batch);
  for (size_t i = layers_.size(); i-- > 0;) {
    if (layers_[i]->aliases_input()) continue;
    layers_[i]->backward(state.activations[i], state.activations[i + 1], state.gradients[i + 1],
                         i > 0 ? &state.gradients[i] : nullptr);
  }
}

std::vector<std::string> Network::fuse_for_inference(const std::string& family) {
  std::vector<std::string> report;
  for (size_t i = 0; i + 2 < layers_.size(); ++i) {
    auto* conv = dynamic_cast<Conv2d*>(layers_[i].get());
    auto* pool = dynamic_cast<Pool*>(layers_[i + 2].get());
    if (!conv || layers_[i + 1]->kind() != "relu" || !pool || pool->pool_kind() != PoolKind::Max || pool->size() != 2) {
      continue;
    }
    const Epilogue epilogue{true, true, 2};
    if (!runtime_->on_host()) {
      // Ask the family with the layer's own shape at batch 1; the shape does not change with the batch.
      ConvProblem problem = conv->problem(1, Direction::Forward);
      std::vector<int64_t> shape = {1};
      shape.insert(shape.end(), input_.begin(), input_.end());
      for (size_t j = 0; j < i; ++j) shape = fused_away_.count(j) ? shape : layers_[j]->output_shape(shape);
      problem.h = shape[2];
      problem.w = shape[3];
      const std::string why = kernel_family(family).unsupported_reason(
          problem, epilogue, with_workspace_limit(runtime_->device().info(), runtime_->workspace_limit()));
      if (!why.empty()) {
        report.push_back(fmt::format("{}: not fused ({} does not compute it: {})", conv->name(), family, why));
        continue;
      }
    }
    conv->set_fused_epilogue(epilogue, family);
    fused_away_.insert(i + 1);
    fused_away_.insert(i + 2);
    report.push_back(fmt::format("{}+{}+{}: bias, ReLU and 2x2 max-pool fused into one {} forward", conv->name(),
                                 layers_[i + 1]->name(), layers_[i + 2]->name(),
                                 runtime_->on_host() ? "host" : family));
  }
  batches_.clear();
  return report;
}

std::vector<std::string> Network::steps() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i]->aliases_input()) continue;
    if (fused_away_.count(i)) {
      names.back() += "+" + layers_[i]->name();
      continue;
    }
    names.push_back(layers_[i]->name());
  }
  return names;
}

std::vector<std::string> architecture_names() { return {"lenet", "lenet-small"}; }

std::unique_ptr<Network> make_network(Runtime& runtime, const std::string& architecture,
                                      const std::string& conv_family) {
  int64_t c1 = 0, c2 = 0, hidden = 0;
  if (architecture == "lenet") {
    c1 = 32, c2 = 64, hidden = 256;
  } else if (architecture == "lenet-small") {
    c1 = 8, c2 = 16, hidden = 64;
  } else {
    throw InvalidArgument(fmt::format("unknown network architecture '{}': expected one of: lenet, lenet-small",
                                      architecture));
  }
  auto net = std::make_unique<Network>(runtime, architecture, std::vector<int64_t>{1, 28, 28});
  net->add(std::make_unique<Conv2d>(runtime, "conv1", 1, c1, 5, 2, conv_family));
  net->add(std::make_unique<Activation>(runtime, "relu1", ActivationKind::Relu));
  net->add(std::make_unique<Pool>(runtime, "pool1", PoolKind::Max, 2));
  net->add(std::make_unique<Conv2d>(runtime, "conv2", c1, c2, 5, 2, conv_family));
  net->add(std::make_unique<Activation>(runtime, "relu2", ActivationKind::Relu));
  net->add(std::make_unique<Pool>(runtime, "pool2", PoolKind::Max, 2));
  net->add(std::make_unique<Flatten>("flatten"));
  net->add(std::make_unique<Dense>(runtime, "fc1", c2 * 7 * 7, hidden));
  net->add(std::make_unique<Activation>(runtime, "relu3", ActivationKind::Relu));
  net->add(std::make_unique<Dense>(runtime, "fc2", hidden, 10));
  return net;
}

}  // namespace convtune::nn
