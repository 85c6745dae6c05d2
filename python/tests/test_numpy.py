"""convtune on NumPy arrays through DLPack: every direction against float64 references on the CPU device (in
place) and an OpenCL device (PoCL on CI: copied there and back), plans, GEMMs, and the errors bad input raises."""
import numpy as np
import pytest

import convtune
from conftest import assert_close, bwd_data_ref, bwd_filter_ref, conv_ref, kernel_devices

# (x shape, w shape, stride, padding, dilation, groups): plain, strided and padded, dilated, grouped, depthwise.
CASES = [
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 9, 7), (6, 4, 3, 2), (2, 1), (1, 0), 1, 1),
    ((2, 2, 9, 9), (3, 2, 3, 3), 1, 2, 2, 1),
    ((1, 6, 6, 6), (4, 3, 3, 3), 1, 1, 1, 2),
    ((2, 4, 5, 5), (4, 1, 3, 3), 1, 1, 1, 4),
]
PAIR = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731


def arrays(rng, x_shape, w_shape, groups, stride, padding, dilation):
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal(w_shape, dtype=np.float32)
    y = conv_ref(x, w, PAIR(stride), PAIR(padding), PAIR(dilation), groups)
    return x, w, rng.standard_normal(y.shape).astype(np.float32), y


@pytest.mark.parametrize("x_shape,w_shape,stride,padding,dilation,groups", CASES)
def test_every_direction_on_the_cpu_device(rng, x_shape, w_shape, stride, padding, dilation, groups):
    x, w, dy, y_ref = arrays(rng, x_shape, w_shape, groups, stride, padding, dilation)
    geometry = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y = convtune.conv2d(x, w, **geometry)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == y_ref.shape
    assert_close(y, y_ref, "fwd")
    dx = convtune.conv2d(w, dy, direction="bwd-data", x_shape=x.shape, **geometry)
    assert_close(dx, bwd_data_ref(dy, w, x.shape, PAIR(stride), PAIR(padding), PAIR(dilation), groups), "bwd-data")
    dw = convtune.conv2d(x, dy, direction="bwd-filter", w_shape=w.shape, **geometry)
    assert_close(dw, bwd_filter_ref(x, dy, w.shape, PAIR(stride), PAIR(padding), PAIR(dilation), groups),
                 "bwd-filter")


@pytest.mark.parametrize("device", kernel_devices())
@pytest.mark.parametrize("case", [CASES[0], CASES[3]])
def test_every_direction_on_a_kernel_device(rng, device, case):
    x_shape, w_shape, stride, padding, dilation, groups = case
    x, w, dy, y_ref = arrays(rng, x_shape, w_shape, groups, stride, padding, dilation)
    geometry = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, device=device)
    assert_close(convtune.conv2d(x, w, **geometry), y_ref, f"fwd on {device}")
    dx = convtune.conv2d(w, dy, direction="bwd-data", out=np.empty(x.shape, np.float32), **geometry)
    assert_close(dx, bwd_data_ref(dy, w, x.shape, PAIR(stride), PAIR(padding), PAIR(dilation), groups), "bwd-data")
    dw = convtune.conv2d(x, dy, direction="bwd-filter", out=np.empty(w.shape, np.float32), **geometry)
    assert_close(dw, bwd_filter_ref(x, dy, w.shape, PAIR(stride), PAIR(padding), PAIR(dilation), groups),
                 "bwd-filter")


def test_plan_is_compiled_once_and_writes_out_in_place(rng):
    x, w, _, y_ref = arrays(rng, (2, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1)
    plan = convtune.Plan(x.shape, w.shape, padding=1, device="cpu")
    assert plan.device == "cpu" and plan.reads == ("x", "w") and plan.writes == "y"
    assert plan.shapes == {"x": (2, 3, 8, 8), "w": (4, 3, 3, 3), "y": (2, 4, 8, 8)}
    assert plan.family.startswith("cpu_") and plan.tier and plan.explanation
    out = np.full(y_ref.shape, np.nan, np.float32)
    for _ in range(2):
        result = plan(x, w, out=out)
        assert result is out  # the caller's memory, written in place
        assert_close(out, y_ref, "fwd")
    assert "Plan(" in repr(plan)


def test_plan_math_mode_and_workspace_limit(rng):
    x, w, _, y_ref = arrays(rng, (2, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1)
    fast = convtune.Plan(x.shape, w.shape, padding=1, device="cpu", tuning=False, math="fp32-fast")
    assert fast.problem.text.endswith("math=fp32-fast")
    assert_close(fast(x, w), y_ref, "fwd")
    # No workspace at all: cpu_blocked's packing buffers are skipped for a family that needs none, and said so.
    bare = convtune.Plan(x.shape, w.shape, padding=1, device="cpu", tuning=False, workspace_limit=0)
    assert bare.workspace_bytes == 0 and bare.family != "cpu_blocked"
    assert "cpu_blocked default skipped: its workspace" in bare.explanation
    assert "over the workspace limit (0 bytes)" in bare.explanation
    assert_close(bare(x, w), y_ref, "fwd")
    with pytest.raises(convtune.InvalidArgument, match="workspace_limit: expected a byte count"):
        convtune.Plan(x.shape, w.shape, device="cpu", workspace_limit=-1)
    with pytest.raises(convtune.InvalidArgument, match="fp32-fast"):
        convtune.Plan(x.shape, w.shape, device="cpu", math="fast")


def test_plan_from_problem_text_and_directions_of_a_plan(rng):
    plan = convtune.plan(problem="N=1,C=2,H=5,K=3,R=3,pad=1,dir=bwd-filter", device="cpu")
    assert plan.reads == ("x", "y") and plan.writes == "w"
    x = rng.standard_normal((1, 2, 5, 5), dtype=np.float32)
    dy = rng.standard_normal((1, 3, 5, 5), dtype=np.float32)
    assert_close(plan(x, dy), bwd_filter_ref(x, dy, (3, 2, 3, 3), (1, 1), (1, 1)), "bwd-filter")


def test_gemm_transposes_batches_and_accumulates(rng):
    a = rng.standard_normal((5, 7), dtype=np.float32)
    b = rng.standard_normal((7, 3), dtype=np.float32)
    assert_close(convtune.gemm(a, b), a.astype(np.float64) @ b, "gemm")
    assert_close(convtune.gemm(np.ascontiguousarray(a.T), b, trans_a=True), a.astype(np.float64) @ b, "trans_a")
    assert_close(convtune.gemm(a, np.ascontiguousarray(b.T), trans_b=True), a.astype(np.float64) @ b, "trans_b")
    ab = rng.standard_normal((4, 5, 7), dtype=np.float32)
    bb = rng.standard_normal((4, 7, 3), dtype=np.float32)
    assert_close(convtune.gemm(ab, bb), ab.astype(np.float64) @ bb, "batched")
    c = np.ones((5, 3), np.float32)
    convtune.gemm(a, b, out=c, accumulate=True)
    assert_close(c, a.astype(np.float64) @ b + 1, "accumulate")


@pytest.mark.parametrize("device", kernel_devices())
def test_gemm_on_a_kernel_device(rng, device):
    a = rng.standard_normal((16, 24), dtype=np.float32)
    b = rng.standard_normal((24, 8), dtype=np.float32)
    assert_close(convtune.gemm(a, b, device=device), a.astype(np.float64) @ b, f"gemm on {device}")


class FakeCudaArray:
    """An array that says it lives on a CUDA GPU, to test device checks on a machine without one."""

    def __init__(self, array):
        self.array, self.shape = array, array.shape

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


def test_bad_input_raises_clear_errors(rng):
    x = rng.standard_normal((1, 3, 8, 8), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    with pytest.raises(TypeError, match=r"x: dtype float64 is not supported: convtune computes float32"):
        convtune.conv2d(x.astype(np.float64), w)
    with pytest.raises(convtune.InvalidArgument, match=r"x: the array is not contiguous .*ascontiguousarray"):
        convtune.conv2d(np.transpose(x, (0, 1, 3, 2)), w)
    with pytest.raises(ValueError, match=r"w_shape \(4, 2, 3, 3\) does not fit x_shape \(1, 3, 8, 8\)"):
        convtune.conv2d(x, w[:, :2].copy())
    with pytest.raises(ValueError, match=r"x: expected a 4-D array \(N, C, H, W\), got shape \(3, 8, 8\)"):
        convtune.conv2d(x[0], w)
    with pytest.raises(TypeError, match=r"x: expected an array that speaks DLPack .* got list"):
        convtune.conv2d([[1.0]], w)
    with pytest.raises(ValueError, match=r"operands are on different devices: x on cpu, w on cuda:0"):
        convtune.conv2d(x, FakeCudaArray(w))
    with pytest.raises(convtune.InvalidArgument, match=r"the operands are on cuda:0 but the plan runs on cpu"):
        convtune.Plan(x.shape, w.shape, device="cpu")(FakeCudaArray(x), FakeCudaArray(w),
                                                      out=FakeCudaArray(np.empty((1, 4, 6, 6), np.float32)))
    with pytest.raises(ValueError, match=r"y: shape \(1, 4, 8, 8\) does not fit the problem: expected \(1, 4, 6, 6\)"):
        convtune.conv2d(x, w, out=np.empty((1, 4, 8, 8), np.float32))
    with pytest.raises(ValueError, match=r"expected x_shape=\(N, C, H, W\) or out="):
        convtune.conv2d(w, np.zeros((1, 4, 6, 6), np.float32), direction="bwd-data")
    with pytest.raises(ValueError, match=r"direction='sideways' is invalid"):
        convtune.conv2d(x, w, direction="sideways")
    with pytest.raises(ValueError, match=r"stride=\(1, 2, 3\) is invalid"):
        convtune.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(ValueError, match=r"no output rows"):
        convtune.conv2d(x[:, :, :2], w)  # the library's own message, as a ValueError
    with pytest.raises(ValueError, match=r"unknown device 'tpu'"):
        convtune.conv2d(x, w, device="tpu")
    with pytest.raises(convtune.Error):
        convtune.Plan(x.shape, w.shape, device="cpu", family="gemm")  # computes GEMMs, not convolutions
    with pytest.raises(ValueError, match=r"op\(b\) to have 7 rows"):
        convtune.gemm(np.zeros((5, 7), np.float32), np.zeros((6, 3), np.float32))
    readonly = x.copy()
    readonly.setflags(write=False)
    try:
        convtune.conv2d(readonly, w)  # NumPy 2 exports read-only arrays through DLPack 1.x; NumPy 1 refuses
    except convtune.InvalidArgument as e:
        assert "x: ndarray.__dlpack__() failed" in str(e)
    else:
        out = np.empty((1, 4, 6, 6), np.float32)
        out.setflags(write=False)
        with pytest.raises(ValueError, match="y: the array is read-only, but the result is written into it"):
            convtune.conv2d(x, w, out=out)


def test_errors_are_convtune_errors_and_builtins():
    assert issubclass(convtune.InvalidArgument, convtune.Error) and issubclass(convtune.InvalidArgument, ValueError)
    assert issubclass(convtune.Unsupported, NotImplementedError)
    assert issubclass(convtune.BackendError, RuntimeError)
    assert issubclass(convtune.TuningDatabaseError, convtune.Error)


def test_devices_and_backends():
    ids = [d.id for d in convtune.devices()]
    assert "cpu" in ids
    assert convtune.best_device() in ids
    assert dict(convtune.backends())["cpu"] == ""
    names = [name for name, _, _ in convtune.families()]
    assert "cpu_direct" in names and "implicit_gemm" in names
    cpu = next(d for d in convtune.devices() if d.id == "cpu")
    assert cpu.backend == "cpu" and cpu.fingerprint.startswith("cpu|")
