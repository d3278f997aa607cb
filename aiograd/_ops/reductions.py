"""Reductions: ``sum mean max min``, over all elements or over ``dim``.

Sum and mean send the gradient back by reshaping it to the kept-dims shape
and expanding it to the input's shape (a broadcast view, no copy). A full
``max``/``min`` splits the gradient evenly among the elements equal to the
result (PyTorch's ``evenly_distribute_backward``); with ``dim`` the whole
gradient goes to the index returned, the first occurrence of a tie.
See Note [Dual backward formulas].
"""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy

from .._tensor import Tensor
from ..graph._node import Node
from . import _dual
from ._record import edges_of, plain, record, save

__all__ = ["ValuesIndices", "as_array", "normalize_dim", "reduction_dims"]


def normalize_dim(dim: Any, ndim: int) -> int:
    """``dim`` as an index in ``range(max(ndim, 1))``; a 0-d tensor accepts -1 and 0."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__} ({dim!r})")
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got "
            f"{dim}): the tensor has {ndim} dimension(s)"
        )
    return dim % n


def reduction_dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """The sorted dims ``dim`` names (None or ``()``: all of them)."""
    if dim is None:
        return tuple(range(ndim))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if not dims:
        return tuple(range(ndim))
    seen = sorted(normalize_dim(d, ndim) for d in dims)
    for a, b in zip(seen, seen[1:]):
        if a == b:
            raise RuntimeError(
                f"dim {a} appears multiple times in the list of dims {dims}; name each once"
            )
    return tuple(seen) if ndim else ()


def _kept_shape(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in dims else n for i, n in enumerate(shape))


def as_array(data: Any) -> Any:
    """NumPy's full reductions give scalars; a tensor's data stays an array (0-d)."""
    return numpy.asarray(data) if isinstance(data, numpy.generic) else data


# ---- sum / mean ----

class SumBackward0(Node):
    """Expands the gradient back to ``self_shape``.

    Invariant: ``kept_shape`` is ``self_shape`` with every reduced dim set to 1.
    """

    __slots__ = ("self_shape", "kept_shape")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        if g.shape != self.kept_shape:
            g = _dual.reshape(g, self.kept_shape)
        return (_dual.expand(g, self.self_shape),)


class SumBackward1(SumBackward0):
    """``sum(dim=...)``."""

    __slots__ = ()


class MeanBackward0(SumBackward0):
    """Divides the gradient by ``count`` and expands it.

    Invariant: ``count >= 1``; an empty input keeps 1 (its gradient is empty
    whatever the divisor, and ``g / 0`` would make NumPy warn).
    """

    __slots__ = ("count",)

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return super().apply([grads[0] / self.count], create_graph)


class MeanBackward1(MeanBackward0):
    """``mean(dim=...)``."""

    __slots__ = ()


def _reduce(a: Tensor, dim: Any, keepdim: bool, is_mean: bool) -> Tensor:
    x = a.data
    dims = reduction_dims(dim, x.ndim)
    if is_mean:
        if x.dtype.kind != "f":
            raise RuntimeError(
                "mean(): could not infer output dtype. Input dtype must be a floating point "
                f"dtype, got {x.dtype}; convert first, e.g. t.to(dtype=aiograd.float32)"
            )
        data = x.mean(axis=dims, keepdims=keepdim) if x.size else _mean_of_empty(x, dims, keepdim)
    else:
        data = x.sum(axis=dims, keepdims=keepdim)
    data = as_array(data)
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    full = dim is None and not keepdim
    if is_mean:
        node = (MeanBackward0 if full else MeanBackward1)(edges)
        node.count = math.prod(x.shape[d] for d in dims) or 1
    else:
        node = (SumBackward0 if full else SumBackward1)(edges)
    node.self_shape = x.shape
    node.kept_shape = _kept_shape(x.shape, dims)
    return record(node, data, a.device)


@numpy.errstate(all="ignore")  # 0 / 0
def _mean_of_empty(x: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """The mean of an empty array: NaN where no element is averaged, as PyTorch, without
    NumPy's "Mean of empty slice" warning. See Note [Silent singular points]."""
    return x.sum(axis=dims, keepdims=keepdim) / math.prod(x.shape[d] for d in dims)


def sum(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Sum over ``dim`` (an int, a tuple of ints, or None for all)."""
    return _reduce(a, dim, keepdim, is_mean=False)


def mean(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim`` (an int, a tuple of ints, or None for all); floating dtypes only."""
    return _reduce(a, dim, keepdim, is_mean=True)


# ---- max / min ----

class ValuesIndices(NamedTuple):
    """What ``max(dim)``/``min(dim)`` return: ``values`` and int64 ``indices``."""

    values: Tensor
    indices: Tensor


class MaxBackward1(Node):
    """Full max: the gradient is split evenly among the elements equal to the result
    (among the NaNs when the result is NaN, as PyTorch's ``evenly_distribute_backward``)."""

    __slots__ = ("self_", "result")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        x = self.self_.unpack(self, False)
        result = self.result.unpack(self, False)
        xp = _dual.xp_of(x)
        mask = xp.isnan(x) if bool(xp.isnan(result)) else x == result
        weights = mask.astype(x.dtype) / mask.sum(dtype=x.dtype)
        return (grads[0] * weights,)

    def release_variables(self) -> None:
        self.self_.release()
        self.result.release()


class MinBackward1(MaxBackward1):
    __slots__ = ()


class MaxBackward0(Node):
    """Max over ``dim``: the whole gradient goes to the index returned."""

    __slots__ = ("indices", "dim", "keepdim", "self_shape")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        idx = self.indices.unpack(self, False)
        if not self.self_shape:  # a 0-d input is its own max
            return (g,)
        if not self.keepdim:
            g = _dual.unsqueeze(g, self.dim)
            idx = _dual.xp_of(idx).expand_dims(idx, self.dim)
        n = self.self_shape[self.dim]
        positions = _dual.xp_of(idx).arange(n).reshape(
            tuple(n if i == self.dim else 1 for i in range(len(self.self_shape)))
        )
        return (_dual.where(positions == idx, g, 0),)

    def release_variables(self) -> None:
        self.indices.release()


class MinBackward0(MaxBackward0):
    __slots__ = ()


def _extreme(a: Tensor, dim: Any, keepdim: bool, is_max: bool) -> Any:
    name = "max" if is_max else "min"
    x = a.data
    xp = a.device.xp
    if dim is None:
        if x.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        data = as_array(x.max() if is_max else x.min())
        edges = edges_of(a)
        if edges is None:
            return plain(data, a.device)
        node = (MaxBackward1 if is_max else MinBackward1)(edges)
        node.self_ = save(a)
        out = record(node, data, a.device)
        node.result = save(out, is_output=True)
        return out
    d = normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        values = x.copy()
        idx = xp.zeros_like(x, dtype="int64")
    else:
        if x.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
        idx = (x.argmax if is_max else x.argmin)(axis=d, keepdims=True)
        idx = idx.astype("int64", copy=False)
        values = xp.take_along_axis(x, idx, axis=d)
        if not keepdim:
            idx = idx.squeeze(d)
            values = values.squeeze(d)
    indices = plain(idx, a.device)
    edges = edges_of(a)
    if edges is None:
        return ValuesIndices(plain(values, a.device), indices)
    node = (MaxBackward0 if is_max else MinBackward0)(edges)
    node.indices = save(indices)
    node.dim = d
    node.keepdim = keepdim
    node.self_shape = x.shape
    return ValuesIndices(record(node, values, a.device), indices)


def max(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """The largest element, or ``(values, indices)`` along ``dim``."""
    return _extreme(a, dim, keepdim, is_max=True)


def min(a: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """The smallest element, or ``(values, indices)`` along ``dim``."""
    return _extreme(a, dim, keepdim, is_max=False)


# ---- Tensor methods ----

Tensor.sum = sum
Tensor.mean = mean
Tensor.max = max
Tensor.min = min
