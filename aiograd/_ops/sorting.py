"""Sorting and scans: ``sort argsort topk kthvalue median nanmedian`` and ``cumprod cummax
cummin logcumsumexp``.

Order is PyTorch's: NaN sorts above every number, so an ascending sort puts the NaNs
last and a descending one first. Sorts are always stable (``stable=False`` included),
which fixes the index returned among ties: the first in sort order, where PyTorch's
quickselect (``kthvalue``, ``median(dim)``) or partial sort (``topk``) may pick another.

The ops returning ``(values, indices)`` send the gradient of each value to the position
its index names; ``cummax``/``cummin`` add up the gradients of repeated indices. These
formulas are linear in the gradient and do not read the input, so the second derivative
with respect to the input is zero, as in PyTorch. Scans (``cummax``, ``cummin``, the
zeros case of ``cumprod``'s gradient under ``create_graph``, and ``logcumsumexp`` off
NumPy) combine shifted slices in ``log2(n)`` vectorized steps (Hillis-Steele), with
elementwise ops only.
See Note [Dual backward formulas] and Note [Silent singular points].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy

from .._tensor import Tensor, int64, scalar_type_name
from ..devices import device_of_array
from ..graph._node import Node
from ..graph._saved import SavedTensor
from . import _dual
from ._index_scatter import index_scatter_add
from ._record import edges_of, plain, record
from ._rule import Rule, RuleNode, Saved
from .indexing import along_dim_key
from .joining import cat
from .reductions import (
    _ABSENT,
    EVENLY_SAVES,
    SELECTING_KEEPS,
    SELECTING_SAVES,
    ValuesIndices,
    _abs,
    _cast_dtype,
    _flip,
    as_array,
    evenly_distribute_grad,
    normalize_dim,
    reverse_cumsum,
    value_selecting_grad,
)

__all__ = ["sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "cumprod", "cummax",
           "cummin", "logcumsumexp"]


# ---- helpers ----

def _part(x: Any, dim: int, start: int, stop: int) -> Any:
    """``x[start:stop]`` along ``dim`` (a view; recorded for a Tensor)."""
    return x[(slice(None),) * dim + (slice(start, stop),)]


def _cat(parts: list[Any], dim: int) -> Any:
    """Arrays or Tensors (all of one kind) joined along ``dim``."""
    if type(parts[0]) is Tensor:
        return cat(parts, dim)
    return _dual.xp_of(parts[0]).concatenate(parts, axis=dim)


def _sort_order(x: Any, dim: int, descending: bool = False) -> Any:
    """int64 indices that sort ``x`` (ndim >= 1) stably along ``dim``, NaNs as the largest.

    Descending: the stable ascending order of ``x`` reversed, read backwards, so equal
    elements keep their input order in both directions.
    """
    xp = _dual.xp_of(x)
    if not descending:
        return xp.argsort(x, axis=dim, kind="stable").astype(int64, copy=False)
    backwards = xp.argsort(_flip(x, dim), axis=dim, kind="stable").astype(int64, copy=False)
    return (x.shape[dim] - 1) - _flip(backwards, dim)


def _on_device(host: Any, device: Any) -> Any:
    """A NumPy array copied to ``device`` (new arrays of a forward go there, not to the
    thread's current device)."""
    return device.backend.from_host(host, device.index)


def _scalar_pair(a: Tensor) -> tuple[Any, Any]:
    """The ``(values, indices)`` of a 0-d input: itself, at index 0."""
    return a.data.copy(), _on_device(numpy.zeros((), dtype=int64), a.device)


def _with_history(a: Tensor, values: Any, idx: Any, rule: Rule, dim: int,
                  keepdim: bool = True) -> ValuesIndices:
    """``(values, indices)`` as tensors; ``values`` records ``rule`` (which sends the
    gradient to ``indices``) when ``a`` requires grad. A rule saving ``self_`` saves ``a``
    before the indices (PyTorch's order)."""
    values, indices = as_array(values), plain(as_array(idx), a.device)
    saved = (a, indices) if len(rule.inputs_saved) == 2 else (indices,)
    out = rule.record((a,), values, a.device, saved, (dim, keepdim, a.shape))
    return ValuesIndices(out, indices)


def _int_arg(fn: str, value: Any, name: str, position: int) -> int:
    """``value``, which must be an int (not a bool); else PyTorch's TypeError."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be int, not "
                        f"{type(value).__name__}")
    return value


def _not_for_bool(kernel: str, x: Any) -> None:
    """PyTorch's error for a bool input to an op whose ``kernel`` has no bool version."""
    if x.dtype.kind == "b":
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')


# ---- sort / argsort / topk ----

def _put_back(unique: bool) -> Callable[..., Any]:
    """The formula sending the gradient of each value to the position its index names
    (PyTorch's ``value_selecting_reduction_backward``): ``zeros(self_shape)`` with ``g``
    put at ``indices`` along ``dim``. ``indices`` has the shape of the result (``keepdim``
    is always true). ``unique``: no index repeats within a slice (sort, topk); otherwise
    repeated gradients add up."""
    label = "ScatterBackward0" if unique else "ScatterAddBackward0"

    def put_back(g: Any, indices: Any, dim: int, keepdim: bool,
                 self_shape: tuple[int, ...]) -> Any:
        if not self_shape:  # a 0-d input is its own result
            return g
        key = along_dim_key(indices, dim, device_of_array(indices))
        return index_scatter_add(g, self_shape, key, unique, label)

    return put_back


_put_back_unique = _put_back(True)
SortBackward0 = Rule("SortBackward0", _put_back_unique, saves=SELECTING_SAVES,
                     keeps=SELECTING_KEEPS, doc="``sort``: see ``_put_back``.")
SortBackward1 = Rule("SortBackward1", _put_back_unique, saves=SELECTING_SAVES,
                     keeps=SELECTING_KEEPS, doc="``sort(stable=...)``.")
TopkBackward0 = Rule("TopkBackward0", _put_back_unique, saves=SELECTING_SAVES,
                     keeps=SELECTING_KEEPS, doc="``topk``: see ``_put_back``.")


def sort(a: Tensor, dim: int = -1, descending: bool = False, *,
         stable: Any = _ABSENT) -> ValuesIndices:
    """``(values, indices)``: ``a`` sorted along ``dim`` and where each value came from.

    NaN sorts above every number. The sort is always stable (ties keep their input
    order), whatever ``stable`` says; passing ``stable`` names the node SortBackward1,
    as PyTorch's overload does.
    """
    x = a.data
    d = normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        values, idx = _scalar_pair(a)
    else:
        idx = _sort_order(x, d, descending)
        values = a.device.xp.take_along_axis(x, idx, axis=d)
    return _with_history(a, values, idx, SortBackward0 if stable is _ABSENT else SortBackward1,
                         d)


def argsort(a: Tensor, dim: int = -1, descending: bool = False, *,
            stable: bool = False) -> Tensor:
    """The int64 indices of :func:`sort` (stable, NaN as the largest); no gradient."""
    x = a.data
    d = normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        return plain(_scalar_pair(a)[1], a.device)
    return plain(as_array(_sort_order(x, d, descending)), a.device)


def topk(a: Tensor, k: int, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> ValuesIndices:  # noqa: A002
    """``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) elements
    along ``dim``, in sorted order; NaN counts as the largest.

    ``sorted=False`` returns them sorted too (PyTorch leaves the order unspecified). A
    0-d input is its own result for ``k`` 0 or 1, as in PyTorch.
    """
    k = _int_arg("topk", k, "k", 2)
    x = a.data
    if x.dtype.kind == "b":
        raise RuntimeError("topk does not support bool dtypes on CPU")
    d = normalize_dim(dim, x.ndim)
    if not 0 <= k <= (x.shape[d] if x.ndim else 1):
        raise RuntimeError("selected index k out of range")
    if x.ndim == 0:
        values, idx = _scalar_pair(a)
    else:
        idx = _part(_sort_order(x, d, descending=largest), d, 0, k)
        values = a.device.xp.take_along_axis(x, idx, axis=d)
    return _with_history(a, values, idx, TopkBackward0, d)


# ---- kthvalue / median ----

def _selecting_rule(name: str, doc: str) -> Rule:
    """A node sending the gradient to the index returned (``max(dim)``'s formula)."""
    return Rule(name, value_selecting_grad, saves=SELECTING_SAVES, keeps=SELECTING_KEEPS,
                doc=doc)


def _evenly_rule(name: str, doc: str) -> Rule:
    """A full reduction splitting the gradient evenly among the elements equal to the
    result (the full ``max``'s formula)."""
    return Rule(name, evenly_distribute_grad, saves=EVENLY_SAVES, doc=doc)


KthvalueBackward0 = _selecting_rule("KthvalueBackward0",
                                    "The gradient goes to the index returned.")
MedianBackward1 = _selecting_rule("MedianBackward1",
                                  "``median(dim)``: the gradient goes to the index returned.")
NanmedianBackward1 = _selecting_rule("NanmedianBackward1", "``nanmedian(dim)``.")
MedianBackward0 = _evenly_rule("MedianBackward0",
                               "Full median: the gradient is split evenly among the elements "
                               "equal to the median (among the NaNs when it is NaN).")
NanmedianBackward0 = _evenly_rule("NanmedianBackward0", "Full nanmedian.")


def _check_reduced_dim(fn: str, x: Any, d: int) -> None:
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"{fn}(): Expected reduction dim {d} to have non-zero size.")


def _at_rank(a: Tensor, d: int, rank: Any, keepdim: bool, rule: Rule) -> ValuesIndices:
    """``(values, indices)`` of the element at position ``rank`` (an int, or an int array
    of the kept-dims shape) of each slice along ``d`` sorted stably ascending."""
    x = a.data
    if x.ndim == 0:
        values, idx = _scalar_pair(a)
    else:
        xp = a.device.xp
        order = _sort_order(x, d)
        if isinstance(rank, int):
            idx = _part(order, d, rank, rank + 1)
        else:
            idx = xp.take_along_axis(order, rank, axis=d)
        values = xp.take_along_axis(x, idx, axis=d)
        if not keepdim:
            idx, values = idx.squeeze(d), values.squeeze(d)
    return _with_history(a, values, idx, rule, d, keepdim)


def kthvalue(a: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """``(values, indices)`` of the ``k``-th smallest element (from 1) along ``dim``; NaN
    counts as the largest. Among equal elements, the index is the first in sort order."""
    k = _int_arg("kthvalue", k, "k", 2)
    x = a.data
    _not_for_bool("kthvalue_cpu", x)
    d = normalize_dim(dim, x.ndim)
    _check_reduced_dim("kthvalue", x, d)
    if not 1 <= k <= (x.shape[d] if x.ndim else 1):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _at_rank(a, d, k - 1, keepdim, KthvalueBackward0)


def _median_rank(x: Any, d: int, ignore_nan: bool) -> Any:
    """Per slice along ``d``, the position in the stable ascending order (NaNs last, in
    input order) of the lower median: of all elements, or of the numbers only when
    ``ignore_nan``. A slice with NaNs has its first NaN as median unless ``ignore_nan``;
    an all-NaN one always does."""
    n = x.shape[d]
    if x.dtype.kind != "f":
        return (n - 1) // 2
    xp = _dual.xp_of(x)
    nans = xp.isnan(x).sum(axis=d, keepdims=True)
    if ignore_nan:
        return xp.maximum(n - nans - 1, 0) // 2
    return xp.where(nans > 0, n - nans, (n - 1) // 2)


def _median(a: Tensor, dim: Any, keepdim: Any, ignore_nan: bool) -> Any:
    name = "nanmedian" if ignore_nan else "median"
    x = a.data
    if dim is not _ABSENT:
        d = normalize_dim(dim, x.ndim)
        _not_for_bool("median_out", x)
        _check_reduced_dim("median", x, d)
        keep = False if keepdim is _ABSENT else bool(keepdim)
        rank = _median_rank(x, d, ignore_nan) if x.ndim else 0
        return _at_rank(a, d, rank, keep,
                        NanmedianBackward1 if ignore_nan else MedianBackward1)
    if keepdim is not _ABSENT:
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
    _not_for_bool("median_cpu", x)
    flat = x.reshape(-1)
    if flat.size == 0:
        empty = math.nan if x.dtype.kind == "f" else numpy.iinfo(x.dtype).min
        data = _on_device(numpy.full((), empty, dtype=x.dtype), a.device)
    else:
        data = as_array(a.device.xp.sort(flat)[_median_rank(flat, 0, ignore_nan)].reshape(()))
    return (NanmedianBackward0 if ignore_nan else MedianBackward0).record((a,), data, a.device,
                                                                          (a,))


def median(a: Tensor, dim: Any = _ABSENT, keepdim: Any = _ABSENT) -> Any:
    """The lower median of all elements (NaN if any is NaN), or ``(values, indices)`` of the
    lower median along ``dim`` (a slice with NaNs gives its first NaN).

    An empty tensor's median is NaN (an integer one's is the dtype's minimum).
    ``keepdim`` needs ``dim``.
    """
    return _median(a, dim, keepdim, ignore_nan=False)


def nanmedian(a: Tensor, dim: Any = _ABSENT, keepdim: Any = _ABSENT) -> Any:
    """:func:`median` of the numbers, NaNs ignored: NaN (at the slice's first index) only
    where there is no number."""
    return _median(a, dim, keepdim, ignore_nan=True)


# ---- cummax / cummin ----

_put_back_adding = _put_back(False)


def _cummaxmin_grad(g: Any, self_: Any, indices: Any, dim: int, keepdim: bool,
                    self_shape: tuple[int, ...]) -> Any:
    """Repeated indices add up their gradients (PyTorch's ``cummaxmin_backward``). The
    formula does not read the input: ``self_`` is saved, as PyTorch does, for its version
    check (made before the indices')."""
    return _put_back_adding(g, indices, dim, keepdim, self_shape)


_CUMMAXMIN_SAVES = (Saved("self_", raw=True),) + SELECTING_SAVES
CummaxBackward0 = Rule("CummaxBackward0", _cummaxmin_grad, saves=_CUMMAXMIN_SAVES,
                       keeps=SELECTING_KEEPS, doc="``cummax``: see ``_cummaxmin_grad``.")
CumminBackward0 = Rule("CumminBackward0", _cummaxmin_grad, saves=_CUMMAXMIN_SAVES,
                       keeps=SELECTING_KEEPS, doc="``cummin``: see ``_cummaxmin_grad``.")


def _running_extreme(a: Tensor, d: int, is_max: bool) -> tuple[Any, Any]:
    """Running max (min) along ``d`` and its index, PyTorch's rules: a tie moves the index
    to the later element, and NaN beats any number (the latest NaN gives the index).

    Hillis-Steele: after the step of ``shift``, position k holds the winner of the
    ``2 * shift`` elements ending at k; the earlier window wins only when strictly
    better, which is associative, so the result is the sequential scan's.
    """
    x = a.data
    xp = a.device.xp
    n = x.shape[d]
    values = x.copy()
    positions = numpy.arange(n, dtype=int64).reshape((n,) + (1,) * (x.ndim - d - 1))
    idx = _on_device(numpy.broadcast_to(positions, x.shape).copy(), a.device)
    floating = x.dtype.kind == "f"
    shift = 1
    while shift < n:
        earlier_v, later_v = _part(values, d, 0, n - shift), _part(values, d, shift, n)
        wins = earlier_v > later_v if is_max else earlier_v < later_v
        if floating:
            wins |= xp.isnan(earlier_v) & ~xp.isnan(later_v)
        new_idx = xp.where(wins, _part(idx, d, 0, n - shift), _part(idx, d, shift, n))
        _part(values, d, shift, n)[...] = xp.where(wins, earlier_v, later_v)
        _part(idx, d, shift, n)[...] = new_idx
        shift *= 2
    return values, idx


def _cumulative_extreme(a: Tensor, dim: int, is_max: bool) -> ValuesIndices:
    x = a.data
    d = normalize_dim(dim, x.ndim)
    values, idx = _scalar_pair(a) if x.ndim == 0 else _running_extreme(a, d, is_max)
    return _with_history(a, values, idx, CummaxBackward0 if is_max else CumminBackward0, d)


def cummax(a: Tensor, dim: int) -> ValuesIndices:
    """``(values, indices)`` of the running maximum along ``dim``: a tie takes the later
    index; from the first NaN on the value is NaN."""
    return _cumulative_extreme(a, dim, is_max=True)


def cummin(a: Tensor, dim: int) -> ValuesIndices:
    """``(values, indices)`` of the running minimum along ``dim`` (the rules of
    :func:`cummax`)."""
    return _cumulative_extreme(a, dim, is_max=False)


# ---- cumprod ----

def _cumprod(x: Any, dim: int) -> Any:
    """Running products along ``dim`` of an array or a Tensor (recorded)."""
    return cumprod(x, dim) if type(x) is Tensor else x.cumprod(axis=dim)


def _reverse_linear_scan(b: Any, c: Any, dim: int) -> Any:
    """``R`` with ``R_j = b_j + c_j R_{j+1}`` along ``dim``, ``R`` past the end being 0.

    Invariant of the step of ``shift``: ``R_j = b_j + c_j R_{j+shift}``; a step folds in
    ``R_{j+shift}``, doubling ``shift``. Where ``j + shift`` is past the end ``b_j`` is
    final and ``c_j`` never multiplies anything again. Sums and products only: no
    division.
    """
    n = b.shape[dim]
    shift = 1
    while shift < n:
        c_head, c_next = _part(c, dim, 0, n - shift), _part(c, dim, shift, n)
        b_head = _part(b, dim, 0, n - shift) + c_head * _part(b, dim, shift, n)
        b = _cat([b_head, _part(b, dim, n - shift, n)], dim)
        c = _cat([c_head * c_next, _part(c, dim, n - shift, n)], dim)
        shift *= 2
    return b


def _prepend_one(x: Any, dim: int) -> Any:
    """``x`` with a slice of ones put first along ``dim``."""
    ones = _dual.zeros_of(x, x.shape[:dim] + (1,) + x.shape[dim + 1:]) + 1
    return _cat([ones, x], dim)


def _cumprod_grad_with_zeros(g: Any, x: Any, dim: int) -> Any:
    """``sum_{k >= j} g_k prod_{i <= k, i != j} x_i`` along ``dim``, without dividing by x
    (which has zeros): ``L_j R_j``, ``L_j = prod_{i < j} x_i`` (a shifted cumprod) and
    ``R_j = sum_{k >= j} g_k prod_{j < i <= k} x_i``, the scan ``R_j = g_j + x_{j+1}
    R_{j+1}``. A polynomial in x, so its own derivatives (create_graph) are exact, as
    PyTorch's O(n^2) formula for this case.
    """
    n = x.shape[dim]
    before = _prepend_one(_cumprod(_part(x, dim, 0, n - 1), dim), dim)
    # c_j = x_{j+1}; the last c is never used (nothing follows), x_0 fills it
    following = _cat([_part(x, dim, 1, n), _part(x, dim, 0, 1)], dim)
    return before * _reverse_linear_scan(g, following, dim)


def _cumprod_grad_first_zero(g: Any, x: Any, y: Any, dim: int) -> Any:
    """PyTorch's O(n) gradient for an ``x`` with zeros (arrays; not differentiated again).

    In a slice whose first zero is at ``z1`` (the second at ``z2``, or the end): before
    ``z1``, ``reversed_cumsum(g * y) / x`` over the elements before ``z1``; at ``z1``,
    ``y_{z1-1} sum_{z1 <= k < z2} g_k prod_{z1 < i <= k} x_i``; after it, 0. With inf or
    NaN in ``x`` this gives PyTorch's values, which differ from the polynomial of
    :func:`_cumprod_grad_with_zeros`.
    """
    xp = _dual.xp_of(x)
    zeros_so_far = (x == 0).cumsum(axis=dim)
    before, up_to_second = zeros_so_far == 0, zeros_so_far == 1
    first = up_to_second & (x == 0)
    head = reverse_cumsum(xp.where(before, y * g, 0), dim) / x
    runs = xp.where(up_to_second & ~first, x, 1).cumprod(axis=dim)
    at_first = (runs * xp.where(up_to_second, g, 0)).sum(axis=dim, keepdims=True)
    y_before = _prepend_one(_part(y, dim, 0, x.shape[dim] - 1), dim)
    return xp.where(before, head, xp.where(first, at_first * y_before, 0))


@numpy.errstate(all="ignore")  # inf and NaN inputs: inf * 0, inf / inf
def _cumprod_grad(node: RuleNode, grads: list[Any], create_graph: bool, saved_x: SavedTensor,
                  saved_y: SavedTensor, dim: int) -> Any:
    """``sum_{k >= j} g_k y_k / x_j`` (``y`` the result), PyTorch's formulas: with ``g``
    cast to the input's dtype, ``reversed_cumsum(g * y) / x`` when no element is 0, else
    :func:`_cumprod_grad_first_zero`, or for ``create_graph`` the same sum written
    without division (:func:`_cumprod_grad_with_zeros`)."""
    x = saved_x.unpack(node, create_graph)
    y = saved_y.unpack(node, create_graph)
    g = grads[0]
    if g.dtype != x.dtype:  # cumprod(dtype=...): the result's dtype is another
        g = g.to(dtype=x.dtype) if type(g) is Tensor else g.astype(x.dtype)
    if _dual.raw(x).size <= 1 or x.shape[dim] == 1:
        return (g,)
    if not bool((_dual.raw(x) == 0).any()):
        return (reverse_cumsum(g * y, dim) / x,)
    if create_graph:
        return (_cumprod_grad_with_zeros(g, x, dim),)
    return (_cumprod_grad_first_zero(g, x, y, dim),)


CumprodBackward0 = Rule("CumprodBackward0", whole=_cumprod_grad, saves=("self_", "result"),
                        keeps=("dim",), doc="``cumprod``: see ``_cumprod_grad``.")


def cumprod(a: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running products along ``dim``, of ``a`` cast to ``dtype`` (inside the op: the node
    has ``a``'s edge, and the gradient ``a``'s dtype); integers and bools multiply in
    int64. The gradient is exact where the input has zeros."""
    x = a.data
    d = normalize_dim(dim, x.ndim)
    if dtype is not None:
        dt = _cast_dtype(a, dtype, "cumprod")
        x = x.astype(dt, copy=False)
    elif x.dtype.kind in "biu":
        dt = int64
    else:
        dt = x.dtype
    if x.ndim:
        data = _dual.contiguous(_dual.quietly(x.cumprod, d, dt))
    else:
        data = x.astype(dt, copy=True)
    return CumprodBackward0.record((a,), data, a.device, (a,), (d,))


# ---- logcumsumexp ----

@numpy.errstate(all="ignore")  # inf and NaN meeting in logaddexp
def _running_logsumexp(x: Any, dim: int) -> Any:
    """``log(cumsum(exp(x)))`` along ``dim`` by ``logaddexp`` (exact for any magnitudes: no
    common offset is subtracted): in sequence on NumPy, as PyTorch's CPU kernel, else of
    shifted slices (CuPy has no ``ufunc.accumulate``)."""
    xp = _dual.xp_of(x)
    if xp is numpy:
        return numpy.logaddexp.accumulate(x, axis=dim)
    out = x.copy()
    n = x.shape[dim]
    shift = 1
    while shift < n:
        later = _part(out, dim, shift, n)
        later[...] = xp.logaddexp(_part(out, dim, 0, n - shift), later)
        shift *= 2
    return out


def _logcumsumexp(x: Any, dim: int) -> Any:
    return logcumsumexp(x, dim) if type(x) is Tensor else _running_logsumexp(x, dim)


@numpy.errstate(all="ignore")  # log(0) of a zero gradient
def _logcumsumexp_grad(g: Any, x: Any, result: Any, d: int) -> Any:
    """``grad_j = sum_{k >= j} g_k exp(x_j - result_k)``, computed as PyTorch does: the
    positive and negative parts of ``g`` in log space, each through a reversed
    logcumsumexp (``lowest`` stands for log 0)."""
    if g.ndim == 0 or 0 in g.shape:
        return g
    ga = _dual.raw(g)
    lowest = float(numpy.finfo(ga.dtype).min)
    log_abs = _dual.log(_abs(g))

    def spread(log_part: Any) -> Any:
        return _dual.exp(_flip(_logcumsumexp(_flip(log_part - result, d), d), d) + x)

    return (spread(_dual.where(ga > 0, log_abs, lowest))
            - spread(_dual.where(ga < 0, log_abs, lowest)))


LogcumsumexpBackward0 = Rule("LogcumsumexpBackward0", _logcumsumexp_grad,
                             saves=("self_", "result"), keeps=("dim",),
                             doc="``logcumsumexp``: see ``_logcumsumexp_grad``.")


def logcumsumexp(a: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(a)))`` along ``dim``, computed stably; floating dtypes only."""
    x = a.data
    if x.dtype.kind != "f":
        raise NotImplementedError(
            f"\"logcumsumexp_out_cpu\" not implemented for '{scalar_type_name(x.dtype)}'"
        )
    d = normalize_dim(dim, x.ndim)
    data = x.copy() if x.ndim == 0 else _running_logsumexp(x, d)
    return LogcumsumexpBackward0.record((a,), data, a.device, (a,), (d,))


# ---- unique (no derivative, as PyTorch's) ----

class Unique2Backward0(Node):
    """``unique``'s node: PyTorch implements no derivative for it, and nor does aiograd."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        raise NotImplementedError("the derivative for 'unique' is not implemented.")


def unique(a: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct values of ``a`` (of its slices along ``dim``), ascending, with the
    int64 inverse indices (``a``'s shape, or ``dim``'s length) and counts if asked.

    The values are always sorted, whatever ``sorted`` says (PyTorch leaves the order
    unspecified then). Like PyTorch, the result records a node whose backward raises.
    """
    x = a.data
    xp = a.device.xp
    if dim is None:
        values, inverse, counts = xp.unique(x.reshape(-1), return_inverse=True,
                                            return_counts=True)
        inverse = inverse.reshape(x.shape)
    else:
        d = normalize_dim(dim, x.ndim)
        values, inverse, counts = xp.unique(x, return_inverse=True, return_counts=True,
                                            axis=d)
        inverse = inverse.reshape(-1)
    edges = edges_of(a)
    out = plain(values, a.device) if edges is None else record(
        Unique2Backward0(edges), values, a.device)
    extra = [plain(inverse.astype(int64, copy=False), a.device)] if return_inverse else []
    if return_counts:
        extra.append(plain(counts.astype(int64, copy=False), a.device))
    return (out, *extra) if extra else out
