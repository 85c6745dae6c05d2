"""convtune inside PyTorch: 2-D convolution forward, backward-data and backward-filter as PyTorch operators with
autograd, a drop-in ``Conv2d`` module and ``patch(model)``, which swaps every Conv2d convtune can run.

The operators run on PyTorch's own tensors in place: CUDA tensors on PyTorch's current stream of their device (in
the primary context, which PyTorch and convtune share), with outputs and workspaces from PyTorch's caching
allocator; CPU tensors on convtune's CPU device.

Layouts: contiguous NCHW tensors run as NCHW problems, channels-last ones (``torch.channels_last``) as NHWC problems,
with no conversion where a family reads channels-last itself (the Hopper families); as PyTorch decides for cuDNN, a
convolution runs channels-last when its input or its weight is channels-last, and its outputs and gradients come back
in that memory format. Other strides are copied first.

Precision: bfloat16 and float16 tensors run with FP32 accumulation; float32 tensors on CUDA in TF32 math where
PyTorch lets cuDNN use TF32 (``torch.backends.cudnn.allow_tf32``, True by default; on PyTorch 2.9 and later also
``torch.backends.cudnn.conv.fp32_precision``), else in FP32; ``set_fp32_math()`` overrides that. Under autocast a
convolution runs in autocast's 16-bit dtype where convtune computes it on that device, else in float32.

Speed: eager calls go through a ``torch.autograd.Function`` with the compiled plans of each shape cached; under
``torch.compile`` the custom operators ``torch.ops.convtune.conv2d`` (and its two gradients, PyTorch 2.4 or later)
keep the convolutions in the graph. ``patch()`` also compiles, on a model's first call with new input shapes, every
plan that call and its backward will need, in parallel on all cores (``prepare()`` does it on request).
"""
import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from . import _convtune, _errors
from ._conv import Plan, conv_problem
from ._convtune import Problem, TuningDatabase
from ._tune import TuneEvent, TuneResult, tune

__all__ = ["Conv2d", "FusedConvBatchNorm2d", "OptimizeReport", "PatchReport", "conv2d", "fp32_math", "optimize",
           "patch", "prepare", "set_fp32_math", "set_tuning", "tune_model", "uses_custom_ops"]

IntPair = Union[int, Tuple[int, int]]

# Whether this PyTorch has torch.library.custom_op (2.4+): operators with fake and autograd registrations.
uses_custom_ops = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_fake")

_UNSUPPORTED = (_errors.Unsupported, NotImplementedError)

# The dtypes convtune computes and the element type (a Plan's math=) of each.
_TYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}

# The convtune device CPU tensors run on. Tests on a machine without a GPU point it at an OpenCL device (PoCL with the
# tensor cores emulated) so the 16-bit path runs under autograd; tensors then go there and back through DLPack, too
# slowly to offer it as an option.
_host_device = "cpu"

# ---- precision ----

# set_fp32_math's names: convtune's math modes, and torch.set_float32_matmul_precision's words for them.
_FP32_MATHS = {"fp32": "fp32", "tf32": "tf32", "3xtf32": "3xtf32", "fp32-fast": "fp32-fast",
               "highest": "fp32", "high": "tf32", "medium": "tf32"}
_fp32_math_override: Optional[str] = None


def set_fp32_math(mode: Optional[str]) -> None:
    """How float32 convolutions compute on CUDA devices from now on: 'fp32' (every product in FP32), 'tf32' (TF32
    tensor cores, as cuDNN with TF32 allowed), '3xtf32' (split TF32 at FP32 accuracy), 'fp32-fast' (FP32, and
    Winograd's larger tiles); PyTorch's precision words 'highest' (fp32), 'high' and 'medium' (tf32) are taken too.
    None follows PyTorch again: tf32 where it lets cuDNN use TF32, else fp32. The CPU computes FP32 whatever is set."""
    global _fp32_math_override
    if mode is not None and mode not in _FP32_MATHS:
        raise _errors.InvalidArgument(f"set_fp32_math: mode={mode!r} is invalid: expected one of "
                                      f"{', '.join(repr(m) for m in _FP32_MATHS)} or None")
    _fp32_math_override = None if mode is None else _FP32_MATHS[mode]


def _cudnn_allows_tf32() -> bool:
    cudnn = torch.backends.cudnn
    # PyTorch 2.9+: per-operator precision settings ('tf32', 'ieee', or 'none' for "ask the next level").
    for holder in (getattr(cudnn, "conv", None), cudnn, torch.backends):
        precision = getattr(holder, "fp32_precision", None) if holder is not None else None
        if precision == "tf32":
            return True
        if precision == "ieee":
            return False
    return bool(cudnn.allow_tf32)


def fp32_math(device: Union[str, torch.device] = "cuda") -> str:
    """The math mode float32 convolutions on `device` run in now (see set_fp32_math)."""
    if (device.type if isinstance(device, torch.device) else torch.device(device).type) != "cuda":
        return "fp32"
    if _fp32_math_override is not None:
        return _fp32_math_override
    return "tf32" if _cudnn_allows_tf32() else "fp32"


def _math(dtype: torch.dtype, device: torch.device) -> str:
    """A Plan's math= for tensors of `dtype` on `device`."""
    type_ = _TYPES[dtype]
    return fp32_math(device) if type_ == "fp32" else type_


def _pair(value: Any) -> Tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _plan_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    if device.type == "cpu":
        return _host_device
    raise _errors.Unsupported(f"convtune.torch runs tensors on the CPU or CUDA devices, not {device}: leave "
                                "this convolution to PyTorch")


def _check_dtype(tensor: torch.Tensor, name: str, like: Optional[torch.Tensor] = None, like_name: str = "") -> None:
    if tensor.dtype not in _TYPES:
        raise TypeError(f"{name}: dtype {tensor.dtype} is not supported: convtune computes float32, bfloat16 and "
                        "float16 tensors; use .float(), or autocast")
    if like is not None and tensor.dtype != like.dtype:
        raise _errors.InvalidArgument(f"{name}: dtype {tensor.dtype} differs from {like_name}'s {like.dtype}: "
                                      "expected one dtype (float32, bfloat16 or float16) for both")


def _channels_last_only(t: torch.Tensor) -> bool:
    """Whether `t` is channels-last and not also contiguous NCHW (a 1x1 filter or a single channel is both)."""
    return t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


def _layout(x: torch.Tensor, w: torch.Tensor) -> str:
    """The layout a convolution of x and w runs in: channels-last when either is (PyTorch's rule for cuDNN)."""
    return "nhwc" if _channels_last_only(x) or _channels_last_only(w) else "nchw"


_MEMORY_FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}


def _dense(t: torch.Tensor, layout: str) -> torch.Tensor:
    """`t` dense in `layout` (itself when it is), 16-byte aligned (the kernels load 16-byte vectors: a view into the
    middle of an allocation is copied)."""
    fmt = _MEMORY_FORMATS[layout]
    if not t.is_contiguous(memory_format=fmt):
        t = t.contiguous(memory_format=fmt)
    if t.data_ptr() % 16:
        t = t.clone(memory_format=fmt)
    return t


def _output_shape(x_shape: Sequence[int], w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                  dilation: Sequence[int]) -> List[int]:
    n, _, h, w = x_shape
    k, _, r, s = w_shape
    p = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    q = (w + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    return [n, k, p, q]


# ---- plans ----

# Where plans take their configurations (set_tuning), and, while tune_model() or prepare() looks at a model, the
# convolutions it found instead of computing them.
_tuning: Union[bool, TuningDatabase] = True
_recording: Optional[Dict["_Key", Tuple[bool, bool]]] = None
_recording_modes: Optional[Dict[int, bool]] = None  # meanwhile, each module's training flag (by id) before it


class _Conv:
    """One convolution shape on one device, dtype, layout and math mode: its plans by direction, compiled once
    (lazily, or ahead by prepare()), and how to run them. Plans take their workspace from each call (PyTorch's
    allocator, stream-ordered), so one plan may run on several streams at once."""

    __slots__ = ("x_shape", "w_shape", "y_shape", "stride", "padding", "dilation", "groups", "device", "plan_device",
                 "dtype", "layout", "math", "epilogue", "in_place", "plans", "refusals", "lock")

    def __init__(self, x_shape: Tuple[int, ...], w_shape: Tuple[int, ...], stride: Tuple[int, int],
                 padding: Tuple[int, int], dilation: Tuple[int, int], groups: int, device: torch.device,
                 dtype: torch.dtype, layout: str, math: str, epilogue: str = "none") -> None:
        self.x_shape, self.w_shape = x_shape, w_shape
        self.y_shape = tuple(_output_shape(x_shape, w_shape, stride, padding, dilation))
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.device, self.plan_device = device, _plan_device(device)
        self.dtype, self.layout, self.math = dtype, layout, math
        self.epilogue = epilogue  # the forward's fused epilogue ('none', 'bias+residual+relu', ...)
        # Tensors run in place by address on the CPU device and CUDA; elsewhere (_host_device) through DLPack.
        self.in_place = self.plan_device == "cpu" or self.plan_device.startswith("cuda")
        self.plans: Dict[str, Plan] = {}
        self.refusals: Dict[str, str] = {}
        self.lock = threading.Lock()

    def problem(self, direction: str) -> Problem:
        problem = conv_problem(self.x_shape, self.w_shape, stride=self.stride, padding=self.padding,
                               dilation=self.dilation, groups=self.groups, direction=direction, layout=self.layout)
        return problem if self.math == "fp32" else problem.with_precision(self.math)

    def plan(self, direction: str) -> Plan:
        found = self.plans.get(direction)
        if found is not None:
            return found
        with self.lock:  # one compile per direction, whichever thread asks first
            found = self.plans.get(direction)
            if found is None:
                found = Plan(problem=self.problem(direction), device=self.plan_device, tuning=_tuning,
                             _external_workspace=self.in_place,
                             _epilogue=self.epilogue if direction == "fwd" else "none")
                self.plans[direction] = found
        return found

    def refusal(self, direction: str) -> str:
        """'' when a plan for `direction` can be made (and then it is), else the library's reason."""
        if direction in self.plans:
            return ""
        if direction not in self.refusals:
            try:
                self.plan(direction)
                return ""
            except _UNSUPPORTED as e:
                self.refusals[direction] = str(e)
        return self.refusals[direction]

    def run(self, direction: str, a: torch.Tensor, b: torch.Tensor, out_shape: Sequence[int],
            bias: Optional[torch.Tensor] = None, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Runs `direction` on the two tensors it reads (x, w order, dense in this layout) and returns the one it
        writes, new, in this layout's memory format; the forward's epilogue takes `bias` (K float32s) and `residual`
        (y's shape, dtype and layout) where it has them."""
        plan = self.plan(direction)
        fmt = _MEMORY_FORMATS[self.layout]
        out = torch.empty(out_shape, dtype=self.dtype, device=self.device, memory_format=fmt)
        written = 0 if direction == "bwd-data" else 1 if direction == "bwd-filter" else 2
        if direction == "fwd":
            pointers = (a.data_ptr(), b.data_ptr(), out.data_ptr())
        elif direction == "bwd-data":
            pointers = (out.data_ptr(), a.data_ptr(), b.data_ptr())
        else:
            pointers = (a.data_ptr(), out.data_ptr(), b.data_ptr())
        if not self.in_place and (bias is not None or residual is not None):
            # Host tensors on a kernel device with an epilogue's operands: by address, through the device's buffers.
            extra = (bias.data_ptr() if bias is not None else 0, residual.data_ptr() if residual is not None else 0)
            plan._plan.run_pointers(pointers, 0, 0, *extra)
            return out
        if not self.in_place:
            # Host tensors on a kernel device (_host_device): through DLPack, as dense arrays in memory order.
            def dense(t: torch.Tensor) -> torch.Tensor:
                return t.detach().permute(0, 2, 3, 1) if self.layout == "nhwc" else t.detach()
            operands: List[Optional[torch.Tensor]] = [None, None, None]
            reads = [i for i in range(3) if i != written]
            operands[reads[0]], operands[reads[1]], operands[written] = dense(a), dense(b), dense(out)
            plan(operands[reads[0]], operands[reads[1]], out=operands[written])
            return out
        memory = plan._plan.memory_bytes
        # The plan's workspace and staging copies, per call from PyTorch's allocator (stream-ordered).
        workspace = torch.empty(memory, dtype=torch.uint8, device=self.device) if memory else None
        ws = workspace.data_ptr() if workspace is not None else 0
        extra = (bias.data_ptr() if bias is not None else 0, residual.data_ptr() if residual is not None else 0)
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            stream = _current_stream(index)
            if torch.cuda.current_device() == index:
                plan._plan.run_pointers(pointers, ws, stream, *extra)
            else:
                with torch.cuda.device(index):  # convtune makes its device current; PyTorch's stays what it was
                    plan._plan.run_pointers(pointers, ws, stream, *extra)
        else:
            plan._plan.run_pointers(pointers, ws, 0, *extra)
        return out


def _current_stream(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


if hasattr(torch._C, "_cuda_getCurrentRawStream"):
    def _current_stream(index: int) -> int:  # noqa: F811: the fast path PyTorch's own extensions use
        return torch._C._cuda_getCurrentRawStream(index)


_Key = Tuple[Any, ...]
_convs: Dict[_Key, _Conv] = {}
_convs_lock = threading.Lock()


def _conv(x_shape: Sequence[int], w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[int],
          dilation: Sequence[int], groups: int, device: torch.device, dtype: torch.dtype, layout: str,
          epilogue: str = "none") -> _Conv:
    math = _math(dtype, device)
    key = (tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding), tuple(dilation), groups, device, dtype,
           layout, math)
    if epilogue != "none":
        key += (epilogue,)
    found = _convs.get(key)
    if found is None:
        with _convs_lock:
            found = _convs.get(key)
            if found is None:
                found = _Conv(key[0], key[1], key[2], key[3], key[4], groups, device, dtype, layout, math, epilogue)
                _convs[key] = found
    return found


def set_tuning(tuning: Union[bool, TuningDatabase]) -> None:
    """Where plans made from now on take their configurations: True the process's default database (the user's
    file and the shipped defaults, read once), False the built-in defaults, or a TuningDatabase such as the one
    tune_model() filled. The plans made so far are dropped, so the next calls compile the new choices."""
    global _tuning
    if not isinstance(tuning, (bool, TuningDatabase)):
        raise TypeError(f"tuning: expected True, False or a convtune.TuningDatabase, got {type(tuning).__name__}")
    with _convs_lock:
        _tuning = tuning
        _convs.clear()


# ---- the three directions ----

def _forward(x: torch.Tensor, w: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
             dilation: Sequence[int], groups: int) -> torch.Tensor:
    _check_dtype(x, "input")
    _check_dtype(w, "weight", x, "input")
    if x.device != w.device:
        raise ValueError(f"input is on {x.device} but weight on {w.device}: expected one device")
    layout = _layout(x, w)
    conv = _conv(x.shape, w.shape, stride, padding, dilation, groups, x.device, x.dtype, layout)
    if _recording is not None:
        # tune_model() or prepare() is looking: note the convolution and which gradients it needs, skip the work.
        _recording[_key_of(conv)] = (x.requires_grad, w.requires_grad)
        return torch.empty(conv.y_shape, dtype=x.dtype, device=x.device, memory_format=_MEMORY_FORMATS[layout]).zero_()
    return conv.run("fwd", _dense(x, layout), _dense(w, layout), conv.y_shape)


def _key_of(conv: _Conv) -> _Key:
    key = (conv.x_shape, conv.w_shape, conv.stride, conv.padding, conv.dilation, conv.groups, conv.device,
           conv.dtype, conv.layout, conv.math)
    return key + (conv.epilogue,) if conv.epilogue != "none" else key


def _gradients(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, needs: Sequence[bool], stride: Sequence[int],
               padding: Sequence[int], dilation: Sequence[int], groups: int) -> Tuple[Optional[torch.Tensor], ...]:
    layout = _layout(x, w)
    conv = _conv(x.shape, w.shape, stride, padding, dilation, groups, x.device, x.dtype, layout)
    dy = _dense(dy.to(x.dtype), layout)  # autograd may hand an expanded, transposed or other-format gradient
    dx = conv.run("bwd-data", _dense(w, layout), dy, conv.x_shape) if needs[0] else None
    dw = conv.run("bwd-filter", _dense(x, layout), dy, conv.w_shape) if needs[1] else None
    return dx, dw


class _ConvFunction(torch.autograd.Function):
    """The three directions under autograd in eager mode: the fewest Python steps per call."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, stride: Tuple[int, int],  # type: ignore[override]
                padding: Tuple[int, int], dilation: Tuple[int, int], groups: int) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.params = (stride, padding, dilation, groups)
        return _forward(x, w, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:  # type: ignore[override]
        x, w = ctx.saved_tensors
        dx, dw = _gradients(x, w, dy, ctx.needs_input_grad[:2], *ctx.params)
        return dx, dw, None, None, None, None


def _backward_data(w: torch.Tensor, dy: torch.Tensor, x_shape: Sequence[int], stride: Sequence[int],
                   padding: Sequence[int], dilation: Sequence[int], groups: int, layout: str) -> torch.Tensor:
    conv = _conv(x_shape, w.shape, stride, padding, dilation, groups, w.device, w.dtype, layout)
    return conv.run("bwd-data", _dense(w, layout), _dense(dy, layout), conv.x_shape)


def _backward_filter(x: torch.Tensor, dy: torch.Tensor, w_shape: Sequence[int], stride: Sequence[int],
                     padding: Sequence[int], dilation: Sequence[int], groups: int, layout: str) -> torch.Tensor:
    conv = _conv(x.shape, w_shape, stride, padding, dilation, groups, x.device, x.dtype, layout)
    return conv.run("bwd-filter", _dense(x, layout), _dense(dy, layout), conv.w_shape)


if uses_custom_ops:
    # The same three directions as custom operators, for torch.compile (a graph with convtune's kernels in it, no
    # break per convolution). Gradients are computed in the forward's layout, passed as an argument.
    @torch.library.custom_op("convtune::conv2d", mutates_args=())
    def _conv2d_op(x: torch.Tensor, w: torch.Tensor, stride: List[int], padding: List[int], dilation: List[int],
                   groups: int) -> torch.Tensor:
        return _forward(x, w, stride, padding, dilation, groups)

    @torch.library.custom_op("convtune::conv2d_backward_data", mutates_args=())
    def _backward_data_op(w: torch.Tensor, dy: torch.Tensor, x_shape: List[int], stride: List[int],
                          padding: List[int], dilation: List[int], groups: int, layout: str = "nchw") -> torch.Tensor:
        return _backward_data(w, dy, x_shape, stride, padding, dilation, groups, layout)

    @torch.library.custom_op("convtune::conv2d_backward_filter", mutates_args=())
    def _backward_filter_op(x: torch.Tensor, dy: torch.Tensor, w_shape: List[int], stride: List[int],
                            padding: List[int], dilation: List[int], groups: int,
                            layout: str = "nchw") -> torch.Tensor:
        return _backward_filter(x, dy, w_shape, stride, padding, dilation, groups, layout)

    @_conv2d_op.register_fake
    def _(x, w, stride, padding, dilation, groups):  # type: ignore[no-redef]
        shape = _output_shape(x.shape, w.shape, stride, padding, dilation)
        return x.new_empty(shape).contiguous(memory_format=_MEMORY_FORMATS[_layout(x, w)])

    @_backward_data_op.register_fake
    def _(w, dy, x_shape, stride, padding, dilation, groups, layout="nchw"):  # type: ignore[no-redef]
        return dy.new_empty(x_shape).contiguous(memory_format=_MEMORY_FORMATS[layout])

    @_backward_filter_op.register_fake
    def _(x, dy, w_shape, stride, padding, dilation, groups, layout="nchw"):  # type: ignore[no-redef]
        return x.new_empty(w_shape).contiguous(memory_format=_MEMORY_FORMATS[layout])

    def _setup_context(ctx: Any, inputs: Tuple[Any, ...], output: torch.Tensor) -> None:
        x, w, stride, padding, dilation, groups = inputs
        ctx.save_for_backward(x, w)
        ctx.params = (stride, padding, dilation, groups)

    def _autograd_backward(ctx: Any, dy: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        x, w = ctx.saved_tensors
        layout = _layout(x, w)
        dy = dy.contiguous(memory_format=_MEMORY_FORMATS[layout])
        stride, padding, dilation, groups = ctx.params
        dx = _backward_data_op(w, dy, list(x.shape), stride, padding, dilation, groups, layout) \
            if ctx.needs_input_grad[0] else None
        dw = _backward_filter_op(x, dy, list(w.shape), stride, padding, dilation, groups, layout) \
            if ctx.needs_input_grad[1] else None
        return dx, dw, None, None, None, None

    _conv2d_op.register_autograd(_autograd_backward, setup_context=_setup_context)


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)


def _compiling() -> bool:
    return bool(_is_compiling is not None and _is_compiling())


def _apply(x: torch.Tensor, w: torch.Tensor, stride: Tuple[int, int], padding: Tuple[int, int],
           dilation: Tuple[int, int], groups: int) -> torch.Tensor:
    if uses_custom_ops and _compiling():
        return _conv2d_op(x, w, list(stride), list(padding), list(dilation), groups)
    if not (x.requires_grad or w.requires_grad) or not torch.is_grad_enabled():
        return _forward(x, w, stride, padding, dilation, groups)  # no gradient to record: no autograd node either
    return _ConvFunction.apply(x, w, stride, padding, dilation, groups)


def _same_padding(w_shape: Sequence[int], stride: Sequence[int], dilation: Sequence[int]) -> List[int]:
    """padding='same' as symmetric padding; refused where PyTorch would pad one side more."""
    if any(s != 1 for s in stride):
        raise ValueError("padding='same' needs stride 1 (as in PyTorch)")
    padding = []
    for extent, d in zip(w_shape[2:], dilation):
        total = d * (extent - 1)
        if total % 2:
            raise _errors.Unsupported(f"padding='same' with a filter extent of {extent} and dilation {d} pads one "
                                        "side more than the other, which convtune does not do")
        padding.append(total // 2)
    return padding


@functools.lru_cache(maxsize=1024)
def _arguments(stride: Any, padding: Any, dilation: Any, w_shape: Tuple[int, ...]) -> Tuple[Tuple[int, int], ...]:
    """conv2d's stride, padding and dilation as pairs (padding 'valid' and 'same' resolved), once per distinct value."""
    stride_, dilation_ = _pair(stride), _pair(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding_ = (0, 0)
        elif padding == "same":
            padding_ = tuple(_same_padding(w_shape, stride_, dilation_))
        else:
            raise ValueError(f"padding={padding!r} is invalid: expected an int, a pair, 'valid' or 'same'")
    else:
        padding_ = _pair(padding)
    return stride_, padding_, dilation_  # type: ignore[return-value]


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: IntPair = 1,
           padding: Union[IntPair, str] = 0, dilation: IntPair = 1, groups: int = 1) -> torch.Tensor:
    """torch.nn.functional.conv2d computed by convtune, with autograd: CPU or CUDA tensors, NCHW or channels-last
    (other strides are copied); float32 (TF32 math on CUDA where PyTorch allows it, see set_fp32_math), or bfloat16 /
    float16; under autocast, autocast's dtype where convtune computes it for this convolution, else float32."""
    try:
        stride_, padding_, dilation_ = _arguments(stride, padding, dilation, tuple(weight.shape))
    except TypeError:  # an unhashable argument (a list): not cached
        stride_, padding_, dilation_ = _arguments.__wrapped__(stride, padding, dilation, tuple(weight.shape))
    unbatched = input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.dim() != 4 or weight.dim() != 4:
        raise ValueError(f"input {tuple(input.shape)} and weight {tuple(weight.shape)}: expected a 4-D (N, C, H, W) "
                         "or 3-D (C, H, W) input and a 4-D (K, C/groups, R, S) weight")
    if input.dtype != torch.float64 and _autocast_enabled(input.device.type):
        # As autocast casts the arguments of its 16-bit operators (bias too; float64 left alone), or of its float32
        # ones.
        dtype = _autocast_dtype(input, weight, stride_, padding_, dilation_, int(groups))
        input, weight = input.to(dtype), weight.to(dtype)
        bias = bias.to(dtype) if bias is not None else None
    y = _apply(input, weight, stride_, padding_, dilation_, int(groups))  # type: ignore[arg-type]
    if bias is not None:
        y = y + bias.view(1, -1, 1, 1)
    return y.squeeze(0) if unbatched else y


def _autocast_enabled_per_device() -> bool:
    try:
        torch.is_autocast_enabled("cpu")  # PyTorch 2.4+: per device type
        return True
    except TypeError:
        return False


if _autocast_enabled_per_device():
    def _autocast_enabled(device_type: str) -> bool:
        return bool(torch.is_autocast_enabled(device_type))
else:
    def _autocast_enabled(device_type: str) -> bool:
        return bool(torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled())


def _autocast_dtype(x: torch.Tensor, w: torch.Tensor, stride: Tuple[int, int], padding: Tuple[int, int],
                    dilation: Tuple[int, int], groups: int) -> torch.dtype:
    """The dtype this convolution runs in under autocast: autocast's 16-bit dtype when convtune makes plans for it in
    that type on this device for every direction autograd will call, else float32 (the CPU device, a GPU without
    16-bit tensor cores), as before convtune had 16-bit kernels. The plans are kept for the calls."""
    try:
        dtype = torch.get_autocast_dtype(x.device.type)  # PyTorch 2.4+
    except AttributeError:
        dtype = torch.get_autocast_cpu_dtype() if x.device.type == "cpu" else torch.get_autocast_gpu_dtype()
    if dtype not in (torch.bfloat16, torch.float16):
        return torch.float32
    conv = _conv(x.shape, w.shape, stride, padding, dilation, groups, x.device, dtype, _layout(x, w))
    if _recording is not None:
        return dtype  # prepare() decides what to compile; a refusal shows when the plans are made
    directions = ["fwd"]
    if torch.is_grad_enabled():
        directions += ["bwd-data"] if x.requires_grad else []
        directions += ["bwd-filter"] if w.requires_grad else []
    for direction in directions:
        if conv.refusal(direction):
            return torch.float32
    return dtype


# ---- modules ----

def _unsupported_reason(conv: torch.nn.Conv2d, as_class: type = torch.nn.Conv2d) -> str:
    """Why convtune cannot stand in for this Conv2d (of class `as_class`: a subclass may compute otherwise); ''
    when it can."""
    if type(conv) is not as_class:
        return f"a subclass of Conv2d ({type(conv).__name__}) whose forward may differ"
    if conv.padding_mode != "zeros":
        return f"padding_mode='{conv.padding_mode}': convtune pads with zeros only"
    if conv.weight.dtype not in _TYPES:
        return f"weight dtype {conv.weight.dtype}: convtune computes float32, bfloat16 and float16"
    if conv.weight.device.type not in ("cpu", "cuda"):
        return f"on {conv.weight.device}: convtune.torch runs on the CPU and CUDA"
    padding = [0, 0] if conv.padding == "valid" else conv.padding
    if conv.padding == "same":
        try:
            padding = _same_padding(conv.weight.shape, conv.stride, conv.dilation)
        except (ValueError, _errors.Unsupported) as e:
            return str(e)
    if conv.weight.dtype != torch.float32:
        # Whether the device computes this type at all, asked of the library with the smallest input that has an
        # output (describing, not compiling): the CPU device does not, a GPU before sm_80 neither.
        k, c_per_group, r, s = conv.weight.shape
        x_shape = (1, c_per_group * conv.groups, conv.dilation[0] * (r - 1) + 1, conv.dilation[1] * (s - 1) + 1)
        problem = conv_problem(x_shape, conv.weight.shape, stride=conv.stride, padding=padding,
                               dilation=conv.dilation, groups=conv.groups)
        problem = problem.with_precision(_TYPES[conv.weight.dtype])
        return _convtune._unsupported_reason(_plan_device(conv.weight.device), problem)
    return ""


class Conv2d(torch.nn.Conv2d):
    """torch.nn.Conv2d computed by convtune: the same constructor, parameters, state_dict keys and bias; forward
    and both gradients run convtune's plans (tuned through the tuning database) on the module's device, in the
    layout of its input and weight (NCHW or channels-last)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        reason = _unsupported_reason(self, as_class=Conv2d)
        if reason:
            raise _errors.Unsupported(f"convtune.torch.Conv2d: {reason}")

    @classmethod
    def from_torch(cls, conv: torch.nn.Conv2d) -> "Conv2d":
        """A convtune Conv2d sharing `conv`'s parameters and buffers (an optimizer made before keeps working)."""
        reason = _unsupported_reason(conv)
        if reason:
            raise _errors.Unsupported(f"convtune.torch.Conv2d.from_torch: {reason}")
        new = cls.__new__(cls)
        new.__dict__.update(conv.__dict__)
        new._parameters = conv._parameters
        new._buffers = conv._buffers
        new._modules = conv._modules
        return new

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor,  # type: ignore[override]
                      bias: Optional[torch.Tensor]) -> torch.Tensor:
        return conv2d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)


class PatchReport:
    """What patch() did: the Conv2d modules it replaced and those it left to PyTorch, with why."""

    def __init__(self) -> None:
        self.replaced: List[str] = []
        self.left: Dict[str, str] = {}

    def __str__(self) -> str:
        lines = [f"convtune.torch.patch: {len(self.replaced)} Conv2d replaced, {len(self.left)} left to PyTorch"]
        lines += [f"  left {name or '(the model)'}: {why}" for name, why in self.left.items()]
        return "\n".join(lines)

    __repr__ = __str__


def patch(model: torch.nn.Module, verbose: bool = False, prepare: bool = True) -> PatchReport:
    """Replaces every torch.nn.Conv2d in `model` (in place; the model itself too) that convtune can run with
    convtune.torch.Conv2d sharing its parameters, and reports which it left alone and why. A model moved to
    channels_last keeps running channels-last.

    With ``prepare`` (the default), the model's first call with each new set of input shapes, dtypes and modes first
    compiles every plan that call and its backward need, in parallel on all cores (see prepare())."""
    report = PatchReport()
    for name, module in list(model.named_modules()):
        if not isinstance(module, torch.nn.Conv2d) or isinstance(module, Conv2d):
            continue
        reason = _unsupported_reason(module)
        if reason:
            report.left[name] = reason
            continue
        replacement = Conv2d.from_torch(module)
        if name == "":
            model.__class__ = Conv2d  # the model is a Conv2d itself
        else:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, replacement)
        report.replaced.append(name)
    if prepare and report.replaced and not getattr(model, "_convtune_prepare_hook", None):
        model._convtune_prepare_hook = model.register_forward_pre_hook(_prepare_hook, with_kwargs=True) \
            if _hooks_take_kwargs() else model.register_forward_pre_hook(_prepare_hook_positional)
    if verbose:
        print(report, file=sys.stderr)
    return report


def _hooks_take_kwargs() -> bool:
    import inspect
    return "with_kwargs" in inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters


# ---- compiling ahead: prepare() ----

_preparing = threading.local()
_prepared: Dict[Any, None] = {}


def _signature(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    def describe(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return (tuple(value.shape), value.dtype, value.device, value.requires_grad,
                    value.is_contiguous(memory_format=torch.channels_last))
        return type(value).__name__
    device = "cuda" if torch.cuda.is_available() else "cpu"
    autocast = _autocast_enabled(device), _autocast_enabled("cpu")
    return (id(model), model.training, torch.is_grad_enabled(), autocast, fp32_math(device),
            tuple(describe(a) for a in args), tuple((k, describe(v)) for k, v in sorted(kwargs.items())))


def _prepare_hook(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    if getattr(_preparing, "active", False) or _compiling():
        return None
    signature = _signature(model, args, kwargs)
    if signature in _prepared:
        return None
    _prepared[signature] = None
    prepare(model, *args, **kwargs)
    return None


def _prepare_hook_positional(model: torch.nn.Module, args: Tuple[Any, ...]) -> None:
    return _prepare_hook(model, args, {})


def _record(model: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[_Key, Tuple[bool, bool]]:
    """The convolutions a call of `model` runs through convtune, with whether their input and weight need gradients:
    the model run once in eval mode with those convolutions returning zeros; its modes restored after."""
    global _recording, _recording_modes
    modes = [(m, m.training) for m in model.modules()]
    found: Dict[_Key, Tuple[bool, bool]] = {}
    _preparing.active = True
    _recording = found
    _recording_modes = {id(m): mode for m, mode in modes}
    try:
        model.eval()
        model(*args, **kwargs)
    finally:
        _recording = None
        _recording_modes = None
        _preparing.active = False
        for module, mode in modes:
            module.training = mode
    return found


def prepare(model: torch.nn.Module, *example_inputs: Any, jobs: Optional[int] = None, progress: bool = False,
            **example_kwargs: Any) -> int:
    """Compiles, in parallel on `jobs` threads (default: every core), every plan the model's convolutions need for
    a call with these inputs in the current modes (training or not, gradients enabled or not, autocast): forward,
    and in training with gradients enabled both gradients where autograd will ask for them. The model is run once
    in eval mode with convtune's convolutions returning zeros, to see their shapes; its modes are restored after.
    Returns how many plans were compiled. patch() calls it on a model's first call with new input shapes."""
    training = torch.is_grad_enabled() and model.training
    found = _record(model, example_inputs, example_kwargs)
    jobs_list: List[Tuple[_Conv, str]] = []
    for key, (x_grad, w_grad) in found.items():
        conv = _convs.get(key)
        if conv is None:
            continue
        directions = ["fwd"]
        if training:
            directions += ["bwd-data"] if x_grad else []
            directions += ["bwd-filter"] if w_grad else []
        jobs_list += [(conv, d) for d in directions if d not in conv.plans and d not in conv.refusals]
    if not jobs_list:
        return 0
    workers = max(1, min(len(jobs_list), jobs or os.cpu_count() or 1))
    if progress:
        print(f"convtune.torch.prepare: compiling {len(jobs_list)} plans on {workers} threads", file=sys.stderr)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda job: job[0].refusal(job[1]), jobs_list))
    return len(jobs_list)


# ---- tuning ----

def tune_model(model: torch.nn.Module, *example_inputs: Any, budget: float = 60.0,
               database: Optional[TuningDatabase] = None, devices: Optional[Sequence[str]] = None,
               progress: Any = None, distributed: bool = False, **options: Any) -> List[TuneResult]:
    """Tunes the convolutions convtune runs in `model` (patch() it first) in all three directions, and makes
    them use the results (set_tuning). The model is run once on `example_inputs` in eval mode without gradients,
    convtune's convolutions returning zeros, to see their shapes; its training mode is restored after.

    ``database``: where results go (default: the user's database file); ``devices``: a list of alike devices to
    share the tuning (default: the device each convolution ran on); ``budget`` is in seconds for the whole run;
    ``progress`` and the other options are those of convtune.tune().

    ``distributed=True`` (every rank of torch.distributed's default process group calls it, as in a torchrun job on
    any number of hosts, over NCCL or Gloo): rank r tunes every world-th convolution, from the r-th on, on the device
    its own convolutions ran on, with that share of ``budget``, so the run takes about budget / world seconds; then the
    ranks exchange their entries (torch.distributed.all_gather_object) and each merges all of them into its
    ``database`` and saves it, so every host's file holds every result. Results lists this rank's tasks only."""
    with torch.no_grad():
        found = _record(model, example_inputs, {})
    if not found:
        raise _errors.InvalidArgument("tune_model: the model ran no convolution through convtune: patch(model) "
                                      "first, and pass inputs its forward takes")
    keys = list(found)
    if distributed:
        rank, world = _process_group("tune_model(distributed=True)")
        keys = keys[rank::world]
    by_device: Dict[str, List[Any]] = {}
    for key in keys:
        conv = _convs[key]
        by_device.setdefault(conv.plan_device, []).append(conv.problem("fwd"))
    if database is None:
        database = TuningDatabase()
    target = database
    if distributed:
        import tempfile
        scratch = tempfile.TemporaryDirectory(prefix="convtune-tune-rank-")
        database = TuningDatabase(os.path.join(scratch.name, "entries.json"), shipped=False)
    results: List[TuneResult] = []
    for device, problems in by_device.items():
        share = budget * len(problems) / len(found)
        results += tune(problems, device=list(devices) if devices else device, directions="all", budget=share,
                        database=database, progress=progress, **options)
    if distributed:
        with scratch:
            database.save()
            _merge_every_rank(database.path, target)
    set_tuning(target)
    return results


def _process_group(what: str) -> Tuple[int, int]:
    """(rank, world size) of torch.distributed's default process group; InvalidArgument when there is none."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise _errors.InvalidArgument(f"{what}: torch.distributed has no default process group: call "
                                      "torch.distributed.init_process_group() first (torchrun sets up its environment)")
    return dist.get_rank(), dist.get_world_size()


def _merge_every_rank(own_file: str, database: TuningDatabase) -> None:
    """Every rank's database file (its text, gathered from all ranks) merged into `database`, which is saved: save()
    merges what other processes on this host saved meanwhile, so ranks sharing a file lose nothing."""
    import tempfile
    import torch.distributed as dist
    text = b""
    if os.path.exists(own_file):
        with open(own_file, "rb") as f:
            text = f.read()
    gathered: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, text)
    with tempfile.TemporaryDirectory(prefix="convtune-tune-merge-") as folder:
        for index, other in enumerate(gathered):
            if not other:
                continue
            path = os.path.join(folder, f"rank{index}.json")
            with open(path, "wb") as f:
                f.write(other)
            counts = database.merge_file(path)
            if counts["damaged"]:
                raise _errors.TuningDatabaseError(f"tune_model: rank {index}'s entries could not be merged: "
                                                  f"{counts['damaged']}")
    database.save()


# ---- fused blocks: optimize() ----

from ._fusion import FusedConvBatchNorm2d, OptimizeReport, optimize  # noqa: E402: uses the definitions above
