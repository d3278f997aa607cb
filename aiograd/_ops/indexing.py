"""Indexing: ``t[index]`` (basic and advanced) and ``t[index] = value``.

Note [Index keys]
    An index is normalised once into a *key*: a tuple of ints, slices (of
    ints), None, Ellipsis, Python bools and integer/boolean arrays on the
    indexed tensor's device (aiograd tensors, NumPy arrays and lists become
    arrays). A key without arrays or bools is *basic*: the result is a view
    (see Note [Views share the version counter]) and the key ends with an
    Ellipsis, so NumPy returns a 0-d array, not a scalar, when every dim is
    indexed by an int. A node keeps a copy of the key's arrays, so changing
    an index array after the forward does not change the backward.

The gradient of ``t[key]`` is a scatter-*add* of the gradient into zeros
(repeated positions accumulate); the scatter is itself a differentiable op
(its backward indexes again), so ``create_graph`` works to any order.
"""

from __future__ import annotations

import numbers
import operator
import warnings
from typing import Any

import numpy

from .._tensor import Tensor, tensor
from ..devices import CPU
from ..graph._node import Node
from . import _dual
from ._record import check_same_device, edges_of, plain, record, scalar_or_tensor
from .inplace import check_inplace, commit_inplace
from .views import as_view

__all__ = ["getitem", "setitem", "index_scatter_add"]


# ---- index keys ----

def _opt_index(x: Any) -> int | None:
    return None if x is None else operator.index(x)


def _index_array(t: Tensor, arr: Any) -> Any:
    """An index array (from a Tensor, array or list) on ``t``'s device; checks its dtype."""
    if isinstance(arr, Tensor):
        if arr.device is not t.device and arr.device is not CPU:
            raise RuntimeError(
                f"indices should be either on cpu or on the same device as the indexed tensor "
                f"({t.device}), got an index on {arr.device}"
            )
        arr = arr.data
    if not t.device.backend.owns(arr):
        host = numpy.asarray(arr)
        if host.size == 0 and host.dtype.kind == "f":  # x[[]] selects nothing
            host = host.astype(numpy.int64)
        arr = t.device.backend.from_host(host, t.device.index)
    if arr.dtype.kind not in "biu":
        raise IndexError(
            f"tensors used as indices must be long, int or bool tensors, got dtype {arr.dtype}"
        )
    if arr.dtype == numpy.uint8:  # a mask, as in PyTorch
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                      "torch.bool instead.", UserWarning, stacklevel=4)
        arr = arr.astype(bool)
    return arr


def _key_item(t: Tensor, item: Any) -> tuple[Any, bool]:
    """One normalised index item and whether it is basic."""
    if item is None or item is Ellipsis:
        return item, True
    if isinstance(item, slice):
        try:
            start, stop, step = (_opt_index(x) for x in (item.start, item.stop, item.step))
        except TypeError:
            raise IndexError(f"slice indices must be integers or None, got {item!r}") from None
        return slice(start, stop, step), True
    if isinstance(item, (bool, numpy.bool_)):
        return bool(item), False  # NumPy: a scalar boolean adds a dim of size 1 or 0
    if isinstance(item, numbers.Integral):
        return operator.index(item), True
    if isinstance(item, (Tensor, list, tuple, numpy.ndarray)) or t.device.backend.owns(item):
        return _index_array(t, item), False
    raise IndexError(
        "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean tensors "
        f"or arrays are valid indices (got {type(item).__name__})"
    )


def _key(t: Tensor, index: Any) -> tuple[tuple[Any, ...], bool]:
    """The key of ``index`` and whether it is basic. See Note [Index keys]."""
    items = index if isinstance(index, tuple) else (index,)
    key = []
    basic = True
    for item in items:
        k, is_basic = _key_item(t, item)
        key.append(k)
        basic = basic and is_basic
    if basic and not any(k is Ellipsis for k in key):
        key.append(Ellipsis)
    return tuple(key), basic


def _saved_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``key`` with its arrays copied, for a node to keep."""
    return tuple(k.copy() if hasattr(k, "dtype") else k for k in key)


def _basic_name(index: Any, key: tuple[Any, ...]) -> str:
    """PyTorch's name for a basic index: that of its last step (full slices in a tuple skip)."""
    single = not isinstance(index, tuple)
    name = "AliasBackward0"
    for k in key:
        if k is None:
            name = "UnsqueezeBackward0"
        elif isinstance(k, slice):
            if single or k != slice(None):
                name = "SliceBackward0"
        elif k is not Ellipsis:
            name = "SelectBackward0"
    return name


# ---- the scatter-add behind every indexing gradient ----

class IndexScatterBackward(Node):
    """Backward of :func:`index_scatter_add`: index the gradient with the same key.

    Named as PyTorch names the node of an indexing gradient (``IndexPutImplBackward0``,
    ``SelectBackwardBackward0``, ...).
    """

    __slots__ = ("key", "label")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0][self.key],)

    def name(self) -> str:
        return self.label


def index_scatter_add(g: Any, shape: tuple[int, ...], key: tuple[Any, ...], basic: bool,
                      label: str) -> Any:
    """Zeros of ``shape`` with ``g`` added at ``key`` (an array, or a Tensor that records)."""
    data = _dual.raw(g)
    out = _dual.xp_of(data).zeros(shape, dtype=data.dtype)
    if basic:  # a basic key hits every position at most once
        out[key] = data
    else:
        _dual.xp_of(data).add.at(out, key, data)
    if type(g) is not Tensor:
        return out
    edges = edges_of(g)
    if edges is None:
        return plain(out, g.device)
    node = IndexScatterBackward(edges)
    node.key, node.label = key, label
    return record(node, out, g.device)


# ---- t[index] ----

class IndexBackward0(Node):
    """``t[key]`` with an advanced key: the gradient is scatter-added into zeros."""

    __slots__ = ("in_shape", "key")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (index_scatter_add(grads[0], self.in_shape, self.key, False,
                                  "IndexPutImplBackward0"),)


class BasicIndexBackward(Node):
    """``t[key]`` with a basic key (the result is a view).

    Named as PyTorch names the last step of the index: ``SelectBackward0``
    (an int), ``SliceBackward0``, ``UnsqueezeBackward0`` (None) or ``AliasBackward0``.
    """

    __slots__ = ("in_shape", "key", "label")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        label = self.label[:-1] + "Backward0"  # SelectBackward0 -> SelectBackwardBackward0
        return (index_scatter_add(grads[0], self.in_shape, self.key, True, label),)

    def name(self) -> str:
        return self.label


def getitem(t: Tensor, index: Any) -> Tensor:
    """``t[index]``: a view for basic indexes, a copy for advanced ones (NumPy's rules)."""
    key, basic = _key(t, index)
    data = t.data[key]
    edges = edges_of(t)
    if edges is None:
        out = plain(data, t.device)
    elif basic:
        node = BasicIndexBackward(edges)
        node.in_shape, node.key, node.label = t.shape, key, _basic_name(index, key)
        out = record(node, data, t.device)
    else:
        node = IndexBackward0(edges)
        node.in_shape, node.key = t.shape, _saved_key(key)
        out = record(node, data, t.device)
    return as_view(out, t) if basic else out


# ---- t[index] = value ----

class IndexPutBackward0(Node):
    """``t[key] = value``: t's old value gets the gradient with zeros at ``key``; ``value``
    gets the gradient at ``key`` (the engine sums it to value's shape).

    Named ``CopySlices`` for a basic key, as PyTorch does.
    """

    __slots__ = ("key", "basic", "value_ndim")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        edges = self.next_edges
        g_old = None
        if edges[0] is not None:
            mask = _dual.xp_of(g).zeros(g.shape, dtype=bool)
            mask[self.key] = True
            g_old = _dual.where(mask, 0.0, g)
        if len(edges) == 1:
            return (g_old,)
        g_value = None
        if edges[1] is not None:
            g_value = g[self.key]
            extra = self.value_ndim - g_value.ndim  # NumPy drops leading 1s of the value
            if extra > 0:
                g_value = _dual.reshape(g_value, (1,) * extra + tuple(g_value.shape))
        return (g_old, g_value)

    def name(self) -> str:
        return "CopySlices" if self.basic else "IndexPutBackward0"


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` in place. See Note [In-place ops]."""
    key, basic = _key(t, index)
    if isinstance(value, (list, tuple)):
        value = tensor(value, dtype=t.dtype, device=t.device)
    value = scalar_or_tensor(value, t)
    if type(value) is Tensor:
        check_same_device(t, value)
        edges = edges_of(t, value)
    else:
        edges = edges_of(t)
    check_inplace(t, edges)
    try:
        t.data[key] = _dual.raw(value)
    except ValueError as exc:
        shape = list(getattr(value, "shape", ()))
        raise RuntimeError(
            f"shape mismatch: value of shape {shape} cannot be broadcast to the indexed part "
            f"of a tensor of shape {list(t.shape)} ({exc})"
        ) from None
    node = None
    if edges is not None:
        node = IndexPutBackward0(edges)
        node.key, node.basic = _saved_key(key), basic
        node.value_ndim = value.ndim if type(value) is Tensor else 0
    commit_inplace(t, node)


# ---- Tensor methods ----

Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
