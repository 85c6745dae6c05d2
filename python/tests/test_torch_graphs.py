"""convtune.torch under CUDA graph capture and torch.compile: a patched model's training step captured and replayed
matches the same step run eagerly, and torch.compile traces a patched model into one graph with convtune's operators
in it. Needs a CUDA GPU and PyTorch 2.4+ (run on the GPU machine: docs/PYTHON.md says how)."""
import pytest

torch = pytest.importorskip("torch")

import convtune.torch as ct  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_compile = pytest.mark.skipif(not (torch.cuda.is_available() and ct.uses_custom_ops
                                        and hasattr(torch, "compile")), reason="needs CUDA and torch.compile")


def _patched_net_and_input(channels_last: bool):
    """A small patched network on the GPU and an input batch for it, both in the layout asked for."""
    model = _net(channels_last)
    ct.patch(model)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return model, torch.randn(8, 3, 32, 32, device="cuda").contiguous(memory_format=fmt)


def _net(channels_last: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).cuda()
    return model.to(memory_format=torch.channels_last) if channels_last else model


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-30)).item()


@needs_cuda
@pytest.mark.parametrize("channels_last", [False, True])
def test_a_patched_training_step_captures_and_replays_in_a_cuda_graph(channels_last):
    model, static_x = _patched_net_and_input(channels_last)
    params = list(model.parameters())

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(static_x).float().square().mean()
        loss.backward()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires: plans compiled, caches filled
        for _ in range(3):
            for p in params:
                p.grad = None
            step()
    torch.cuda.current_stream().wait_stream(side)
    for p in params:
        p.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step()
    new_x = torch.randn_like(static_x)
    static_x.copy_(new_x)
    graph.replay()
    torch.cuda.synchronize()
    replayed = [static_loss.detach().clone()] + [p.grad.detach().clone() for p in params]
    for p in params:
        p.grad = None
    eager = [step().detach()] + [p.grad for p in params]  # the same inputs, eagerly
    for got, want in zip(replayed, eager):
        assert _relative(got, want) < 1e-6  # the same kernels on the same inputs


@needs_compile
@pytest.mark.parametrize("channels_last", [False, True])
def test_torch_compile_traces_a_patched_model_without_graph_breaks(channels_last):
    import torch._dynamo
    model, x = _patched_net_and_input(channels_last)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    seen = []

    def inspecting_backend(gm, example_inputs):
        seen.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=inspecting_backend)(x)
    assert sum("convtune.conv2d" in s for s in seen) == 3, seen
    torch._dynamo.reset()
    compiled = torch.compile(model)  # inductor, the default backend
    eager_y = model(x)
    eager_y.sum().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    compiled_y = compiled(x)
    compiled_y.sum().backward()
    assert _relative(compiled_y, eager_y) < 1e-3  # TF32 by default on both
    # As one vector: the first convolution's bias, before a batch norm, has a zero gradient but for rounding.
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert _relative(got, torch.cat([g.flatten() for g in eager_grads])) < 1e-3
