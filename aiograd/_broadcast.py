"""Summing a broadcast gradient down to a shape: shared by the ops' backward formulas
and the engine's ``validate_outputs`` (Note [Broadcast gradients]).

A leaf module (it imports only ``_tensor``), so the ops need not import the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy

from ._tensor import Tensor

_ndarray = numpy.ndarray
_add_reduce: Callable[..., Any] = numpy.add.reduce  # the ufunc stubs need literal keepdims


def sum_to_shape(grad: Any, shape: tuple[int, ...]) -> Any | None:
    """Sum ``grad`` down to ``shape``; None if ``shape`` cannot broadcast to grad's.

    Leading dimensions are summed away and broadcast size-1 dimensions summed
    with keepdim, so the result has ``shape`` without a reshape (a fresh
    array, not a view: AccumulateGrad can keep it without copying).
    """
    gshape = grad.shape
    lead = len(gshape) - len(shape)
    if lead < 0:
        return None
    inner = []
    for i, n in enumerate(shape):
        if n != gshape[lead + i]:
            if n != 1:
                return None
            inner.append(i)
    if lead:
        grad = sum_dims(grad, tuple(range(lead)))
    if inner:
        grad = sum_dims(grad, tuple(inner), keepdim=True)
    return grad


def sum_dims(x: Any, dims: tuple[int, ...] | int | None, keepdim: bool = False) -> Any:
    """``x.sum`` over ``dims`` for a Tensor or an array (NumPy's without its Python wrapper)."""
    kind = type(x)
    if kind is _ndarray:
        return _add_reduce(x, dims, keepdims=keepdim)
    if kind is Tensor:
        return x.sum(dim=dims, keepdim=keepdim)
    return x.sum(axis=dims, keepdims=keepdim)
