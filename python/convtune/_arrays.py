"""Where arrays live and how convtune reaches them: DLPack devices, dtypes (float32, float16, bfloat16), the CUDA
stream a call runs on, the CUDA device PyTorch has current, and new output arrays of the caller's own kind (NumPy,
PyTorch, any array-API library)."""
from __future__ import annotations

import contextlib
import sys
from typing import Any, ContextManager, Dict, Optional, Sequence, Tuple

from . import _convtune, _errors

# DLPack device types (DLDeviceType) convtune reaches.
_CPU, _CUDA, _CUDA_HOST, _CUDA_MANAGED = 1, 2, 3, 13
_KNOWN = {4: "OpenCL", 7: "Vulkan", 8: "Metal", 10: "ROCm", 14: "oneAPI", 15: "WebGPU"}

# The dtypes convtune computes, by name, and the element type (a Plan's math=) of a problem on them.
_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_DTYPES = {type_: dtype for dtype, type_ in _TYPES.items()}


def dlpack_device(array: Any, name: str) -> Tuple[int, int]:
    """The (DLPack device type, index) of `array`; TypeError naming `name` for an object without DLPack."""
    try:
        query = array.__dlpack_device__
    except AttributeError:
        raise TypeError(f"{name}: expected an array that speaks DLPack (__dlpack__ and __dlpack_device__), such as a "
                        f"NumPy array or a PyTorch tensor, got {type(array).__name__}") from None
    kind, index = query()
    return int(kind), int(index)


def device_name(kind: int, index: int) -> str:
    """convtune's name for a DLPack device ('cpu', 'cuda:1'); InvalidArgument for memory convtune cannot reach."""
    if kind in (_CPU, _CUDA_HOST):
        return "cpu"
    if kind in (_CUDA, _CUDA_MANAGED):
        return f"cuda:{index}"
    label = _KNOWN.get(kind, f"type {kind}")
    raise _errors.InvalidArgument(f"memory on DLPack device {label} {index} is not reachable by convtune: expected "
                                    "host memory or CUDA memory")


def common_device(arrays: Dict[str, Any]) -> str:
    """The one device all `arrays` (name -> array) live on; InvalidArgument naming two that differ."""
    where: Dict[str, str] = {}
    for name, array in arrays.items():
        kind, index = dlpack_device(array, name)
        try:
            where[name] = device_name(kind, index)
        except _errors.InvalidArgument as e:
            raise _errors.InvalidArgument(f"{name}: {e}") from None
    names = list(where)
    for name in names[1:]:
        if where[name] != where[names[0]]:
            raise _errors.InvalidArgument(f"the operands are on different devices: {names[0]} on {where[names[0]]}, "
                                            f"{name} on {where[name]}: expected all on one device")
    return where[names[0]]


def dtype_name(array: Any) -> str:
    """The name of `array`'s dtype as NumPy has it ('float32', 'bfloat16'; PyTorch's 'torch.float16' too); '' when
    it has none."""
    dtype = getattr(array, "dtype", None)
    return "" if dtype is None else str(dtype).rsplit(".", 1)[-1]


def element_type(arrays: Dict[str, Any]) -> str:
    """The element type ('fp32', 'fp16' or 'bf16') of `arrays` (name -> array); TypeError naming one of a dtype
    convtune does not compute, InvalidArgument one whose dtype differs from the first's. An array without .dtype is
    left to the import, which reads its DLPack dtype."""
    first: Optional[Tuple[str, str]] = None
    for name, array in arrays.items():
        dtype = dtype_name(array)
        if not dtype:
            continue
        if dtype not in _TYPES:
            # Before any plan is made: a plan in the other operands' type may be refused for a reason beside the point.
            raise TypeError(f"{name}: dtype {dtype} is not supported: convtune computes float32, float16 and "
                            "bfloat16 arrays (convert with .astype(numpy.float32) or .float())")
        if first is None:
            first = (name, dtype)
        elif dtype != first[1]:
            raise _errors.InvalidArgument(f"{name}: dtype {dtype} differs from {first[0]}'s {first[1]}: expected "
                                          "every operand of one call in one dtype (float32, float16 or bfloat16)")
    return _TYPES[first[1]] if first else "fp32"


class _BFloat16Bits:
    """A NumPy array of ml_dtypes.bfloat16 as convtune's extension takes it: NumPy's DLPack export knows no
    bfloat16, so the array goes as its uint16 bits, which the extension reads as bfloat16 from this wrapper alone."""

    _convtune_bfloat16_bits = True

    def __init__(self, array: Any) -> None:
        self._bits = array.view("uint16")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._bits.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._bits.__dlpack_device__()


def exportable(array: Any) -> Any:
    """`array` as the extension imports it: itself, or a NumPy bfloat16 array (ml_dtypes) as its bits."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(array, numpy.ndarray) and array.dtype.name == "bfloat16":
        return _BFloat16Bits(array)
    return array


def stream_handle(stream: Any, arrays: Sequence[Any], device: str) -> int:
    """The CUDA stream a call on `device` runs on, as a handle: the one given (an int, a torch.cuda.Stream or
    anything with .cuda_stream or .ptr), else PyTorch's current stream when an operand is a PyTorch tensor, else 0
    (CUDA's legacy default stream). 0 off CUDA."""
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attribute in ("cuda_stream", "ptr"):
            if hasattr(stream, attribute):
                return int(getattr(stream, attribute))
        raise TypeError(f"stream: expected an int handle or a stream object with .cuda_stream (torch.cuda.Stream) "
                        f"or .ptr (CuPy), got {type(stream).__name__}")
    if not device.startswith("cuda"):
        return 0
    torch = sys.modules.get("torch")
    if torch is not None and any(isinstance(a, torch.Tensor) for a in arrays):
        return int(torch.cuda.current_stream(int(device.split(":")[1])).cuda_stream)
    return 0


def device_guard(device: str) -> ContextManager[Any]:
    """Keeps PyTorch's current CUDA device what it was: convtune makes the primary context of the device it runs on
    current on the calling thread, which is how the CUDA runtime (and so PyTorch) knows its current device."""
    torch = sys.modules.get("torch")
    if torch is None or not device.startswith("cuda") or not torch.cuda.is_available():
        return contextlib.nullcontext()
    return torch.cuda.device(int(device.split(":")[1]))


def new_array(like: Any, name: str, shape: Sequence[int], type_: str = "fp32") -> Any:
    """An uninitialised array of `shape` and element type `type_` ('fp32', 'fp16', 'bf16') of the same kind and
    device as `like` (operand `name`). Where that kind has no such dtype (NumPy's bfloat16 without ml_dtypes),
    `like`'s own, which the run then refuses naming the input."""
    dtype = _DTYPES[type_]
    same = dtype_name(like) == dtype
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(like, torch.Tensor):
        return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=like.device)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(like, numpy.ndarray):
        numpy_dtype = like.dtype if same else dtype
        if not same and type_ == "bf16":  # NumPy's bfloat16 is ml_dtypes', when the program has imported it
            ml_dtypes = sys.modules.get("ml_dtypes")
            numpy_dtype = ml_dtypes.bfloat16 if ml_dtypes is not None else like.dtype
        return numpy.empty(tuple(shape), dtype=numpy_dtype)
    namespace = getattr(like, "__array_namespace__", None)
    if namespace is not None:
        xp = namespace()
        return xp.empty(tuple(shape), dtype=like.dtype if same else getattr(xp, dtype, like.dtype),
                        device=like.device)
    raise TypeError(f"cannot make the output like {name} (a {type(like).__name__}, neither NumPy, PyTorch nor an "
                    "array-API array): pass out=")


def shape_of(array: Any, name: str, dims: Optional[int] = None, legend: str = "") -> Tuple[int, ...]:
    """`array.shape` as ints, checked to have `dims` axes."""
    shape = getattr(array, "shape", None)
    if shape is None:
        dlpack_device(array, name)  # says what was expected of an object that is no array at all
        raise TypeError(f"{name}: a {type(array).__name__} has no .shape")
    shape = tuple(int(s) for s in shape)
    if dims is not None and len(shape) != dims:
        raise _errors.InvalidArgument(f"{name}: expected a {dims}-D array {legend}, got shape {shape}")
    return shape
