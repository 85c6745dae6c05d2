"""convtune.torch.optimize(): Conv2d -> BatchNorm2d [-> + shortcut] [-> ReLU / ReLU6] blocks found by tracing, fused
in inference (the batch norm folded, shortcut and activation in the convolution's epilogue) and computed unfused in
training; outputs against float64 and stock PyTorch, state_dict keys, running statistics, gradients. On the CPU
everywhere and on CUDA where there is a GPU."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import convtune.torch as ct  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True)
def fp32_math():
    """FP32 on both sides: convtune's plans and the stock model's cuDNN (which takes TF32 by default on a GPU)."""
    ct.set_fp32_math("fp32")
    allowed = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = allowed
    ct.set_fp32_math(None)


class Bottleneck(torch.nn.Module):
    """torchvision's ResNet bottleneck, as its forward writes it: module ReLU shared by three calls, `out += identity`."""

    def __init__(self, c: int, mid: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(c, mid, 1, bias=False), torch.nn.BatchNorm2d(mid)
        self.conv2 = torch.nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = torch.nn.Conv2d(mid, 2 * c, 1, bias=False), torch.nn.BatchNorm2d(2 * c)
        self.relu = torch.nn.ReLU(inplace=True)
        self.downsample = torch.nn.Sequential(torch.nn.Conv2d(c, 2 * c, 1, stride, bias=False),
                                              torch.nn.BatchNorm2d(2 * c))

    def forward(self, x):
        identity = self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


class Net(torch.nn.Module):
    """A stem (conv with bias, batch norm, functional ReLU), a bottleneck, a MobileNet-style depthwise block with
    ReLU6 and a projection added to its input, and a convolution with no batch norm after it."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, 2, 1)
        self.stem_bn = torch.nn.BatchNorm2d(8)
        self.block = Bottleneck(8, 4, 2)
        self.dw = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False),
                                      torch.nn.BatchNorm2d(16), torch.nn.ReLU6(inplace=True))
        self.project = torch.nn.Conv2d(16, 16, 1, bias=False)
        self.project_bn = torch.nn.BatchNorm2d(16)
        self.head = torch.nn.Conv2d(16, 10, 1)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        x = self.block(x)
        x = x + self.project_bn(self.project(self.dw(x)))
        return self.head(x).mean((2, 3))


def _net(device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    net = Net().to(device)
    for m in net.modules():  # batch norms that change what they normalise, so a wrong fold shows
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.3, 0.3)
    return net


def _relative(got, want) -> float:
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_inference_fuses_every_block_and_matches_float64(device, channels_last):
    net = _net(device).eval()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(2, 3, 20, 18, device=device).contiguous(memory_format=fmt)
    with torch.no_grad():
        want = net.double()(x.double())
        net.float()
        stock = net(x)
    keys = set(net.state_dict())
    model = ct.optimize(net.to(memory_format=fmt))
    report = model._convtune_optimize_report
    # stem (functional ReLU), the bottleneck's four (one of the two that are added takes the other as its shortcut,
    # and the ReLU), the depthwise (ReLU6) and the projection (added to the block's input, no activation)
    assert set(report.fused) == {"stem_bn", "block.bn1", "block.bn2", "block.bn3", "block.downsample.1", "dw.1",
                                 "project_bn"}, report
    assert sorted(report.fused.values()) == sorted(["bias+relu", "bias+relu", "bias+relu", "bias+residual+relu",
                                                    "bias", "bias+relu6", "bias+residual"]), report
    assert set(model.state_dict()) == keys  # the same keys (a traced module may list them in the order of use)
    with torch.no_grad():
        got = model(x)
    assert _relative(got, want) < 1e-5
    assert _relative(got, stock) < 1e-5
    epilogues = {conv.epilogue for conv in ct._convs.values() if conv.device == x.device}
    assert {"bias+relu", "bias+residual+relu", "bias+relu6", "bias+residual", "bias"} <= epilogues


def _fused_training_blocks(device: str, layout: str) -> int:
    """How many training blocks (batch norm plans) convtune has made for `device` and `layout`."""
    from convtune import _fusion
    return sum(1 for key in _fusion._bn_plans if key[0].startswith(device) and key[2] == layout)


def _train_side_by_side(stock, model, x, steps=2):
    """`steps` forward and backward passes on both models; the outputs of each."""
    outputs = []
    for _ in range(steps):  # the second step sees the running statistics the first updated
        y_stock, y_ours = stock(x), model(x)
        outputs.append((y_ours.detach(), y_stock.detach()))
        y_stock.square().sum().backward()
        y_ours.square().sum().backward()
    return outputs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_training_fuses_blocks_with_pytorchs_statistics_and_gradients(device, channels_last):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    stock, ours = _net(device).to(memory_format=fmt), _net(device).to(memory_format=fmt)
    reference = _net(device).double()
    model = ct.optimize(ours)
    layout = "nhwc" if channels_last else "nchw"
    made = _fused_training_blocks(device, layout)
    x = torch.randn(4, 3, 16, 16, device=device).contiguous(memory_format=fmt)
    outputs = _train_side_by_side(stock, model, x)
    # Every block with a ReLU or a shortcut after its batch norm ran fused (the stem's with its convolution bias in the
    # forward convolution's epilogue): the stem, the bottleneck's three (its downsample's batch norm is followed by
    # nothing, so PyTorch's batch norm runs it), the depthwise and the projection, a plan each.
    layout = "nhwc" if channels_last else "nchw"
    assert _fused_training_blocks(device, layout) - made == 6
    want = reference(x.double())
    assert _relative(outputs[0][0], want) < 1e-5  # against float64
    for got, stock_y in outputs:
        assert _relative(got, stock_y) < 1e-5
    # As one vector: a convolution's bias before a batch norm has a zero gradient but for rounding.
    ours_p, stock_p = dict(model.named_parameters()), dict(stock.named_parameters())
    for name, p in stock_p.items():
        assert ours_p[name].grad is not None, name  # a gradient for every parameter
        # (the stem's bias before its batch norm: zero but for rounding)
        assert _relative(ours_p[name].grad, p.grad) < 1e-4 or p.grad.norm() < 1e-5, name
    assert _relative(torch.cat([ours_p[n].grad.flatten() for n in stock_p]),
                     torch.cat([p.grad.flatten() for p in stock_p.values()])) < 1e-5
    ours_b = dict(model.named_buffers())
    for name, b in stock.named_buffers():
        assert torch.allclose(ours_b[name].double(), b.double(), rtol=1e-5, atol=1e-6), name
    # Back in eval: the fold uses the statistics training left.
    stock.eval()
    model.eval()
    with torch.no_grad():
        assert _relative(model(x), stock(x)) < 1e-5


class Block(torch.nn.Module):
    """Conv -> BatchNorm (the given options) -> + shortcut -> ReLU."""

    def __init__(self, conv_bias: bool = False, **bn) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(6, 6, 3, 1, 1, bias=conv_bias)
        self.bn = torch.nn.BatchNorm2d(6, **bn)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)) + x)


@pytest.mark.parametrize("options", [dict(momentum=None), dict(affine=False), dict(track_running_stats=False),
                                     dict(momentum=0.3, eps=1e-3), dict(conv_bias=True)])
def test_training_block_follows_batchnorm_options(options):
    torch.manual_seed(1)
    stock = Block(**options)
    ours = Block(**options)
    ours.load_state_dict(stock.state_dict())
    model = ct.optimize(ours)
    assert "bn" in model._convtune_optimize_report.fused
    x = torch.randn(3, 6, 9, 7)
    for step in range(3):
        x_s, x_o = x.clone().requires_grad_(), x.clone().requires_grad_()
        y_s, y_o = stock(x_s), model(x_o)
        assert _relative(y_o, y_s) < 1e-5, step
        (y_s * torch.arange(y_s.numel()).view_as(y_s).sin()).sum().backward()
        (y_o * torch.arange(y_o.numel()).view_as(y_o).sin()).sum().backward()
        assert _relative(x_o.grad, x_s.grad) < 1e-5, step  # through the shortcut and the convolution
    for (name, b_s), b_o in zip(stock.state_dict().items(), model.state_dict().values()):
        assert torch.allclose(b_o.double(), b_s.double(), rtol=1e-5, atol=1e-6), name
    scale = max(p.grad.norm().item() for p in stock.parameters())
    for (name, p_s), p_o in zip(stock.named_parameters(), model.parameters()):
        # A convolution bias before a batch norm has a zero gradient but for rounding: compared absolutely.
        assert _relative(p_o.grad, p_s.grad) < 1e-5 or (p_o.grad - p_s.grad).norm() < 1e-5 * scale, name
    # Evaluation without running statistics uses the batch's: still the training block.
    stock.eval()
    model.eval()
    with torch.no_grad():
        assert _relative(model(x), stock(x)) < 1e-5


def test_a_changed_parameter_or_statistic_is_folded_again():
    net = _net("cpu").eval()
    model = ct.optimize(net)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        model(x)
        net.stem_bn.running_mean.add_(0.25)  # in place: the module is shared with the optimized model
        net.block.conv2.weight.mul_(0.5)
        stock = net(x)
        assert _relative(model(x), stock) < 1e-5


def test_gradients_in_eval_mode_take_the_unfused_path():
    net = _net("cpu").eval()
    model = ct.optimize(net)
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    y = model(x)
    y.sum().backward()
    x2 = x.detach().clone().requires_grad_()
    net(x2).sum().backward()
    assert _relative(x.grad, x2.grad) < 1e-5


def test_a_model_that_cannot_be_traced_is_patched_with_the_reason():
    class Dynamic(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)

        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: symbolic tracing fails
                x = -x
            return self.bn(self.conv(x))

    model = ct.optimize(Dynamic().eval())
    report = model._convtune_optimize_report
    assert not report.fused and "could not be traced" in str(report) and report.patch.replaced == ["conv"]
    with torch.no_grad():
        assert model(torch.randn(1, 3, 8, 8)).shape == (1, 4, 6, 6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_bf16_training_block_is_as_close_to_float64_as_stock(device, channels_last):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    torch.manual_seed(2)
    reference = Block().double().to(device)
    stock = Block().to(device)
    stock.load_state_dict(reference.state_dict())
    ours = Block().to(device)
    ours.load_state_dict(reference.state_dict())
    stock, ours = stock.to(torch.bfloat16, memory_format=fmt), ours.to(torch.bfloat16, memory_format=fmt)
    model = ct.optimize(ours)
    x = torch.randn(8, 6, 12, 10, device=device).to(torch.bfloat16).contiguous(memory_format=fmt)
    sides = {}
    for name, net, inp in [("f64", reference, x.double()), ("stock", stock, x), ("ours", model, x)]:
        inp = inp.clone().requires_grad_()
        y = net(inp)
        (y.double() * torch.linspace(-1, 1, y.numel(), device=device, dtype=torch.float64).view_as(y)).sum().backward()
        sides[name] = [y.detach()] + [inp.grad] + [p.grad for p in net.parameters()]
    for i, what in enumerate(["output", "input's gradient", "weight's gradient", "gamma's gradient",
                              "beta's gradient"]):
        ours_error, stock_error = _relative(sides["ours"][i], sides["f64"][i]), _relative(sides["stock"][i],
                                                                                         sides["f64"][i])
        assert ours_error < max(2 * stock_error, 2 ** -8), (what, ours_error, stock_error)


class Block6(torch.nn.Module):
    """Conv -> BatchNorm -> ReLU6 (MobileNet's), strided."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(6, 8, 3, 2, 1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return F.relu6(self.bn(self.conv(x)))


@pytest.mark.parametrize("channels_last", [False, True])
def test_fused_blocks_on_an_opencl_device(monkeypatch, channels_last):
    """CPU tensors computed on an OpenCL device (PoCL on CI; convtune.torch._host_device): the training blocks and the
    folded inference blocks through the device's buffers, against stock PyTorch."""
    from conftest import kernel_devices
    device = next((d for d in kernel_devices() if d.startswith("opencl")), None)
    if device is None:
        pytest.skip("no OpenCL device runs kernels here")
    monkeypatch.setattr(ct, "_host_device", device)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    for make in (Block, Block6):
        torch.manual_seed(3)
        stock = make().to(memory_format=fmt)
        ours = make().to(memory_format=fmt)
        ours.load_state_dict(stock.state_dict())
        model = ct.optimize(ours)
        x = torch.randn(3, 6, 11, 9).contiguous(memory_format=fmt)
        before = _fused_training_blocks(device, "nhwc" if channels_last else "nchw")
        for step in range(2):
            x_s, x_o = x.clone().requires_grad_(), x.clone().requires_grad_()
            y_s, y_o = stock(x_s), model(x_o)
            assert _relative(y_o, y_s) < 1e-5, (make.__name__, step)
            y_s.sin().sum().backward()
            y_o.sin().sum().backward()
            assert _relative(x_o.grad, x_s.grad) < 1e-5, (make.__name__, step)
        assert _fused_training_blocks(device, "nhwc" if channels_last else "nchw") == before + 1, make.__name__
        for (name, p_s), p_o in zip(stock.named_parameters(), model.parameters()):
            assert _relative(p_o.grad, p_s.grad) < 1e-5, (make.__name__, name)
        for (name, b_s), b_o in zip(stock.state_dict().items(), model.state_dict().values()):
            assert torch.allclose(b_o.double(), b_s.double(), rtol=1e-5, atol=1e-6), (make.__name__, name)
        stock.eval()
        model.eval()
        with torch.no_grad():
            assert _relative(model(x), stock(x)) < 1e-5, make.__name__
        assert any(conv.plan_device == device and conv.epilogue != "none" for conv in ct._convs.values())


class DropPath(torch.nn.Module):
    """Stochastic depth as torchvision writes it: the mode read inside forward, no convolution."""

    def forward(self, x):
        if not self.training:
            return x
        keep = torch.rand(x.shape[0], 1, 1, 1) > 0.5
        return x * keep / 0.5


class ModeNet(torch.nn.Module):
    """A block with stochastic depth on its branch, and an auxiliary head only in training (Inception's)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.drop = DropPath()
        self.aux = torch.nn.Sequential(torch.nn.Conv2d(6, 4, 1, bias=False), torch.nn.BatchNorm2d(4),
                                       torch.nn.ReLU())

    def forward(self, x):
        y = x + self.drop(self.block(x))
        if self.training:
            return y, self.aux(y)
        return y


@pytest.mark.parametrize("start_in_training", [True, False])
def test_modes_stay_dynamic_after_tracing(start_in_training):
    """What depends on train()/eval() keeps doing so: modules without convolutions run whole (stochastic depth), and
    a forward that differs by mode around convolutions gets a graph per mode."""
    torch.manual_seed(4)
    stock, ours = ModeNet(), ModeNet()
    ours.load_state_dict(stock.state_dict())
    ours.train(start_in_training)
    model = ct.optimize(ours)
    assert model._convtune_optimize_report.by_mode and {"block.bn", "aux.1"} <= set(model._convtune_optimize_report.fused)
    x = torch.randn(4, 6, 8, 8)
    for _ in range(2):
        stock.train(), model.train()
        torch.manual_seed(7)
        want = stock(x)
        torch.manual_seed(7)
        got = model(x)
        assert isinstance(got, tuple) and _relative(got[0], want[0]) < 1e-5 and _relative(got[1], want[1]) < 1e-5
        stock.eval(), model.eval()
        with torch.no_grad():
            got, want = model(x), stock(x)
        assert isinstance(got, torch.Tensor) and _relative(got, want) < 1e-5


def test_eval_after_training_folds_the_updated_statistics():
    """The training blocks' kernels move running_mean/var in place: an evaluation after them folds the new values,
    not those of an evaluation before."""
    torch.manual_seed(6)
    stock, ours = Block(), Block()
    ours.load_state_dict(stock.state_dict())
    model = ct.optimize(ours)
    x = torch.randn(3, 6, 9, 7)
    for _ in range(2):
        stock.eval(), model.eval()
        with torch.no_grad():
            assert _relative(model(x), stock(x)) < 1e-5
        stock.train(), model.train()
        stock(x).sum().backward()
        model(x).sum().backward()
