"""convtune inside PyTorch: 2-D convolution forward, backward-data and backward-filter as PyTorch operators with
autograd, a drop-in ``Conv2d`` module and ``patch(model)``, which swaps every Conv2d convtune can run.

The operators run on PyTorch's own tensors in place: CUDA tensors on PyTorch's current stream of their device (in
the primary context, which PyTorch and convtune share), with outputs and workspaces from PyTorch's caching
allocator; CPU tensors on convtune's CPU device. With PyTorch 2.4 or later they are custom operators
(``torch.ops.convtune.conv2d``, ``...conv2d_backward_data``, ``...conv2d_backward_filter``, with fake
implementations for torch.compile); older PyTorch gets a ``torch.autograd.Function``.

convtune computes float32 tensors in FP32 math, and bfloat16 and float16 tensors with FP32 accumulation: on 16-bit
kernels where it has them (NVIDIA tensor cores, sm_80+), elsewhere (the CPU device, other GPUs) on an FP32 family over
FP32 copies of the tensors, the result rounded to the 16-bit dtype (the library's widened_* families).
Under autocast a convolution runs in autocast's 16-bit dtype where convtune computes it on that device, else in
float32 (as autocast does for its float32 operators). allow_tf32 is not followed yet, so float32 convolutions stay
FP32 where cuDNN's would use TF32. Only contiguous NCHW tensors are taken.
"""
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

from . import _convtune, _errors
from ._conv import Plan, conv_problem
from ._convtune import Problem, TuningDatabase
from ._tune import TuneEvent, TuneResult, tune

__all__ = ["Conv2d", "PatchReport", "conv2d", "patch", "set_tuning", "tune_model", "uses_custom_ops"]

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


def _pair(value: Any) -> Tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _plan_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    if device.type == "cpu":
        return _host_device
    raise _errors.Unsupported(f"convtune.torch runs tensors on the CPU or CUDA devices, not on {device}: leave "
                                "this convolution to PyTorch")


def _check(tensor: torch.Tensor, name: str, like: Optional[torch.Tensor] = None, like_name: str = "") -> None:
    """`tensor` (argument `name`) is one convtune takes: a dtype it computes, `like`'s when given, contiguous NCHW."""
    if tensor.dtype not in _TYPES:
        raise TypeError(f"{name}: dtype {tensor.dtype} is not supported: convtune computes float32, bfloat16 and "
                        "float16 tensors; use .float(), or autocast")
    if like is not None and tensor.dtype != like.dtype:
        raise _errors.InvalidArgument(f"{name}: dtype {tensor.dtype} differs from {like_name}'s {like.dtype}: "
                                      "expected one dtype (float32, bfloat16 or float16) for both")
    if not tensor.is_contiguous():
        layout = " (channels_last?)" if tensor.dim() == 4 and tensor.is_contiguous(
            memory_format=torch.channels_last) else ""
        raise ValueError(f"{name}: the tensor is not contiguous NCHW{layout}, strides {tuple(tensor.stride())} for "
                         f"shape {tuple(tensor.shape)}: convtune reads contiguous NCHW tensors; call .contiguous() "
                         "or leave this convolution to PyTorch")


# Compiled plans by shape, parameters, direction, device and element type, with the index of the operand they
# write and its shape. Plans take their workspace from each call (PyTorch's allocator, stream-ordered), so one plan
# may run on several streams at once.
_plans: Dict[Tuple[Any, ...], Tuple[Plan, int, Tuple[int, ...]]] = {}
_plans_lock = threading.Lock()
# Where plans take their configurations (set_tuning), and, while tune_model() looks at a model, the convolutions
# it found instead of computing them.
_tuning: Union[bool, TuningDatabase] = True
_recording: Optional[Dict[Tuple[Any, ...], None]] = None
# Under autocast: the library's reason why a 16-bit plan cannot be made, by the _plan key (the convolution then runs
# in float32), so a refused convolution is described once.
_refusals: Dict[Tuple[Any, ...], str] = {}


def set_tuning(tuning: Union[bool, TuningDatabase]) -> None:
    """Where plans made from now on take their configurations: True the process's default database (the user's
    file and the shipped defaults, read once), False the built-in defaults, or a TuningDatabase such as the one
    tune_model() filled. The plans made so far are dropped, so the next calls compile the new choices."""
    global _tuning
    if not isinstance(tuning, (bool, TuningDatabase)):
        raise TypeError(f"tuning: expected True, False or a convtune.TuningDatabase, got {type(tuning).__name__}")
    with _plans_lock:
        _tuning = tuning
        _plans.clear()
        _refusals.clear()


def _in_place(device: str) -> bool:
    """Whether tensors run in place on `device` by address (the CPU device, CUDA), rather than through DLPack."""
    return device == "cpu" or device.startswith("cuda")


def _problem(x_shape: Sequence[int], w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[int],
             dilation: Sequence[int], groups: int, direction: str, type_: str) -> Problem:
    problem = conv_problem(x_shape, w_shape, stride=stride, padding=padding, dilation=dilation, groups=groups,
                           direction=direction)
    return problem if type_ == "fp32" else problem.with_precision(type_)


def _plan(x_shape: Sequence[int], w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[int],
          dilation: Sequence[int], groups: int, direction: str, device: str,
          type_: str = "fp32") -> Tuple[Plan, int, Tuple[int, ...]]:
    key = (tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding), tuple(dilation), groups, direction, device,
           type_)
    found = _plans.get(key)
    if found is None:
        problem = _problem(key[0], key[1], key[2], key[3], key[4], groups, direction, type_)
        plan = Plan(problem=problem, device=device, tuning=_tuning, _external_workspace=_in_place(device))
        found = (plan, problem.written, tuple(problem.shapes[problem.written]))
        with _plans_lock:
            _plans[key] = found
    return found


def _aligned(t: torch.Tensor) -> torch.Tensor:
    # Kernels load 16-byte vectors: an input viewing the middle of an allocation is copied (the outputs are new
    # allocations, which PyTorch aligns).
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _launch(direction: str, a: torch.Tensor, b: torch.Tensor, x_shape: Sequence[int], w_shape: Sequence[int],
            stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    """Runs one direction on the two tensors it reads (x, w order) and returns the tensor it writes."""
    device = a.device
    name = _plan_device(device)
    type_ = _TYPES[a.dtype]
    if _recording is not None and direction == "fwd":
        # tune_model() is looking: note the convolution, skip the work (the zeros have the right shape).
        _recording[(tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding), tuple(dilation), groups, name,
                    type_)] = None
        return torch.zeros(_output_shape(x_shape, w_shape, stride, padding, dilation), dtype=a.dtype, device=device)
    plan, written, out_shape = _plan(x_shape, w_shape, stride, padding, dilation, groups, direction, name, type_)
    out = torch.empty(out_shape, dtype=a.dtype, device=device)
    if not _in_place(name):
        # Host tensors on a kernel device (_host_device): copied there and back. DLPack exports no tensor that
        # requires gradients, as the inputs of autograd.Function.forward may.
        return plan(a.detach(), b.detach(), out=out)
    # The plan's workspace and, for a widened plan, its FP32 copies of the operands (memory_bytes), per call from
    # PyTorch's allocator: one plan may run on several streams at once.
    workspace = (torch.empty(plan.memory_bytes, dtype=torch.uint8, device=device)
                 if plan.memory_bytes else None)
    operands: List[Optional[torch.Tensor]] = [None, None, None]
    reads = [i for i in range(3) if i != written]
    operands[reads[0]] = a
    operands[reads[1]] = b
    operands[written] = out
    if device.type == "cuda":
        operands[reads[0]], operands[reads[1]] = _aligned(a), _aligned(b)
        index = device.index if device.index is not None else torch.cuda.current_device()
        stream = torch.cuda.current_stream(device).cuda_stream
        pointers = tuple(t.data_ptr() for t in operands)  # type: ignore[union-attr]
        ws = workspace.data_ptr() if workspace is not None else 0
        if torch.cuda.current_device() == index:
            plan._plan.run_pointers(pointers, ws, stream)
        else:
            with torch.cuda.device(index):  # convtune makes its device current; PyTorch's stays what it was
                plan._plan.run_pointers(pointers, ws, stream)
    else:
        pointers = tuple(t.data_ptr() for t in operands)  # type: ignore[union-attr]
        plan._plan.run_pointers(pointers, workspace.data_ptr() if workspace is not None else 0, 0)
    return out


def _forward(x: torch.Tensor, w: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
             dilation: Sequence[int], groups: int) -> torch.Tensor:
    _check(x, "input")
    _check(w, "weight", x, "input")
    if x.device != w.device:
        raise ValueError(f"input is on {x.device} but weight on {w.device}: expected one device")
    return _launch("fwd", x, w, x.shape, w.shape, stride, padding, dilation, groups)


def _backward_data(w: torch.Tensor, dy: torch.Tensor, x_shape: Sequence[int], stride: Sequence[int],
                   padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    _check(w, "weight")
    _check(dy, "grad_output", w, "weight")
    return _launch("bwd-data", w, dy, x_shape, w.shape, stride, padding, dilation, groups)


def _backward_filter(x: torch.Tensor, dy: torch.Tensor, w_shape: Sequence[int], stride: Sequence[int],
                     padding: Sequence[int], dilation: Sequence[int], groups: int) -> torch.Tensor:
    _check(x, "input")
    _check(dy, "grad_output", x, "input")
    return _launch("bwd-filter", x, dy, x.shape, w_shape, stride, padding, dilation, groups)


def _output_shape(x_shape: Sequence[int], w_shape: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                  dilation: Sequence[int]) -> List[int]:
    n, _, h, w = x_shape
    k, _, r, s = w_shape
    p = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    q = (w + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    return [n, k, p, q]


def _gradients(saved: Tuple[torch.Tensor, torch.Tensor], needs: Sequence[bool], dy: torch.Tensor,
               params: Tuple[Any, ...], data_op: Any, filter_op: Any) -> Tuple[Optional[torch.Tensor], ...]:
    x, w = saved
    dy = dy.contiguous()  # autograd may hand an expanded or transposed gradient
    dx = data_op(w, dy, list(x.shape), *params) if needs[0] else None
    dw = filter_op(x, dy, list(w.shape), *params) if needs[1] else None
    return dx, dw, None, None, None, None


if uses_custom_ops:
    @torch.library.custom_op("convtune::conv2d", mutates_args=())
    def _conv2d_op(x: torch.Tensor, w: torch.Tensor, stride: List[int], padding: List[int], dilation: List[int],
                   groups: int) -> torch.Tensor:
        return _forward(x, w, stride, padding, dilation, groups)

    @torch.library.custom_op("convtune::conv2d_backward_data", mutates_args=())
    def _backward_data_op(w: torch.Tensor, dy: torch.Tensor, x_shape: List[int], stride: List[int],
                          padding: List[int], dilation: List[int], groups: int) -> torch.Tensor:
        return _backward_data(w, dy, x_shape, stride, padding, dilation, groups)

    @torch.library.custom_op("convtune::conv2d_backward_filter", mutates_args=())
    def _backward_filter_op(x: torch.Tensor, dy: torch.Tensor, w_shape: List[int], stride: List[int],
                            padding: List[int], dilation: List[int], groups: int) -> torch.Tensor:
        return _backward_filter(x, dy, w_shape, stride, padding, dilation, groups)

    @_conv2d_op.register_fake
    def _(x, w, stride, padding, dilation, groups):  # type: ignore[no-redef]
        return x.new_empty(_output_shape(x.shape, w.shape, stride, padding, dilation))

    @_backward_data_op.register_fake
    def _(w, dy, x_shape, stride, padding, dilation, groups):  # type: ignore[no-redef]
        return dy.new_empty(x_shape)

    @_backward_filter_op.register_fake
    def _(x, dy, w_shape, stride, padding, dilation, groups):  # type: ignore[no-redef]
        return x.new_empty(w_shape)

    def _setup_context(ctx: Any, inputs: Tuple[Any, ...], output: torch.Tensor) -> None:
        x, w, stride, padding, dilation, groups = inputs
        ctx.save_for_backward(x, w)
        ctx.params = (stride, padding, dilation, groups)

    def _autograd_backward(ctx: Any, dy: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        return _gradients(ctx.saved_tensors, ctx.needs_input_grad, dy, ctx.params, _backward_data_op,
                          _backward_filter_op)

    _conv2d_op.register_autograd(_autograd_backward, setup_context=_setup_context)

    def _apply(x: torch.Tensor, w: torch.Tensor, stride: List[int], padding: List[int], dilation: List[int],
               groups: int) -> torch.Tensor:
        return _conv2d_op(x, w, stride, padding, dilation, groups)
else:
    class _Conv2dFunction(torch.autograd.Function):
        """The three directions under autograd, for PyTorch without torch.library.custom_op."""

        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, stride: List[int], padding: List[int],  # type: ignore[override]
                    dilation: List[int], groups: int) -> torch.Tensor:
            ctx.save_for_backward(x, w)
            ctx.params = (stride, padding, dilation, groups)
            return _forward(x, w, stride, padding, dilation, groups)

        @staticmethod
        def backward(ctx: Any, dy: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:  # type: ignore[override]
            return _gradients(ctx.saved_tensors, ctx.needs_input_grad, dy, ctx.params, _backward_data,
                              _backward_filter)

    def _apply(x: torch.Tensor, w: torch.Tensor, stride: List[int], padding: List[int], dilation: List[int],
               groups: int) -> torch.Tensor:
        return _Conv2dFunction.apply(x, w, stride, padding, dilation, groups)


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


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: IntPair = 1,
           padding: Union[IntPair, str] = 0, dilation: IntPair = 1, groups: int = 1) -> torch.Tensor:
    """torch.nn.functional.conv2d computed by convtune, with autograd (contiguous NCHW, CPU or CUDA; float32, or
    bfloat16/float16 where convtune has 16-bit kernels; under autocast, autocast's dtype where convtune computes it
    for this convolution, else float32)."""
    stride_, dilation_ = list(_pair(stride)), list(_pair(dilation))
    if isinstance(padding, str):
        if padding == "valid":
            padding_ = [0, 0]
        elif padding == "same":
            padding_ = _same_padding(weight.shape, stride_, dilation_)
        else:
            raise ValueError(f"padding={padding!r} is invalid: expected an int, a pair, 'valid' or 'same'")
    else:
        padding_ = list(_pair(padding))
    unbatched = input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    if input.dim() != 4 or weight.dim() != 4:
        raise ValueError(f"input {tuple(input.shape)} and weight {tuple(weight.shape)}: expected a 4-D (N, C, H, W) "
                         "or 3-D (C, H, W) input and a 4-D (K, C/groups, R, S) weight")
    if _autocast_enabled(input.device.type) and input.dtype != torch.float64:
        # As autocast casts the arguments of its 16-bit operators (bias too; float64 left alone), or of its float32
        # ones.
        dtype = _autocast_dtype(input, weight, stride_, padding_, dilation_, int(groups))
        input, weight = input.to(dtype), weight.to(dtype)
        bias = bias.to(dtype) if bias is not None else None
    y = _apply(input, weight, stride_, padding_, dilation_, int(groups))
    if bias is not None:
        y = y + bias.view(1, -1, 1, 1)
    return y.squeeze(0) if unbatched else y


def _autocast_enabled(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type))  # PyTorch 2.4+: per device type
    except TypeError:
        return bool(torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled())


def _autocast_dtype(x: torch.Tensor, w: torch.Tensor, stride: Sequence[int], padding: Sequence[int],
                    dilation: Sequence[int], groups: int) -> torch.dtype:
    """The dtype this convolution runs in under autocast: autocast's 16-bit dtype when convtune makes plans for it in
    that type on this device for every direction autograd will call, else float32 (the CPU device, a GPU without
    16-bit tensor cores), as before convtune had 16-bit kernels. The plans are kept for the calls."""
    try:
        dtype = torch.get_autocast_dtype(x.device.type)  # PyTorch 2.4+
    except AttributeError:
        dtype = torch.get_autocast_cpu_dtype() if x.device.type == "cpu" else torch.get_autocast_gpu_dtype()
    if dtype not in (torch.bfloat16, torch.float16):
        return torch.float32
    directions = ["fwd"]
    if torch.is_grad_enabled():
        directions += ["bwd-data"] if x.requires_grad else []
        directions += ["bwd-filter"] if w.requires_grad else []
    device, type_ = _plan_device(x.device), _TYPES[dtype]
    for direction in directions:
        key = (tuple(x.shape), tuple(w.shape), tuple(stride), tuple(padding), tuple(dilation), groups, direction,
               device, type_)
        if key not in _refusals and key not in _plans:
            try:
                _plan(x.shape, w.shape, stride, padding, dilation, groups, direction, device, type_)
            except _UNSUPPORTED as e:
                _refusals[key] = str(e)
        if key in _refusals:
            return torch.float32
    return dtype


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
    if not conv.weight.is_contiguous():
        return "weight is not contiguous NCHW (channels_last?)"
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
        problem = _problem(x_shape, conv.weight.shape, conv.stride, padding, conv.dilation, conv.groups, "fwd",
                           _TYPES[conv.weight.dtype])
        return _convtune._unsupported_reason(_plan_device(conv.weight.device), problem)
    return ""


class Conv2d(torch.nn.Conv2d):
    """torch.nn.Conv2d computed by convtune: the same constructor, parameters, state_dict keys and bias; forward
    and both gradients run convtune's plans (tuned through the tuning database) on the module's device."""

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


def patch(model: torch.nn.Module, verbose: bool = False) -> PatchReport:
    """Replaces every torch.nn.Conv2d in `model` (in place; the model itself too) that convtune can run with
    convtune.torch.Conv2d sharing its parameters, and reports which it left alone and why."""
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
    if verbose:
        print(report, file=sys.stderr)
    return report


def tune_model(model: torch.nn.Module, *example_inputs: Any, budget: float = 60.0,
               database: Optional[TuningDatabase] = None, devices: Optional[Sequence[str]] = None,
               progress: Any = None, **options: Any) -> List[TuneResult]:
    """Tunes the convolutions convtune runs in `model` (patch() it first) in all three directions, and makes
    them use the results (set_tuning). The model is run once on `example_inputs` in eval mode without gradients,
    convtune's convolutions returning zeros, to see their shapes; its training mode is restored after.

    ``database``: where results go (default: the user's database file); ``devices``: a list of alike devices to
    share the tuning (default: the device each convolution ran on); ``budget`` is in seconds for the whole run;
    ``progress`` and the other options are those of convtune.tune()."""
    global _recording
    modes = [(m, m.training) for m in model.modules()]
    found: Dict[Tuple[Any, ...], None] = {}
    _recording = found
    try:
        model.eval()
        with torch.no_grad():
            model(*example_inputs)
    finally:
        _recording = None
        for module, training in modes:
            module.training = training
    if not found:
        raise _errors.InvalidArgument("tune_model: the model ran no convolution through convtune: patch(model) "
                                      "first, and pass inputs its forward takes")
    by_device: Dict[str, List[Any]] = {}
    for x_shape, w_shape, stride, padding, dilation, groups, device, type_ in found:
        problem = _problem(x_shape, w_shape, stride, padding, dilation, groups, "fwd", type_)
        by_device.setdefault(device, []).append(problem)
    if database is None:
        database = TuningDatabase()
    results: List[TuneResult] = []
    for device, problems in by_device.items():
        share = budget * len(problems) / len(found)
        results += tune(problems, device=list(devices) if devices else device, directions="all", budget=share,
                        database=database, progress=progress, **options)
    set_tuning(database)
    return results
