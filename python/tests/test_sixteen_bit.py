"""16-bit arrays (float16, bfloat16) through the Python package: every direction and a GEMM on an OpenCL device with
the tensor cores emulated (PoCL on CI, CONVTUNE_EMULATE_TENSOR_CORES=1; CUDA for real where present) against float64
references of the same 16-bit values within the library's 16-bit tolerance, dtypes kept through DLPack, 16-bit plans
(math='bf16'|'fp16'), 16-bit arrays on devices without 16-bit kernels (FP32 copies), the refusals (mixed dtypes, float32
arrays in a 16-bit plan, a tensor-core family on another device),
and convtune.torch's 16-bit path under autograd and autocast."""
import math

import numpy as np
import pytest

import convtune
from conftest import bwd_data_ref, bwd_filter_ref, conv_ref, kernel_devices

try:
    import torch
except ImportError:  # the NumPy tests run without PyTorch
    torch = None

# (x shape, w shape, stride, padding, dilation, groups): plain and padded; strided, grouped and uneven. Small: each
# shape, direction and type compiles its own emulated kernel on PoCL (seconds each).
CASES = [((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
         ((1, 4, 9, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 1), 2)]
TYPES = ["fp16", "bf16"]


@pytest.fixture
def emulated(monkeypatch):
    """The tensor-core families' kernels emulated in plain OpenCL C (tests/nn does the same in C++)."""
    monkeypatch.setenv("CONVTUNE_EMULATE_TENSOR_CORES", "1")


@pytest.fixture(params=kernel_devices() or [None])
def device16(request, monkeypatch):
    """Each kernel device: an OpenCL one with the tensor cores emulated (PoCL here), CUDA as it is."""
    if request.param is None:
        pytest.skip("no OpenCL or CUDA device runs kernels here")
    if request.param.startswith("opencl"):
        monkeypatch.setenv("CONVTUNE_EMULATE_TENSOR_CORES", "1")
    return request.param


def opencl_device():
    device = next((d for d in kernel_devices() if d.startswith("opencl")), None)
    if device is None:
        pytest.skip("no OpenCL device runs kernels here")
    return device


def tolerance(problem):
    """The library's bound on a 16-bit result's relative L2 error (src/harness/workload.cpp, tolerance()): twice the
    type's unit roundoff for the output's one rounding, FP32's direct-sum term, and 2^-24 L for the tensor cores'
    truncating FP32 accumulation over a reduction of length L."""
    unit = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}[problem.type]
    length = max(1, problem.reduction_length)
    return 2 * unit + 8 * 2.0 ** -24 * math.sqrt(length) + 2.0 ** -24 * length


def relative_error(got, want):
    got = np.asarray(got, dtype=np.float64)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def sixteen_bit(rng, shape, type_):
    """A random array of `type_` (NumPy float16; bfloat16 as a PyTorch tensor, NumPy having none) and its values in
    float64, so the reference sees exactly what convtune reads."""
    values = rng.standard_normal(shape, dtype=np.float32)
    if type_ == "fp16":
        array = values.astype(np.float16)
        return array, array.astype(np.float64)
    if torch is None:
        pytest.skip("bfloat16 arrays come from PyTorch here (NumPy has no bfloat16)")
    array = torch.from_numpy(values).bfloat16()
    return array, array.double().numpy()


def as_float64(array):
    return array.double().numpy() if hasattr(array, "double") else np.asarray(array, dtype=np.float64)


def problem_of(x_shape, w_shape, stride, padding, dilation, groups, direction, type_):
    return convtune.conv_problem(x_shape, w_shape, stride=stride, padding=padding, dilation=dilation, groups=groups,
                                 direction=direction).with_precision(type_)


@pytest.mark.parametrize("type_,case", [("fp16", CASES[0]), ("bf16", CASES[0]), ("bf16", CASES[1])])
def test_every_direction_within_the_16_bit_tolerance(rng, device16, type_, case):
    device = device16
    x_shape, w_shape, stride, padding, dilation, groups = case
    geometry = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    x, x64 = sixteen_bit(rng, x_shape, type_)
    w, w64 = sixteen_bit(rng, w_shape, type_)
    y_ref = conv_ref(x64, w64, stride, padding, dilation, groups)
    dy, dy64 = sixteen_bit(rng, y_ref.shape, type_)
    y = convtune.conv2d(x, w, device=device, **geometry)
    assert type(y) is type(x) and y.dtype == x.dtype and tuple(y.shape) == y_ref.shape
    problem = problem_of(x_shape, w_shape, *case[2:], "fwd", type_)
    assert relative_error(as_float64(y), y_ref) <= tolerance(problem)
    dx = convtune.conv2d(w, dy, direction="bwd-data", x_shape=x_shape, device=device, **geometry)
    assert dx.dtype == x.dtype
    problem = problem_of(x_shape, w_shape, *case[2:], "bwd-data", type_)
    assert relative_error(as_float64(dx), bwd_data_ref(dy64, w64, x_shape, stride, padding, dilation, groups)) <= \
        tolerance(problem)
    dw = convtune.conv2d(x, dy, direction="bwd-filter", w_shape=w_shape, device=device, **geometry)
    assert dw.dtype == x.dtype
    problem = problem_of(x_shape, w_shape, *case[2:], "bwd-filter", type_)
    assert relative_error(as_float64(dw), bwd_filter_ref(x64, dy64, w_shape, stride, padding, dilation, groups)) <= \
        tolerance(problem)


@pytest.mark.parametrize("type_", TYPES)
def test_gemm_within_the_16_bit_tolerance(rng, device16, type_):
    device = device16
    a, a64 = sixteen_bit(rng, (20, 24), type_)
    b, b64 = sixteen_bit(rng, (16, 24), type_)
    c = convtune.gemm(a, b, trans_b=True, device=device)
    assert c.dtype == a.dtype and tuple(c.shape) == (20, 16)
    problem = convtune.gemm_problem(20, 16, 24, trans_b=True).with_precision(type_)
    assert relative_error(as_float64(c), a64 @ b64.T) <= tolerance(problem)


def test_16_bit_plans_and_dtypes_kept_through_dlpack(rng, emulated):
    device = opencl_device()
    x_shape, w_shape = CASES[0][:2]
    x, x64 = sixteen_bit(rng, x_shape, "fp16")
    w, w64 = sixteen_bit(rng, w_shape, "fp16")
    # The tensor-core family named (untuned, this thin layer goes to an FP32 family on FP32 copies: widened_*).
    plan = convtune.Plan(x_shape, w_shape, padding=1, device=device, math="fp16", family="implicit_gemm_tc")
    assert plan.problem.type == "fp16" and plan.problem.math == "fp32" and "type=fp16" in plan.problem.text
    assert plan.family == "implicit_gemm_tc"
    out = np.full((2, 4, 8, 8), np.nan, np.float16)
    assert plan(x, w, out=out) is out  # the caller's float16 array, written
    assert relative_error(out, conv_ref(x64, w64, pad=(1, 1))) <= tolerance(plan.problem)
    fresh = plan(x, w)
    assert isinstance(fresh, np.ndarray) and fresh.dtype == np.float16
    np.testing.assert_array_equal(fresh, out)
    # math= names the element type too, as the command line's --math does: FP32 tensors again with 'fp32'.
    assert convtune.Plan(problem=plan.problem, device="cpu", math="fp32").problem.type == "fp32"
    if torch is None:
        return
    for dtype, type_ in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        xt, wt = torch.from_numpy(x64).to(dtype), torch.from_numpy(w64).to(dtype)
        yt = convtune.conv2d(xt, wt, padding=1, device=device)
        assert isinstance(yt, torch.Tensor) and yt.dtype == dtype and yt.device.type == "cpu"
        assert relative_error(yt.double().numpy(), conv_ref(xt.double().numpy(), wt.double().numpy(), pad=(1, 1))) <= \
            tolerance(problem_of(x_shape, w_shape, 1, 1, 1, 1, "fwd", type_))


def test_ml_dtypes_bfloat16_arrays_go_as_their_bits(rng, emulated):
    ml_dtypes = pytest.importorskip("ml_dtypes")  # never a dependency: taken where a program has it
    device = opencl_device()
    x = rng.standard_normal(CASES[0][0], dtype=np.float32).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal(CASES[0][1], dtype=np.float32).astype(ml_dtypes.bfloat16)
    y = convtune.conv2d(x, w, padding=1, device=device)
    assert isinstance(y, np.ndarray) and y.dtype == x.dtype
    reference = conv_ref(x.astype(np.float64), w.astype(np.float64), pad=(1, 1))
    assert relative_error(y.astype(np.float64), reference) <= \
        tolerance(problem_of(x.shape, w.shape, 1, 1, 1, 1, "fwd", "bf16"))


def test_mixed_dtypes_are_refused_naming_the_argument(rng, emulated):
    x16 = rng.standard_normal((2, 3, 8, 8), dtype=np.float32).astype(np.float16)
    w16 = rng.standard_normal((4, 3, 3, 3), dtype=np.float32).astype(np.float16)
    with pytest.raises(convtune.InvalidArgument, match=r"^w: dtype float32 differs from x's float16: expected every "
                                                       r"operand of one call in one dtype"):
        convtune.conv2d(x16, w16.astype(np.float32), padding=1)
    with pytest.raises(convtune.InvalidArgument, match=r"^out: dtype float32 differs from x's float16"):
        convtune.conv2d(x16, w16, padding=1, out=np.empty((2, 4, 8, 8), np.float32))
    with pytest.raises(convtune.InvalidArgument, match=r"^dy: dtype float16 differs from w's float32"):
        convtune.conv2d(w16.astype(np.float32), np.zeros((2, 4, 8, 8), np.float16), direction="bwd-data",
                        x_shape=x16.shape, padding=1)
    with pytest.raises(convtune.InvalidArgument, match=r"^b: dtype float16 differs from a's float32"):
        convtune.gemm(np.zeros((4, 5), np.float32), np.zeros((5, 3), np.float16))
    with pytest.raises(TypeError, match=r"^x: dtype float64 is not supported: convtune computes float32, float16 and "
                                        r"bfloat16"):
        convtune.conv2d(x16.astype(np.float64), w16)
    # A plan's arrays against its element type, in the library's words: the inputs named before the output.
    device = opencl_device()
    plan = convtune.Plan(x16.shape, w16.shape, padding=1, device=device, math="fp16")
    with pytest.raises(convtune.InvalidArgument, match=r"^x: dtype float32 does not fit the problem: expected "
                                                       r"float16 \(its element type, type=fp16\) for N=2,.*type=fp16"):
        plan(x16.astype(np.float32), w16.astype(np.float32))
    with pytest.raises(convtune.InvalidArgument, match=r"^w: dtype float32 does not fit the problem: expected float16"):
        plan(x16, w16.astype(np.float32), out=np.empty((2, 4, 8, 8), np.float16))
    with pytest.raises(convtune.InvalidArgument, match=r"^y: dtype float32 does not fit the problem: expected float16"):
        plan(x16, w16, out=np.empty((2, 4, 8, 8), np.float32))
    with pytest.raises(convtune.InvalidArgument, match=r"^x: dtype float16 does not fit the problem: expected float32"):
        convtune.Plan(x16.shape, w16.shape, padding=1, device="cpu")(x16, w16)
    # 16-bit tensors take fp32 math only (the library's Problem validation).
    with pytest.raises(convtune.InvalidArgument, match=r"type=bf16 takes math=fp32 \(16-bit products are exact"):
        convtune.Plan(problem="N=1,C=2,H=5,K=3,R=3,type=bf16,math=tf32", device="cpu")
    with pytest.raises(convtune.InvalidArgument, match=r"unknown math mode 'bfloat'.*bf16 or fp16"):
        convtune.Plan(x16.shape, w16.shape, device="cpu", math="bfloat")


def test_devices_without_16_bit_kernels_compute_them_through_fp32_copies(rng, monkeypatch):
    """Without tensor cores a 16-bit problem runs an FP32 family on FP32 copies of its arrays (widened_*): the CPU
    device here, and PoCL; a tensor-core family named outright is still refused, naming the type and device."""
    monkeypatch.delenv("CONVTUNE_EMULATE_TENSOR_CORES", raising=False)
    x16 = rng.standard_normal((2, 3, 8, 8), dtype=np.float32).astype(np.float16)
    w16 = rng.standard_normal((4, 3, 3, 3), dtype=np.float32).astype(np.float16)
    problem = problem_of(x16.shape, w16.shape, 1, 1, 1, 1, "fwd", "fp16")
    reference = conv_ref(x16.astype(np.float64), w16.astype(np.float64), pad=(1, 1))
    device = opencl_device()
    for where in ("cpu", device):
        plan = convtune.Plan(x16.shape, w16.shape, padding=1, device=where, math="fp16")
        assert plan.family.startswith("widened_"), (where, plan.family)
        y = plan(x16, w16)
        assert isinstance(y, np.ndarray) and y.dtype == np.float16
        assert relative_error(y.astype(np.float64), reference) <= tolerance(problem), where
    y = convtune.conv2d(x16, w16, padding=1)  # host arrays: the CPU device
    assert relative_error(y.astype(np.float64), reference) <= tolerance(problem)
    info = next(d for d in convtune.devices() if d.id == device)
    if "NVIDIA" in info.vendor:
        pytest.skip(f"{device} is NVIDIA's OpenCL, which may have 16-bit tensor cores")
    with pytest.raises(NotImplementedError, match=rf"implicit_gemm_tc needs an NVIDIA GPU of compute capability 8.0 or "
                                                  rf"newer .*not {device} .*for bf16 tensors"):
        convtune.Plan(x16.shape, w16.shape, padding=1, device=device, math="bf16", family="implicit_gemm_tc")


# convtune.torch: CPU tensors on the emulated OpenCL device (convtune.torch._host_device), so the 16-bit path runs
# under autograd here; on CUDA where there is a GPU.

@pytest.fixture
def ct(emulated, monkeypatch):
    """convtune.torch with CPU tensors on the emulated OpenCL device."""
    if torch is None:
        pytest.skip("needs PyTorch")
    import convtune.torch
    monkeypatch.setattr(convtune.torch, "_host_device", opencl_device())
    return convtune.torch


def assert_bf16_directions(x, w, dy, results, case):
    """y, dx and dw (`results`) of bfloat16 x, w, dy each within the 16-bit tolerance of the float64 references."""
    x_shape, w_shape, stride, padding, dilation, groups = case
    x64, w64, dy64 = x.detach().double().numpy(), w.detach().double().numpy(), dy.double().numpy()
    for got, want, direction in zip(results, (conv_ref(x64, w64, stride, padding, dilation, groups),
                                              bwd_data_ref(dy64, w64, x_shape, stride, padding, dilation, groups),
                                              bwd_filter_ref(x64, dy64, w_shape, stride, padding, dilation, groups)),
                                    ("fwd", "bwd-data", "bwd-filter")):
        problem = problem_of(x_shape, w_shape, stride, padding, dilation, groups, direction, "bf16")
        assert relative_error(got.detach().double().numpy(), want) <= tolerance(problem), direction


def test_torch_16_bit_tensors_run_every_direction_under_autograd(ct):
    x_shape, w_shape, stride, padding, dilation, groups = CASES[1]
    generator = torch.Generator().manual_seed(6)
    x = torch.randn(x_shape, generator=generator).bfloat16().requires_grad_()
    w = torch.randn(w_shape, generator=generator).bfloat16().requires_grad_()
    y = ct.conv2d(x, w, None, stride, padding, dilation, groups)
    assert y.dtype == torch.bfloat16
    dy = torch.randn(y.shape, generator=generator).bfloat16()
    gx, gw = torch.autograd.grad(y, (x, w), dy)
    assert gx.dtype == gw.dtype == torch.bfloat16
    assert_bf16_directions(x, w, dy, (y, gx, gw), CASES[1])
    with pytest.raises(convtune.InvalidArgument, match=r"^weight: dtype torch.float16 differs from input's "
                                                       r"torch.bfloat16: expected one dtype"):
        ct.conv2d(x.detach(), w.detach().half(), None, stride, padding, dilation, groups)


@pytest.mark.parametrize("case", CASES)
def test_torch_channels_last_16_bit_tensors_run_every_direction(ct, case):
    # Channels-last bfloat16 tensors: NHWC problems (the emulated tensor cores read NCHW copies made by transposes),
    # the output and both gradients channels-last, each direction within the 16-bit tolerance of float64.
    x_shape, w_shape, stride, padding, dilation, groups = case
    generator = torch.Generator().manual_seed(14)
    cl = torch.channels_last
    x = torch.randn(x_shape, generator=generator).bfloat16().contiguous(memory_format=cl).requires_grad_()
    w = torch.randn(w_shape, generator=generator).bfloat16().contiguous(memory_format=cl).requires_grad_()
    y = ct.conv2d(x, w, None, stride, padding, dilation, groups)
    assert y.dtype == torch.bfloat16 and y.is_contiguous(memory_format=cl)
    dy = torch.randn(y.shape, generator=generator).bfloat16()
    gx, gw = torch.autograd.grad(y, (x, w), dy)
    assert gx.is_contiguous(memory_format=cl) and gw.is_contiguous(memory_format=cl)
    assert_bf16_directions(x, w, dy, (y, gx, gw), case)


def test_torch_autocast_runs_16_bit_where_the_device_has_it(ct):
    torch.manual_seed(7)
    conv = ct.Conv2d(3, 4, 3, padding=1, bias=False)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv(x)
    assert y.dtype == torch.bfloat16  # as autocast's own conv2d: computed and returned in autocast's dtype
    reference = conv_ref(x.detach().bfloat16().double().numpy(), conv.weight.detach().bfloat16().double().numpy(),
                         pad=(1, 1))
    assert relative_error(y.detach().double().numpy(), reference) <= \
        tolerance(problem_of(x.shape, conv.weight.shape, 1, 1, 1, 1, "fwd", "bf16"))
    y.float().sum().backward()
    # The gradients reach the float32 leaves through autocast's casts, as float32.
    assert x.grad.dtype == conv.weight.grad.dtype == torch.float32
    assert torch.isfinite(x.grad).all() and torch.isfinite(conv.weight.grad).all()
    # A bias is cast with the rest, so y keeps autocast's dtype.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert ct.Conv2d(3, 4, 3, padding=1)(x).dtype == torch.bfloat16


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_torch_cuda_tensors_in_16_bits(dtype_name):
    import convtune.torch as ct
    dtype = getattr(torch, dtype_name)
    type_ = "bf16" if dtype == torch.bfloat16 else "fp16"
    torch.manual_seed(8)
    x = torch.randn(4, 16, 12, 12, device="cuda", requires_grad=True)
    w = torch.randn(32, 16, 3, 3, device="cuda", requires_grad=True)
    problems = {d: problem_of(x.shape, w.shape, 1, 1, 1, 1, d, type_) for d in ("fwd", "bwd-data", "bwd-filter")}
    why = convtune._convtune._unsupported_reason(f"cuda:{torch.cuda.current_device()}", problems["fwd"])
    with torch.autocast("cuda", dtype=dtype):
        y = ct.conv2d(x, w, padding=1)
    assert y.dtype == (torch.float32 if why else dtype)
    if why:
        pytest.skip(f"this GPU has no 16-bit kernels: {why}")
    x64, w64 = x.detach().to(dtype).double().cpu().numpy(), w.detach().to(dtype).double().cpu().numpy()
    reference = conv_ref(x64, w64, pad=(1, 1))
    assert relative_error(y.detach().double().cpu().numpy(), reference) <= tolerance(problems["fwd"])
    dy = torch.randn(y.shape, device="cuda").to(dtype)
    gx, gw = torch.autograd.grad(y, (x, w), dy)
    assert gx.dtype == gw.dtype == torch.float32  # back through autocast's casts to the float32 leaves
    dy64 = dy.double().cpu().numpy()
    assert relative_error(gx.double().cpu().numpy(), bwd_data_ref(dy64, w64, x.shape, pad=(1, 1))) <= \
        tolerance(problems["bwd-data"])
    assert relative_error(gw.double().cpu().numpy(), bwd_filter_ref(x64, dy64, w.shape, pad=(1, 1))) <= \
        tolerance(problems["bwd-filter"])
    # DLPack: 16-bit CUDA tensors in place on their GPU.
    out = torch.empty(4, 32, 12, 12, device="cuda", dtype=dtype)
    pointer = out.data_ptr()
    assert convtune.conv2d(x.detach().to(dtype), w.detach().to(dtype), padding=1, out=out) is out
    assert out.data_ptr() == pointer
    assert relative_error(out.double().cpu().numpy(), reference) <= tolerance(problems["fwd"])
