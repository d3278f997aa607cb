"""Helpers for backward formulas that work on arrays and Tensors alike.

See Note [Dual backward formulas]. Each helper takes an array (NumPy or
CuPy) or a Tensor and returns the same kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from .._tensor import Tensor
from ..devices import device_of_array
from ..engine.validate import sum_dims  # noqa: F401  (one of the helpers)

_ndarray = numpy.ndarray


def xp_of(x: Any) -> Any:
    """The array module of an array or tensor."""
    if type(x) is Tensor:
        return x.device.xp
    return device_of_array(x).xp


def expand(x: Any, shape: Sequence[int]) -> Any:
    """A read-only broadcast view of ``x`` (a Tensor: ``Tensor.expand``)."""
    if type(x) is Tensor:
        return x.expand(*shape)
    if type(x) is _ndarray and x.size == 1:
        # One element (the gradient of a full sum or mean): made in C, several
        # times cheaper than numpy.broadcast_to's Python wrapper.
        view = _ndarray(tuple(shape), x.dtype, x, 0, (0,) * len(shape))
        view.flags.writeable = False
        return view
    return xp_of(x).broadcast_to(x, tuple(shape))


def reshape(x: Any, shape: Sequence[int]) -> Any:
    return x.reshape(tuple(shape))


def swap_last(x: Any) -> Any:
    """Swap the last two dimensions."""
    if type(x) is Tensor:
        return x.transpose(-1, -2)
    return x.T if x.ndim == 2 else x.swapaxes(-1, -2)


def transpose(x: Any, d0: int, d1: int) -> Any:
    if type(x) is Tensor:
        return x.transpose(d0, d1)
    return x.swapaxes(d0, d1)


def permute(x: Any, dims: Sequence[int]) -> Any:
    if type(x) is Tensor:
        return x.permute(*dims)
    return x.transpose(tuple(dims))


def unsqueeze(x: Any, dim: int) -> Any:
    if type(x) is Tensor:
        return x.unsqueeze(dim)
    return xp_of(x).expand_dims(x, dim)


def where(cond: Any, x: Any, y: Any) -> Any:
    """``cond`` is a boolean array; x or y may be Tensors or numbers."""
    if type(x) is Tensor or type(y) is Tensor:
        from .unary import where as t_where

        return t_where(cond, x, y)
    return xp_of(x if not isinstance(x, (int, float)) else y).where(cond, x, y)


def log(x: Any) -> Any:
    if type(x) is Tensor:
        return x.log()
    return xp_of(x).log(x)


def sign(x: Any) -> Any:
    if type(x) is Tensor:
        return x.sign()
    return xp_of(x).sign(x)


def raw(x: Any) -> Any:
    """The array behind a Tensor, or the array itself (for masks)."""
    return x.data if type(x) is Tensor else x


def zeros_of(x: Any, shape: Sequence[int] | None = None) -> Any:
    """Zeros with x's dtype (and device), shaped like x or ``shape``."""
    if type(x) is Tensor:
        from .._tensor import zeros

        return zeros(*(x.shape if shape is None else shape), dtype=x.dtype, device=x.device)
    return xp_of(x).zeros(x.shape if shape is None else tuple(shape), dtype=x.dtype)


def exp(x: Any) -> Any:
    if type(x) is Tensor:
        return x.exp()
    return xp_of(x).exp(x)
