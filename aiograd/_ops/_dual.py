"""Helpers for backward formulas that work on arrays and Tensors alike.

See Note [Dual backward formulas]. Each helper takes an array (NumPy or
CuPy) or a Tensor and returns the same kind.

Note [Silent singular points]
    PyTorch computes ``log(0) == -inf``, ``1 / 0 == inf``, ``sqrt(-1)``,
    ``0 / 0`` and ``0 ** -1`` without a word; NumPy prints a RuntimeWarning
    for each. The ops that meet such points as a matter of course (log,
    sqrt, division, powers, the mean of an empty tensor, and their backward
    formulas) run their array math under ``numpy.errstate(all="ignore")``,
    used as a decorator (:func:`quietly`, or on an ``apply``): about 1.3 us
    a call (a ``with`` block costs twice that), on ops of 4-5 us. It is
    taken only where a singular point is possible: ``x / 2.0`` and ``x ** 2``
    test the number and skip it. The hot ops whose warnings need unusual
    data (``inf * 0`` in mul or its backward, ``exp`` overflow, a sum of
    ``inf`` and ``-inf``) still warn. NumPy keeps the error state in a
    context variable, per thread, so formulas running on engine workers need
    no lock. CuPy never warns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy

from .._broadcast import sum_dims as sum_dims  # one of the helpers, re-exported
from .._tensor import Tensor, zeros
from ..devices import device_of_array

_ndarray = numpy.ndarray


@numpy.errstate(all="ignore")
def quietly(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with NumPy's floating-point warnings off (inf and NaN results stay).

    See Note [Silent singular points]; the decorator keeps its state per call, so
    any thread may call this.
    """
    return fn(*args)


def contiguous(x: Any) -> Any:
    """The array ``x``, or a C-contiguous copy of it: the layout PyTorch gives the results
    of reductions, joins and the like (NumPy keeps its inputs' order)."""
    return x if x.flags.c_contiguous else x.copy()


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
    """``cond`` is a boolean array; x or y may be Tensors or numbers. With a Tensor it is
    the differentiable ``where`` (Tensor.where, ``self`` taken where ``cond`` holds)."""
    if type(x) is Tensor:
        return x.where(cond, y)
    if type(y) is Tensor:
        return y.where(~cond, x)
    return xp_of(x if type(x) not in (int, float) else y).where(cond, x, y)


def log(x: Any) -> Any:
    if type(x) is Tensor:
        return x.log()
    return xp_of(x).log(x)


def sign(x: Any) -> Any:
    """-1, 0 or 1, and 0 at NaN (PyTorch's; NumPy's sign is NaN there)."""
    if type(x) is Tensor:
        return x.sign()
    xp = xp_of(x)
    s = xp.sign(x)
    if s.dtype.kind == "f":
        if isinstance(s, numpy.generic):  # NumPy's result for a 0-d input
            return s.dtype.type(0) if s != s else s
        xp.copyto(s, 0, where=s != s)
    return s


def raw(x: Any) -> Any:
    """The array behind a Tensor, or the array itself (for masks)."""
    return x.data if type(x) is Tensor else x


def zeros_of(x: Any, shape: Sequence[int] | None = None) -> Any:
    """Zeros with x's dtype (and device), shaped like x or ``shape``."""
    if type(x) is Tensor:
        return zeros(*(x.shape if shape is None else shape), dtype=x.dtype, device=x.device)
    return xp_of(x).zeros(x.shape if shape is None else tuple(shape), dtype=x.dtype)


def exp(x: Any) -> Any:
    if type(x) is Tensor:
        return x.exp()
    return xp_of(x).exp(x)


def tanh(x: Any) -> Any:
    if type(x) is Tensor:
        return x.tanh()
    return xp_of(x).tanh(x)
