"""convtune.torch.optimize(): Conv2d -> BatchNorm2d [-> + shortcut] [-> ReLU / ReLU6] blocks of a model run as one
convtune convolution with a fused epilogue in inference, found in the model's traced graph (torch.fx)."""
import operator
import sys
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
        self.patch: Optional[_ct.PatchReport] = None

    def __str__(self) -> str:
        lines = [f"convtune.torch.optimize: {len(self.fused)} Conv2d + BatchNorm2d blocks fused"]
        if self.not_traced:
            lines.append(f"  none fused: the model could not be traced ({self.not_traced})")
        lines += [f"  fused {name}: conv + batch norm + {epilogue}" for name, epilogue in self.fused.items()]
        if self.patch is not None:
            lines.append(str(self.patch))
        return "\n".join(lines)

    __repr__ = __str__


class FusedConvBatchNorm2d(torch.nn.BatchNorm2d):
    """A BatchNorm2d that computes the convolution before it (and the shortcut and activation after it) too: the same
    parameters, buffers and state_dict keys as the BatchNorm2d it replaces. In eval mode without gradients, one
    convtune convolution with the batch norm folded into its weights and bias, and the shortcut and ReLU in its
    epilogue; otherwise (training, or gradients wanted) the convolution, batch norm, shortcut and activation one after
    another, exactly as the unfused model."""

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
        if training or not self.track_running_stats or (torch.is_grad_enabled() and (
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
        versions = tuple((t.data_ptr(), t._version) if t is not None else None for t in tensors)
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

    def _fused(self, x: torch.Tensor, residual: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        """The fused computation, or None where convtune refuses it (the caller then runs the unfused one)."""
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
        x = x.to(dtype)
        layout = _ct._layout(x, conv.weight)
        weight, bias = self._fold(dtype, layout)
        epilogue = self._epilogue()
        fused = _ct._conv(x.shape, weight.shape, stride, padding, dilation, groups, x.device, dtype, layout,
                          epilogue)
        if not fused.in_place or fused.refusal("fwd"):  # host tensors through another device: not fused
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
        if type(bn) is not torch.nn.BatchNorm2d or calls[bn_node.target] != 1 or not bn.track_running_stats \
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
    or where gradients are wanted, a block computes as the unfused model does. A model that cannot be traced is
    patched only (the report says why)."""
    report = OptimizeReport()
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001: tracing fails in many ways on dynamic models; the reason is reported
        report.not_traced = f"{type(e).__name__}: {e}".splitlines()[0]
        gm = model
    report.patch = _ct.patch(gm)  # first, so that a fused block's convolution is convtune's in training too
    if isinstance(gm, torch.fx.GraphModule):
        _fuse_blocks(gm, report)
    gm._convtune_optimize_report = report  # type: ignore[assignment]
    if verbose:
        print(report, file=sys.stderr)
    return gm


def report_of(model: torch.nn.Module) -> Optional[OptimizeReport]:
    """What optimize() did to `model` (None when it did not make it)."""
    return getattr(model, "_convtune_optimize_report", None)

