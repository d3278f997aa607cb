"""Pointwise ops: the in-place forms of the unary ops (``exp_ log_ sqrt_ sigmoid_ tanh_ sin_
cos_ abs_ neg_ sign_ log1p_ expm1_ clamp_min_ clamp_max_``), of ``cumsum`` and of the ops
without a gradient ``logical_not_ bitwise_not_``; ``reciprocal rsqrt square floor ceil
round trunc frac log2 log10 exp2 nan_to_num`` and their in-place forms; ``isnan isinf
isfinite`` (no gradient); and ``atan2 hypot fmod remainder fmax fmin lerp addcmul
addcdiv``, most also in place.

Note [In-place pointwise ops]
    ``t.foo_(...)`` runs ``foo`` on ``t``'s value and copies the result into ``t``, under
    the rules of Note [In-place ops]: the result type must cast to ``t``'s dtype and the
    result must have ``t``'s shape. With autograd involved, ``foo`` is recorded on a
    stand-in for ``t``'s old value that carries ``t``'s history: a copy when ``foo``'s node
    saves its input (PyTorch saves ``original_self``, a clone, for ``sin_``), the same
    array when it does not; the node becomes ``t``'s grad_fn (its root's CopySlices, for a
    view). A node that saves its result saves ``t`` after the write, as PyTorch: a later
    in-place write of ``t`` makes the backward raise. Saved as the node's output, it needs
    no reference to ``t`` and unpacks, under create_graph, with the node as its history.
    Not so for a view: the node runs inside the root's CopySlices, and a create_graph
    result whose history is the node itself would make a second backward run it twice
    (and free it in between); PyTorch gives the result the view's new history, held
    weakly, which a SavedTensor cannot do without a reference cycle. The node then saves
    a second result of ``op`` on the old value, sharing ``t``'s version counter: its
    history is a twin of the node, over the same inputs.

Integer and bool inputs follow PyTorch: the float ops (``reciprocal``, ``log2``, ``atan2``)
compute in float32; the rounding ops return an integer tensor's values; the ops PyTorch
does not implement for a dtype raise its NotImplementedError.
See Note [Dual backward formulas], Note [Broadcast gradients] and
Note [Silent singular points].
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

import numpy

from .._tensor import Tensor, cpp_type_name, scalar_type_name
from ..grad_mode import no_grad
from ..graph._node import Node
from . import _dual, unary
from ._promote import result_type
from ._record import (
    check_same_device,
    edges_of,
    plain,
    record,
    scalar_or_tensor,
    tensor_arg,
)
from ._rule import SAVES_INPUT, SAVES_OUTPUT, Rule, Saved, identity
from .arithmetic import (
    _promoted,
    broadcast_error,
    broadcast_error_among,
    neg,
    opmath,
    wrap_int,
)
from .arithmetic import pow as _pow
from .inplace import (
    _can_cast,
    check_inplace,
    commit_inplace,
    pow_,
    write_inplace,
)
from .unary import _floating

__all__ = [
    "exp_", "log_", "sqrt_", "sigmoid_", "tanh_", "sin_", "cos_", "abs_", "neg_", "sign_",
    "log1p_", "expm1_", "clamp_", "clamp_min_", "clamp_max_", "cumsum_", "logical_not_",
    "bitwise_not_",
    "reciprocal", "reciprocal_", "rsqrt", "rsqrt_", "square", "square_",
    "floor", "floor_", "ceil", "ceil_", "round", "round_", "trunc", "trunc_", "frac", "frac_",
    "log2", "log2_", "log10", "log10_", "exp2", "exp2_", "isnan", "isinf", "isfinite",
    "nan_to_num", "nan_to_num_", "atan2", "atan2_", "hypot", "hypot_", "fmod", "fmod_",
    "remainder", "remainder_", "fmax", "fmin", "lerp", "lerp_", "addcmul", "addcmul_",
    "addcdiv", "addcdiv_",
]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _unary_(op: Callable[[Tensor], Tensor], saves: str | None) -> Callable[[Tensor], Tensor]:
    """The in-place form of the unary ``op`` whose node saves ``saves`` (``"input"``,
    ``"result"`` or None)."""

    def op_(t: Tensor) -> Tensor:
        return write_inplace(t, op, (), copy_self=saves == "input",
                        result_slot="saved" if saves == "result" else None)

    op_.__name__ = op.__name__ + "_"
    op_.__doc__ = f"``{op.__name__}`` in place. See Note [In-place pointwise ops]."
    return op_


exp_ = _unary_(unary.exp, "result")
log_ = _unary_(unary.log, "input")
sqrt_ = _unary_(unary.sqrt, "result")
sigmoid_ = _unary_(unary.sigmoid, "result")
tanh_ = _unary_(unary.tanh, "result")
sin_ = _unary_(unary.sin, "input")
cos_ = _unary_(unary.cos, "input")
abs_ = _unary_(unary.abs, "input")
neg_ = _unary_(neg, None)
sign_ = _unary_(unary.sign, None)
log1p_ = _unary_(unary.log1p, "input")
expm1_ = _unary_(unary.expm1, "result")


def _check_number_bounds(t: Tensor, lo: Any, hi: Any) -> None:
    """PyTorch's error, which names the C++ type, for number bounds whose result type does
    not cast to ``t``'s dtype."""
    if not isinstance(lo, Tensor) and not isinstance(hi, Tensor):
        rt = unary._clamp_dtype(t, lo, hi)
        if not _can_cast(rt, t.dtype):
            raise RuntimeError(f"result type {scalar_type_name(rt)} can't be cast to the "
                               f"desired output type {cpp_type_name(t.dtype)}")


def clamp_(t: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """``clamp`` in place; its node saves the input. See Note [In-place pointwise ops]."""
    unary._clamp_args("clamp_", min, max)
    _check_number_bounds(t, min, max)
    return write_inplace(t, lambda s: unary.clamp(s, min, max), (min, max), copy_self=True)


def _clamp_bound_(op: Callable[[Tensor, Any], Tensor]) -> Callable[[Tensor, Any], Tensor]:
    """The in-place form of ``clamp_min`` or ``clamp_max`` (``op``), whose node saves its
    input."""

    def op_(t: Tensor, bound: Any) -> Tensor:
        if bound is not None and not isinstance(bound, (Tensor, numbers.Real)):
            raise TypeError(f"{op_.__name__}(): argument '{op.__name__[-3:]}' must be a Tensor "
                            f"or a number, not {type(bound).__name__}")
        if bound is not None:
            _check_number_bounds(t, bound, None)
        return write_inplace(t, lambda s: op(s, bound), (bound,), copy_self=True)

    op_.__name__ = op.__name__ + "_"
    op_.__doc__ = f"``{op.__name__}`` in place. See Note [In-place pointwise ops]."
    return op_


clamp_min_ = _clamp_bound_(unary.clamp_min)
clamp_max_ = _clamp_bound_(unary.clamp_max)


def cumsum_(a: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """``cumsum`` in place (a ``dtype`` must be ``a``'s); not for a bool tensor."""
    if a.dtype.kind == "b":
        raise _not_implemented(f"cumsum_out_{a.device.type}", a.dtype)

    def op(s: Tensor) -> Tensor:
        out = s.cumsum(dim, dtype=dtype)
        if dtype is not None and out.dtype != a.dtype:
            raise RuntimeError(
                f"Bad in-place call: input tensor dtype {cpp_type_name(a.dtype)} and output "
                f"tensor dtype {cpp_type_name(out.dtype)} should match")
        return out

    return write_inplace(a, op, (), copy_self=False)


def _write_untracked(t: Tensor, data: Any) -> Tensor:
    """Write ``data`` into ``t`` for an op without a gradient: ``t`` keeps its history and
    may be a leaf that requires grad, or a view of one, as in PyTorch (which checks such a
    write as one under no_grad)."""
    with no_grad():
        check_inplace(t, None)
    t.device.xp.copyto(t.data, data, casting="unsafe")
    return commit_inplace(t, None)


def logical_not_(a: Tensor) -> Tensor:
    """``logical_not`` in place: 1 where ``a`` is zero, else 0, in ``a``'s dtype."""
    return _write_untracked(a, a.device.xp.logical_not(a.data))


def bitwise_not_(a: Tensor) -> Tensor:
    """``bitwise_not`` in place, bool and integer tensors only."""
    if a.dtype.kind not in "biu":
        raise _not_implemented(f"bitwise_not_{a.device.type}", a.dtype)
    return _write_untracked(a, a.device.xp.invert(a.data))


def _not_implemented(kernel: str, dtype: numpy.dtype) -> NotImplementedError:
    return NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_type_name(dtype)}'")


# ---- reciprocal / rsqrt / square ----

ReciprocalBackward0 = Rule("ReciprocalBackward0", lambda g, r: -g * (r * r), saves=SAVES_OUTPUT,
                           doc="d (1 / x) = -r^2 for the result r: saves the output.")
RsqrtBackward0 = Rule("RsqrtBackward0", lambda g, r: -0.5 * g * r ** 3, saves=SAVES_OUTPUT,
                      doc="d x^(-1/2) = -r^3 / 2 for the result r: saves the output.")


def _reciprocal_data(x: Any) -> Any:
    return 1 / x


def _rsqrt_data(x: Any) -> Any:
    """``1 / sqrt(x)``, rounded once for float16 (computed in float32, as PyTorch)."""
    root = _dual.xp_of(x).sqrt(x.astype(opmath(x.dtype), copy=False))
    return (1 / root).astype(x.dtype, copy=False)


def reciprocal(a: Tensor) -> Tensor:
    """``1 / a``; an integer or bool tensor gives float32."""
    data = _dual.quietly(_reciprocal_data, _floating(a))  # 1 / 0 == inf
    return ReciprocalBackward0.unary(a, data)


def rsqrt(a: Tensor) -> Tensor:
    """``1 / sqrt(a)``; an integer or bool tensor gives float32."""
    data = _dual.quietly(_rsqrt_data, _floating(a))  # rsqrt(0) == inf, rsqrt(-1) is NaN
    return RsqrtBackward0.unary(a, data)


def square(a: Tensor) -> Tensor:
    """``a ** 2``, recorded as PowBackward0 as in PyTorch (a bool tensor gives int64)."""
    return _pow(a, 2)


def square_(a: Tensor) -> Tensor:
    """``a **= 2`` in place."""
    return pow_(a, 2)


reciprocal_ = _unary_(reciprocal, "result")
rsqrt_ = _unary_(rsqrt, "result")


# ---- floor / ceil / round / trunc / frac ----

def _zeros_rule(name: str) -> Rule:
    return Rule(name, _dual.zeros_of, doc="Piecewise constant: the gradient is zero, as "
                                          "PyTorch's.")


FloorBackward0 = _zeros_rule("FloorBackward0")
CeilBackward0 = _zeros_rule("CeilBackward0")
TruncBackward0 = _zeros_rule("TruncBackward0")
RoundBackward0 = _zeros_rule("RoundBackward0")
RoundBackward1 = _zeros_rule("RoundBackward1")  # round(x, decimals=d)
FracBackward0 = Rule("FracBackward0", identity,
                     doc="``x - trunc(x)``: the gradient passes through, as PyTorch's.")


def _rounding(name: str, kernel: str, rule: Rule) -> Callable[[Tensor], Tensor]:
    """The op ``name`` (NumPy's ufunc ``kernel``): an integer tensor gives a copy of its
    values, a bool one raises, as PyTorch."""

    def rounding(a: Tensor) -> Tensor:
        x = a.data
        if x.dtype.kind == "b":
            raise _not_implemented(f"{name}_vml_{a.device.type}", x.dtype)
        if x.dtype.kind in "iu":
            return plain(x.copy(), a.device)
        return rule.unary(a, getattr(a.device.xp, kernel)(x))

    rounding.__name__ = name
    rounding.__doc__ = f"Elementwise {name}, with a zero gradient (as PyTorch's)."
    return rounding


floor = _rounding("floor", "floor", FloorBackward0)
ceil = _rounding("ceil", "ceil", CeilBackward0)
trunc = _rounding("trunc", "trunc", TruncBackward0)
_round_half_even = _rounding("round", "rint", RoundBackward0)


def round(a: Tensor, *, decimals: int | None = None) -> Tensor:  # noqa: A001
    """Round half to even; with ``decimals`` to that many decimal places (negative: to
    tens, hundreds...), computed as PyTorch's kernel, floating point tensors only."""
    if decimals is None:
        return _round_half_even(a)
    x = a.data
    if x.dtype.kind != "f":
        kernel = "round_vml" if decimals == 0 else "round"
        raise _not_implemented(f"{kernel}_{a.device.type}", x.dtype)
    xp = a.device.xp
    wide = x.astype(opmath(x.dtype), copy=False)
    scale = wide.dtype.type(10.0 ** -decimals if decimals < 0 else 10.0 ** decimals)
    data = xp.rint(wide / scale) * scale if decimals < 0 else xp.rint(wide * scale) / scale
    return RoundBackward1.unary(a, data.astype(x.dtype, copy=False))


def frac(a: Tensor) -> Tensor:
    """``a - trunc(a)``, floating point tensors only; the gradient passes through."""
    x = a.data
    if x.dtype.kind != "f":
        raise _not_implemented(f"frac_{a.device.type}", x.dtype)
    return FracBackward0.unary(a, _dual.quietly(_frac_data, x))  # inf - inf


def _frac_data(x: Any) -> Any:
    return x - _dual.xp_of(x).trunc(x)


floor_ = _unary_(floor, None)
ceil_ = _unary_(ceil, None)
trunc_ = _unary_(trunc, None)
frac_ = _unary_(frac, None)


def round_(a: Tensor, *, decimals: int | None = None) -> Tensor:
    """``round`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: round(s, decimals=decimals), (), copy_self=False)


# ---- log2 / log10 / exp2 ----

def _log_base_grad(ln_base: float) -> Callable[[Any, Any], Any]:
    """d log_b(x) = 1 / (x ln b), for ``ln_base`` = ln b."""

    @numpy.errstate(all="ignore")  # x == 0. See Note [Silent singular points].
    def log_base_grad(g: Any, x: Any) -> Any:
        return g / (x * ln_base)

    return log_base_grad


Log2Backward0 = Rule("Log2Backward0", _log_base_grad(_LN2), saves=SAVES_INPUT,
                     doc="d log2(x) = 1 / (x ln 2): saves the input.")
Log10Backward0 = Rule("Log10Backward0", _log_base_grad(_LN10), saves=SAVES_INPUT,
                      doc="d log10(x) = 1 / (x ln 10): saves the input.")
Exp2Backward0 = Rule("Exp2Backward0", lambda g, result: g * result * _LN2, saves=SAVES_OUTPUT,
                     doc="d 2^x = 2^x ln 2: saves the output.")


def log2(a: Tensor) -> Tensor:
    """Base-2 logarithm; an integer or bool tensor gives float32."""
    data = _dual.quietly(a.device.xp.log2, _floating(a))
    return Log2Backward0.unary(a, data)


def log10(a: Tensor) -> Tensor:
    """Base-10 logarithm; an integer or bool tensor gives float32."""
    data = _dual.quietly(a.device.xp.log10, _floating(a))
    return Log10Backward0.unary(a, data)


def exp2(a: Tensor) -> Tensor:
    """``2 ** a``; an integer or bool tensor gives float32."""
    return Exp2Backward0.unary(a, a.device.xp.exp2(_floating(a)))


log2_ = _unary_(log2, "input")
log10_ = _unary_(log10, "input")
exp2_ = _unary_(exp2, "result")


# ---- isnan / isinf / isfinite / nan_to_num ----

def _classify(name: str, non_float: bool) -> Callable[[Tensor], Tensor]:
    """The bool test ``name`` (a NumPy ufunc); ``non_float`` is its value for an integer or
    bool tensor. Records nothing."""

    def classify(a: Tensor) -> Tensor:
        x = a.data
        xp = a.device.xp
        if x.dtype.kind == "f":
            return plain(getattr(xp, name)(x), a.device)
        return plain((xp.ones if non_float else xp.zeros)(x.shape, dtype=bool), a.device)

    classify.__name__ = name
    classify.__doc__ = f"A bool tensor: ``{name}`` of each element (no gradient)."
    return classify


isnan = _classify("isnan", False)
isinf = _classify("isinf", False)
isfinite = _classify("isfinite", True)


NanToNumBackward0 = Rule(
    "NanToNumBackward0", lambda g, x: g * _dual.xp_of(x).isfinite(x),
    saves=(Saved("saved", raw=True),),
    doc="The gradient where the input is finite, ``g * 0`` elsewhere (PyTorch's ``grad * "
        "isfinite(self)``): saves the input.")


def nan_to_num(a: Tensor, nan: float | None = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN to ``nan`` (None: 0), inf to ``posinf``, -inf to ``neginf`` (by default the
    dtype's largest and lowest values); an integer or bool tensor gives a copy."""
    x = a.data
    if x.dtype.kind != "f":
        return plain(x.copy(), a.device)
    if nan is None:
        nan = 0.0
    # a replacement out of the dtype's range becomes inf, as in PyTorch (NumPy warns)
    data = _dual.quietly(a.device.xp.nan_to_num, x, True, nan, posinf, neginf)
    return NanToNumBackward0.unary(a, data)


def nan_to_num_(a: Tensor, nan: float | None = 0.0, posinf: float | None = None,
                neginf: float | None = None) -> Tensor:
    """``nan_to_num`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: nan_to_num(s, nan, posinf, neginf), (), copy_self=True)


# ---- atan2 / hypot ----

@numpy.errstate(all="ignore")  # a == b == 0. See Note [Silent singular points].
def _atan2_recip(a: Any, b: Any) -> Any:
    """``1 / (a^2 + b^2)``, taken as 0 where ``a^2 + b^2 == 0`` (both gradients 0 at the
    origin; a create_graph backward through the masked reciprocal is NaN there, as
    PyTorch's)."""
    denom = a * a + b * b
    return _dual.where(_dual.raw(denom) == 0, 0.0, 1 / denom)


@numpy.errstate(all="ignore")  # r == 0. See Note [Silent singular points].
def _hypot_grad(g: Any, x: Any, r: Any) -> Any:
    return g * x / r


Atan2Backward0 = Rule(
    "Atan2Backward0",
    lambda g, other, self_: g * other * _atan2_recip(self_, other),
    lambda g, other, self_: g * -self_ * _atan2_recip(self_, other),
    saves=("other", "self_"),
    doc="``atan2(a, b)``: ``g b / (a^2 + b^2)`` and ``-g a / (a^2 + b^2)``, as PyTorch's "
        "(see ``_atan2_recip``).")
HypotBackward0 = Rule(
    "HypotBackward0",
    lambda g, other, self_, result: _hypot_grad(g, self_, result),
    lambda g, other, self_, result: _hypot_grad(g, other, result),
    saves=("other", "self_", "result"),
    doc="``hypot(a, b) = r``: ``g a / r`` and ``g b / r``, as PyTorch's; saves both inputs "
        "and the result.")


def _apply_pair(ufunc: Any, a: Tensor, other: Tensor, x: Any, y: Any) -> Any:
    """``ufunc(x, y)`` for the arrays of ``a`` and ``other``; PyTorch's error if their shapes
    do not broadcast."""
    try:
        return _dual.quietly(ufunc, x, y)
    except ValueError:
        raise broadcast_error(a.shape, other.shape) from None


def atan2(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The angle of the point ``(other, input)``, in ``[-pi, pi]``; integer or bool tensors
    give float32."""
    a = tensor_arg(input, "atan2", "input", 1)
    other = tensor_arg(other, "atan2", "other", 2)
    dev = check_same_device(a, other)
    x, y = _promoted(a, other, true_divide=True)
    data = _apply_pair(dev.xp.arctan2, a, other, x, y)
    return Atan2Backward0.record((a, other), data, dev, (other, a))  # PyTorch's order of saving


def hypot(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """``sqrt(input^2 + other^2)`` without overflow; floating point result types only."""
    a = tensor_arg(input, "hypot", "input", 1)
    other = tensor_arg(other, "hypot", "other", 2)
    dev = check_same_device(a, other)
    x, y = _promoted(a, other)
    if x.dtype.kind != "f":
        raise _not_implemented(f"hypot_{dev.type}", x.dtype)
    data = _apply_pair(dev.xp.hypot, a, other, x, y)
    return HypotBackward0.record((a, other), data, dev, (other, a))  # PyTorch's order of saving


def atan2_(a: Tensor, other: Tensor) -> Tensor:
    """``atan2`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: atan2(s, other), (other,), copy_self=True)


def hypot_(a: Tensor, other: Tensor) -> Tensor:
    """``hypot`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: hypot(s, other), (other,), copy_self=True,
                         result_slot="result")


# ---- fmod / remainder ----

FmodBackward0 = Rule("FmodBackward0", identity,
                     doc="``fmod(x, number)``: the gradient passes through.")
RemainderBackward0 = Rule("RemainderBackward0", identity,
                          doc="``remainder(x, number)``: the gradient passes through.")


@numpy.errstate(all="ignore")  # b == 0. See Note [Silent singular points].
def _fmod_other_grad(g: Any, b: Any, a: Any) -> Any:
    return -g * _dual.xp_of(a).trunc(a / b)


@numpy.errstate(all="ignore")  # b == 0. See Note [Silent singular points].
def _remainder_other_grad(g: Any, b: Any, a: Any) -> Any:
    return -g * _dual.xp_of(a).floor_divide(a, b)


# The quotient is piecewise constant: raw arrays in the create_graph formula, as PyTorch's
# ``div(rounding_mode=...)`` has a zero gradient.
_MODULO_SAVES = (Saved("other", raw=True), Saved("self_", raw=True))
FmodBackward1 = Rule("FmodBackward1", identity, _fmod_other_grad, saves=_MODULO_SAVES,
                     doc="``fmod(a, b) = a - trunc(a / b) b``: ``g`` and ``-g trunc(a / b)``.")
RemainderBackward1 = Rule("RemainderBackward1", identity, _remainder_other_grad,
                          saves=_MODULO_SAVES,
                          doc="``remainder(a, b) = a - floor(a / b) b``: ``g`` and "
                              "``-g floor(a / b)``.")


class _RemainderOfNumber(Node):
    """``remainder(number, tensor)``: PyTorch implements no derivative."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        raise RuntimeError("derivative for aten::remainder is not implemented")

    def name(self) -> str:
        return "torch::autograd::NotImplemented"


def _fmod_data(x: Any, y: Any) -> Any:
    return _dual.xp_of(x).fmod(x, y)


def _remainder_data(x: Any, y: Any) -> Any:
    """PyTorch's remainder: ``fmod`` moved into the divisor's sign (a zero keeps fmod's)."""
    xp = _dual.xp_of(x if hasattr(x, "dtype") else y)
    mod = xp.fmod(x, y)
    return xp.where((mod != 0) & ((mod < 0) != (y < 0)), mod + y, mod)


def _modulo(name: str, kernel: Callable[[Any, Any], Any], a: Any, other: Any) -> Tensor:
    """``kernel(a, other)`` (fmod or remainder) with PyTorch's result type and errors;
    recorded as ``<Name>Backward0`` (a number divisor) or ``Backward1`` (a tensor)."""
    if not isinstance(a, Tensor):
        if name == "fmod" or not isinstance(other, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(a).__name__}")
        return _remainder_of_number(a, other)
    other = scalar_or_tensor(other, a)
    dev = a.device
    if type(other) is Tensor:
        dev = check_same_device(a, other)
        x, y = _promoted(a, other)
    else:
        x = a.data.astype(result_type(a, other), copy=False)
        y = wrap_int(x, other)
    if x.dtype.kind == "b":
        raise _not_implemented(f"{name}_{dev.type}", x.dtype)
    if x.dtype.kind in "iu" and not dev.xp.all(y != 0):
        raise RuntimeError("ZeroDivisionError")
    if type(other) is not Tensor:
        rule = FmodBackward0 if name == "fmod" else RemainderBackward0
        return rule.unary(a, _dual.quietly(kernel, x, y))
    data = _apply_pair(kernel, a, other, x, y)
    rule = FmodBackward1 if name == "fmod" else RemainderBackward1
    return rule.record((a, other), data, dev, (other, a))  # PyTorch's order of saving


def _remainder_of_number(number: Any, t: Tensor) -> Tensor:
    """``remainder(number, t)``: the result of PyTorch's, whose derivative raises."""
    x = t.data.astype(result_type(number, t), copy=False)
    if x.dtype.kind == "b":
        raise _not_implemented(f"remainder_{t.device.type}", x.dtype)
    if x.dtype.kind in "iu" and not t.device.xp.all(x != 0):
        raise RuntimeError("ZeroDivisionError")
    data = _dual.quietly(_remainder_data, wrap_int(x, number), x)
    edges = edges_of(t)
    if edges is None:
        return plain(data, t.device)
    return record(_RemainderOfNumber(edges), data, t.device)


def fmod(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """C's remainder ``input - trunc(input / other) * other`` (the dividend's sign);
    ``other`` a tensor or a number. An integer divisor of 0 raises, as in PyTorch."""
    return _modulo("fmod", _fmod_data, input, other)


def remainder(input: Any, other: Any) -> Tensor:  # noqa: A002
    """Python's ``%``: ``input - floor(input / other) * other`` (the divisor's sign); either
    may be a number. An integer divisor of 0 raises, as in PyTorch."""
    return _modulo("remainder", _remainder_data, input, other)


def _rmod(t: Tensor, number: Any) -> Tensor:
    """``number % t``."""
    return remainder(number, t)


def fmod_(a: Tensor, other: Any) -> Tensor:
    """``fmod`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: fmod(s, other), (other,), copy_self=isinstance(other, Tensor))


def remainder_(a: Tensor, other: Any) -> Tensor:
    """``remainder`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: remainder(s, other), (other,),
                    copy_self=isinstance(other, Tensor))


# ---- fmax / fmin ----

def _fextremum_rule(name: str, wins: Callable[[Any, Any], Any], doc: str) -> Rule:
    """``fmax`` (``fmin``): the gradient goes to ``a`` where ``wins(a, b)`` or ``b`` is NaN,
    to ``b`` elsewhere (ties go to ``a``, as PyTorch's). The masks come from raw arrays."""

    def to_a(a: Any, b: Any) -> Any:
        return wins(a, b) | _dual.xp_of(b).isnan(b)

    return Rule(name,
                lambda g, other, self_: _dual.where(to_a(self_, other), g, 0),
                lambda g, other, self_: _dual.where(to_a(self_, other), 0, g),
                saves=(Saved("other", raw=True), Saved("self_", raw=True)), doc=doc)


FmaxBackward0 = _fextremum_rule("FmaxBackward0", operator.ge,
                                "``fmax(a, b)``: to ``a`` where ``a >= b`` or ``b`` is NaN.")
FminBackward0 = _fextremum_rule("FminBackward0", operator.le,
                                "``fmin(a, b)``: to ``a`` where ``a <= b`` or ``b`` is NaN.")


def _fextremum(name: str, rule: Rule) -> Callable[[Tensor, Tensor], Tensor]:
    def fextremum(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
        a = tensor_arg(input, name, "input", 1)
        other = tensor_arg(other, name, "other", 2)
        dev = check_same_device(a, other)
        x, y = _promoted(a, other)
        data = _apply_pair(getattr(dev.xp, name), a, other, x, y)
        return rule.record((a, other), data, dev, (other, a))  # PyTorch's order of saving

    fextremum.__name__ = name
    fextremum.__doc__ = (f"Elementwise {name[1:]} of two tensors (broadcast), ignoring NaN: "
                         "NaN only where both are NaN.")
    return fextremum


fmax = _fextremum("fmax", FmaxBackward0)
fmin = _fextremum("fmin", FminBackward0)


# ---- lerp ----

LerpBackward0 = Rule("LerpBackward0", lambda g, weight: g * (1 - weight),
                     lambda g, weight: g * weight, keeps=("weight",),
                     doc="``lerp(a, b, w)`` for a number ``w``: ``g (1 - w)`` and ``g w``.")
LerpBackward1 = Rule(
    "LerpBackward1",
    lambda g, end, self_, weight: g * (1 - weight),
    lambda g, end, self_, weight: g * weight,
    lambda g, end, self_, weight: g * (end - self_),
    saves=("end", "self_", "weight"),  # PyTorch's order of saving
    doc="``lerp(a, b, w)`` for a tensor ``w``: ``g (1 - w)``, ``g w`` and ``g (b - a)``.")


def _lerp_data(x: Any, y: Any, w: Any) -> Any:
    """PyTorch's kernel: from the nearer end, so ``w == 1`` gives ``y`` exactly."""
    if w.ndim == 0:
        return x + w * (y - x) if -0.5 < w < 0.5 else y - (y - x) * (1 - w)
    xp = _dual.xp_of(x)
    return xp.where(xp.abs(w) < 0.5, x + w * (y - x), y - (y - x) * (1 - w))


def _lerp_check(a: Tensor, end: Tensor, weight: Any) -> None:
    """PyTorch's checks: ``end`` (and a weight with dims) of ``input``'s dtype, floating."""
    dtype = a.dtype
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and (name == "end" or t.ndim) and t.dtype != dtype:
            raise RuntimeError(f"expected dtype {cpp_type_name(dtype)} for `{name}` but got "
                               f"dtype {cpp_type_name(t.dtype)}")
    if dtype.kind != "f":
        kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
        raise _not_implemented(kernel, dtype)


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:  # noqa: A002
    """``input + weight * (end - input)``, broadcast; ``weight`` a number or a tensor.
    ``end`` and a weight with dims must have ``input``'s floating dtype (a 0-d weight is
    cast to it), as in PyTorch."""
    a = tensor_arg(input, "lerp", "input", 1)
    end = tensor_arg(end, "lerp", "end", 2)
    if not isinstance(weight, (Tensor, numbers.Real)):
        raise TypeError(f"lerp(): argument 'weight' (position 3) must be Tensor or Number, "
                        f"not {type(weight).__name__}")
    dev = check_same_device(a, end)
    _lerp_check(a, end, weight)
    ot = opmath(a.dtype)
    x, y = a.data.astype(ot, copy=False), end.data.astype(ot, copy=False)
    if isinstance(weight, Tensor):
        check_same_device(a, weight)
        w = weight.data.astype(ot, copy=False)
        shapes: tuple[tuple[int, ...], ...] = (x.shape, y.shape, w.shape)
    else:
        w = ot.type(weight)
        shapes = (x.shape, y.shape)
    try:
        numpy.broadcast_shapes(*shapes)
    except ValueError:
        raise broadcast_error_among(*shapes) from None
    data = _lerp_data(x, y, w).astype(a.dtype, copy=False)
    if isinstance(weight, Tensor):
        return LerpBackward1.record((a, end, weight), data, dev, (end, a, weight))
    return LerpBackward0.record((a, end), data, dev, (), (float(weight),))


def lerp_(a: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``lerp`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: lerp(s, end, weight), (end, weight),
                    copy_self=isinstance(weight, Tensor))


# ---- addcmul / addcdiv ----

@numpy.errstate(all="ignore")  # t2 == 0. See Note [Silent singular points].
def _addcdiv_tensor1_grad(g: Any, t1: Any, t2: Any, v: Any) -> Any:
    return g * (v / t2)


@numpy.errstate(all="ignore")  # t2 == 0. See Note [Silent singular points].
def _addcdiv_tensor2_grad(g: Any, t1: Any, t2: Any, v: Any) -> Any:
    return -g * (v * t1 / (t2 * t2))


# addcmul saves the tensor each gradient needs; addcdiv both (its tensor1's reads tensor2).
AddcmulBackward0 = Rule(
    "AddcmulBackward0", identity,
    lambda g, t1, t2, v: g * (t2 * v),
    lambda g, t1, t2, v: g * (t1 * v),
    saves=(Saved("tensor1", only_for=2), Saved("tensor2", only_for=1)), keeps=("value",),
    doc="``a + v t1 t2``: ``g``, ``g (t2 v)`` and ``g (t1 v)``.")
AddcdivBackward0 = Rule(
    "AddcdivBackward0", identity, _addcdiv_tensor1_grad, _addcdiv_tensor2_grad,
    saves=("tensor1", "tensor2"), keeps=("value",),
    doc="``a + v t1 / t2``: ``g``, ``g (v / t2)`` and ``-g (v t1 / t2^2)``, as PyTorch's.")


_ADDCDIV_INTEGER_ERROR = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
    "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
    "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
    "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
    "addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
    "tensor2), for all dtypes."
)


def _addc(name: str, input: Tensor, tensor1: Tensor, tensor2: Tensor, value: Any,  # noqa: A002
          rule: Rule) -> Tensor:
    """``input + value * tensor1 (* or /) tensor2`` in their result type (``value`` does not
    promote: an integer result truncates it), as PyTorch's kernel computes it."""
    a = tensor_arg(input, name, "input", 1)
    t1 = tensor_arg(tensor1, name, "tensor1", 2)
    t2 = tensor_arg(tensor2, name, "tensor2", 3)
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")
    dev = check_same_device(a, t1)
    check_same_device(a, t2)
    divides = rule is AddcdivBackward0
    if divides and t1.dtype.kind in "biu" and t2.dtype.kind in "biu":
        raise RuntimeError(_ADDCDIV_INTEGER_ERROR)
    rt = result_type(a, t1, t2)
    if rt.kind == "b":
        raise _not_implemented(f"addcmul_{dev.type}_out", rt)
    ot = opmath(rt)
    x, y, z = (t.data.astype(ot, copy=False) for t in (a, t1, t2))
    v = ot.type(value)
    try:
        numpy.broadcast_shapes(x.shape, y.shape, z.shape)
    except ValueError:
        raise broadcast_error_among(x.shape, y.shape, z.shape) from None
    data = (x + _dual.quietly(_addc_term, v, y, z, divides)).astype(rt, copy=False)
    return rule.record((a, t1, t2), data, dev, (t1, t2), (value,))


def _addc_term(v: Any, y: Any, z: Any, divides: bool) -> Any:
    return v * y / z if divides else v * y * z


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 * tensor2``, broadcast."""
    return _addc("addcmul", input, tensor1, tensor2, value, AddcmulBackward0)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 / tensor2``, broadcast; not for two integer tensors."""
    return _addc("addcdiv", input, tensor1, tensor2, value, AddcdivBackward0)


def addcmul_(a: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``addcmul`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: addcmul(s, tensor1, tensor2, value=value),
                    (tensor1, tensor2), copy_self=False)


def addcdiv_(a: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:
    """``addcdiv`` in place. See Note [In-place pointwise ops]."""
    return write_inplace(a, lambda s: addcdiv(s, tensor1, tensor2, value=value),
                    (tensor1, tensor2), copy_self=False)
