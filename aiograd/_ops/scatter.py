"""Scatter-style writes and their reads: ``scatter``/``scatter_add`` (and in place),
``index_add``, ``index_copy``, ``index_fill`` (and in place), ``masked_select``,
``masked_scatter`` (and in place) and ``take``.

Note [Scatter keys]
    ``scatter(t, d, index, src)`` writes ``t[key] = src[:index.shape]``, where
    ``key`` is ``index`` at dim ``d`` and broadcast aranges over the index's
    shape elsewhere (gather's key: ``t.gather(d, index)`` is ``t[key]``). The
    ``index_*`` ops write whole slices: their key is ``index`` (a vector) at
    ``d`` after full slices. A 0-d tensor is written as a 1-d one of one element
    (``_nonempty``), as PyTorch treats it. ``scatter_add`` and ``index_add``
    accumulate repeated positions (``add.at``); ``scatter`` and ``index_copy``
    with repeated positions keep the last value written (PyTorch leaves it
    undefined).

Each backward formula runs on arrays through the key and, under ``create_graph``,
on Tensors through the differentiable ops PyTorch's formula uses (``gather``,
``scatter(g, d, index, 0)``, ``index_select``, ``index_fill``, ``masked_fill``,
...), so every order of gradient records PyTorch's nodes. Nodes keep their own
copies of index and mask arrays: changing them after the forward changes nothing.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy

from .._tensor import Tensor, checked_fill, scalar_type_name
from ..graph._node import Node
from . import _dual
from ._index_scatter import index_scatter_add
from ._record import check_same_device, edges_of, plain, record, tensor_arg
from ._rule import Rule, identity
from .indexing import (
    _broadcast_error,
    _check_bounds,
    _index_tensor,
    _zero_where,
    along_dim_key,
    gather,
    index_select,
)
from .inplace import check_inplace, commit_inplace
from .shape import wrap_dim

__all__ = ["scatter", "scatter_", "scatter_add", "scatter_add_", "index_add", "index_add_",
           "index_copy", "index_copy_", "index_fill", "index_fill_", "masked_select",
           "masked_scatter", "masked_scatter_", "take"]


# ---- shared helpers ----

def _nonempty(a: Any) -> Any:
    """The array ``a``, a 0-d one as a 1-d view of its one element (PyTorch's rule)."""
    return a if a.ndim else a[None]


def _shape_or_one(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape if shape else (1,)


def _own_index(t: Tensor, idx: Any) -> Tensor:
    """A tensor holding a copy of the index array ``idx``, for a node to keep."""
    return Tensor._wrap(idx.copy(), t.device)


def _wrapped_index(idx: Any, size: int, error: Callable[[int], Exception]) -> Any:
    """``idx`` with negative entries counted from the end (as int64); raises
    ``error(value)`` for the first entry outside ``[-size, size)``."""
    if idx.size:
        bad = (idx < -size) | (idx >= size)
        if bad.any():
            raise error(int(idx[bad].ravel()[0]))
    idx = idx.astype(numpy.int64)
    return _dual.xp_of(idx).where(idx < 0, idx + size, idx)


def _zeroed(g: Any, key: tuple[Any, ...] | None) -> Any:
    """An array copy of ``g`` (which may be a NumPy scalar) with zeros at ``key`` (None:
    nowhere)."""
    out = _dual.xp_of(g).array(g)
    if key is not None:
        _nonempty(out)[key] = 0
    return out


def _slice_key(d: int, idx: Any) -> tuple[Any, ...]:
    """The key of the ``index_*`` ops: full slices, then ``idx`` (a vector) at dim ``d``."""
    return (slice(None),) * d + (idx,)


def _check_dtype(t: Tensor, other: Tensor, message: str) -> None:
    check_same_device(t, other)
    if other.data.dtype != t.data.dtype:
        raise RuntimeError(message)


def _write(t: Tensor, out_of_place: bool, node: Node | None, write: Callable[[Any], None],
           base: Any = None) -> Tensor:
    """Apply ``write`` (which writes an array in place) to a copy of ``t`` (or of ``base``,
    t's array broadcast) recorded with ``node``, or to ``t`` itself through the in-place
    machinery (Note [In-place ops])."""
    if out_of_place:
        data = (t.data if base is None else base).copy()
        write(data)
        return plain(data, t.device) if node is None else record(node, data, t.device)
    check_inplace(t, None if node is None else node.next_edges)
    write(t.data)
    return commit_inplace(t, node)


def _fill_value(t: Tensor, value: Any, fn: str) -> tuple[Any, Tensor | None]:
    """A fill value (a number or a 0-d tensor) as (the value to write, the tensor or None)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                f"{fn} only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.ndim} dimension(s)."
            )
        if value.device is t.device:
            return value.data.astype(t.data.dtype), value
        return t.data.dtype.type(value.item()), value  # a 0-d value may be on another device
    if not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise TypeError(f"{fn}(): argument 'value' must be a Number or a 0-d Tensor, not "
                        f"{type(value).__name__}")
    return checked_fill(value, t.data.dtype), None


# ---- scatter / scatter_add (trickier grads: see Note [Scatter keys]) ----

def _scatter_zeroed(g: Any, dim: int, index: Tensor, key: tuple[Any, ...] | None) -> Any:
    """``g.scatter(dim, index, 0)``: g with zeros where the scatter wrote (``key``: the
    array key, None for an empty index)."""
    if type(g) is Tensor:
        return scatter(g, dim, index, value=0)
    return _zeroed(g, key)


def _scatter_gathered(g: Any, dim: int, index: Tensor, key: tuple[Any, ...] | None) -> Any:
    """``g.gather(dim, index)``: the gradient of the written values."""
    if type(g) is Tensor:
        return gather(g, dim, index)
    if key is None:
        return _dual.xp_of(g).zeros(index.shape, dtype=g.dtype)
    return _nonempty(g)[key].reshape(index.shape)


_SCATTER_KEEPS = ("dim", "index", "key")
ScatterBackward0 = Rule(
    "ScatterBackward0", _scatter_zeroed, _scatter_gathered, keeps=_SCATTER_KEEPS,
    doc="``t.scatter(dim, index, src)``: t gets g with zeros where src went; src gets g "
        "gathered at index (of index's shape: a larger src fails in the engine, as in "
        "PyTorch).")
ScatterBackward1 = Rule(
    "ScatterBackward1", _scatter_zeroed, keeps=_SCATTER_KEEPS,
    doc="``t.scatter(dim, index, value)``: t gets g with zeros where the value went.")
ScatterAddBackward0 = Rule(
    "ScatterAddBackward0", identity, _scatter_gathered, keeps=_SCATTER_KEEPS,
    doc="``t.scatter_add(dim, index, src)``: t gets g; src gets g gathered at index.")


def _check_scatter_shapes(t: Tensor, d: int, idx: Any, src: Tensor | None) -> None:
    """PyTorch's ``scatter_shape_check`` for a non-empty index: index has self's number of
    dims and is no larger than self (but at ``d``) and than src (everywhere)."""
    ndim = max(t.ndim, 1)
    if max(idx.ndim, 1) != ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    ishape, sshape = _shape_or_one(idx.shape), _shape_or_one(t.shape)
    wrong = any(ishape[i] > sshape[i] for i in range(ndim) if i != d)
    if src is not None:
        if not wrong:
            for i in range(ndim):  # src.size(i) raises for a src with fewer dims, as in PyTorch
                size = src.shape[wrap_dim(i, src.ndim)] if src.ndim else 1
                if ishape[i] > size:
                    wrong = True
                    break
        if max(src.ndim, 1) != ndim:
            raise RuntimeError("Index tensor must have the same number of dimensions as src "
                               "tensor")
    if wrong:
        tail = "" if src is None else f" and to be no larger size than src {list(src.shape)}"
        raise RuntimeError(
            f"Expected index {list(idx.shape)} to be no larger than self {list(t.shape)} apart "
            f"from dimension {d}{tail}"
        )


def _scatter_args(fn: str, t: Tensor, dim: int, index: Any, src: Tensor | None
                  ) -> tuple[int, Any, tuple[Any, ...] | None]:
    """Checked scatter arguments, in PyTorch's order: (the dim, the index array, the key or
    None for an empty index)."""
    tensor_arg(index, fn, "index", 2)
    d = wrap_dim(dim, t.ndim)
    idx = _index_tensor(t, index, "scatter", "int32/int64")
    if src is not None:
        _check_dtype(t, src, "scatter(): Expected self.dtype to be equal to src.dtype")
    if idx.size == 0:
        return d, idx, None
    _check_scatter_shapes(t, d, idx, src)
    _check_bounds(idx, _shape_or_one(t.shape)[d], d, None)
    return d, idx, along_dim_key(idx, d, t.device)


def _src_or_value(fn: str, src: Any, value: Any) -> tuple[Tensor | None, Any]:
    """scatter's third argument as (src tensor, None) or (None, number)."""
    if (src is None) == (value is None):
        raise TypeError(f"{fn}() needs exactly one of 'src' (a Tensor) and 'value' (a Number)")
    given = value if src is None else src
    if isinstance(given, Tensor):
        if src is not None:
            return given, None
        if given.ndim == 0:  # a 0-d tensor value is a number, as in PyTorch
            return None, given.item()
    if isinstance(given, numbers.Number) and not isinstance(given, complex):
        return None, given
    name = "value" if src is None else "src"
    raise TypeError(f"{fn}(): argument '{name}' must be Tensor or Number, not "
                    f"{type(given).__name__}")


def _scatter(fn: str, t: Tensor, dim: int, index: Any, src: Any, value: Any,
             accumulate: bool, out_of_place: bool) -> Tensor:
    """scatter, scatter_add and their in-place forms."""
    src_t: Tensor | None
    if accumulate:
        src_t, number = tensor_arg(src, fn, "src", 3), None
    else:
        src_t, number = _src_or_value(fn, src, value)
    d, idx, key = _scatter_args(fn, t, dim, index, src_t)
    fill = None if src_t is not None else checked_fill(number, t.data.dtype)
    edges = edges_of(t) if src_t is None else edges_of(t, src_t)
    node = None
    if edges is not None:
        rule = (ScatterAddBackward0 if accumulate
                else ScatterBackward1 if src_t is None else ScatterBackward0)
        node = rule.make(edges, (), (d, _own_index(t, idx), key))

    def write(data: Any) -> None:
        if key is None:
            return
        values = fill if src_t is None else _nonempty(src_t.data)[
            tuple(slice(0, n) for n in _shape_or_one(idx.shape))]
        if accumulate:
            t.device.xp.add.at(_nonempty(data), key, values)
        else:
            _nonempty(data)[key] = values

    return _write(t, out_of_place, node, write)


def scatter(t: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None
            ) -> Tensor:
    """A copy of ``t`` with ``src[i][j]`` written at ``[index[i][j]][j]`` (for dim 0), or
    the number ``value`` at those positions. ``index`` (int64/int32) has t's number of dims
    and is no larger than ``src`` and (but at ``dim``) ``t``; see Note [Scatter keys]."""
    return _scatter("scatter", t, dim, index, src, value, False, True)


def scatter_(t: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None
             ) -> Tensor:
    """:func:`scatter` in place."""
    return _scatter("scatter_", t, dim, index, src, value, False, False)


def scatter_add(t: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """:func:`scatter` that adds ``src`` instead of writing it: repeated indices accumulate."""
    return _scatter("scatter_add", t, dim, index, src, None, True, True)


def scatter_add_(t: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """:func:`scatter_add` in place."""
    return _scatter("scatter_add_", t, dim, index, src, None, True, False)


# ---- index_add / index_copy (trickier grads: their key is _slice_key's) ----

def _slices_picked(g: Any, dim: int, index: Tensor, key: tuple[Any, ...]) -> Any:
    """``g.index_select(dim, index)`` (through ``key`` for an array)."""
    if type(g) is Tensor:
        return index_select(g, dim, index)
    return _dual.xp_of(g).take(_nonempty(g), key[-1], axis=dim)


def _slices_zeroed(g: Any, dim: int, index: Tensor, key: tuple[Any, ...]) -> Any:
    """``g.index_fill(dim, index, 0)`` (through ``key`` for an array)."""
    if type(g) is Tensor:
        return index_fill(g, dim, index, 0)
    return _zeroed(g, key)


def _slices_selected(g: Any, dim: int, index: Tensor, key: tuple[Any, ...],
                     source_shape: tuple[int, ...]) -> Any:
    """``g.index_select(dim, index)`` shaped like the source: the source's gradient."""
    picked = _slices_picked(g, dim, index, key)
    if tuple(picked.shape) != source_shape:
        picked = _dual.reshape(picked, source_shape)
    return picked


def _times(g: Any, scalar: Any) -> Any:
    """``g * scalar``; a Tensor ``g`` records :data:`MulBackward1`."""
    if type(g) is not Tensor:
        return g * scalar
    return MulBackward1.record((g,), g.data * scalar, g.device, keeps=(scalar,))


MulBackward1 = Rule(
    "MulBackward1", _times, keeps=("scalar",),
    doc="``g * scalar`` as PyTorch's ``mul(Tensor, Scalar)`` records it (index_add's alpha).")


def _index_add_grad_source(g: Any, dim: int, index: Tensor, key: tuple[Any, ...],
                           source_shape: tuple[int, ...], alpha: Any) -> Any:
    picked = _slices_selected(g, dim, index, key, source_shape)
    return picked if alpha == 1 else _times(picked, alpha)


# The index_* nodes keep the dim, the index (a Tensor), its array key and the source's shape.
_SLICE_KEEPS = ("dim", "index", "key", "source_shape")
IndexAddBackward0 = Rule(
    "IndexAddBackward0", identity, _index_add_grad_source, keeps=_SLICE_KEEPS + ("alpha",),
    doc="``t.index_add(dim, index, source, alpha)``: t gets g; source gets ``alpha`` times g "
        "at the indexed slices.")
IndexCopyBackward0 = Rule(
    "IndexCopyBackward0",
    lambda g, dim, index, key, source_shape: _slices_zeroed(g, dim, index, key),
    _slices_selected, keeps=_SLICE_KEEPS,
    doc="``t.index_copy(dim, index, source)``: t gets g with zeros in the indexed slices "
        "(``g.index_fill(dim, index, 0)``); source gets g at those slices.")


def _source_values(t: Tensor, source: Tensor, d: int, count: int) -> Any:
    """The source's array shaped as the slices it writes: t's shape with ``count`` at ``d``."""
    shape = list(_shape_or_one(t.shape))
    shape[d] = count
    return source.data.reshape(shape)


def _index_add_args(t: Tensor, dim: int, index: Any, source: Any) -> tuple[int, Any]:
    """Checked index_add arguments, in PyTorch's order: (the dim, the int64 index vector)."""
    tensor_arg(index, "index_add", "index", 2)
    tensor_arg(source, "index_add", "source", 3)
    check_same_device(t, index)
    d = wrap_dim(dim, t.ndim)
    if index.ndim > 1:
        raise IndexError(
            f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with "
            f"type: {scalar_type_name(index.dtype)} and size: {list(index.shape)}"
        )
    if index.data.dtype not in (numpy.int32, numpy.int64):
        raise RuntimeError("index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{scalar_type_name(index.dtype)}")
    _check_dtype(t, source, f"index_add_(): self ({scalar_type_name(t.dtype)}) and source "
                            f"({scalar_type_name(source.dtype)}) must have the same scalar type")
    if d != 0 and d >= source.ndim:
        raise RuntimeError(f"index_add_(): Indexing dim {d} is out of bounds of the source "
                           f"tensor with dim {source.ndim}")
    count = index.data.size
    if count != (source.shape[d] if source.ndim else 1):
        if not source.ndim:  # PyTorch's message asks for source.size(dim)
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
        raise RuntimeError(f"index_add_(): Number of indices ({count}) should be equal to "
                           f"source.size(dim): ({source.shape[d]}), for dim: {d}")
    self_rest, source_rest = list(t.shape), list(source.shape)
    if t.ndim and source.ndim:
        del self_rest[d], source_rest[d]
    if self_rest != source_rest:
        raise RuntimeError(
            "source tensor shape must match self tensor shape, excluding the specified "
            f"dimension. Got self.shape = {list(t.shape)} source.shape = {list(source.shape)}"
        )
    idx = index.data.reshape(-1)
    _check_bounds(idx, _shape_or_one(t.shape)[d], d, None)
    return d, idx.astype(numpy.int64)


def _index_add(t: Tensor, dim: int, index: Tensor, source: Tensor, alpha: Any,
               out_of_place: bool) -> Tensor:
    d, idx = _index_add_args(t, dim, index, source)
    key = _slice_key(d, idx)
    if t.data.dtype.kind in "biu":  # PyTorch converts alpha to the tensor's type
        alpha = t.data.dtype.type(checked_fill(alpha, t.data.dtype))
    edges = edges_of(t, source)
    node = None
    if edges is not None:
        node = IndexAddBackward0.make(edges, (), (d, _own_index(t, idx), key, source.shape, alpha))

    def write(data: Any) -> None:
        values = _source_values(t, source, d, idx.size)
        t.device.xp.add.at(_nonempty(data), key, values if alpha == 1 else values * alpha)

    return _write(t, out_of_place, node, write)


def index_add(t: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1
              ) -> Tensor:
    """A copy of ``t`` with ``alpha * source`` added to its slices ``index`` (a vector,
    int64/int32) along ``dim``; repeated indices accumulate. ``source`` has t's shape but
    ``len(index)`` at ``dim``."""
    return _index_add(t, dim, index, source, alpha, True)


def index_add_(t: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1
               ) -> Tensor:
    """:func:`index_add` in place."""
    return _index_add(t, dim, index, source, alpha, False)


def _index_copy_args(t: Tensor, dim: int, index: Any, source: Any) -> tuple[int, Any]:
    """Checked index_copy arguments, in PyTorch's order: (the dim, the index vector)."""
    tensor_arg(index, "index_copy", "index", 2)
    tensor_arg(source, "index_copy", "source", 3)
    check_same_device(t, index)
    d = wrap_dim(dim, t.ndim)
    if index.ndim >= 2:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    count = index.data.size
    if source.ndim == 0 and count != 1:
        raise IndexError("index_copy_(): When source is scalar, index should have one element "
                         f"(got {count})")
    if source.ndim != t.ndim and source.ndim and t.ndim:
        raise IndexError(
            "index_copy_(): When source and destination are not scalars, their dimensionality "
            f"must match. Source dimensionality ({source.ndim}), destination dimensionality "
            f"({t.ndim})"
        )
    if index.data.dtype != numpy.int64:
        raise RuntimeError("index_copy_(): Expected a long tensor for index, but got "
                           f"{scalar_type_name(index.dtype)}")
    _check_dtype(t, source, "index_copy_(): self and source expected to have the same dtype, "
                            f"but got (self) {scalar_type_name(t.dtype)} and (source) "
                            f"{scalar_type_name(source.dtype)}")
    self_rest = [n for i, n in enumerate(t.shape) if i != d]
    source_rest = [n for i, n in enumerate(source.shape) if i != d]
    if self_rest != source_rest:
        raise RuntimeError(
            "index_copy_(): Source/destination tensor must have same slice shapes. Destination "
            f"slice shape: {' '.join(map(str, self_rest))} at dimension {d} and source slice "
            f"shape: {' '.join(map(str, source_rest))} at dimension 0."
        )
    if source.ndim and count != source.shape[d]:
        raise IndexError(f"index_copy_(): Number of indices ({count}) should be equal to "
                         f"source.size(dim) ({source.shape[d]})")
    idx = index.data.reshape(-1)
    try:
        _check_bounds(idx, _shape_or_one(t.shape)[d], d, None)
    except RuntimeError as exc:
        raise IndexError(f"index_copy_(): {exc}") from None
    return d, idx


def _index_copy(t: Tensor, dim: int, index: Tensor, source: Tensor, out_of_place: bool
                ) -> Tensor:
    d, idx = _index_copy_args(t, dim, index, source)
    key = _slice_key(d, idx)
    edges = edges_of(t, source)
    node = None
    if edges is not None:
        node = IndexCopyBackward0.make(edges, (), (d, _own_index(t, idx), key, source.shape))

    def write(data: Any) -> None:
        _nonempty(data)[key] = _source_values(t, source, d, idx.size)

    return _write(t, out_of_place, node, write)


def index_copy(t: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of ``t`` with its slices ``index`` (an int64 vector) along ``dim`` replaced by
    those of ``source`` (t's shape but ``len(index)`` at ``dim``)."""
    return _index_copy(t, dim, index, source, True)


def index_copy_(t: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """:func:`index_copy` in place."""
    return _index_copy(t, dim, index, source, False)


# ---- index_fill ----

IndexFillBackward0 = Rule(
    "IndexFillBackward0", _slices_zeroed, keeps=("dim", "index", "key"),
    doc="``t.index_fill(dim, index, number)``: t gets g with zeros in the filled slices.")
IndexFillBackward1 = Rule(
    "IndexFillBackward1", _slices_zeroed,
    lambda g, dim, index, key: _dual.sum_dims(_slices_picked(g, dim, index, key), None),
    keeps=("dim", "index", "key"),
    doc="``t.index_fill(dim, index, value)`` with a 0-d tensor ``value``: it gets the sum of "
        "g over the filled slices, each counted once (``index`` holds unique entries here).")


def _index_fill(t: Tensor, dim: int, index: Any, value: Any, out_of_place: bool) -> Tensor:
    tensor_arg(index, "index_fill", "index", 2)
    fill, value_t = _fill_value(t, value, "index_fill_")
    check_same_device(t, index)
    if index.data.dtype != numpy.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    d = wrap_dim(dim, t.ndim)
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    size = _shape_or_one(t.shape)[d]
    idx = _wrapped_index(index.data.reshape(-1), size, lambda v: IndexError(
        f"index {v} is out of bounds for dimension {d} with size {size}"))
    edges = edges_of(t) if value_t is None else edges_of(t, value_t)
    node = None
    if edges is not None and t.data.dtype.kind == "f":
        rule = IndexFillBackward0 if value_t is None else IndexFillBackward1
        kept = idx if value_t is None else t.device.xp.unique(idx)
        node = rule.make(edges, (), (d, _own_index(t, kept), _slice_key(d, kept)))

    def write(data: Any) -> None:
        _nonempty(data)[_slice_key(d, idx)] = fill

    return _write(t, out_of_place, node, write)


def index_fill(t: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """A copy of ``t`` with ``value`` (a number or a 0-d tensor, cast to t's dtype) in its
    slices ``index`` (an int64 vector; negative entries count from the end) along ``dim``."""
    return _index_fill(t, dim, index, value, True)


def index_fill_(t: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """:func:`index_fill` in place."""
    return _index_fill(t, dim, index, value, False)


# ---- masked_select / masked_scatter ----

def _broadcast(t: Tensor, mask: Any) -> tuple[Any, Any]:
    """``t``'s array and ``mask`` broadcast together (read-only views)."""
    try:
        values, m = t.device.xp.broadcast_arrays(t.data, mask)
    except ValueError:
        raise _broadcast_error(mask.shape, t.shape) from None
    return values, m


MaskedSelectBackward0 = Rule(
    "MaskedSelectBackward0", lambda g, mask: _scattered_into_zeros(mask, g), keeps=("mask",),
    doc="``t.masked_select(mask)``: g goes back to the selected positions of zeros of the "
        "broadcast shape (``mask`` is broadcast; the engine sums to t's shape).")


def masked_select(t: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``t`` where the bool ``mask`` (broadcast with t) is True, as a new
    1-d tensor in row-major order."""
    check_same_device(t, tensor_arg(mask, "masked_select", "mask", 1))
    if mask.data.dtype != numpy.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    values, m = _broadcast(t, mask.data)
    data = values[m]
    edges = edges_of(t)
    if edges is None:
        return plain(data, t.device)
    return record(MaskedSelectBackward0.make(edges, (), (m.copy(),)), data, t.device)


def _scattered_into_zeros(mask: Any, values: Any) -> Any:
    """Zeros of ``mask``'s shape with the first ``mask.sum()`` of ``values`` where ``mask``:
    ``zeros.masked_scatter(mask, values)``."""
    zeros = _dual.zeros_of(values, mask.shape)
    if type(values) is Tensor:
        return masked_scatter(zeros, Tensor._wrap(mask, values.device), values)
    zeros[mask] = values.reshape(-1)[:int(mask.sum())]
    return zeros


# ---- trickier grads: masked_scatter ----

MaskedScatterBackwardBackward0 = Rule(
    "MaskedScatterBackwardBackward0", lambda g, mask: _scattered_into_zeros(mask, g),
    keeps=("mask",),
    doc=":func:`_masked_scatter_backward` of g: g gets the gradient's first ``mask.sum()`` "
        "elements where ``mask``, zeros elsewhere (``masked_select``'s formula).")


def _masked_scatter_backward(g: Any, mask: Any, source_shape: tuple[int, ...]) -> Any:
    """The source's gradient of masked_scatter: ``g`` where ``mask``, in order, then zeros,
    shaped like the source (PyTorch's ``masked_scatter_backward``, which a Tensor ``g``
    records)."""
    data = _dual.raw(g)
    xp = _dual.xp_of(data)
    picked = data[mask]
    missing = math.prod(source_shape) - picked.shape[0]
    if missing > 0:
        picked = xp.concatenate([picked, xp.zeros(missing, dtype=picked.dtype)])
    picked = picked.reshape(source_shape)
    if type(g) is not Tensor:
        return picked
    return MaskedScatterBackwardBackward0.record((g,), picked, g.device, keeps=(mask,))


MaskedScatterBackward0 = Rule(
    "MaskedScatterBackward0", lambda g, mask, source_shape: _zero_where(mask, g),
    _masked_scatter_backward, keeps=("mask", "source_shape"),
    doc="``t.masked_scatter(mask, source)``: t gets g with zeros where ``mask`` (broadcast to "
        "the result's shape); source's first ``mask.sum()`` elements get g there, in order, "
        "the rest zeros.")


def _masked_scatter(t: Tensor, mask: Any, source: Any, out_of_place: bool) -> Tensor:
    """masked_scatter and masked_scatter_, with PyTorch's order of checks."""
    fn = "masked_scatter" if out_of_place else "masked_scatter_"
    check_same_device(t, tensor_arg(mask, fn, "mask", 1))
    tensor_arg(source, fn, "source", 2)
    if out_of_place:
        base, m = _broadcast(t, mask.data)
    _check_dtype(t, source, "masked_scatter: expected self and source to have same dtypes but "
                            f"got{scalar_type_name(t.dtype)} and "
                            f"{scalar_type_name(source.dtype)}")
    if mask.data.dtype != numpy.bool_:
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {scalar_type_name(mask.data.dtype)}")
    if not out_of_place:
        base, m = t.data, mask.expand(*t.shape).data  # expand's errors are PyTorch's
    count = int(m.sum())
    if source.data.size < count:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    edges = edges_of(t, source)
    node = None
    if edges is not None:
        node = MaskedScatterBackward0.make(edges, (), (m.copy(), source.shape))

    def write(data: Any) -> None:
        data[m] = source.data.reshape(-1)[:count]

    return _write(t, out_of_place, node, write, base)


def masked_scatter(t: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of ``t`` (broadcast with the bool ``mask``) with the first ``mask.sum()``
    elements of ``source`` (same dtype), in order, where ``mask`` is True."""
    return _masked_scatter(t, mask, source, True)


def masked_scatter_(t: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """:func:`masked_scatter` in place; ``mask`` must broadcast to t's shape."""
    return _masked_scatter(t, mask, source, False)


# ---- take ----

def _take_grad(g: Any, in_shape: tuple[int, ...], key: tuple[Any, ...]) -> Any:
    shape = _shape_or_one(in_shape)
    g = index_scatter_add(g, shape, key, False, "PutBackward0")
    return g if shape == in_shape else _dual.reshape(g, in_shape)


TakeBackward0 = Rule(
    "TakeBackward0", _take_grad, keeps=("in_shape", "key"),
    doc="``t.take(index)``: g is added at the taken positions of zeros shaped like t "
        "(``key``: the index unravelled over t's shape, a 0-d t as 1-d); repeated positions "
        "accumulate. Under create_graph this records PyTorch's ``PutBackward0``.")


def take(t: Tensor, index: Tensor) -> Tensor:
    """The elements of ``t`` (as if flattened) at ``index`` (int64; negative entries count
    from the end), shaped like ``index``."""
    check_same_device(t, tensor_arg(index, "take", "index", 1))
    if index.data.dtype != numpy.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{scalar_type_name(index.dtype)}")
    size = t.data.size
    if size == 0 and index.data.size:
        raise IndexError("take(): tried to take from an empty tensor")
    flat = _wrapped_index(index.data, size, lambda v: IndexError(
        f"out of range: tried to access index {v} on a tensor of {size} elements."))
    data = t.data.reshape(-1)[flat.reshape(-1)].reshape(index.shape)
    edges = edges_of(t)
    if edges is None:
        return plain(data, t.device)
    key = t.device.xp.unravel_index(flat, _shape_or_one(t.shape))
    return record(TakeBackward0.make(edges, (), (t.shape, key)), data, t.device)

