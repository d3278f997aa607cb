"""Indexing: ``t[index]`` (basic and advanced), ``t[index] = value``, ``gather``,
``index_select``, ``masked_fill`` and ``nonzero``.

Note [Index keys]
    An index is normalised once into a *key*: a tuple of ints, slices (of
    ints), None, Ellipsis, Python bools and integer/boolean arrays on the
    indexed tensor's device (aiograd tensors, NumPy arrays and lists become
    arrays). A key without arrays or bools is *basic*: the result is a view
    (see Note [Views share the version counter]) and the key ends with an
    Ellipsis, so NumPy returns a 0-d array, not a scalar, when every dim is
    indexed by an int. A node keeps a copy of the key's arrays, so changing
    an index array after the forward does not change the backward. A 0-d
    integer tensor is an int (PyTorch's rule); a 0-d bool tensor is a mask.

    A key with both ints and arrays is applied in two steps, as PyTorch
    does: first its basic part (a view: the ints select, the other items
    keep their dims), then its arrays on that view. NumPy would instead
    treat the ints as arrays and, when a slice separates them from the
    arrays, put the indexed dims first: ``a[0, :, [1, 3]]`` of a (2, 3, 4)
    tensor is (3, 2) in PyTorch and here, (2, 3) in NumPy.

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

from .._tensor import Tensor, checked_fill, cpp_type_name, tensor
from ..devices import CPU, Device
from ..graph._node import Node
from . import _dual
from ._index_scatter import index_scatter_add
from ._record import check_same_device, edges_of, plain, record, scalar_or_tensor, tensor_arg
from ._rule import Rule, RuleNode
from .inplace import check_inplace, commit_inplace
from .shape import wrap_dim
from .views import as_view

__all__ = ["getitem", "setitem", "gather", "index_select", "masked_fill",
           "masked_fill_", "nonzero"]


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
    if isinstance(item, Tensor) and item.data.ndim == 0 and item.data.dtype.kind in "iu" \
            and item.data.dtype != numpy.uint8:  # an int, as in PyTorch (uint8 is a mask)
        return int(item.data.item()), True
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


def _has_int(key: tuple[Any, ...]) -> bool:
    for k in key:
        if type(k) is int:
            return True
    return False


def _split_key(key: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """An advanced key with ints as PyTorch applies it: (basic part, the rest on its result).

    The basic part keeps the ints, slices, None and Ellipsis and puts full slices
    where the arrays are (a mask covers ``mask.ndim`` dims, a Python bool none);
    the rest keeps the arrays and bools, with full slices for the dims the basic
    part kept or added. See Note [Index keys].
    """
    first: list[Any] = []
    rest: list[Any] = []
    for k in key:
        if type(k) is int:
            first.append(k)
        elif k is None or isinstance(k, slice):
            first.append(k)
            rest.append(slice(None))
        elif k is Ellipsis:
            first.append(k)
            rest.append(k)
        elif type(k) is bool:
            rest.append(k)
        else:
            first.extend([slice(None)] * (k.ndim if k.dtype == bool else 1))
            rest.append(k)
    if not any(k is Ellipsis for k in first):
        first.append(Ellipsis)
    return tuple(first), tuple(rest)


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


# ---- t[index] ----

IndexBackward0 = Rule(
    "IndexBackward0",
    lambda g, in_shape, key: index_scatter_add(g, in_shape, key, False, "IndexPutImplBackward0"),
    keeps=("in_shape", "key"),
    doc="``t[key]`` with an advanced key: the gradient is scatter-added into zeros.")


def _basic_index_rule(name: str) -> Rule:
    """The rule of ``t[key]`` for a basic key (the result is a view) whose last step is
    named ``name``; its gradient's node is ``SelectBackwardBackward0`` (for ``name``
    ``SelectBackward0``) and so on."""
    label = name[:-1] + "Backward0"

    def grad(g: Any, in_shape: tuple[int, ...], key: tuple[Any, ...]) -> Any:
        return index_scatter_add(g, in_shape, key, True, label)

    return Rule(name, grad, keeps=("in_shape", "key"), variant="index",
                doc=f"``t[key]`` for a basic key whose last step is PyTorch's {name}.")


# A basic index's rule, by PyTorch's name of its last step (see _basic_name).
_BASIC_INDEX = {name: _basic_index_rule(name) for name in (
    "SelectBackward0", "SliceBackward0", "UnsqueezeBackward0", "AliasBackward0")}


def getitem(t: Tensor, index: Any) -> Tensor:
    """``t[index]``: a view for basic indexes, a copy for advanced ones (PyTorch's order of
    dims: see Note [Index keys])."""
    key, basic = _key(t, index)
    if not basic:
        return _advanced_index(t, key)
    data = t.data[key]
    edges = edges_of(t)
    if edges is None:
        return as_view(plain(data, t.device), t)
    node = _BASIC_INDEX[_basic_name(index, key)].make(edges, (), (t.shape, key))
    return as_view(record(node, data, t.device), t)


def _advanced_index(t: Tensor, key: tuple[Any, ...]) -> Tensor:
    """``t[key]`` for an advanced key: a copy."""
    if _has_int(key):
        first, key = _split_key(key)
        t = getitem(t, first)  # a view
    data = t.data[key]
    edges = edges_of(t)
    if edges is None:
        return plain(data, t.device)
    return record(IndexBackward0.make(edges, (), (t.shape, _saved_key(key))), data, t.device)


# ---- t[index] = value (trickier grads: a number value has no edge) ----

def _index_put_grad(node: RuleNode, grads: list[Any], create_graph: bool, key: tuple[Any, ...],
                    value_ndim: int) -> Any:
    """t's old value gets the gradient with zeros at ``key``; a tensor value gets the
    gradient at ``key`` (the engine sums it to value's shape)."""
    g = grads[0]
    edges = node.next_edges
    g_old = None
    if edges[0] is not None:
        mask = _dual.xp_of(g).zeros(g.shape, dtype=bool)
        mask[key] = True
        g_old = _dual.where(mask, 0.0, g)
    if len(edges) == 1:
        return (g_old,)
    g_value = None
    if edges[1] is not None:
        g_value = g[key]
        extra = value_ndim - g_value.ndim  # NumPy drops leading 1s of the value
        if extra > 0:
            g_value = _dual.reshape(g_value, (1,) * extra + tuple(g_value.shape))
    return (g_old, g_value)


IndexPutBackward0 = Rule("IndexPutBackward0", whole=_index_put_grad, keeps=("key", "value_ndim"),
                         doc="``t[key] = value`` for an advanced key.")
# Named as PyTorch names the write of a basic key (into a view of t).
IndexPutBasicBackward0 = Rule("CopySlices", whole=_index_put_grad, keeps=("key", "value_ndim"),
                              variant="basic key", doc="``t[key] = value`` for a basic key.")


def setitem(t: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` in place. See Note [In-place ops].

    A key with ints and arrays writes through the view of its basic part (see
    Note [Index keys]); a value written into an integer or bool tensor records
    nothing (such tensors cannot require grad).
    """
    key, basic = _key(t, index)
    if not basic and _has_int(key):
        first, key = _split_key(key)
        t = getitem(t, first)  # a view
    if isinstance(value, (list, tuple)):
        value = tensor(value, dtype=t.dtype, device=t.device)
    value = scalar_or_tensor(value, t)
    if type(value) is Tensor:
        check_same_device(t, value)
        edges = edges_of(t, value) if t.data.dtype.kind == "f" else None
    else:
        edges = edges_of(t)
    check_inplace(t, edges)
    try:
        t.data[key] = _dual.raw(value) if type(value) is Tensor else checked_fill(value, t.dtype)
    except ValueError as exc:
        shape = list(getattr(value, "shape", ()))
        raise RuntimeError(
            f"shape mismatch: value of shape {shape} cannot be broadcast to the indexed part "
            f"of a tensor of shape {list(t.shape)} ({exc})"
        ) from None
    node = None
    if edges is not None:
        rule = IndexPutBasicBackward0 if basic else IndexPutBackward0
        node = rule.make(edges, (), (_saved_key(key), value.ndim if type(value) is Tensor else 0))
    commit_inplace(t, node)


# ---- gather / index_select ----

def _index_tensor(t: Tensor, index: Any, what: str, kinds: str) -> Any:
    """The array of an index tensor of ``t`` (same device), checked to be an int32/int64."""
    check_same_device(t, tensor_arg(index, what, "index", 2))
    data = index.data
    if data.dtype not in (numpy.int32, numpy.int64):
        raise RuntimeError(f"{what}(): Expected dtype {kinds} for index")
    return data


def _gather_grad(g: Any, in_shape: tuple[int, ...], src_shape: tuple[int, ...],
                 out_shape: tuple[int, ...], key: tuple[Any, ...]) -> Any:
    if g.shape != out_shape:
        g = _dual.reshape(g, out_shape)
    g = index_scatter_add(g, src_shape, key, False, "ScatterAddBackward0")
    return g if src_shape == in_shape else _dual.reshape(g, in_shape)


GatherBackward0 = Rule(
    "GatherBackward0", _gather_grad, keeps=("in_shape", "src_shape", "out_shape", "key"),
    doc="``t.gather(dim, index)`` is ``t[key]`` for a broadcast key (aranges, ``index`` at "
        "dim): the gradient is scatter-added there. ``src_shape``/``out_shape``: the input's "
        "and the index's shapes, 0-d ones as (1,).")


def _check_bounds(index: Any, size: int, dim: int, message: str | None) -> None:
    """Raise unless every element of ``index`` is in ``range(size)`` (no negative indices)."""
    if index.size == 0:
        return
    bad = (index < 0) | (index >= size)
    if bad.any():
        if message is not None:
            raise IndexError(message)
        value = int(index[bad].ravel()[0])
        raise RuntimeError(f"index {value} is out of bounds for dimension {dim} with size {size}")


def along_dim_key(idx: Any, d: int, device: Device) -> tuple[Any, ...]:
    """The advanced key that picks, in every slice along ``d``, the positions ``idx`` (a
    0-d one as 1-d): ``x[key]`` is ``take_along_axis(x, idx, d)``. ``idx`` (an int64 copy)
    at ``d``, aranges on ``device`` over its other dims, shaped to broadcast against it."""
    shape = idx.shape if idx.ndim else (1,)
    ndim = len(shape)
    return tuple(
        idx.reshape(shape).astype(numpy.int64) if i == d
        else device.backend.from_host(
            numpy.arange(n).reshape((1,) * i + (n,) + (1,) * (ndim - i - 1)), device.index)
        for i, n in enumerate(shape)
    )


def gather(t: Tensor, dim: int, index: Tensor) -> Tensor:
    """``out[i][j] = t[index[i][j]][j]`` (for dim 0): values along ``dim`` picked by ``index``,
    which has ``t``'s number of dims and is no larger than ``t`` in the other dims."""
    idx = _index_tensor(t, index, "gather", "int32/int64")
    ndim = max(t.ndim, 1)
    d = wrap_dim(dim, t.ndim)
    if max(idx.ndim, 1) != ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    src_shape = t.shape if t.ndim else (1,)
    out_shape = idx.shape if idx.ndim else (1,)
    for i, (n, m) in enumerate(zip(out_shape, src_shape)):
        if i != d and n > m:
            raise RuntimeError(
                f"Size does not match at dimension {i} expected index {list(idx.shape)} to be "
                f"no larger than self {list(t.shape)} apart from dimension {d}"
            )
    _check_bounds(idx, src_shape[d], d, None)
    key = along_dim_key(idx, d, t.device)
    data = t.data.reshape(src_shape)[key].reshape(idx.shape)
    edges = edges_of(t)
    if edges is None:
        return plain(data, t.device)
    node = GatherBackward0.make(edges, (), (t.shape, src_shape, out_shape, key))
    return record(node, data, t.device)


def _index_select_grad(g: Any, in_shape: tuple[int, ...], src_shape: tuple[int, ...],
                       key: tuple[Any, ...]) -> Any:
    if src_shape != in_shape:  # a 0-d input
        g = _dual.reshape(g, (1,))
    g = index_scatter_add(g, src_shape, key, False, "IndexAddBackward0")
    return g if src_shape == in_shape else _dual.reshape(g, in_shape)


IndexSelectBackward0 = Rule(
    "IndexSelectBackward0", _index_select_grad, keeps=("in_shape", "src_shape", "key"),
    doc="``t.index_select(dim, index)``: the gradient is index-added along ``dim`` "
        "(``src_shape``: the input's shape, (1,) for a 0-d input).")


def index_select(t: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries of ``t`` at the positions ``index`` (a vector) along ``dim`` (a copy)."""
    idx = _index_tensor(t, index, "index_select", "int32 or int64")
    if idx.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = wrap_dim(dim, t.ndim)
    if t.ndim == 0 and idx.size != 1:
        raise RuntimeError(
            f"index_select(): Index to scalar can have only 1 value, got {idx.size} value(s)"
        )
    src_shape = t.shape if t.ndim else (1,)
    _check_bounds(idx, src_shape[d], d, "index out of range in self")
    idx = idx.reshape(-1).astype(numpy.int64)
    data = t.device.xp.take(t.data.reshape(src_shape), idx, axis=d)
    if not t.ndim:
        data = data.reshape(())
    edges = edges_of(t)
    if edges is None:
        return plain(data, t.device)
    node = IndexSelectBackward0.make(edges, (), (t.shape, src_shape, (slice(None),) * d + (idx,)))
    return record(node, data, t.device)


# ---- masked_fill ----

def _zero_where(mask: Any, g: Any) -> Any:
    """``g`` with zeros where ``mask``; a Tensor ``g`` records ``masked_fill`` (PyTorch's)."""
    if type(g) is Tensor:
        return masked_fill(g, Tensor._wrap(mask, g.device), 0.0)
    return _dual.xp_of(g).where(mask, 0.0, g)


MaskedFillBackward0 = Rule(
    "MaskedFillBackward0", lambda g, mask: _zero_where(mask, g), keeps=("mask",),
    doc="``t.masked_fill(mask, number)``: the gradient passes where ``mask`` is False.")
MaskedFillBackward1 = Rule(
    "MaskedFillBackward1", lambda g, mask: _zero_where(mask, g),
    lambda g, mask: _zero_where(~mask, g), keeps=("mask",),
    doc="``t.masked_fill(mask, value)`` with a 0-d tensor ``value``: it gets the gradient "
        "where ``mask`` is True (summed by the engine, Note [Broadcast gradients]).")


def _mask_and_value(t: Tensor, mask: Tensor, value: Any) -> tuple[Any, Any, Tensor | None]:
    """Checked ``masked_fill`` arguments: the mask's array, the value as a 0-d array or a
    NumPy scalar of ``t``'s dtype, and the value tensor (None for a number)."""
    check_same_device(t, tensor_arg(mask, "masked_fill", "mask", 1))
    if mask.data.dtype != numpy.bool_:
        dtype = cpp_type_name(mask.data.dtype)
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {dtype}"
        )
    dtype = t.data.dtype
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                f"with {value.ndim} dimension(s)."
            )
        if value.device is t.device:
            return mask.data, value.data.astype(dtype), value
        return mask.data, dtype.type(value.item()), value
    if not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise TypeError(
            f"masked_fill(): argument 'value' must be a Number or a 0-d Tensor, not "
            f"{type(value).__name__}"
        )
    return mask.data, dtype.type(checked_fill(value, dtype)), None


def _broadcast_error(a: tuple[int, ...], b: tuple[int, ...]) -> RuntimeError:
    """PyTorch's error for shapes ``a`` and ``b`` that do not broadcast."""
    n = max(len(a), len(b))
    for i in range(n - 1, -1, -1):
        x = a[i - n + len(a)] if i - n + len(a) >= 0 else 1
        y = b[i - n + len(b)] if i - n + len(b) >= 0 else 1
        if x != y and x != 1 and y != 1:
            break
    return RuntimeError(
        f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
        f"dimension {i}"
    )


def _masked_fill_node(t: Tensor, mask: Any, value: Tensor | None) -> Node | None:
    edges = edges_of(t, value) if value is not None else edges_of(t)
    if edges is None or t.data.dtype.kind != "f":
        return None
    rule = MaskedFillBackward0 if len(edges) == 1 else MaskedFillBackward1
    return rule.make(edges, (), (mask.copy(),))  # the caller may change its mask afterwards


def masked_fill(t: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``t`` with ``value`` (a number or a 0-d tensor) where the bool ``mask`` is True;
    ``t`` and ``mask`` broadcast together."""
    m, v, value_t = _mask_and_value(t, mask, value)
    try:
        data = _dual.contiguous(t.device.xp.where(m, v, t.data))
    except ValueError:
        raise _broadcast_error(m.shape, t.shape) from None
    node = _masked_fill_node(t, m, value_t)
    return plain(data, t.device) if node is None else record(node, data, t.device)


def masked_fill_(t: Tensor, mask: Tensor, value: Any) -> Tensor:
    """:func:`masked_fill` in place; ``mask`` must broadcast to ``t``'s shape."""
    m, v, value_t = _mask_and_value(t, mask, value)
    try:
        shape = numpy.broadcast_shapes(t.shape, m.shape)
    except ValueError:
        raise _broadcast_error(m.shape, t.shape) from None
    if shape != t.shape:
        raise RuntimeError(
            f"output with shape {list(t.shape)} doesn't match the broadcast shape {list(shape)}"
        )
    node = _masked_fill_node(t, m, value_t)
    check_inplace(t, None if node is None else node.next_edges)
    t.device.xp.copyto(t.data, v, where=m)
    return commit_inplace(t, node)


# ---- nonzero ----

def nonzero(t: Tensor, *, as_tuple: bool = False) -> Any:
    """The indices of the nonzero elements: an int64 (count, ndim) tensor, or with
    ``as_tuple`` one int64 vector per dim (a 0-d ``t`` counts as 1-d). Not differentiable."""
    xp = t.device.xp
    if as_tuple:
        return tuple(
            plain(i.astype(numpy.int64, copy=False), t.device)
            for i in xp.nonzero(t.data if t.ndim else t.data.reshape(1))
        )
    return plain(xp.argwhere(t.data).astype(numpy.int64, copy=False), t.device)
