"""Checks of the Python arguments that reach the library: integers that are integers, texts without NUL bytes,
finite numbers, each refused with convtune.InvalidArgument (or TypeError for the wrong kind) naming the argument."""
from __future__ import annotations

import math
import operator
from typing import Any, Optional

from . import _errors


def integer(value: Any, name: str, minimum: Optional[int] = None) -> int:
    """`value` as an int: an int or anything with __index__ (NumPy's integers), never a bool, a float (2.0 or 2.7
    would be truncated without a word) or a string."""
    if isinstance(value, bool):
        raise _errors.InvalidArgument(f"{name}={value!r} is invalid: expected an integer, not a bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise _errors.InvalidArgument(f"{name}={value!r} is invalid: expected an integer, got "
                                      f"{type(value).__name__}") from None
    if minimum is not None and number < minimum:
        raise _errors.InvalidArgument(f"{name}={number} is invalid: expected an integer of {minimum} or more")
    return number


def real(value: Any, name: str) -> float:
    """`value` as a finite float: an int or float (NumPy's too), never a bool or a string."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise _errors.InvalidArgument(f"{name}={value!r} is invalid: expected a number")
    if isinstance(value, str) or isinstance(value, (bytes, bytearray)):
        raise _errors.InvalidArgument(f"{name}={value!r} is invalid: expected a number, not a string")
    number = float(value)
    if not math.isfinite(number):
        raise _errors.InvalidArgument(f"{name}={value!r} is invalid: expected a finite number")
    return number


def text(value: Any, name: str) -> str:
    """`value` as a str without NUL bytes: the library's strings end at a NUL, so the rest would be dropped and a
    path or name would mean something else."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a str, got {type(value).__name__}")
    if "\0" in value:
        raise _errors.InvalidArgument(f"{name}={value!r} is invalid: it holds a NUL character")
    return value
