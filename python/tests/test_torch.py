"""convtune.torch: gradients of Conv2d against torch.nn.functional.conv2d, patch(), state_dict compatibility,
training steps, refusals, and DLPack round trips with PyTorch tensors; on the CPU everywhere and on CUDA where
there is a GPU (PyTorch's current stream, custom operators when this PyTorch has them)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import convtune  # noqa: E402
import convtune.torch as ct  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True)
def fp32_math():
    """FP32 math for float32 tensors, which the 1e-5 bounds below assume: on a GPU, PyTorch's default lets cuDNN (and so
    convtune) use TF32, whose error is about 1e-3 (test_default_fp32_math_on_cuda_is_tf32 checks that)."""
    ct.set_fp32_math("fp32")
    yield
    ct.set_fp32_math(None)

# (in, out, kernel, stride, padding, dilation, groups)
GEOMETRIES = [(3, 8, 3, 1, 1, 1, 1), (4, 6, (3, 2), (2, 1), (1, 0), 1, 2), (6, 6, 3, 1, 2, 2, 6), (5, 7, 1, 2, 0, 1, 1)]


def relative_error(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_conv2d_gradients_match_torch(device, geometry):
    c_in, c_out, kernel, stride, padding, dilation, groups = geometry
    torch.manual_seed(0)
    reference = torch.nn.Conv2d(c_in, c_out, kernel, stride, padding, dilation, groups).to(device)
    ours = ct.Conv2d(c_in, c_out, kernel, stride, padding, dilation, groups).to(device)
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(3, c_in, 11, 10, device=device, requires_grad=True)
    y_ours = ours(x)
    # The reference in float64, so the comparison measures convtune's FP32 error alone.
    x64 = x.detach().double().requires_grad_()
    w64 = reference.weight.detach().double().requires_grad_()
    b64 = reference.bias.detach().double().requires_grad_()
    y_ref = F.conv2d(x64, w64, b64, stride, padding, dilation, groups)
    assert y_ours.shape == y_ref.shape and y_ours.dtype == torch.float32
    assert relative_error(y_ours, y_ref) < 1e-5
    dy = torch.randn_like(y_ours)
    gx, gw, gb = torch.autograd.grad(y_ours, (x, ours.weight, ours.bias), dy)
    rx, rw, rb = torch.autograd.grad(y_ref, (x64, w64, b64), dy.double())
    assert relative_error(gx, rx) < 1e-5
    assert relative_error(gw, rw) < 1e-5
    assert relative_error(gb, rb) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_functional_matches_and_takes_unbatched_input_and_padding_words(device):
    torch.manual_seed(1)
    x = torch.randn(2, 4, 7, 7, device=device)
    w = torch.randn(5, 4, 3, 3, device=device)
    for padding in (1, "same", "valid", (0, 1)):
        assert relative_error(ct.conv2d(x, w, padding=padding), F.conv2d(x.double(), w.double(),
                                                                         padding=padding)) < 1e-5
    assert ct.conv2d(x[0], w, padding=1).shape == (5, 7, 7)


def small_net(device):
    torch.manual_seed(2)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1, padding_mode="reflect"),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).to(device)


def sgd_losses(net, x, labels, steps):
    """The loss of each of `steps` SGD steps (momentum 0.9) of `net` on one batch."""
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    history = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x), labels)
        loss.backward()
        optimizer.step()
        history.append(loss.item())
    return history


@pytest.mark.parametrize("device", DEVICES)
def test_patch_swaps_what_it_can_and_training_matches_torch(device):
    reference = small_net(device)
    model = small_net(device)
    report = ct.patch(model)
    assert report.replaced == ["0", "3"]
    assert report.left == {"6": "padding_mode='reflect': convtune pads with zeros only"}
    assert "2 Conv2d replaced, 1 left to PyTorch" in str(report)
    assert isinstance(model[0], ct.Conv2d) and isinstance(model[0], torch.nn.Conv2d)
    assert list(model.state_dict()) == list(reference.state_dict())
    assert ct.patch(model).replaced == []  # already patched
    torch.manual_seed(3)
    x = torch.randn(16, 1, 12, 12, device=device)
    labels = torch.randint(0, 10, (16,), device=device)
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # cuDNN in FP32, as convtune computes
    losses = [sgd_losses(net, x, labels, 5) for net in (reference, model)]
    torch.backends.cudnn.allow_tf32 = tf32
    assert losses[1][-1] < losses[1][0]  # it learns
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-3)  # as PyTorch's own convolutions do


def test_patch_keeps_the_optimizer_s_parameters():
    model = small_net("cpu")
    before = [id(p) for p in model.parameters()]
    ct.patch(model)
    assert [id(p) for p in model.parameters()] == before


def test_state_dict_round_trip_with_torch_conv2d():
    torch.manual_seed(4)
    theirs = torch.nn.Conv2d(3, 4, 3, bias=True)
    ours = ct.Conv2d(3, 4, 3)
    ours.load_state_dict(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(1, 3, 6, 6)
    assert relative_error(ours(x), theirs(x).double()) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_refusals_say_what_was_expected(device):
    x = torch.randn(1, 3, 6, 6, device=device)
    w = torch.randn(4, 3, 3, 3, device=device)
    with pytest.raises(TypeError, match="input: dtype torch.float64 is not supported: convtune computes float32"):
        ct.conv2d(x.double(), w.double())
    with pytest.raises(NotImplementedError, match="padding_mode='circular': convtune pads with zeros only"):
        ct.Conv2d(3, 4, 3, padding_mode="circular")
    with pytest.raises(convtune.Unsupported, match="pads one side more"):
        ct.conv2d(x, torch.randn(4, 3, 2, 2, device=device), padding="same")
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3).double())
    assert "weight dtype torch.float64" in ct.patch(net).left["0"]
    with pytest.raises(ValueError, match=r"input \(1, 1, 3, 6, 6\) and weight \(4, 3, 3, 3\): expected a 4-D"):
        ct.conv2d(torch.randn(1, 1, 3, 6, 6, device=device), w)


def test_autocast_runs_16_bit_on_the_cpu_device_through_fp32_copies():
    # convtune's CPU device has no 16-bit kernels: its widened families compute bfloat16 tensors in FP32 on FP32 copies
    # (test_sixteen_bit.py runs the tensor-core path, emulated), so autocast runs its dtype there as on a GPU.
    torch.manual_seed(9)
    x = torch.randn(1, 3, 6, 6, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = ct.conv2d(x, w)
    assert y.dtype == torch.bfloat16
    want = F.conv2d(x.detach().bfloat16().double(), w.detach().bfloat16().double())
    assert relative_error(y.detach(), want) <= 2 * 2.0 ** -8 + 1e-5
    y.float().sum().backward()
    assert x.grad.dtype == w.grad.dtype == torch.float32
    assert torch.isfinite(x.grad).all() and torch.isfinite(w.grad).all()
    # Outside autocast a 16-bit tensor is the caller's choice, computed in its dtype.
    assert ct.conv2d(x.detach().bfloat16(), w.detach().bfloat16()).dtype == torch.bfloat16
    # patch() takes a 16-bit Conv2d on the CPU too.
    report = ct.patch(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3).bfloat16()))
    assert "0" in report.replaced and not report.left


@pytest.mark.parametrize("device", DEVICES)
def test_dlpack_round_trip_with_tensors(device):
    torch.manual_seed(5)
    x = torch.randn(2, 3, 8, 8, device=device)
    w = torch.randn(4, 3, 3, 3, device=device)
    out = torch.empty(2, 4, 8, 8, device=device)
    pointer = out.data_ptr()
    y = convtune.conv2d(x, w, padding=1, out=out)
    assert y is out and out.data_ptr() == pointer  # written in place, no copy
    assert relative_error(out, F.conv2d(x.double(), w.double(), padding=1)) < 1e-5
    fresh = convtune.conv2d(x, w, padding=1)
    assert isinstance(fresh, torch.Tensor) and fresh.device == x.device
    dx = convtune.conv2d(w, torch.ones_like(out), padding=1, direction="bwd-data", x_shape=x.shape)
    assert dx.shape == x.shape


def test_numpy_views_of_tensors_are_the_same_memory():
    x = torch.randn(1, 2, 5, 5)
    w = torch.randn(3, 2, 3, 3)
    out = np.zeros((1, 3, 3, 3), np.float32)
    convtune.conv2d(x.numpy(), w, out=out)  # a NumPy array and a tensor, both host memory
    assert relative_error(torch.from_numpy(out), F.conv2d(x.double(), w.double())) < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_runs_on_the_current_stream_and_keeps_the_current_device():
    x = torch.randn(8, 16, 32, 32, device="cuda")
    w = torch.randn(32, 16, 3, 3, device="cuda")
    expected = F.conv2d(x.double(), w.double(), padding=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = ct.conv2d(x, w, padding=1)  # enqueued on `side`, in order with its other work
        y2 = y * 2
    torch.cuda.current_stream().wait_stream(side)
    assert relative_error(y2 / 2, expected) < 1e-5
    if torch.cuda.device_count() > 1:
        with torch.cuda.device(0):
            ct.conv2d(x.to("cuda:1"), w.to("cuda:1"), padding=1)
            assert torch.cuda.current_device() == 0


@pytest.mark.skipif(not (torch.cuda.is_available() and ct.uses_custom_ops), reason="needs CUDA and custom ops")
def test_custom_operators_pass_opcheck():
    x = torch.randn(2, 4, 9, 9, device="cuda", requires_grad=True)
    w = torch.randn(6, 2, 3, 3, device="cuda", requires_grad=True)
    # Schema, autograd registration and fake (meta) implementation; torch.compile with dynamic shapes is not
    # claimed (the shape arguments are int[], which specialises).
    torch.library.opcheck(torch.ops.convtune.conv2d.default, (x, w, [1, 1], [1, 1], [1, 1], 2),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    dy = torch.randn(2, 6, 9, 9, device="cuda")
    torch.library.opcheck(torch.ops.convtune.conv2d_backward_data.default,
                          (w.detach(), dy, [2, 4, 9, 9], [1, 1], [1, 1], [1, 1], 2), test_utils=("test_faketensor",))
    torch.library.opcheck(torch.ops.convtune.conv2d_backward_filter.default,
                          (x.detach(), dy, [6, 2, 3, 3], [1, 1], [1, 1], [1, 1], 2), test_utils=("test_faketensor",))


def test_tune_model_tunes_the_patched_convolutions_and_uses_them(tmp_path):
    model = small_net("cpu")
    ct.patch(model)
    model.train()
    db = convtune.TuningDatabase(str(tmp_path / "db.json"), shipped=False)
    x = torch.randn(4, 1, 12, 12)
    events = []
    try:
        results = ct.tune_model(model, x, budget=20, database=db, max_candidates=1, repeats=1, warmup=0,
                                progress=events.append)
        assert model.training and model[4].training  # modes restored
        assert {r.operation for r in results} == {"fwd", "bwd-data", "bwd-filter"}
        assert len({r.problem.split(",dir=")[0] for r in results}) == 2  # the two convolutions convtune runs
        assert len(db) > 0 and events
        model(x).sum().backward()
        tiers = {plan.tier for conv in ct._convs.values() for plan in conv.plans.values()}
        assert tiers == {"exact"}
    finally:
        ct.set_tuning(True)
    with pytest.raises(ValueError, match="ran no convolution through convtune"):
        ct.tune_model(small_net("cpu"), x, database=db)


def reference_grads(x, w, dy, stride, padding, dilation, groups):
    """float64 forward and both gradients of F.conv2d."""
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()
    y = F.conv2d(x64, w64, None, stride, padding, dilation, groups)
    gx, gw = torch.autograd.grad(y, (x64, w64), dy.double())
    return y, gx, gw


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("which", ["both", "input", "weight"])
def test_channels_last_runs_channels_last_and_matches_float64(device, geometry, which):
    # A convolution runs channels-last when its input or its weight is (PyTorch's rule for cuDNN); the output and both
    # gradients come back channels-last, and match the float64 reference.
    c_in, c_out, kernel, stride, padding, dilation, groups = geometry
    torch.manual_seed(11)
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    x = torch.randn(3, c_in, 11, 10, device=device)
    w = torch.randn(c_out, c_in // groups, kh, kw, device=device)
    if which in ("both", "input"):
        x = x.contiguous(memory_format=torch.channels_last)
    if which in ("both", "weight"):
        w = w.contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    w.requires_grad_()
    y = ct.conv2d(x, w, None, stride, padding, dilation, groups)
    channels_last = ct._layout(x, w) == "nhwc"
    assert channels_last == (which != "weight" or not w.is_contiguous())
    if channels_last:
        assert y.is_contiguous(memory_format=torch.channels_last)
    dy = torch.randn_like(y)
    gx, gw = torch.autograd.grad(y, (x, w), dy)
    ry, rx, rw = reference_grads(x, w, dy, stride, padding, dilation, groups)
    assert relative_error(y, ry) < 1e-5
    assert relative_error(gx, rx) < 1e-5
    assert relative_error(gw, rw) < 1e-5
    if channels_last:
        assert gx.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("device", DEVICES)
def test_other_strides_are_copied_not_refused(device):
    torch.manual_seed(12)
    x = torch.randn(2, 3, 9, 8, device=device).transpose(2, 3)  # neither NCHW nor channels-last
    w = torch.randn(4, 3, 3, 3, device=device)
    assert relative_error(ct.conv2d(x, w, padding=1), F.conv2d(x.double(), w.double(), padding=1)) < 1e-5


def test_patch_runs_a_channels_last_model_in_place_and_trains_like_torch():
    reference = small_net("cpu").to(memory_format=torch.channels_last)
    model = small_net("cpu").to(memory_format=torch.channels_last)
    report = ct.patch(model)
    assert report.replaced == ["0", "3"]  # channels-last weights are taken, not refused
    torch.manual_seed(13)
    x = torch.randn(16, 1, 12, 12).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (16,))
    losses = [sgd_losses(net, x, labels, 4) for net in (reference, model)]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-3)
    assert model[3].weight.is_contiguous(memory_format=torch.channels_last)


def test_prepare_compiles_every_plan_of_a_training_step_ahead():
    model = small_net("cpu")
    ct.patch(model, prepare=False)
    x = torch.randn(5, 1, 12, 12)
    model.train()
    compiled = ct.prepare(model, x)
    # Two convolutions: forward and backward-filter each, backward-data for the second only (the first one's input
    # needs no gradient).
    assert compiled == 5
    assert model.training and model[4].training  # modes restored
    assert ct.prepare(model, x) == 0  # nothing left to compile
    model.eval()
    with torch.no_grad():
        assert ct.prepare(model, torch.randn(2, 1, 12, 12)) == 2  # inference: the forwards of a new batch size


def test_patch_prepares_on_the_first_call_of_new_shapes():
    model = small_net("cpu")
    ct.patch(model)
    x = torch.randn(7, 1, 12, 12)
    model(x).sum().backward()  # the hook compiled every plan first, then the step ran
    convs = [c for c in ct._convs.values() if c.x_shape[0] == 7]
    assert sorted(len(c.plans) for c in convs) == [2, 3]


def test_fp32_math_follows_cudnn_allow_tf32_and_the_override():
    tf32 = torch.backends.cudnn.allow_tf32
    try:
        assert ct.fp32_math("cpu") == "fp32"  # the CPU computes FP32 whatever is set
        ct.set_fp32_math(None)
        torch.backends.cudnn.allow_tf32 = True
        if not any(getattr(h, "fp32_precision", "none") in ("tf32", "ieee")
                   for h in (getattr(torch.backends.cudnn, "conv", None), torch.backends.cudnn, torch.backends)
                   if h is not None):
            assert ct.fp32_math("cuda") == "tf32"
            torch.backends.cudnn.allow_tf32 = False
            assert ct.fp32_math("cuda") == "fp32"
        ct.set_fp32_math("3xtf32")
        assert ct.fp32_math("cuda") == "3xtf32"
        ct.set_fp32_math("highest")
        assert ct.fp32_math("cuda") == "fp32"
        with pytest.raises(convtune.InvalidArgument, match="set_fp32_math: mode='tf64' is invalid"):
            ct.set_fp32_math("tf64")
    finally:
        ct.set_fp32_math(None)
        torch.backends.cudnn.allow_tf32 = tf32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_default_fp32_math_on_cuda_is_tf32_as_pytorch_allows_it():
    torch.manual_seed(15)
    x = torch.randn(4, 32, 14, 14, device="cuda")
    w = torch.randn(64, 32, 3, 3, device="cuda")
    reference = F.conv2d(x.double(), w.double(), padding=1)
    tf32 = torch.backends.cudnn.allow_tf32
    try:
        ct.set_fp32_math(None)
        torch.backends.cudnn.allow_tf32 = True
        error = relative_error(ct.conv2d(x, w, padding=1), reference)
        assert 1e-5 < error < 3e-3  # TF32's 10-bit mantissa, as cuDNN with TF32 allowed
        torch.backends.cudnn.allow_tf32 = False
        assert relative_error(ct.conv2d(x, w, padding=1), reference) < 1e-5  # FP32 when PyTorch forbids TF32
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
