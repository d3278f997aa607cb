"""Type promotion: the dtype of a binary op's result, by PyTorch's rules.

Note [Type promotion]
    NumPy and PyTorch agree when both operands are tensors of one kind, but
    not across kinds or dimensions: NumPy gives ``int64 + float32 -> float64``
    and ``float32 + 0-d float64 -> float64``; PyTorch gives float32 for both.
    PyTorch ranks its operands in three classes and promotes within each:
    tensors with dims, 0-d tensors, and Python numbers (a float counts as
    the default dtype, float32; an int as int64). The result is that of the
    highest class whose kind (bool < integer < floating) is not exceeded
    by a lower class; when a lower class has the higher kind, the two are
    promoted together (``int32 tensor + 0-d float64 -> float64``) or, for a
    Python number, its default dtype wins (``int64 tensor * 2.5 -> float32``).
    Within one class, an integer meets a float as the float
    (``int64 + float16 -> float16``; NumPy: float64); otherwise as NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy

from .. import _defaults

__all__ = ["promote_types", "result_type"]

_BOOL = numpy.dtype(bool)
_INT64 = numpy.dtype(numpy.int64)
_FLOAT32 = numpy.dtype(numpy.float32)


def promote_types(a: numpy.dtype, b: numpy.dtype) -> numpy.dtype:
    """PyTorch's ``promote_types`` for real dtypes: an integer or bool meets a float as it."""
    if a is b:
        return a
    a_float, b_float = a.kind == "f", b.kind == "f"
    if a_float != b_float:
        return a if a_float else b
    return numpy.promote_types(a, b)


def _combine(higher: numpy.dtype | None, lower: numpy.dtype | None) -> numpy.dtype | None:
    """The result of a class (``higher``) and the classes below it (``lower``)."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher is _BOOL or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(*operands: Any) -> numpy.dtype:
    """The dtype PyTorch gives an op of ``operands``, Tensors or Python numbers (bool,
    int, float): each class (with dims, 0-d, numbers) promotes within itself, then the
    classes combine. See Note [Type promotion]."""
    dims: numpy.dtype | None = None
    zeros: numpy.dtype | None = None
    numbers: numpy.dtype | None = None
    for x in operands:
        kind = type(x)
        if kind is float:
            default = _defaults.FLOAT
            numbers = default if numbers is None else promote_types(numbers, default)
        elif kind is int:
            numbers = _INT64 if numbers is None else promote_types(numbers, _INT64)
        elif kind is bool:
            numbers = _BOOL if numbers is None else promote_types(numbers, _BOOL)
        elif x.ndim:
            dims = x.dtype if dims is None else promote_types(dims, x.dtype)
        else:
            zeros = x.dtype if zeros is None else promote_types(zeros, x.dtype)
    return _combine(dims, _combine(zeros, numbers))  # type: ignore[return-value]
