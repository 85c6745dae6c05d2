"""Convolutions and matrix products on DLPack arrays: conv_problem(), Plan (compiled once, called many times),
conv2d() and gemm() with a cache of plans, on the device the arrays live on unless another is named."""
from __future__ import annotations

import threading
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _arrays, _checks, _convtune, _errors
from ._convtune import Problem, TuningDatabase

IntPair = Union[int, Sequence[int]]
Shape = Sequence[int]
Tuning = Union[bool, TuningDatabase]

_DIRECTIONS = {"fwd": "fwd", "forward": "fwd", "bwd-data": "bwd-data", "backward-data": "bwd-data",
               "bwd_data": "bwd-data", "bwd-filter": "bwd-filter", "backward-filter": "bwd-filter",
               "bwd_filter": "bwd-filter"}


def _direction(direction: str) -> str:
    try:
        return _DIRECTIONS[_checks.text(direction, "direction")]
    except (KeyError, TypeError):
        raise _errors.InvalidArgument(f"direction={direction!r} is invalid: expected 'fwd', 'bwd-data' or "
                                        "'bwd-filter'") from None


def _is_integer(value: Any) -> bool:
    try:
        _checks.integer(value, "")
        return True
    except _errors.InvalidArgument:
        return False


def _pair(value: IntPair, name: str) -> Tuple[int, int]:
    """An int or a (height, width) pair, as PyTorch's Conv2d takes them (NumPy's integers too; never a float or a
    bool)."""
    if _is_integer(value):
        return (_checks.integer(value, name), _checks.integer(value, name))
    if not isinstance(value, (str, bytes)):
        try:
            h, w = value  # type: ignore[misc]
            if _is_integer(h) and _is_integer(w):
                return (_checks.integer(h, name), _checks.integer(w, name))
        except (TypeError, ValueError):
            pass
    raise _errors.InvalidArgument(f"{name}={value!r} is invalid: expected an int or a (height, width) pair of ints")


def _shape4(shape: Shape, name: str, legend: str) -> Tuple[int, int, int, int]:
    """Four extents, each an integer: int(2.7) would have made a 2 of a float without a word."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise _errors.InvalidArgument(f"{name}={shape!r} is invalid: expected a 4-tuple {legend}")
    items = tuple(shape)
    if len(items) != 4:
        raise _errors.InvalidArgument(f"{name}={items!r} is invalid: expected 4 extents {legend}")
    for item in items:
        if not _is_integer(item):
            raise _errors.InvalidArgument(f"{name}={items!r} is invalid: expected 4 integer extents {legend}, got "
                                          f"{item!r} ({type(item).__name__})")
    return tuple(_checks.integer(item, name) for item in items)  # type: ignore[return-value]


_LAYOUTS = {"nchw": "nchw", "nhwc": "nhwc", "channels_last": "nhwc"}


def conv_problem(x_shape: Shape, w_shape: Shape, *, stride: IntPair = 1, padding: IntPair = 0,
                 dilation: IntPair = 1, groups: int = 1, direction: str = "fwd", layout: str = "nchw") -> Problem:
    """The convolution of an x of `x_shape` (N, C, H, W) with a w of `w_shape` (K, C/groups, R, S), validated.
    ``layout``: how the operands lie in memory, 'nchw' or 'nhwc' (channels-last: x as (N, H, W, C), w as
    (K, R, S, C/groups), y as (N, P, Q, K)); the shapes given are the logical ones either way."""
    if layout not in _LAYOUTS:
        raise _errors.InvalidArgument(f"layout={layout!r} is invalid: expected 'nchw' or 'nhwc'")
    n, c, h, w = _shape4(x_shape, "x_shape", "(N, C, H, W)")
    k, c_per_group, r, s = _shape4(w_shape, "w_shape", "(K, C/groups, R, S)")
    if not _is_integer(groups) or _checks.integer(groups, "groups") < 1:
        raise _errors.InvalidArgument(f"groups={groups!r} is invalid: expected a positive int")
    groups = _checks.integer(groups, "groups")
    if c_per_group * groups != c:
        raise _errors.InvalidArgument(
            f"w_shape {tuple(w_shape)} does not fit x_shape {tuple(x_shape)} with groups={groups}: expected "
            f"w_shape[1] = C/groups = {c}/{groups}" + ("" if c % groups == 0 else f" (groups={groups} does not divide C={c})"))
    return _convtune.conv_problem(n, c, h, w, k, r, s, _pair(stride, "stride"), _pair(padding, "padding"),
                                  _pair(dilation, "dilation"), groups, _direction(direction), _LAYOUTS[layout])


def _check_workspace_limit(limit: Optional[int]) -> None:
    if limit is not None and (not _is_integer(limit) or _checks.integer(limit, "workspace_limit") < 0):
        raise _errors.InvalidArgument(f"workspace_limit: expected a byte count >= 0 (0: no workspace) or None (the "
                                      f"device's default), got {limit!r}")


def _device_id(device: Optional[str]) -> str:
    if device is None or device == "best":
        return _convtune.best_device()
    if not isinstance(device, str):
        raise TypeError(f"device: expected a name such as 'cpu', 'opencl:0' or 'cuda:1', got {type(device).__name__}")
    return _checks.text(device, "device")


def _config(config: Optional[Mapping[str, int]]) -> Optional[Dict[str, int]]:
    """A configuration as the library takes it: parameter names (str, no NUL) to integers."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise TypeError(f"config: expected a mapping of parameter names to ints, got {type(config).__name__}")
    return {_checks.text(k, "config key"): _checks.integer(v, f"config[{k!r}]") for k, v in config.items()}


class Plan:
    """One convolution (or matrix product) compiled once for one device, to be called many times.

    ``Plan(x_shape, w_shape, stride=..., padding=..., dilation=..., groups=..., direction=..., device=...)``, or
    ``Plan(problem=...)`` with a Problem or its text. Calling it takes the two operands the direction reads, in
    x, w, y order, and returns the one it writes (into ``out`` when given): ``fwd`` (x, w) -> y, ``bwd-data``
    (w, dy) -> dx, ``bwd-filter`` (x, dy) -> dw, a GEMM (a, b) -> c.

    ``tuning``: True takes the configuration from the default tuning database, False the family's built-in
    default, a TuningDatabase that database. ``family`` and ``config`` name them outright. ``math``, as the command
    line's --math, sets the element type with the math mode: 'bf16' or 'fp16' (16-bit arrays of that dtype, FP32
    accumulation; the tensor-core families), or 'fp32', 'tf32', '3xtf32', 'fp32-fast' (float32 arrays;
    fp32-fast also admits Winograd's alpha-8 tiles, within 4x the FP32 tolerance); None keeps the problem's own
    (fp32 unless its text says ``type=``). Every operand must have the plan's dtype. ``workspace_limit``: the
    scratch bytes the plan may take (0: none; None: the device's default); ``explanation`` says what it left out.
    """

    def __init__(self, x_shape: Optional[Shape] = None, w_shape: Optional[Shape] = None, *, stride: IntPair = 1,
                 padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1, direction: str = "fwd",
                 problem: Union[Problem, str, None] = None, device: Optional[str] = "best",
                 family: Optional[str] = None, config: Optional[Mapping[str, int]] = None, tuning: Tuning = True,
                 math: Optional[str] = None, workspace_limit: Optional[int] = None,
                 _external_workspace: bool = False, _epilogue: str = "none") -> None:
        if problem is None:
            if x_shape is None or w_shape is None:
                raise _errors.InvalidArgument("Plan: expected x_shape and w_shape, or problem=")
            problem = conv_problem(x_shape, w_shape, stride=stride, padding=padding, dilation=dilation,
                                   groups=groups, direction=direction)
        elif isinstance(problem, str):
            problem = _convtune.parse_problem(_checks.text(problem, "problem"))
        elif not isinstance(problem, Problem):
            raise TypeError(f"problem: expected a convtune.Problem or its text, got {type(problem).__name__}")
        if not isinstance(tuning, (bool, TuningDatabase)):
            raise TypeError(f"tuning: expected True, False or a convtune.TuningDatabase, got {type(tuning).__name__}")
        _check_workspace_limit(workspace_limit)
        if workspace_limit is not None:
            workspace_limit = _checks.integer(workspace_limit, "workspace_limit")
        if family is not None:
            _checks.text(family, "family")
        if math is not None:
            _checks.text(math, "math")
        database = tuning if isinstance(tuning, TuningDatabase) else None
        self._plan = _convtune.make_plan(_device_id(device), problem, family, _config(config) or None,
                                         tuning is not False, database, _external_workspace, math, workspace_limit,
                                         _epilogue)
        self.problem: Problem = self._plan.problem
        self.device: str = self._plan.device.id
        names = problem.operand_names
        self.reads: Tuple[str, str] = tuple(names[i] for i in range(3) if i != problem.written)  # type: ignore
        self.writes: str = names[problem.written]

    @property
    def family(self) -> str:
        return self._plan.family

    @property
    def config(self) -> Dict[str, int]:
        return dict(self._plan.config)

    @property
    def tier(self) -> str:
        """Where the configuration came from: 'given', 'exact', 'nearest', ..., 'built-in default'."""
        return self._plan.tier

    @property
    def explanation(self) -> str:
        return self._plan.explanation

    @property
    def workspace_bytes(self) -> int:
        return self._plan.workspace_bytes

    @property
    def memory_bytes(self) -> int:
        """Workspace and, for a widened plan (16-bit arrays through an FP32 family), its FP32 copies of the
        operands: the device memory the plan takes."""
        return self._plan.memory_bytes

    @property
    def shapes(self) -> Dict[str, Tuple[int, ...]]:
        """Operand name -> dense shape."""
        return dict(zip(self.problem.operand_names, (tuple(s) for s in self.problem.shapes)))

    def describe(self) -> str:
        return self._plan.describe()

    def __repr__(self) -> str:
        return f"Plan({self.problem.text!r} on {self.device}: {self.describe()}, {self.tier})"

    def __call__(self, a: Any, b: Any, *, out: Any = None, stream: Any = None) -> Any:
        written = self.problem.written
        shapes = self.problem.shapes
        operands = [None, None, None]
        reads = [i for i in range(3) if i != written]
        operands[reads[0]], operands[reads[1]] = a, b
        if out is None:
            out = _arrays.new_array(a, self.writes, _dense_shape(self.problem, written, a), self.problem.type)
        operands[written] = out
        handle = _arrays.stream_handle(stream, operands, self.device)
        exported = [_arrays.exportable(o) for o in operands]
        with _arrays.device_guard(self.device):
            self._plan.run(exported[0], exported[1], exported[2], stream=handle)
        return out


def _dense_shape(problem: Problem, operand: int, like: Any) -> Tuple[int, ...]:
    """The written operand's shape: a convolution's 4-D tensor; a GEMM's (M, N), or (batch, M, N) when the inputs
    are batched (3-D)."""
    shape = tuple(problem.shapes[operand])
    if problem.kind == "gemm" and len(getattr(like, "shape", ())) == 2:
        return shape[1:]
    return shape


# Plans of conv2d() and gemm(), by problem, device and requested family/configuration: compiled once per process.
_plans: Dict[Tuple[Any, ...], Plan] = {}
_plans_lock = threading.Lock()
_MAX_CACHED_PLANS = 512


def _cached_plan(problem: Problem, device: str, family: Optional[str], config: Optional[Mapping[str, int]]) -> Plan:
    key = (problem.text, device, family, tuple(sorted(config.items())) if config else None)
    with _plans_lock:
        plan = _plans.get(key)
    if plan is None:
        plan = Plan(problem=problem, device=device, family=family, config=config)
        with _plans_lock:
            if len(_plans) >= _MAX_CACHED_PLANS:
                _plans.clear()
            _plans[key] = plan
    return plan


def conv2d(a: Any, b: Any, *, stride: IntPair = 1, padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1,
           direction: str = "fwd", x_shape: Optional[Shape] = None, w_shape: Optional[Shape] = None, out: Any = None,
           device: Optional[str] = None, stream: Any = None, family: Optional[str] = None,
           config: Optional[Mapping[str, int]] = None) -> Any:
    """A 2-D convolution (cross-correlation, like torch.nn.functional.conv2d) on DLPack arrays, in one direction.

    ``fwd``: conv2d(x, w) -> y. ``bwd-data``: conv2d(w, dy, x_shape=...) -> dx. ``bwd-filter``:
    conv2d(x, dy, w_shape=...) -> dw. The shape a backward direction writes comes from ``out`` when it is given.
    x is (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q), dense, row-major, all of one dtype: float32, or
    float16 / bfloat16 (FP32 accumulation: the tensor cores of NVIDIA sm_80+, elsewhere an FP32 family on FP32
    copies, widened_*).

    ``device``: by default where the arrays live (host memory -> convtune's CPU device, CUDA memory -> that CUDA
    device, on PyTorch's current stream for tensors, else ``stream``); name another device (an OpenCL one, say) to
    run there with host arrays copied to it and back. Plans are compiled once per problem and device.
    """
    direction = _direction(direction)
    if direction == "fwd":
        x_shape = _arrays.shape_of(a, "x", 4, "(N, C, H, W)")
        w_shape = _arrays.shape_of(b, "w", 4, "(K, C/groups, R, S)")
        arrays = {"x": a, "w": b}
    elif direction == "bwd-data":
        w_shape = _arrays.shape_of(a, "w", 4, "(K, C/groups, R, S)")
        _arrays.shape_of(b, "dy", 4, "(N, K, P, Q)")
        if x_shape is None:
            if out is None:
                raise _errors.InvalidArgument("conv2d bwd-data: expected x_shape=(N, C, H, W) or out= (the shape "
                                                "of dx cannot be told from dy when stride > 1)")
            x_shape = _arrays.shape_of(out, "out", 4, "(N, C, H, W)")
        arrays = {"w": a, "dy": b}
    else:
        x_shape = _arrays.shape_of(a, "x", 4, "(N, C, H, W)")
        _arrays.shape_of(b, "dy", 4, "(N, K, P, Q)")
        if w_shape is None:
            if out is None:
                raise _errors.InvalidArgument("conv2d bwd-filter: expected w_shape=(K, C/groups, R, S) or out=")
            w_shape = _arrays.shape_of(out, "out", 4, "(K, C/groups, R, S)")
        arrays = {"x": a, "dy": b}
    if out is not None:
        arrays["out"] = out
    where = _arrays.common_device(arrays)
    type_ = _arrays.element_type(arrays)
    problem = conv_problem(x_shape, w_shape, stride=stride, padding=padding, dilation=dilation, groups=groups,
                           direction=direction)
    if type_ != "fp32":
        problem = problem.with_precision(type_)
    plan = _cached_plan(problem, _device_id(device) if device is not None else where, family, config)
    return plan(a, b, out=out, stream=stream)


def gemm(a: Any, b: Any, *, trans_a: bool = False, trans_b: bool = False, out: Any = None, accumulate: bool = False,
         device: Optional[str] = None, stream: Any = None, family: Optional[str] = None,
         config: Optional[Mapping[str, int]] = None) -> Any:
    """C = op(A) op(B) on dense row-major arrays of one dtype (float32, float16 or bfloat16, as conv2d): 2-D, or
    3-D for a batch of products. op transposes when
    trans_a / trans_b is set (A is then stored K x M). ``accumulate`` adds to ``out`` (C += ...), which is then
    required. Devices and streams as in conv2d."""
    a_shape = _arrays.shape_of(a, "a")
    b_shape = _arrays.shape_of(b, "b")
    if len(a_shape) not in (2, 3) or len(b_shape) != len(a_shape):
        raise _errors.InvalidArgument(f"gemm: a {a_shape} and b {b_shape}: expected two 2-D matrices or two 3-D "
                                        "batches of them")
    batch = a_shape[0] if len(a_shape) == 3 else 1
    if len(a_shape) == 3 and b_shape[0] != batch:
        raise _errors.InvalidArgument(f"gemm: a has a batch of {batch}, b of {b_shape[0]}: expected the same")
    m, k = (a_shape[-1], a_shape[-2]) if trans_a else (a_shape[-2], a_shape[-1])
    kb, n = (b_shape[-1], b_shape[-2]) if trans_b else (b_shape[-2], b_shape[-1])
    if kb != k:
        raise _errors.InvalidArgument(f"gemm: op(a) is {m} x {k} but op(b) is {kb} x {n}: expected op(b) to have "
                                        f"{k} rows (a {a_shape}, trans_a={trans_a}; b {b_shape}, trans_b={trans_b})")
    if accumulate and out is None:
        raise _errors.InvalidArgument("gemm: accumulate=True adds to out: expected out=")
    arrays = {"a": a, "b": b}
    if out is not None:
        arrays["out"] = out
    where = _arrays.common_device(arrays)
    type_ = _arrays.element_type(arrays)
    problem = _convtune.gemm_problem(m, n, k, trans_a, trans_b, batch, accumulate)
    if type_ != "fp32":
        problem = problem.with_precision(type_)
    plan = _cached_plan(problem, _device_id(device) if device is not None else where, family, config)
    return plan(a, b, out=out, stream=stream)
