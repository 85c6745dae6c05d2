"""convtune from Python: tuned convolution and GEMM kernels on any GPU or CPU, on the arrays you already have.

Every function takes objects that speak DLPack (``__dlpack__``/``__dlpack_device__``): NumPy arrays and PyTorch
tensors on the CPU run on convtune's CPU device in place; CUDA tensors run on their own GPU, on PyTorch's current
stream, in place. Host arrays sent to an OpenCL or CUDA device (``device='opencl:0'``) are copied there and back.

    import convtune, numpy as np
    y = convtune.conv2d(x, w, stride=1, padding=1)               # forward
    dx = convtune.conv2d(w, dy, padding=1, direction="bwd-data", x_shape=x.shape)
    plan = convtune.Plan(x.shape, w.shape, padding=1, device="cuda:0")   # compile once, call often
    convtune.tune(plan, directions="all", budget=30, progress=print)     # in-process tuning

``convtune.torch`` puts convtune under PyTorch's Conv2d (custom ops with autograd). docs/PYTHON.md has the rest.
"""
from ._errors import BackendError, Error, InvalidArgument, TuningDatabaseError, Unsupported
from ._convtune import (DeviceInfo, Problem, TuningDatabase, backends, best_device, built_backends, families,
                        parse_problem)
from ._convtune import version as _library_version
from ._conv import Plan, conv2d, conv_problem, gemm
from ._tune import TuneEvent, TuneResult, tune

# A CONVTUNE_* variable set to an unusable value is named at import, not found out halfway through (or ignored).
from ._convtune import _check_environment
_check_environment()
del _check_environment

__version__ = _library_version()
plan = Plan  # convtune.plan(...) reads like convtune.conv2d(...)


def devices() -> "list[DeviceInfo]":
    """Every device of every available backend ('cpu', 'opencl:N', 'cuda:N'), with name, vendor, driver..."""
    from ._convtune import devices as _devices
    return _devices()


def gemm_problem(m: int, n: int, k: int, *, trans_a: bool = False, trans_b: bool = False, batch: int = 1,
                 accumulate: bool = False) -> Problem:
    """A packed row-major matrix product C = op(A) op(B) (+C) as a Problem (for Plan(problem=...) and tune())."""
    from ._convtune import gemm_problem as _gemm_problem
    return _gemm_problem(m, n, k, trans_a, trans_b, batch, accumulate)


__all__ = ["BackendError", "DeviceInfo", "Error", "InvalidArgument", "Plan", "Problem", "TuneEvent", "TuneResult",
           "TuningDatabase", "TuningDatabaseError", "Unsupported", "backends", "best_device", "built_backends",
           "conv2d", "conv_problem", "devices", "families", "gemm", "gemm_problem", "parse_problem", "plan", "tune"]
