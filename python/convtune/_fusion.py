"""convtune.torch.optimize(): Conv2d -> BatchNorm2d [-> + shortcut] [-> ReLU / ReLU6] blocks of a model, found in its
traced graph (torch.fx), run fused: in inference one convtune convolution with the batch norm folded in and a fused
epilogue; in training the convolution, then one pass for the statistics and one that normalises, adds the shortcut
and applies the ReLU (convtune's BatchNormPlan), and the backward pass likewise."""
import operator
import sys
import threading
from typing import Any, Dict, Optional, Tuple

import torch
import torch.nn.functional as F

from . import torch as _ct

__all__ = ["FusedConvBatchNorm2d", "OptimizeReport", "optimize"]

# The activations a block may end in, and the epilogue word of each.
_ACTIVATION_MODULES = {torch.nn.ReLU: "relu", torch.nn.ReLU6: "relu6"}
_ACTIVATION_FUNCTIONS = {F.relu: "relu", torch.relu: "relu", F.relu6: "relu6", torch.relu_: "relu"}
_ACTIVATION_METHODS = {"relu": "relu", "relu_": "relu"}
_ADDS = {operator.add, operator.iadd, torch.add}


class OptimizeReport:
    """What optimize() did: the blocks it fused (by their BatchNorm's name, with the epilogue), and what patch() did
    with the convolutions."""

    def __init__(self) -> None:
        self.fused: Dict[str, str] = {}
        self.not_traced = ""
        self.by_mode = False  # traced in each mode: the forward differs between train() and eval()
        self.patch: Optional[_ct.PatchReport] = None

    def __str__(self) -> str:
        lines = [f"convtune.torch.optimize: {len(self.fused)} Conv2d + BatchNorm2d blocks fused"]
        if self.not_traced:
            lines.append(f"  none fused: the model could not be traced ({self.not_traced})")
        if self.by_mode:
            lines.append("  traced in training and in eval mode (the forward differs): each mode runs its own graph")
        lines += [f"  fused {name}: conv + batch norm + {epilogue}" for name, epilogue in self.fused.items()]
        if self.patch is not None:
            lines.append(str(self.patch))
        return "\n".join(lines)

    __repr__ = __str__


class FusedConvBatchNorm2d(torch.nn.BatchNorm2d):
    """A BatchNorm2d that computes the convolution before it (and the shortcut and activation after it) too: the same
    parameters, buffers and state_dict keys as the BatchNorm2d it replaces. In eval mode without gradients, one
    convtune convolution with the batch norm folded into its weights and bias, and the shortcut and ReLU in its
    epilogue. In training (the batch's statistics), convtune's convolution and then its batch norm passes
    (_TrainingBlock), updating running_mean, running_var and num_batches_tracked as BatchNorm2d does. In eval mode with
    gradients wanted, and wherever convtune does not run the block (a device or type it does not compute), the
    convolution, batch norm, shortcut and activation one after another, as the unfused model."""

    def _convtune_setup(self, conv: torch.nn.Conv2d, residual: bool, activation: str) -> None:
        object.__setattr__(self, "_convtune_conv", conv)  # not a child module: its parameters stay where they are
        self._convtune_residual = residual
        self._convtune_activation = activation  # "", "relu" or "relu6"
        self._convtune_folded: Dict[Any, Tuple[Any, torch.Tensor, torch.Tensor]] = {}
        self._convtune_refusals: Dict[Any, str] = {}  # by the weight's dtype and device: why convtune cannot run it

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:  # type: ignore
        conv = self._convtune_conv
        # While prepare() records the model's convolutions it runs every module in eval mode: the mode of the call
        # it prepares decides which convolution this block will run.
        training = self.training if _ct._recording_modes is None else _ct._recording_modes.get(id(self), self.training)
        if training or not self.track_running_stats:  # the batch's statistics: the training block
            y = self._fused_training(x, residual, training)
            return y if y is not None else self._unfused(x, residual)
        if (torch.is_grad_enabled() and (
                x.requires_grad or conv.weight.requires_grad or (residual is not None and residual.requires_grad)
                or (self.weight is not None and self.weight.requires_grad))):
            return self._unfused(x, residual)
        y = self._fused(x, residual)
        return y if y is not None else self._unfused(x, residual)

    def _unfused(self, x: torch.Tensor, residual: Optional[torch.Tensor]) -> torch.Tensor:
        y = super().forward(self._convtune_conv(x))
        if residual is not None:
            y = y + residual
        if self._convtune_activation == "relu":
            y = F.relu(y)
        elif self._convtune_activation == "relu6":
            y = F.relu6(y)
        return y

    def _epilogue(self) -> str:
        parts = ["bias"] + (["residual"] if self._convtune_residual else [])
        return "+".join(parts + ([self._convtune_activation] if self._convtune_activation else []))

    def _fold(self, dtype: torch.dtype, layout: str) -> Tuple[torch.Tensor, torch.Tensor]:
        """The convolution's weight with the batch norm's scale folded in (dtype, layout's memory format) and the
        bias (float32) of the shift, computed again whenever a parameter or running statistic changed."""
        conv = self._convtune_conv
        tensors = [conv.weight, conv.bias, self.weight, self.bias, self.running_mean, self.running_var]
        # The training blocks' kernels move the running statistics without PyTorch's version counter: they count on
        # the tensor instead (shared by every module that holds it).
        versions = tuple((t.data_ptr(), t._version, getattr(t, "_convtune_updates", 0)) if t is not None else None
                         for t in tensors)
        key = (dtype, layout)
        found = self._convtune_folded.get(key)
        if found is not None and found[0] == versions:
            return found[1], found[2]
        with torch.no_grad():
            inv_std = torch.rsqrt(self.running_var.double() + self.eps)
            scale = inv_std * (self.weight.double() if self.weight is not None else 1.0)
            shift = -self.running_mean.double() * scale
            if self.bias is not None:
                shift = shift + self.bias.double()
            if conv.bias is not None:
                shift = shift + conv.bias.double() * scale
            weight = (conv.weight.double() * scale.view(-1, 1, 1, 1)).to(dtype)
            weight = weight.contiguous(memory_format=_ct._MEMORY_FORMATS[layout])
            bias = shift.float().contiguous()
        self._convtune_folded[key] = (versions, weight, bias)
        return weight, bias

    def _conv_setup(self, x: torch.Tensor) -> Optional[Tuple[torch.dtype, Any, Any, Any, int]]:
        """The dtype the convolution runs in (autocast's where it applies) and its stride, padding, dilation and
        groups; None where convtune does not run it (the unfused path then does)."""
        conv = self._convtune_conv
        if x.dim() != 4 or x.device != conv.weight.device:
            return None
        where = (conv.weight.dtype, conv.weight.device)  # what the refusal depends on, asked once for each
        if self._convtune_refusals.get(where) is None:
            self._convtune_refusals[where] = _ct._unsupported_reason(conv, type(conv))
        if self._convtune_refusals[where]:
            return None
        stride, dilation, groups = _ct._pair(conv.stride), _ct._pair(conv.dilation), conv.groups
        if isinstance(conv.padding, str):
            padding = (0, 0) if conv.padding == "valid" else tuple(
                _ct._same_padding(conv.weight.shape, stride, dilation))
        else:
            padding = _ct._pair(conv.padding)
        dtype = x.dtype if x.dtype in _ct._TYPES else None
        if x.dtype != torch.float64 and _ct._autocast_enabled(x.device.type):
            dtype = _ct._autocast_dtype(x, conv.weight, stride, padding, dilation, groups)  # type: ignore[arg-type]
        if dtype is None:
            return None
        return dtype, stride, padding, dilation, groups

    def _fused_training(self, x: torch.Tensor, residual: Optional[torch.Tensor],
                        training: bool) -> Optional[torch.Tensor]:
        """The block with the batch's statistics, fused (_TrainingBlock), updating the running statistics as
        BatchNorm2d does in training; None where convtune does not run it (the caller then runs the unfused one)."""
        conv = self._convtune_conv
        if not self._convtune_activation and not self._convtune_residual:
            # Nothing to fuse after the batch norm: its own passes are what PyTorch's batch norm runs.
            return None
        setup = self._conv_setup(x)
        if setup is None:
            return None
        dtype, stride, padding, dilation, groups = setup
        plan_device = _ct._plan_device(x.device)  # CPU tensors may run on an OpenCL device (tests' PoCL), by copies
        x, weight = x.to(dtype), conv.weight.to(dtype)
        layout = _ct._layout(x, weight)
        block = _ct._conv(x.shape, weight.shape, stride, padding, dilation, groups, x.device, dtype, layout)
        n, c, h, w = block.y_shape
        if n * h * w <= 1 or (residual is not None and (residual.dtype != dtype or tuple(residual.shape) !=
                                                        tuple(block.y_shape))):
            return None  # one value a channel (PyTorch's error), or a shortcut add that would promote the type
        # A convolution bias (VGG's blocks) is added in the forward convolution's epilogue: the batch norm then sees
        # the same y, and the running mean includes the bias, as unfused.
        forward = block if conv.bias is None else _ct._conv(x.shape, weight.shape, stride, padding, dilation, groups,
                                                            x.device, dtype, layout, "bias")
        needs = [forward.refusal("fwd")]
        needs += [block.refusal("bwd-data")] if x.requires_grad else []
        needs += [block.refusal("bwd-filter")] if conv.weight.requires_grad else []
        if any(needs):
            return None
        relu_max = 6.0 if self._convtune_activation == "relu6" else 0.0
        bn = _batch_norm_plan(plan_device, dtype, layout, block.y_shape, residual is not None,
                              bool(self._convtune_activation), relu_max)
        if _ct._recording is not None:
            _ct._recording[_ct._key_of(block)] = (x.requires_grad, conv.weight.requires_grad)
            _ct._recording[_ct._key_of(forward)] = (False, False)
            return torch.empty(block.y_shape, dtype=dtype, device=x.device,
                               memory_format=_ct._MEMORY_FORMATS[layout]).zero_()
        factor = 0.0
        update = training and self.track_running_stats and self.running_mean is not None
        if training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        elif self.momentum is not None:
            factor = self.momentum
        gamma, beta = self._affine(c, x.device)
        if residual is not None:
            residual = _ct._dense(residual, layout)
        # The running statistics are updated by the batch norm's kernels where they are float32 (as BatchNorm2d's
        # are unless the model was cast), else from the returned statistics.
        running = None
        if update and all(t.dtype == torch.float32 and t.is_contiguous() for t in (self.running_mean,
                                                                                 self.running_var)):
            running = (self.running_mean, self.running_var)
        a, stats = _TrainingBlock.apply(x, weight, conv.bias, gamma, beta, residual, block, forward, bn,
                                        float(self.eps), running, float(factor))
        if running is not None:
            for t in running:
                t._convtune_updates = getattr(t, "_convtune_updates", 0) + 1  # type: ignore[attr-defined]
        if update and running is None:
            with torch.no_grad():
                count = n * h * w
                self.running_mean.mul_(1 - factor).add_(stats[:c].to(self.running_mean.dtype), alpha=factor)
                self.running_var.mul_(1 - factor).add_((stats[c:] * (count / (count - 1))).to(self.running_var.dtype),
                                                       alpha=factor)
        return a

    def _affine(self, c: int, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        """gamma and beta: the module's weight and bias, or ones and zeros (made once) without them."""
        if self.weight is not None and self.bias is not None:
            return self.weight, self.bias
        unit = getattr(self, "_convtune_unit", None)
        if unit is None or unit[0].device != device or unit[0].numel() != c:
            unit = (torch.ones(c, device=device), torch.zeros(c, device=device))
            self._convtune_unit = unit
        return (self.weight if self.weight is not None else unit[0]), (self.bias if self.bias is not None else unit[1])

    def _fused(self, x: torch.Tensor, residual: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        """The fused computation, or None where convtune refuses it (the caller then runs the unfused one)."""
        setup = self._conv_setup(x)
        if setup is None:
            return None
        conv = self._convtune_conv
        dtype, stride, padding, dilation, groups = setup
        x = x.to(dtype)
        layout = _ct._layout(x, conv.weight)
        weight, bias = self._fold(dtype, layout)
        epilogue = self._epilogue()
        fused = _ct._conv(x.shape, weight.shape, stride, padding, dilation, groups, x.device, dtype, layout,
                          epilogue)
        if fused.refusal("fwd"):
            return None
        if _ct._recording is not None:
            _ct._recording[_ct._key_of(fused)] = (False, False)
            return torch.empty(fused.y_shape, dtype=dtype, device=x.device,
                               memory_format=_ct._MEMORY_FORMATS[layout]).zero_()
        res = None
        if residual is not None:
            res = _ct._dense(residual.to(dtype), layout)
            if tuple(res.shape) != tuple(fused.y_shape):
                return None
        return fused.run("fwd", _ct._dense(x, layout), weight, fused.y_shape, bias=bias, residual=res)


_bn_plans: Dict[Tuple[Any, ...], Any] = {}
_bn_plans_lock = threading.Lock()


def _batch_norm_plan(device: str, dtype: torch.dtype, layout: str, shape: Tuple[int, ...], residual: bool,
                     relu: bool, relu_max: float) -> Any:
    """The library's BatchNormPlan for this block and shape, compiled once."""
    key = (device, dtype, layout, tuple(shape), residual, relu, relu_max)
    found = _bn_plans.get(key)
    if found is None:
        with _bn_plans_lock:
            found = _bn_plans.get(key)
            if found is None:
                n, c, h, w = shape
                found = _ct._convtune.BatchNormPlan(device, _ct._TYPES[dtype], layout, n, c, h, w, residual, relu,
                                                  relu_max)
                _bn_plans[key] = found
    return found


def _on_stream(device: torch.device, call: Any) -> None:
    """call(stream): on PyTorch's current stream of a CUDA device (that device current meanwhile), 0 on the CPU."""
    if device.type != "cuda":
        call(0)
        return
    index = device.index if device.index is not None else torch.cuda.current_device()
    stream = _ct._current_stream(index)
    if torch.cuda.current_device() == index:
        call(stream)
    else:
        with torch.cuda.device(index):
            call(stream)


def _float32(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t if t.dtype == torch.float32 and t.is_contiguous() else t.float().contiguous()


class _TrainingBlock(torch.autograd.Function):
    """Convolution -> batch norm with the batch's statistics [-> + shortcut] [-> ReLU / ReLU6] under autograd: the
    convolution by its plan, the rest by a BatchNormPlan in two passes (statistics, with the running statistics moved
    where `running` is given; normalise, add and activate); the backward pass the batch norm's two passes (their sums;
    dy and the shortcut's gradient) and the convolution's two directions. Returns the block's output and the
    statistics (mean, biased variance; no gradient)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor],  # type: ignore[override]
                gamma: torch.Tensor, beta: torch.Tensor, residual: Optional[torch.Tensor], conv: Any, forward: Any,
                bn: Any, eps: float, running: Optional[Tuple[torch.Tensor, torch.Tensor]],
                momentum: float) -> Tuple[torch.Tensor, torch.Tensor]:
        layout = conv.layout
        y = forward.run("fwd", _ct._dense(x, layout), _ct._dense(w, layout), conv.y_shape,
                        bias=_float32(bias) if bias is not None else None)
        gamma32, beta32 = _float32(gamma), _float32(beta)
        stats = torch.empty(2 * gamma32.numel(), dtype=torch.float32, device=y.device)
        a = torch.empty_like(y)
        workspace = torch.empty(bn.workspace_bytes, dtype=torch.uint8, device=y.device)
        pointers = (y.data_ptr(), gamma32.data_ptr(), beta32.data_ptr(),
                    residual.data_ptr() if residual is not None else 0, stats.data_ptr(), a.data_ptr(),
                    running[0].data_ptr() if running is not None else 0,
                    running[1].data_ptr() if running is not None else 0)
        _on_stream(y.device, lambda stream: bn.forward_pointers(pointers, eps, momentum, workspace.data_ptr(), stream))
        # The output is the ReLU's mask: kept only where there is a ReLU (a later in-place operation on it, such as
        # an in-place SiLU after a block without one, then changes nothing the backward pass reads).
        ctx.save_for_backward(x, w, y, a if bn.relu else y, stats, gamma32)
        ctx.conv, ctx.bn, ctx.eps, ctx.residual = conv, bn, eps, residual is not None
        ctx.types = (gamma.dtype, beta.dtype, bias.dtype if bias is not None else None)
        ctx.mark_non_differentiable(stats)
        return a, stats

    @staticmethod
    def backward(ctx: Any, da: torch.Tensor, _: Any) -> Tuple[Optional[torch.Tensor], ...]:  # type: ignore
        x, w, y, a, stats, gamma32 = ctx.saved_tensors
        conv, bn = ctx.conv, ctx.bn
        da = _ct._dense(da.to(y.dtype), conv.layout)
        dy, dgamma, dbeta = torch.empty_like(y), torch.empty_like(gamma32), torch.empty_like(gamma32)
        dresidual = torch.empty_like(y) if ctx.residual else None
        workspace = torch.empty(bn.workspace_bytes, dtype=torch.uint8, device=y.device)
        pointers = (da.data_ptr(), a.data_ptr(), y.data_ptr(), stats.data_ptr(), gamma32.data_ptr(), dy.data_ptr(),
                    dgamma.data_ptr(), dbeta.data_ptr(), dresidual.data_ptr() if dresidual is not None else 0)
        _on_stream(y.device, lambda stream: bn.backward_pointers(pointers, ctx.eps, workspace.data_ptr(), stream))
        needs = ctx.needs_input_grad
        # The forward's plans (dy is dense in their layout already): no second lookup of the convolution per step.
        dx = conv.run("bwd-data", _ct._dense(w, conv.layout), dy, conv.x_shape) if needs[0] else None
        dw = conv.run("bwd-filter", _ct._dense(x, conv.layout), dy, conv.w_shape) if needs[1] else None
        dbias = dy.sum((0, 2, 3), dtype=torch.float32).to(ctx.types[2]) if needs[2] else None
        return (dx, dw, dbias, dgamma.to(ctx.types[0]) if needs[3] else None,
                dbeta.to(ctx.types[1]) if needs[4] else None, dresidual, None, None, None, None, None, None)


def _activation_of(node: torch.fx.Node, modules: Dict[str, torch.nn.Module]) -> str:
    """'relu' / 'relu6' when `node` applies that activation to its first argument alone, else ''."""
    if node.op == "call_module":
        return _ACTIVATION_MODULES.get(type(modules.get(node.target)), "")  # type: ignore[arg-type]
    if node.op == "call_function" and node.target in _ACTIVATION_FUNCTIONS:
        # Only the input and `inplace` (by position or name) may be given: other arguments change the function.
        extra = [a for a in node.args[1:] if not isinstance(a, bool)] + [k for k in node.kwargs if k != "inplace"]
        return "" if extra else _ACTIVATION_FUNCTIONS[node.target]
    if node.op == "call_method" and node.target in _ACTIVATION_METHODS and len(node.args) == 1 and not node.kwargs:
        return _ACTIVATION_METHODS[node.target]  # type: ignore[index]
    return ""


def _only_user(node: torch.fx.Node) -> Optional[torch.fx.Node]:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _shortcut_of(add: torch.fx.Node, bn: torch.fx.Node) -> Optional[torch.fx.Node]:
    """The other operand of `add` when it is bn's output + a tensor node (in either order, no alpha)."""
    if add.op != "call_function" or add.target not in _ADDS or add.kwargs or len(add.args) != 2:
        return None
    a, b = add.args
    other = b if a is bn else a if b is bn else None
    return other if isinstance(other, torch.fx.Node) and other is not bn else None


def _fuse_blocks(gm: torch.fx.GraphModule, report: OptimizeReport) -> None:
    modules = dict(gm.named_modules())
    calls: Dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            calls[node.target] = calls.get(node.target, 0) + 1
    for conv_node in list(gm.graph.nodes):
        if conv_node.op != "call_module" or type(modules.get(conv_node.target)) not in (torch.nn.Conv2d, _ct.Conv2d):
            continue
        conv = modules[conv_node.target]
        bn_node = _only_user(conv_node)
        if bn_node is None or bn_node.op != "call_module" or bn_node.args != (conv_node,) or bn_node.kwargs:
            continue
        bn = modules.get(bn_node.target)
        if type(bn) is not torch.nn.BatchNorm2d or calls[bn_node.target] != 1 \
                or bn.num_features != conv.out_channels or len(conv_node.args) != 1 or conv_node.kwargs:
            continue
        chain = [conv_node, bn_node]  # the nodes the fused one replaces, in order
        shortcut, activation = None, ""
        after = _only_user(bn_node)
        if after is not None and _shortcut_of(after, bn_node) is not None:
            shortcut = _shortcut_of(after, bn_node)
            chain.append(after)
            after = _only_user(after)
        if after is not None and _activation_of(after, modules) and after.args[0] is chain[-1]:
            activation = _activation_of(after, modules)
            chain.append(after)
        fused = FusedConvBatchNorm2d.__new__(FusedConvBatchNorm2d)
        fused.__dict__.update(bn.__dict__)  # the same parameters and buffers, so the same state_dict
        fused._convtune_setup(conv, shortcut is not None, activation)
        parent_name, _, child = bn_node.target.rpartition(".")
        setattr(gm.get_submodule(parent_name) if parent_name else gm, child, fused)
        with gm.graph.inserting_after(chain[-1]):
            args = (conv_node.args[0],) + ((shortcut,) if shortcut is not None else ())
            new = gm.graph.call_module(bn_node.target, args)
        chain[-1].replace_all_uses_with(new)
        for node in reversed(chain):  # each has no user left once the one after it is gone
            gm.graph.erase_node(node)
        report.fused[bn_node.target] = fused._epilogue()
    gm.graph.lint()
    gm.recompile()


def optimize(model: torch.nn.Module, verbose: bool = False) -> torch.nn.Module:
    """The model with its Conv2d -> BatchNorm2d blocks fused, each with the shortcut added after it and the ReLU or
    ReLU6 that follows (torchvision's ResNet, MobileNet, RegNet and EfficientNet blocks), found by tracing it with
    torch.fx, and its other convolutions patched (patch()). Returns a torch.fx.GraphModule sharing the model's
    parameters and buffers, with the same state_dict keys; train() and eval() work as on the model.

    In eval mode without gradients (torch.no_grad() or torch.inference_mode()), a fused block is one convtune
    convolution: the batch norm folded into its weights and bias, the shortcut and ReLU in its epilogue. In training,
    the convolution, then convtune's batch norm passes: one for the statistics, one that normalises, adds the shortcut
    and applies the ReLU; backward likewise (FusedConvBatchNorm2d). In eval mode with gradients wanted a block computes
    as the unfused model does. A model that cannot be traced is patched only (the report says why)."""
    report = OptimizeReport()
    try:
        gm = _trace(model, model.training)
        other = _trace(model, not model.training)
    except Exception as e:  # noqa: BLE001: tracing fails in many ways on dynamic models; the reason is reported
        report.not_traced = f"{type(e).__name__}: {e}".splitlines()[0]
        gm, other = model, None
    report.patch = _ct.patch(gm)  # first, so that a fused block's convolution is convtune's in training too
    if isinstance(gm, torch.fx.GraphModule):
        _fuse_blocks(gm, report)
    if other is not None and other.code != gm.code:
        # The forward depends on the mode inside modules with convolutions (Inception's auxiliary classifier): the
        # graph of each mode, the other one's run when the model is in that mode.
        _ct.patch(other)
        _fuse_blocks(other, report)  # its blocks join the report
        report.by_mode = True
        _dispatch_by_mode(gm, other, training=not model.training)
    gm._convtune_optimize_report = report  # type: ignore[assignment]
    if verbose:
        print(report, file=sys.stderr)
    return gm


class _Tracer(torch.fx.Tracer):
    """torch.fx's tracer, leaving whole every module with no convolution or batch norm inside: those run their own
    forward at every call, so what depends on the mode (stochastic depth, dropout variants) or on the data stays
    dynamic; only the modules around the blocks to fuse are traced through."""

    def is_leaf_module(self, m: torch.nn.Module, qualified_name: str) -> bool:
        if super().is_leaf_module(m, qualified_name):
            return True
        return not any(isinstance(sub, (torch.nn.Conv2d, torch.nn.BatchNorm2d)) for sub in m.modules())


def _trace(model: torch.nn.Module, training: bool) -> torch.fx.GraphModule:
    """The model traced (_Tracer) with every module in training or eval mode, as the mode was left after."""
    modes = {m: m.training for m in model.modules()}
    model.train(training)
    try:
        tracer = _Tracer()
        graph = tracer.trace(model)
        return torch.fx.GraphModule(tracer.root, graph, type(model).__name__)
    finally:
        for m, was in modes.items():
            m.training = was


def _dispatch_by_mode(gm: torch.fx.GraphModule, other: torch.fx.GraphModule, training: bool) -> None:
    """gm runs `other` (traced in the mode `training`) whenever gm is in that mode. `other` is kept outside gm's
    modules (same state_dict) and shares its parameters, buffers and unfused modules; its fused blocks follow gm's
    mode at each call."""
    object.__setattr__(gm, "_convtune_other_mode", (other, training))
    own = type(gm).forward

    def forward(self: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
        found = self.__dict__.get("_convtune_other_mode")
        if found is not None and self.training == found[1]:
            found[0].train(self.training)
            return found[0](*args, **kwargs)
        return own(self, *args, **kwargs)

    type(gm).forward = forward  # GraphModule makes a class per instance: only gm changes


def report_of(model: torch.nn.Module) -> Optional[OptimizeReport]:
    """What optimize() did to `model` (None when it did not make it)."""
    return getattr(model, "_convtune_optimize_report", None)

