"""The exceptions convtune raises: each is a convtune.Error and the builtin a Python user would catch for it, and
carries the library's message (which names the parameter, file or constraint, and what was expected)."""
from . import _convtune


class Error(Exception):
    """Base of every error convtune raises."""


class InvalidArgument(Error, ValueError):
    """A value given to convtune is invalid (a shape, a device name, an option, a file's content)."""


class Unsupported(Error, NotImplementedError):
    """Nothing in convtune computes this combination (an element type not implemented, say)."""


class BackendError(Error, RuntimeError):
    """A device cannot do what was asked (unavailable, out of memory, a compile failure)."""


class TuningDatabaseError(Error, RuntimeError):
    """A tuning database file is damaged or cannot be read or written."""


_convtune._set_error_types(Error, InvalidArgument, Unsupported, BackendError, TuningDatabaseError)
