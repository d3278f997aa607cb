"""Reductions: ``sum mean prod std var max min amax amin argmax argmin any all norm
logsumexp`` over all elements or over ``dim``, and the scan ``cumsum``.

Sum and mean send the gradient back by reshaping it to the kept-dims shape
and expanding it to the input's shape (a broadcast view, no copy). A full
``max``/``min`` splits the gradient evenly among the elements equal to the
result (PyTorch's ``evenly_distribute_backward``); with ``dim`` the whole
gradient goes to the index returned, the first occurrence of a tie.
``amax``/``amin`` split it evenly among the ties of each reduced slice.
The other formulas first reshape the gradient (and the saved result) to the
kept-dims shape, so they broadcast against the input.
See Note [Dual backward formulas] and Note [Silent singular points].
"""

from __future__ import annotations

import builtins
import math
import numbers
import warnings
from typing import Any, NamedTuple

import numpy

from .._tensor import Tensor, _resolve_dtype, float32, int64, scalar_type_name
from . import _dual
from ._record import edges_of, plain
from ._rule import Rule, Saved

__all__ = ["ValuesIndices", "as_array", "normalize_dim", "reduction_dims"]


def normalize_dim(dim: Any, ndim: int) -> int:
    """``dim`` as an index in ``range(max(ndim, 1))``; a 0-d tensor accepts -1 and 0."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__} ({dim!r})")
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n


def reduction_dims(dim: Any, ndim: int) -> tuple[int, ...]:
    """The sorted dims ``dim`` names (None or ``()``: all of them)."""
    if dim is None:
        return tuple(range(ndim))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if not dims:
        return tuple(range(ndim))
    wrapped = [normalize_dim(d, ndim) for d in dims]  # all in range first, as PyTorch
    if len(set(wrapped)) < len(wrapped):
        again = next(d for i, d in enumerate(wrapped) if d in wrapped[:i])
        raise RuntimeError(
            f"dim {again} appears multiple times in the list of dims {dims}; name each once"
        )
    return tuple(sorted(wrapped)) if ndim else ()


def _kept_shape(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in dims else n for i, n in enumerate(shape))


def as_array(data: Any) -> Any:
    """A fresh reduction result as a tensor's data: NumPy's full reductions give scalars
    (made 0-d arrays), and C-contiguous, as PyTorch's results are."""
    return numpy.asarray(data) if isinstance(data, numpy.generic) else _dual.contiguous(data)


def _kept(x: Any, kept_shape: tuple[int, ...]) -> Any:
    """``x`` (a gradient or a saved result, array or Tensor) reshaped to ``kept_shape``."""
    return x if x.shape == kept_shape else _dual.reshape(x, kept_shape)


def _given_dtype(dtype: Any, name: str) -> numpy.dtype:
    """The ``dtype=`` argument of ``name``, given (not None), resolved."""
    dt = _resolve_dtype(dtype)
    if dt is None:
        raise TypeError(f"{name}(): dtype must be a dtype, not None")
    return dt


def _cast_dtype(a: Tensor, dtype: Any, name: str) -> numpy.dtype:
    """The ``dtype=`` argument of ``name`` resolved; PyTorch casts the input to it first.

    An integer result cannot carry a gradient: PyTorch refuses one when ``a``
    requires grad (in grad mode).
    """
    dt = _given_dtype(dtype, name)
    if dt.kind != "f":
        if name == "mean":
            raise RuntimeError(
                "mean(): could not infer output dtype. Optional dtype must be either a "
                f"floating point or complex dtype. Got: {scalar_type_name(dt)}"
            )
        if edges_of(a) is not None:
            raise RuntimeError(
                f"Autograd not support dtype: {scalar_type_name(dt)}; {name}(dtype=...) of a "
                "tensor that requires grad needs a floating dtype"
            )
    return dt


def _invalid_keepdim(name: str, keepdim: Any, signatures: str) -> TypeError:
    return TypeError(
        f"{name}() received an invalid combination of arguments - got "
        f"(keepdim={type(keepdim).__name__}, ), but expected one of: {signatures}; "
        f"keepdim needs a dim, e.g. t.{name}(0, keepdim=True)"
    )


# ---- sum / mean ----

def _expand_back(g: Any, self_shape: tuple[int, ...], kept_shape: tuple[int, ...]) -> Any:
    """``g`` reshaped to ``kept_shape`` and expanded back to ``self_shape`` (a view)."""
    if g.shape != kept_shape:
        g = _dual.reshape(g, kept_shape)
    return _dual.expand(g, self_shape)


def _mean_grad(g: Any, self_shape: tuple[int, ...], kept_shape: tuple[int, ...],
               count: int) -> Any:
    return _expand_back(g / count, self_shape, kept_shape)


# Invariants: ``kept_shape`` is ``self_shape`` with every reduced dim set to 1; ``count >= 1``
# (an empty input keeps 1: its gradient is empty whatever the divisor, and ``g / 0`` would
# make NumPy warn).
_SUM_KEEPS = ("self_shape", "kept_shape")
SumBackward0 = Rule("SumBackward0", _expand_back, keeps=_SUM_KEEPS,
                    doc="Expands the gradient back to ``self_shape``.")
SumBackward1 = Rule("SumBackward1", _expand_back, keeps=_SUM_KEEPS, doc="``sum(dim=...)``.")
MeanBackward0 = Rule("MeanBackward0", _mean_grad, keeps=_SUM_KEEPS + ("count",),
                     doc="Divides the gradient by ``count`` and expands it.")
MeanBackward1 = Rule("MeanBackward1", _mean_grad, keeps=_SUM_KEEPS + ("count",),
                     doc="``mean(dim=...)``.")


def _reduce(a: Tensor, dim: Any, keepdim: bool, is_mean: bool, dtype: Any = None) -> Tensor:
    x = a.data
    if dtype is not None:
        x = x.astype(_cast_dtype(a, dtype, "mean" if is_mean else "sum"), copy=False)
    dims = reduction_dims(dim, x.ndim)
    if is_mean:
        if x.dtype.kind != "f":
            raise RuntimeError(
                "mean(): could not infer output dtype. Input dtype must be a floating point "
                f"dtype, got {x.dtype}; convert first, e.g. t.to(dtype=aiograd.float32)"
            )
        data = x.mean(axis=dims, keepdims=keepdim) if x.size else _mean_of_empty(x, dims, keepdim)
    elif dtype is not None:  # NumPy would widen a small integer dtype
        data = x.sum(axis=dims, keepdims=keepdim, dtype=x.dtype)
    elif x.dtype.kind in "biu":  # integers and bools add in int64 (NumPy: uint8 in uint64)
        data = x.sum(axis=dims, keepdims=keepdim, dtype=int64)
    else:
        data = x.sum(axis=dims, keepdims=keepdim)
    data = as_array(data)
    full = dim is None and not keepdim
    kept = _kept_shape(x.shape, dims)
    if is_mean:
        count = math.prod(x.shape[d] for d in dims) or 1
        rule = MeanBackward0 if full else MeanBackward1
        return rule.record((a,), data, a.device, (), (x.shape, kept, count))
    rule = SumBackward0 if full else SumBackward1
    return rule.record((a,), data, a.device, (), (x.shape, kept))


def _nansum_grad(g: Any, x: Any, kept_shape: tuple[int, ...]) -> Any:
    g = _dual.expand(_kept(g, kept_shape), x.shape)
    numbers_ = _dual.raw(x) == _dual.raw(x)  # False at NaN
    return _dual.where(numbers_, g, 0.0)


# Invariant: ``kept_shape`` is the input's shape with every reduced dim set to 1.
NansumBackward0 = Rule("NansumBackward0", _nansum_grad, saves=("saved",), keeps=("kept_shape",),
                       doc="The gradient expanded back, zero where the input is NaN: saves "
                           "the input.")


def nansum(a: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Sum over ``dim`` treating NaN as zero (PyTorch's ``nansum``)."""
    x = a.data
    if dtype is not None:
        x = x.astype(_cast_dtype(a, dtype, "nansum"), copy=False)
    dims = reduction_dims(dim, x.ndim)
    if x.dtype.kind in "biu":  # no NaN: a plain sum, with PyTorch's int64 accumulation
        return _reduce(a, dim, keepdim, False, dtype)
    data = as_array(a.device.xp.nansum(x, axis=dims, keepdims=keepdim))
    return NansumBackward0.record((a,), data, a.device, (a,), (_kept_shape(x.shape, dims),))


@numpy.errstate(all="ignore")  # 0 / 0
def _mean_of_empty(x: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """The mean of an empty array: NaN where no element is averaged, as PyTorch, without
    NumPy's "Mean of empty slice" warning. See Note [Silent singular points]."""
    return x.sum(axis=dims, keepdims=keepdim) / math.prod(x.shape[d] for d in dims)


def sum(a: Tensor, dim: Any = None, keepdim: bool = False, *,  # noqa: A001
        dtype: Any = None) -> Tensor:
    """Sum over ``dim`` (an int, a tuple of ints, or None for all), of ``a`` cast to ``dtype``;
    integers and bools add in int64 unless ``dtype`` is given."""
    return _reduce(a, dim, keepdim, False, dtype)


def mean(a: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Mean over ``dim`` (an int, a tuple of ints, or None for all), of ``a`` cast to
    ``dtype``; floating dtypes only."""
    return _reduce(a, dim, keepdim, True, dtype)


# ---- max / min ----

class ValuesIndices(NamedTuple):
    """What ``max(dim)``/``min(dim)`` return: ``values`` and int64 ``indices``."""

    values: Tensor
    indices: Tensor


def evenly_distribute_grad(g: Any, x: Any, result: Any) -> Any:
    """A full max (min, median): ``g`` split evenly among the elements equal to the result
    (among the NaNs when the result is NaN), PyTorch's ``evenly_distribute_backward``.
    ``x`` and ``result`` are raw arrays: the split is piecewise constant in them."""
    xp = _dual.xp_of(x)
    mask = xp.isnan(x) if bool(xp.isnan(result)) else x == result
    weights = mask.astype(x.dtype) / mask.sum(dtype=x.dtype)
    return g * weights


def value_selecting_grad(g: Any, indices: Any, dim: int, keepdim: bool,
                         self_shape: tuple[int, ...]) -> Any:
    """Max (min, kthvalue, median) over ``dim``: the whole gradient goes to the index
    returned (``indices``, a raw array)."""
    if not self_shape:  # a 0-d input is its own max
        return g
    if not keepdim:
        g = _dual.unsqueeze(g, dim)
        indices = _dual.xp_of(indices).expand_dims(indices, dim)
    n = self_shape[dim]
    positions = _dual.xp_of(indices).arange(n).reshape(
        tuple(n if i == dim else 1 for i in range(len(self_shape)))
    )
    return _dual.where(positions == indices, g, 0)


#: The saves of a full max: the input and the result, as raw arrays.
EVENLY_SAVES = (Saved("self_", raw=True), Saved("result", output=True, raw=True))
#: The saves and keeps of a value-selecting node over ``dim``.
SELECTING_SAVES = (Saved("indices", raw=True),)
SELECTING_KEEPS = ("dim", "keepdim", "self_shape")

MaxBackward1 = Rule("MaxBackward1", evenly_distribute_grad, saves=EVENLY_SAVES,
                    doc="Full max: see ``evenly_distribute_grad``.")
MinBackward1 = Rule("MinBackward1", evenly_distribute_grad, saves=EVENLY_SAVES,
                    doc="Full min: see ``evenly_distribute_grad``.")
MaxBackward0 = Rule("MaxBackward0", value_selecting_grad, saves=SELECTING_SAVES,
                    keeps=SELECTING_KEEPS, doc="Max over ``dim``: see ``value_selecting_grad``.")
MinBackward0 = Rule("MinBackward0", value_selecting_grad, saves=SELECTING_SAVES,
                    keeps=SELECTING_KEEPS, doc="Min over ``dim``: see ``value_selecting_grad``.")


_EXTREME_SIGNATURES = "(), (Tensor other), (int dim, bool keepdim = False)"


def _extreme(a: Tensor, dim: Any, keepdim: bool | None, is_max: bool) -> Any:
    name = "max" if is_max else "min"
    x = a.data
    xp = a.device.xp
    if dim is None:
        if keepdim is not None:
            raise _invalid_keepdim(name, keepdim, _EXTREME_SIGNATURES)
        if x.size == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        data = as_array(x.max() if is_max else x.min())
        return (MaxBackward1 if is_max else MinBackward1).record((a,), data, a.device, (a,))
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
    rule = MaxBackward0 if is_max else MinBackward0
    return ValuesIndices(rule.record((a,), values, a.device, (indices,),
                                     (d, bool(keepdim), x.shape)), indices)


def max(a: Tensor, dim: Any = None, keepdim: bool | None = None) -> Any:  # noqa: A001
    """The largest element, or ``(values, indices)`` along ``dim``, or with a Tensor in
    place of ``dim`` the elementwise ``maximum(a, other)`` (PyTorch's three forms).

    ``keepdim`` (default False) needs an int ``dim``: ``max(keepdim=...)`` raises
    TypeError, as PyTorch.
    """
    if isinstance(dim, Tensor):
        return _elementwise("max", a, dim, keepdim)
    return _extreme(a, dim, keepdim, is_max=True)


def min(a: Tensor, dim: Any = None, keepdim: bool | None = None) -> Any:  # noqa: A001
    """The smallest element, ``(values, indices)`` along ``dim``, or ``minimum(a, other)``
    (the forms of :func:`max`)."""
    if isinstance(dim, Tensor):
        return _elementwise("min", a, dim, keepdim)
    return _extreme(a, dim, keepdim, is_max=False)


def _elementwise(name: str, a: Tensor, other: Tensor, keepdim: bool | None) -> Tensor:
    if keepdim is not None:
        raise TypeError(f"{name}(): argument 'dim' (position 1) must be int, not Tensor")
    return a.maximum(other) if name == "max" else a.minimum(other)


# ---- prod ----

def _prod_kept(x: Any, dims: tuple[int, ...]) -> Any:
    """The product over ``dims``, kept, of an array or a Tensor (recorded)."""
    if type(x) is Tensor:
        return _prod(x, dims, True, ProdBackward1)
    return x.prod(axis=dims, keepdims=True)


# ---- trickier grads: prod ----

@numpy.errstate(all="ignore")  # inf * 0 beside a zero
def _prod_grad_with_zeros(g: Any, x: Any, dims: tuple[int, ...]) -> Any:
    """``g`` times the product of the other elements of each slice, some elements being 0.

    For element i of a slice with ``m`` zeros that product is ``z_i * rest / x'_i``:
    ``x'`` is x with its zeros set to 1, ``rest`` the product of ``x'`` over the slice,
    and ``z_i`` the product of the slice's zeros other than x_i (1 if there are none,
    else 0 in value). ``z_i`` is written exactly to second order in the zeros, with
    their elementary symmetric sums ``e1`` (their sum) and ``e2``: ``[m == 0] +
    [m == 1] e1 + [m == 2] e2`` for a nonzero x_i, and ``[m == 1] + [m == 2] o1 +
    [m == 3] (e2 - x_i o1)`` for a zero, ``o1 = e1 - x_i`` being the sum of the
    others. So the derivatives of this gradient (create_graph) are exact to second
    order: prod's to the third.
    """
    xa = _dual.raw(x)
    zero = xa == 0
    count = zero.sum(axis=dims, keepdims=True)
    none, one, two, three = ((count == k).astype(xa.dtype) for k in (0, 1, 2, 3))
    zeros = _dual.where(zero, x, 0)
    e1 = _dual.sum_dims(zeros, dims, keepdim=True)
    e2 = (e1 * e1 - _dual.sum_dims(zeros * zeros, dims, keepdim=True)) * 0.5
    o1 = e1 - x
    others = _dual.where(zero, one + two * o1 + three * (e2 - x * o1),
                         none + one * e1 + two * e2)
    nonzero = _dual.where(zero, 1, x)
    return g * (others * (_prod_kept(nonzero, dims) / nonzero))


def _prod_grad(g: Any, x: Any, result: Any, dims: tuple[int, ...],
               kept_shape: tuple[int, ...]) -> Any:
    """``g * (result / x)`` (PyTorch's formula) when no element is 0, else the product of
    the other elements (:func:`_prod_grad_with_zeros`)."""
    if not kept_shape:  # a 0-d input is its own product
        return g
    g = _kept(g, kept_shape)
    if bool((_dual.raw(x) == 0).any()):
        return _prod_grad_with_zeros(g, x, dims)
    return g * (_kept(result, kept_shape) / x)


# Invariant: ``kept_shape`` is ``self_`` 's shape with every dim in ``dims`` set to 1.
ProdBackward0 = Rule("ProdBackward0", _prod_grad, saves=("self_", "result"),
                     keeps=("dims", "kept_shape"), doc="Full product: see ``_prod_grad``.")
ProdBackward1 = Rule("ProdBackward1", _prod_grad, saves=("self_", "result"),
                     keeps=("dims", "kept_shape"), doc="``prod(dim)``.")


def _prod(a: Tensor, dims: tuple[int, ...], keepdim: bool, rule: Rule,
          dtype: numpy.dtype | None = None) -> Tensor:
    """The product of ``a`` (already cast to ``dtype``) over ``dims``."""
    x = a.data
    if dtype is None and x.dtype.kind in "biu":
        dtype = int64
    data = as_array(x.prod(axis=dims, keepdims=keepdim, dtype=dtype))
    return rule.record((a,), data, a.device, (a,), (dims, _kept_shape(x.shape, dims)))


def prod(a: Tensor, dim: Any = None, keepdim: bool | None = None, *,
         dtype: Any = None) -> Tensor:
    """The product of all elements, or over the int ``dim``; of ``a`` cast to ``dtype``.

    Integers and bools multiply in int64. ``keepdim`` (default False) needs ``dim``.
    """
    if dim is None and keepdim is not None:
        raise _invalid_keepdim(
            "prod", keepdim, "(*, dtype = None), (int dim, bool keepdim = False, *, dtype = None)"
        )
    if dtype is not None:  # a recorded cast: the formula needs the cast values
        dtype = _cast_dtype(a, dtype, "prod")
        a = a.to(dtype=dtype)
    if dim is None:
        return _prod(a, tuple(range(a.ndim)), False, ProdBackward0, dtype)
    d = normalize_dim(dim, a.ndim)
    return _prod(a, (d,) if a.ndim else (), bool(keepdim), ProdBackward1, dtype)


# ---- std / var ----

_ABSENT: Any = object()  # an argument not passed: PyTorch's signatures tell it from None

_MOMENT_SIGNATURES = (
    "\n * (tuple of ints dim, bool unbiased = True, bool keepdim = False)"
    "\n * (tuple of ints dim = None, *, Number correction = None, bool keepdim = False)"
    "\n * (bool unbiased = True)\n"
)


def _moment_correction(dim: Any, unbiased: Any, keepdim: Any, correction: Any) -> Any:
    """The correction that PyTorch's signature matching these arguments gives; None if
    none matches."""
    if isinstance(dim, bool):  # var(True): the unbiased flag, alone
        return int(dim) if unbiased is keepdim is correction is _ABSENT else None
    if keepdim is not _ABSENT and not isinstance(keepdim, bool):
        return None
    if unbiased is _ABSENT:
        if correction is _ABSENT or correction is None:
            return 1
        return correction if isinstance(correction, numbers.Real) else None
    if not isinstance(unbiased, bool) or correction is not _ABSENT:
        return None
    # var(dim, unbiased, keepdim) needs dim (None is one); var(unbiased) takes nothing else
    return int(unbiased) if dim is not _ABSENT or keepdim is _ABSENT else None


def _moment_args(name: str, dim: Any, unbiased: Any, keepdim: Any,
                 correction: Any) -> tuple[Any, bool, int | float]:
    """``(dim, keepdim, correction)`` from PyTorch's three signatures: ``var(unbiased)``,
    ``var(dim, unbiased, keepdim)`` and ``var(dim=None, *, correction, keepdim)``; any
    other combination of the arguments passed raises PyTorch's TypeError."""
    fixed = _moment_correction(dim, unbiased, keepdim, correction)
    if fixed is None:
        passed = {"dim": dim, "unbiased": unbiased, "keepdim": keepdim, "correction": correction}
        got = ", ".join(f"{k}={type(v).__name__}" for k, v in passed.items() if v is not _ABSENT)
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:{_MOMENT_SIGNATURES}")
    if dim is _ABSENT or isinstance(dim, bool):
        dim = None
    return dim, keepdim is True, fixed


def _mean_kept(x: Any, dims: tuple[int, ...], count: int) -> Any:
    return _dual.sum_dims(x, dims, keepdim=True) / count


def _var_grad(g: Any, x: Any, dims: tuple[int, ...], count: int, dof: float,
              full: bool) -> Any:
    """PyTorch's ``var_backward``: ``2 g (x - mean) / dof``, ``dof`` unclamped (``2 / 0`` is
    inf, a negative ``dof`` flips the sign); a full reduction with ``dof <= 0`` gives
    ``g`` times the constant ``nan`` where ``x == mean``, else ``inf``."""
    if full and dof <= 0:
        xa = _dual.raw(x)
        singular = _dual.xp_of(xa).where(xa == xa.sum() / count, math.nan, math.inf)
        return g * singular.astype(xa.dtype, copy=False)
    return (2 / dof if dof else math.inf) * g * (x - _mean_kept(x, dims, count))


@numpy.errstate(all="ignore")  # dof == 0: inf * 0
def _var_backward(g: Any, x: Any, dims: tuple[int, ...], kept_shape: tuple[int, ...],
                  count: int, dof: float, full: bool) -> Any:
    return _var_grad(_kept(g, kept_shape), x, dims, count, dof, full)


@numpy.errstate(all="ignore")  # g / 0 where std == 0 (masked); dof == 0
def _std_backward(g: Any, x: Any, std: Any, dims: tuple[int, ...],
                  kept_shape: tuple[int, ...], count: int, dof: float, full: bool) -> Any:
    """The variance's formula with ``g / (2 std)``, 0 where std == 0 (PyTorch's)."""
    std = _kept(std, kept_shape)
    g = _dual.where(_dual.raw(std) == 0, 0, _kept(g, kept_shape) / (std * 2))
    return _var_grad(g, x, dims, count, dof, full)


# Invariants: ``kept_shape`` is ``self_`` 's shape with every dim in ``dims`` set to 1;
# ``count >= 1`` elements per slice (an empty input keeps 1: its gradient is empty whatever
# the divisor); ``dof == elements - correction``, not clamped; ``full`` is true for
# ``dim=None`` or a 0-d input (PyTorch's full-reduction branch).
_MOMENT_KEEPS = ("dims", "kept_shape", "count", "dof", "full")
VarBackward0 = Rule("VarBackward0", _var_backward, saves=("self_",), keeps=_MOMENT_KEEPS,
                    doc="``2 g (x - mean) / dof`` over ``dims`` (``_var_grad``).")
StdBackward0 = Rule("StdBackward0", _std_backward, saves=("self_", "result"),
                    keeps=_MOMENT_KEEPS, doc="The variance's formula with ``g / (2 std)``.")


@numpy.errstate(all="ignore")  # an empty slice: 0 / 0; dof == 0
def _variance(x: Any, dims: tuple[int, ...], keepdim: bool, count: int, dof: float) -> Any:
    centered = x - x.sum(axis=dims, keepdims=True) / count
    return as_array((centered * centered).sum(axis=dims, keepdims=keepdim) / dof)


def _moment(a: Tensor, dim: Any, unbiased: Any, keepdim: Any, correction: Any,
            is_std: bool) -> Tensor:
    name = "std" if is_std else "var"
    x = a.data
    if x.dtype.kind != "f":
        raise RuntimeError(
            f"std and var only support floating point and complex dtypes, got {x.dtype}; "
            f"convert first, e.g. t.to(dtype=aiograd.float32).{name}()"
        )
    dim, keepdim, correction = _moment_args(name, dim, unbiased, keepdim, correction)
    dims = reduction_dims(dim, x.ndim)
    count = math.prod(x.shape[d] for d in dims)
    dof = count - correction
    if dof <= 0:
        warnings.warn(
            f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than "
            "the reduction factor (input numel divided by output numel).",
            UserWarning, stacklevel=3,
        )
    data = _variance(x, dims, keepdim, count, builtins.max(0, dof))
    if is_std:
        data = a.device.xp.sqrt(data)
    keeps = (dims, _kept_shape(x.shape, dims), count or 1, dof, dim is None or x.ndim == 0)
    return (StdBackward0 if is_std else VarBackward0).record((a,), data, a.device, (a,), keeps)


def std(a: Tensor, dim: Any = _ABSENT, unbiased: Any = _ABSENT, keepdim: Any = _ABSENT, *,
        correction: Any = _ABSENT) -> Tensor:
    """The standard deviation over ``dim`` (None: all): the square root of :func:`var`.

    PyTorch's three forms: ``std(dim=None, *, correction=1, keepdim=False)``,
    ``std(dim, unbiased=True, keepdim=False)`` (unbiased=False is correction=0; ``dim``
    must be passed, None included) and ``std(unbiased)``; others raise TypeError.
    """
    return _moment(a, dim, unbiased, keepdim, correction, is_std=True)


def var(a: Tensor, dim: Any = _ABSENT, unbiased: Any = _ABSENT, keepdim: Any = _ABSENT, *,
        correction: Any = _ABSENT) -> Tensor:
    """The variance over ``dim`` (None: all): the sum of the squared deviations from the
    mean over ``N - correction`` (arguments as :func:`std`)."""
    return _moment(a, dim, unbiased, keepdim, correction, is_std=False)


# ---- amax / amin ----

@numpy.errstate(all="ignore")  # a NaN slice: g / 0 * 0
def _amax_grad(g: Any, x: Any, result: Any, dims: tuple[int, ...],
               kept_shape: tuple[int, ...]) -> Any:
    """The gradient of each reduced slice split evenly among its elements equal to the
    result (PyTorch's ``scale_grad_by_count``: NaN over a slice whose result is NaN);
    ``x`` and ``result`` raw arrays."""
    hit = x == result.reshape(kept_shape)
    count = hit.sum(axis=dims, keepdims=True, dtype=x.dtype)
    return (_kept(g, kept_shape) / count) * hit.astype(x.dtype)


# Invariant: ``kept_shape`` is ``self_`` 's shape with every dim in ``dims`` set to 1.
AmaxBackward0 = Rule("AmaxBackward0", _amax_grad, saves=EVENLY_SAVES,
                     keeps=("dims", "kept_shape"), doc="``amax``: see ``_amax_grad``.")
AminBackward0 = Rule("AminBackward0", _amax_grad, saves=EVENLY_SAVES,
                     keeps=("dims", "kept_shape"), doc="``amin``: see ``_amax_grad``.")


def _check_nonempty(name: str, x: Any, dim: Any) -> None:
    """PyTorch's errors (``zero_numel_check_dims``) for a reduction without identity over
    an empty ``x``: each dim in turn, as given, must be in range and of non-zero size;
    they come before the check for a repeated dim."""
    dims = dim if isinstance(dim, (tuple, list)) else (() if dim is None else (dim,))
    if not dims:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )
    for d in dims:
        if x.shape[normalize_dim(d, x.ndim)] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _amax_amin(a: Tensor, dim: Any, keepdim: bool, is_max: bool) -> Tensor:
    x = a.data
    if x.size == 0:
        _check_nonempty("amax" if is_max else "amin", x, dim)
    dims = reduction_dims(dim, x.ndim)
    data = as_array((x.max if is_max else x.min)(axis=dims, keepdims=keepdim))
    rule = AmaxBackward0 if is_max else AminBackward0
    return rule.record((a,), data, a.device, (a,), (dims, _kept_shape(x.shape, dims)))


def amax(a: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """The largest values over ``dim`` (``()`` or None: all); ties share the gradient."""
    return _amax_amin(a, dim, keepdim, is_max=True)


def amin(a: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:
    """The smallest values over ``dim`` (``()`` or None: all); ties share the gradient."""
    return _amax_amin(a, dim, keepdim, is_max=False)


# ---- argmax / argmin ----

def _arg_extreme(a: Tensor, dim: Any, keepdim: bool, is_max: bool) -> Tensor:
    """int64 indices of the first extreme (the first NaN, if any: NaN wins, as PyTorch)."""
    name = "argmax" if is_max else "argmin"
    x = a.data
    if x.dtype.kind == "b":
        raise RuntimeError(f"{name}(): does not support bool input; convert it first, "
                           f"e.g. t.to(aiograd.int64).{name}()")
    find = x.argmax if is_max else x.argmin
    if dim is None:
        if x.size == 0:
            raise IndexError(
                f"{name}(): Expected reduction dim to be specified for input.numel() == 0."
            )
        idx = as_array(find()).astype(int64, copy=False)
        if keepdim:
            idx = idx.reshape((1,) * x.ndim)
        return plain(idx, a.device)
    d = normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        return plain(a.device.xp.zeros((), dtype=int64), a.device)
    if x.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    return plain(find(axis=d, keepdims=keepdim).astype(int64, copy=False), a.device)


def argmax(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the largest element (of the flattened tensor when ``dim`` is None)."""
    return _arg_extreme(a, dim, keepdim, is_max=True)


def argmin(a: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The index of the smallest element (of the flattened tensor when ``dim`` is None)."""
    return _arg_extreme(a, dim, keepdim, is_max=False)


# ---- any / all ----

def _any_all(a: Tensor, dim: Any, keepdim: bool, is_any: bool) -> Tensor:
    """Bool results (uint8 for a uint8 input, as PyTorch); ``dim=()`` reduces nothing."""
    x = a.data
    if dim is None:
        dims = tuple(range(x.ndim))
    elif isinstance(dim, (tuple, list)) and not dim:
        dims = ()
    else:
        dims = reduction_dims(dim, x.ndim)
    data = as_array((x.any if is_any else x.all)(axis=dims, keepdims=keepdim))
    if x.dtype == numpy.uint8:
        data = data.astype(x.dtype)
    return plain(data, a.device)


def any(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where some element over ``dim`` (an int, a tuple, None: all) is nonzero."""
    return _any_all(a, dim, keepdim, is_any=True)


def all(a: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where every element over ``dim`` (an int, a tuple, None: all) is nonzero."""
    return _any_all(a, dim, keepdim, is_any=False)


# ---- norm ----

def _abs(x: Any) -> Any:
    return x.abs() if type(x) is Tensor else _dual.xp_of(x).abs(x)


# ---- trickier grads: norm ----

def _norm_grad(g: Any, x: Any, norm: Any, p: float, dims: tuple[int, ...]) -> Any:
    """PyTorch's ``norm_backward`` for ``p != 0`` (``g`` and ``norm`` kept-shaped)."""
    if p == 1:
        return _dual.sign(x) * g
    if p == 2:
        return g * _dual.where(_dual.raw(norm) == 0, 0, x / norm)
    xa = _dual.raw(x)
    if math.isinf(p):  # the gradient split evenly among the elements at the norm
        na = _dual.raw(norm)
        xp = _dual.xp_of(xa)
        hit = (xp.abs(xa) == na) | (xp.isnan(xa) & xp.isnan(na))
        count = hit.sum(axis=dims, keepdims=True, dtype=xa.dtype)
        return (_dual.sign(x) * hit.astype(xa.dtype)) * (g / count)
    if p < 1:
        scaled = _dual.sign(x) * _dual.where(xa == 0, 0, _abs(x) ** (p - 1))
        return scaled * g * norm ** (1 - p)
    scale = _dual.where(_dual.raw(norm) == 0, 0, g / norm ** (p - 1))
    if p < 2:
        return _dual.sign(x) * _abs(x) ** (p - 1) * scale
    return x * _abs(x) ** (p - 2) * scale


@numpy.errstate(all="ignore")  # masked divisions by a zero norm; 0 ** negative
def _vector_norm_grad(g: Any, x: Any, norm: Any, p: float, dims: tuple[int, ...],
                      kept_shape: tuple[int, ...]) -> Any:
    if p == 0:  # the norm is a count: no gradient
        return None
    return _norm_grad(_kept(g, kept_shape), x, _kept(norm, kept_shape), p, dims)


# Invariant: ``kept_shape`` is ``self_`` 's shape with every dim in ``dims`` set to 1.
LinalgVectorNormBackward0 = Rule(
    "LinalgVectorNormBackward0", _vector_norm_grad, saves=("self_", "result"),
    keeps=("p", "dims", "kept_shape"),
    doc="The gradient of a vector p-norm over ``dims`` (``_norm_grad``); none for p == 0, "
        "whose value is a count (PyTorch's name: ``Tensor.norm`` is ``linalg.vector_norm``).")


def _norm_order(p: Any, dim: Any) -> float:
    """``p`` as a number: "fro" and None are 2 (a vector norm, up to two dims)."""
    if p is None:
        return 2.0
    if isinstance(p, str):
        if p == "fro":
            if isinstance(dim, (tuple, list)) and len(dim) > 2:
                raise RuntimeError(
                    "linalg.matrix_norm: dim must be a 2-tuple. Got "
                    + " ".join(str(d) for d in dim)
                )
            return 2.0
        if p == "nuc":
            raise NotImplementedError(
                "norm(p='nuc'): the nuclear norm needs singular values, which aiograd does "
                "not compute; use p='fro', or a number"
            )
        raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    if not isinstance(p, numbers.Real):
        raise TypeError(f"norm(): p must be a number, 'fro' or None, got {type(p).__name__}")
    return float(p)


@numpy.errstate(all="ignore")  # 0 ** negative
def _vector_norm(x: Any, p: float, dims: tuple[int, ...], keepdim: bool) -> Any:
    xp = _dual.xp_of(x)
    if p == 2:
        return xp.sqrt((x * x).sum(axis=dims, keepdims=keepdim))
    if p == 0:
        return (x != 0).sum(axis=dims, keepdims=keepdim, dtype=x.dtype)
    ax = xp.abs(x)
    if p == 1:
        return ax.sum(axis=dims, keepdims=keepdim)
    if p == math.inf:
        return ax.max(axis=dims, keepdims=keepdim)
    if p == -math.inf:
        return ax.min(axis=dims, keepdims=keepdim)
    return (ax ** p).sum(axis=dims, keepdims=keepdim) ** (1 / p)


def norm(a: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False,
         dtype: Any = None) -> Tensor:
    """The vector ``p``-norm over ``dim`` (None: all): ``sum(|x| ** p) ** (1 / p)``.

    ``p``: "fro" or None (2), any number, ``inf`` (max |x|), ``-inf`` (min |x|), 0 (the
    count of nonzeros, not differentiable). ``dtype``: compute in a wider float dtype.
    """
    order = _norm_order(p, dim)
    if a.dtype.kind != "f":
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{scalar_type_name(a.dtype)}"
        )
    if dtype is not None:
        dt = _given_dtype(dtype, "norm")
        if dt.kind != "f":
            raise RuntimeError(
                "linalg.vector_norm: dtype should be floating point or complex, but got "
                f"{scalar_type_name(dt)}"
            )
        if not numpy.can_cast(a.dtype, dt, "safe"):
            raise RuntimeError(
                f"linalg.vector_norm: the dtype of the input ({scalar_type_name(a.dtype)}) "
                f"should be convertible without narrowing to the specified dtype "
                f"({scalar_type_name(dt)})"
            )
        a = a.to(dtype=dt)
    x = a.data
    dims = reduction_dims(dim, x.ndim)
    if order < 0 or math.isinf(order):  # no identity: needs elements
        shown = f"{order:g}"
        if x.size == 0 and dim is None:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {shown} norm on an empty tensor "
                "because the operation does not have an identity"
            )
        for d in dims:
            if x.shape[d] == 0:
                raise RuntimeError(
                    f"linalg.vector_norm cannot compute the {shown} norm on the dimension "
                    f"{d} because this dimension is empty and the operation does not have "
                    "an identity"
                )
    data = as_array(_vector_norm(x, order, dims, keepdim))
    return LinalgVectorNormBackward0.record((a,), data, a.device, (a,),
                                            (order, dims, _kept_shape(x.shape, dims)))


# ---- cumsum ----

def _flip(x: Any, dim: int) -> Any:
    """``x`` reversed along ``dim`` (a view; recorded for a Tensor)."""
    return x[(slice(None),) * dim + (slice(None, None, -1),)]


def _cumsum(x: Any, dim: int) -> Any:
    return cumsum(x, dim) if type(x) is Tensor else x.cumsum(axis=dim)


def reverse_cumsum(g: Any, dim: int) -> Any:
    """Sums from the end along ``dim``: ``flip(cumsum(flip(g)))`` (a 0-d ``g`` itself)."""
    if g.ndim == 0:
        return g
    return _flip(_cumsum(_flip(g, dim), dim), dim)


CumsumBackward0 = Rule("CumsumBackward0", reverse_cumsum, keeps=("dim",),
                       doc="The gradient summed from the end along ``dim``.")


def cumsum(a: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sums along ``dim``, of ``a`` cast to ``dtype``; integers and bools add in
    int64."""
    x = a.data
    d = normalize_dim(dim, x.ndim)
    if dtype is not None:
        dt = _cast_dtype(a, dtype, "cumsum")
        x = x.astype(dt, copy=False)
    elif x.dtype.kind in "biu":
        dt = int64
    else:
        dt = x.dtype
    data = _dual.contiguous(x.cumsum(axis=d, dtype=dt)) if x.ndim else x.astype(dt, copy=True)
    return CumsumBackward0.record((a,), data, a.device, (), (d,))


# ---- logsumexp ----

@numpy.errstate(all="ignore")  # a slice of -inf: -inf - -inf
def _logsumexp_grad(g: Any, x: Any, result: Any, kept_shape: tuple[int, ...]) -> Any:
    """``g * exp(x - result)``: the softmax over the reduced slice."""
    return _kept(g, kept_shape) * _dual.exp(x - _kept(result, kept_shape))


# Invariant: ``kept_shape`` is ``self_`` 's shape with every reduced dim set to 1.
LogsumexpBackward0 = Rule("LogsumexpBackward0", _logsumexp_grad, saves=("self_", "result"),
                          keeps=("kept_shape",), doc="``g * exp(x - result)``.")


@numpy.errstate(all="ignore")  # log(0) for a slice of -inf
def _logsumexp(x: Any, dims: tuple[int, ...], keepdim: bool) -> Any:
    """``log(sum(exp(x)))`` with the slice's max subtracted first (0 for an infinite max)."""
    xp = _dual.xp_of(x)
    if builtins.any(x.shape[d] == 0 for d in dims):  # the sum of nothing: log(0)
        shape = _kept_shape(x.shape, dims)
        if not keepdim:
            shape = tuple(n for i, n in enumerate(x.shape) if i not in dims)
        return xp.full(shape, -math.inf, dtype=x.dtype)
    top = x.max(axis=dims, keepdims=True)
    top = xp.where(xp.isinf(top), 0, top)
    out = xp.log(xp.exp(x - top).sum(axis=dims, keepdims=True)) + top
    return out if keepdim else out.squeeze(dims)


def logsumexp(a: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(a)))`` over ``dim`` (an int or a tuple), computed stably; integers
    and bools as float32."""
    x = a.data
    if x.dtype.kind != "f":
        x = x.astype(float32)
    dims = reduction_dims(dim, x.ndim)
    data = as_array(_logsumexp(x, dims, keepdim))
    return LogsumexpBackward0.record((a,), data, a.device, (a,), (_kept_shape(x.shape, dims),))
