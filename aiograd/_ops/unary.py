"""Elementwise ops: unary (``exp log sqrt log1p expm1 sin cos abs tanh sigmoid relu sign``),
``relu_``, ``clamp`` (number or tensor bounds, and in place), ``maximum``/``minimum`` and
``where``.

Each node saves one tensor, the input or the op's own output, whichever
its formula is written with (PyTorch's choice). Masks (relu, clamp, where)
are raw boolean arrays: they carry no gradient, so a create_graph formula
needs only ``where(mask, g, 0)``, differentiable in ``g``. relu's is the
exception, as in PyTorch: its create_graph gradient is an op of its own,
``threshold_backward(g, result)``, recorded even when only ``result`` has
history.
See Note [Dual backward formulas], Note [Broadcast gradients] and
Note [Silent singular points].
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
from collections.abc import Callable
from typing import Any

import numpy

from .. import _defaults
from .._tensor import Tensor
from ..devices import device_of_array
from ..graph._saved import SavedTensor
from . import _dual
from ._promote import result_type
from ._record import check_same_device, edges_of, save, scalar_or_tensor, tensor_arg
from ._rule import SAVES_INPUT, SAVES_OUTPUT, Rule, RuleNode, Saved, Whole
from .arithmetic import broadcast_error, broadcast_error_among
from .inplace import check_inplace, commit_inplace


def _floating(a: Tensor) -> Any:
    """The array of ``a``, as float32 when it is an integer or bool array (PyTorch's rule)."""
    x = a.data
    return x if x.dtype.kind == "f" else x.astype(_defaults.FLOAT)


# ---- exp / log / sqrt ----

ExpBackward0 = Rule("ExpBackward0", lambda g, result: g * result, saves=SAVES_OUTPUT,
                    doc="d exp(x) = exp(x): saves the output.")


@numpy.errstate(all="ignore")  # x == 0. See Note [Silent singular points].
def _log_grad(g: Any, x: Any) -> Any:
    return g / x


LogBackward0 = Rule("LogBackward0", _log_grad, saves=SAVES_INPUT, doc="d log(x) = 1 / x.")


@numpy.errstate(all="ignore")  # sqrt(x) == 0. See Note [Silent singular points].
def _sqrt_grad(g: Any, result: Any) -> Any:
    return g / (2 * result)


SqrtBackward0 = Rule("SqrtBackward0", _sqrt_grad, saves=SAVES_OUTPUT,
                     doc="d sqrt(x) = 1 / (2 sqrt(x)): saves the output.")


def exp(a: Tensor) -> Tensor:
    return ExpBackward0.unary(a, a.device.xp.exp(_floating(a)))


def log(a: Tensor) -> Tensor:
    data = _dual.quietly(a.device.xp.log, _floating(a))  # log(0) == -inf, log(-1) is NaN
    return LogBackward0.unary(a, data)


def sqrt(a: Tensor) -> Tensor:
    data = _dual.quietly(a.device.xp.sqrt, _floating(a))  # sqrt(-1) is NaN
    return SqrtBackward0.unary(a, data)


# ---- log1p / expm1 / sin / cos ----

@numpy.errstate(all="ignore")  # x == -1. See Note [Silent singular points].
def _log1p_grad(g: Any, x: Any) -> Any:
    return g / (x + 1)


Log1PBackward0 = Rule("Log1PBackward0", _log1p_grad, saves=SAVES_INPUT,
                      doc="d log(1 + x) = 1 / (1 + x): saves the input.")
Expm1Backward0 = Rule("Expm1Backward0", lambda g, result: g * (result + 1), saves=SAVES_OUTPUT,
                      doc="d (exp(x) - 1) = exp(x): saves the output (``result + 1``).")
SinBackward0 = Rule(
    "SinBackward0",
    lambda g, x: g * (cos(x) if type(x) is Tensor else _dual.xp_of(x).cos(x)),
    saves=SAVES_INPUT, doc="d sin(x) = cos(x): saves the input.")


def _cos_grad(g: Any, x: Any) -> Any:
    return g * -(sin(x) if type(x) is Tensor else _dual.xp_of(x).sin(x))


CosBackward0 = Rule("CosBackward0", _cos_grad, saves=SAVES_INPUT,
                    doc="d cos(x) = -sin(x): saves the input.")


def log1p(a: Tensor) -> Tensor:
    data = _dual.quietly(a.device.xp.log1p, _floating(a))  # log1p(-1) == -inf
    return Log1PBackward0.unary(a, data)


def expm1(a: Tensor) -> Tensor:
    return Expm1Backward0.unary(a, a.device.xp.expm1(_floating(a)))


def sin(a: Tensor) -> Tensor:
    return SinBackward0.unary(a, a.device.xp.sin(_floating(a)))


def cos(a: Tensor) -> Tensor:
    return CosBackward0.unary(a, a.device.xp.cos(_floating(a)))


# ---- tanh / sigmoid ----
# Under create_graph their gradients are ops of their own, ``tanh_backward(g, y)`` and
# ``sigmoid_backward(g, s)``, as in PyTorch; those save ``y`` (``s``), and ``grad`` only
# when ``y`` needs a gradient.

TanhBackwardBackward0 = Rule(
    "TanhBackwardBackward0",
    lambda gg, y, grad: tanh_backward(gg, y),
    lambda gg, y, grad: gg * (-2 * y * grad),
    saves=("output", Saved("grad_output", only_for=1)),
    doc="``tanh_backward(grad, y) = grad * (1 - y^2)``: d grad = ``tanh_backward(gg, y)``, "
        "d y = ``gg * (-2 y grad)`` (PyTorch's).")
SigmoidBackwardBackward0 = Rule(
    "SigmoidBackwardBackward0",
    lambda gg, s, grad: sigmoid_backward(gg, s),
    lambda gg, s, grad: gg * grad * (1 - 2 * s),
    saves=("output", Saved("grad_output", only_for=1)),
    doc="``sigmoid_backward(grad, s) = grad * (1 - s) * s``: d grad = "
        "``sigmoid_backward(gg, s)``, d s = ``gg * grad * (1 - 2 s)`` (PyTorch's).")


def tanh_backward(grad: Any, y: Any) -> Any:
    """tanh's gradient ``grad * (1 - y^2)`` from its output ``y``: two arrays, or two
    Tensors (then recorded as a TanhBackwardBackward0)."""
    if type(grad) is not Tensor:
        return grad * (1 - y * y)
    return TanhBackwardBackward0.record((grad, y), grad.data * (1 - y.data * y.data),
                                        grad.device, (y, grad))


def sigmoid_backward(grad: Any, s: Any) -> Any:
    """sigmoid's gradient ``grad * (1 - s) * s`` from its output ``s``: two arrays, or
    two Tensors (then recorded as a SigmoidBackwardBackward0)."""
    if type(grad) is not Tensor:
        return grad * (1 - s) * s
    return SigmoidBackwardBackward0.record((grad, s), grad.data * (1 - s.data) * s.data,
                                           grad.device, (s, grad))


TanhBackward0 = Rule("TanhBackward0", tanh_backward, saves=SAVES_OUTPUT,
                     doc="d tanh(x) = 1 - tanh(x)^2: saves the output.")
SigmoidBackward0 = Rule("SigmoidBackward0", sigmoid_backward, saves=SAVES_OUTPUT,
                        doc="d sigmoid(x) = (1 - s) s: saves the output.")


def tanh(a: Tensor) -> Tensor:
    return TanhBackward0.unary(a, a.device.xp.tanh(_floating(a)))


def sigmoid(a: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``, computed from ``exp(-|x|)`` so no exp overflows."""
    x = _floating(a)
    xp = a.device.xp
    e = xp.exp(-xp.abs(x))
    r = 1 / (1 + e)
    return SigmoidBackward0.unary(a, xp.where(x >= 0, r, e * r))


# ---- abs / sign / relu / clamp ----

AbsBackward0 = Rule("AbsBackward0", lambda g, x: g * _dual.sign(x), saves=SAVES_INPUT,
                    doc="d |x| = sign(x): 0 at 0 and at NaN, as PyTorch's ``grad * sgn(x)``.")
SignBackward0 = Rule("SignBackward0", _dual.zeros_of,
                     doc="sign is piecewise constant: its gradient is zero everywhere.")


# ---- trickier grads: relu ----

def _relu_grad(node: RuleNode, grads: list[Any], create_graph: bool,
               result: SavedTensor) -> Any:
    """Passes the gradient where the output is not 0 (positive, or NaN for a NaN input,
    as PyTorch's ``threshold_backward``), and 0 elsewhere.

    This is the MLP hot path: a finite gradient is multiplied by the mask, in place
    when it is the engine's alone (``_masked``).
    """
    if create_graph:
        return (threshold_backward(grads[0], result.unpack(node, True)),)
    mask = result.unpack(node, False) != 0
    g = grads[0]
    # In place when nothing else can see g (see Note [Stealing gradients]): the
    # engine's buffer slot, the local and getrefcount's argument; no post-hook
    # will be shown the incoming gradient.
    return (_masked(g, mask, type(g) is numpy.ndarray and g.base is None
                    and not node._post_hooks and sys.getrefcount(g) <= 3),)


ReluBackward0 = Rule("ReluBackward0", whole=_relu_grad, saves=SAVES_OUTPUT,
                     doc="relu's node: saves the output. See ``_relu_grad``.")
# relu's create_graph gradient ``threshold_backward(grad, result)``: the mask is piecewise
# constant in ``result``, so its gradient is zeros (PyTorch's). ``self_`` is relu's result.
ThresholdBackwardBackward0 = Rule(
    "ThresholdBackwardBackward0",
    lambda g, result: threshold_backward(g, result),
    lambda g, result: _dual.zeros_of(g),
    saves=("self_",),
    doc="The node of relu's create_graph gradient ``threshold_backward(grad, result)``.")


def _finite(x: Any) -> bool:
    """True if the NumPy array ``x`` holds no inf or NaN, in one BLAS pass: its dot
    with itself is finite (False too if the sum of squares overflows: the caller's
    slow path is right for any array)."""
    flat = x.reshape(-1)
    with numpy.errstate(over="ignore", invalid="ignore"):
        return math.isfinite(flat @ flat)


def _masked(grad: Any, mask: Any, in_place: bool) -> Any:
    """``grad`` where ``mask`` is True, 0 elsewhere, also where ``grad`` is inf or NaN
    (PyTorch selects; a product would give NaN there). A finite NumPy gradient is
    multiplied by the mask, in place if ``in_place``; other arrays take ``where``
    (on a device, no host sync)."""
    if type(grad) is numpy.ndarray and _finite(grad):
        if in_place:
            grad *= mask
            return grad
        return grad * mask
    return _dual.xp_of(grad).where(mask, grad, 0)


def threshold_backward(grad: Any, result: Any) -> Any:
    """relu's gradient ``grad * (result != 0)``: two arrays, or two Tensors (then recorded
    as a ThresholdBackwardBackward0). ``result`` is relu's output (>= 0 or NaN)."""
    if type(grad) is not Tensor:
        return _masked(grad, _dual.raw(result) != 0, False)
    data = _masked(grad.data, result.data != 0, False)
    return ThresholdBackwardBackward0.record((grad, result), data, grad.device, (result,))


def abs(a: Tensor) -> Tensor:  # noqa: A001
    if a.data.dtype.kind == "b":
        raise NotImplementedError(f'"abs_{a.device.type}" not implemented for \'Bool\'')
    return AbsBackward0.unary(a, a.device.xp.abs(a.data))


def sign(a: Tensor) -> Tensor:
    """-1, 0 or 1; 0 at NaN as in PyTorch (NumPy's is NaN); a bool tensor is its own sign."""
    x = a.data
    return SignBackward0.unary(a, x.copy() if x.dtype.kind == "b" else _dual.sign(x))


def relu(a: Tensor) -> Tensor:
    if a.data.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    return ReluBackward0.unary(a, a.device.xp.maximum(a.data, 0))


def relu_(a: Tensor) -> Tensor:
    """``relu`` in place (See Note [In-place ops]), recorded as ReluBackward0 saving the
    result at its new version, as PyTorch's: a later in-place write of ``a`` makes the
    backward raise.

    A view's result is saved without history (a create_graph backward treats it as a
    constant): its grad_fn leads back to this node through the root's CopySlices, and
    holding it would be a reference cycle. Only the mask is taken from it, so the
    gradients are PyTorch's.
    """
    if a.data.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    edges = edges_of(a)
    check_inplace(a, edges)
    a.device.xp.maximum(a.data, 0, out=a.data)
    if edges is None:
        return commit_inplace(a, None)
    node = ReluBackward0.make(edges)
    commit_inplace(a, node)
    ReluBackward0.set_output(node, save(a, is_output=True) if a._base is None
                             else save(a.detach()))
    return a


def _clamp_number_grad(g: Any, x: Any, lo: Any, hi: Any) -> Any:
    """Number bounds: passes the gradient where ``min <= x <= max`` (bounds included, as
    PyTorch)."""
    if lo is None:
        mask = x <= hi
    elif hi is None:
        mask = x >= lo
    else:
        mask = (x >= lo) & (x <= hi)
    return _dual.where(mask, g, 0)


def _clamp_tensor_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                       hi_saved: SavedTensor | None, lo_saved: SavedTensor | None,
                       x_saved: SavedTensor) -> Any:
    """Tensor bounds: the gradient goes to whichever of ``x``, ``min``, ``max`` the output
    took, as PyTorch's ``clamp_backward_min_max``: to ``x`` where ``min <= x <= max``, to
    ``min`` where ``x < min < max``, to ``max`` where ``x > max`` or ``max < min``. With
    one bound: to ``x`` where it is within, to the bound elsewhere. The masks come from
    the saved values (raw arrays: no gradient flows through them).
    """
    g = grads[0]
    x = _dual.raw(x_saved.unpack(node, False))
    lo = None if lo_saved is None else _dual.raw(lo_saved.unpack(node, False))
    hi = None if hi_saved is None else _dual.raw(hi_saved.unpack(node, False))
    if hi is None:
        inside, to_lo, to_hi = x >= lo, x < lo, None
    elif lo is None:
        inside, to_lo, to_hi = x <= hi, None, x > hi
    else:
        inside = (x >= lo) & (x <= hi)
        to_lo = (x < lo) & (lo < hi)
        to_hi = (x > hi) | (hi < lo)
    edges = node.next_edges
    gx = _dual.where(inside, g, 0) if edges[0] is not None else None
    if len(edges) == 2:  # clamp_min / clamp_max: (x, its one bound)
        to_bound = to_lo if hi is None else to_hi
        return (gx, _dual.where(to_bound, g, 0) if edges[1] is not None else None)
    glo = _dual.where(to_lo, g, 0) if edges[1] is not None else None
    ghi = _dual.where(to_hi, g, 0) if edges[2] is not None else None
    return (gx, glo, ghi)


def _clamp_rules(number_name: str, tensor_name: str, what: str) -> tuple[Rule, Rule]:
    """The rules of ``what`` with number bounds and with tensor bounds (PyTorch's names;
    the tensor node saves ``max``, ``min``, ``self_`` in PyTorch's order of saving)."""
    number = Rule(number_name, _clamp_number_grad, saves=(Saved("saved", raw=True),),
                  keeps=("min", "max"), doc=f"``{what}`` with number bounds.")
    tensor = Rule(tensor_name, whole=_clamp_tensor_grad, saves=("max", "min", "self_"),
                  doc=f"``{what}`` with tensor bounds.")
    return number, tensor


ClampBackward1, ClampBackward0 = _clamp_rules("ClampBackward1", "ClampBackward0", "clamp")
ClampMinBackward0, ClampMinBackward1 = _clamp_rules(
    "ClampMinBackward0", "ClampMinBackward1", "clamp_min")
ClampMaxBackward0, ClampMaxBackward1 = _clamp_rules(
    "ClampMaxBackward0", "ClampMaxBackward1", "clamp_max")


_PLAIN_BOUNDS = frozenset((int, float, type(None)))  # checked first: an ABC check is slow


def _is_number_bound(value: Any) -> bool:
    return value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def _clamp_dtype(a: Tensor, lo: Any, hi: Any) -> numpy.dtype:
    """The result type of ``a`` with both bounds (Note [Type promotion])."""
    return result_type(a, *(bound for bound in (lo, hi) if bound is not None))


def _clamp_args(fn: str, lo: Any, hi: Any) -> None:
    """Raise unless the bounds are numbers, or tensors, and not both None (PyTorch's rule)."""
    if lo is None and hi is None:
        raise RuntimeError(f"{fn}: at least one of 'min' or 'max' must not be None")
    kinds = tuple(type(b).__name__ for b in (lo, hi))
    for b in (lo, hi):
        if not (_is_number_bound(b) or isinstance(b, Tensor)):
            raise TypeError(f"{fn}(): min and max must be numbers, tensors or None, got {kinds}")
    if (isinstance(lo, Tensor) and hi is not None and not isinstance(hi, Tensor)) or (
            isinstance(hi, Tensor) and lo is not None and not isinstance(lo, Tensor)):
        raise TypeError(
            f"{fn}() received an invalid combination of arguments - got {kinds}: min and max "
            "must be both numbers or both tensors"
        )


def _clamp_tensors(a: Tensor, lo: Tensor | None, hi: Tensor | None) -> Any:
    """The array of ``a`` clamped to tensor bounds (broadcast), in the result type."""
    rt = _clamp_dtype(a, lo, hi)
    xp = a.device.xp
    data = a.data if a.dtype == rt else a.data.astype(rt)
    shape = a.shape
    for bound, op in ((lo, xp.maximum), (hi, xp.minimum)):
        if bound is None:
            continue
        check_same_device(a, bound)
        try:
            shape = numpy.broadcast_shapes(shape, bound.shape)
        except ValueError:
            raise broadcast_error(shape, bound.shape) from None
        data = op(data, bound.data if bound.dtype == rt else bound.data.astype(rt))
    return data


def _clamp(a: Tensor, lo: Any, hi: Any, fn: str, number: Rule, tensor: Rule) -> Tensor:
    """``clamp`` recorded as ``number`` (number bounds) or ``tensor``'s node."""
    numbers_only = (type(lo) in _PLAIN_BOUNDS and type(hi) in _PLAIN_BOUNDS) or (
        _is_number_bound(lo) and _is_number_bound(hi))
    if not numbers_only or (lo is None and hi is None):
        return _clamp_by_tensors(a, lo, hi, fn, tensor)
    x = a.data
    if x.dtype.kind != "f":  # an integer tensor with a float bound computes in float32
        rt = _clamp_dtype(a, lo, hi)
        if x.dtype != rt:
            x = x.astype(rt)
    return number.record((a,), a.device.xp.clip(x, lo, hi), a.device, (a,), (lo, hi))


def _clamp_by_tensors(a: Tensor, lo: Any, hi: Any, fn: str, tensor: Rule) -> Tensor:
    _clamp_args(fn, lo, hi)
    data = _clamp_tensors(a, lo, hi)
    if tensor is ClampBackward0:
        inputs: tuple[Tensor | None, ...] = (a, lo, hi)
    else:  # clamp_min / clamp_max: one bound
        inputs = (a, hi if lo is None else lo)
    return tensor.record(inputs, data, a.device, (hi, lo, a))


def clamp(a: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Limit ``a`` to ``[min, max]``: numbers, or tensors that broadcast with ``a``. When
    ``min > max`` the element becomes ``max``. The result has the PyTorch result type of
    ``a`` and the bounds (an integer tensor with a float bound gives float32)."""
    return _clamp(a, min, max, "clamp", ClampBackward1, ClampBackward0)


def clamp_min(a: Tensor, min: Any) -> Tensor:  # noqa: A002
    """``clamp(a, min=min)``, recorded as ClampMinBackward0/1 (number/tensor), as PyTorch."""
    if min is None:
        raise TypeError("clamp_min(): argument 'min' must be a number or a Tensor, not None")
    return _clamp(a, min, None, "clamp_min", ClampMinBackward0, ClampMinBackward1)


def clamp_max(a: Tensor, max: Any) -> Tensor:  # noqa: A002
    """``clamp(a, max=max)``, recorded as ClampMaxBackward0/1 (number/tensor), as PyTorch."""
    if max is None:
        raise TypeError("clamp_max(): argument 'max' must be a number or a Tensor, not None")
    return _clamp(a, None, max, "clamp_max", ClampMaxBackward0, ClampMaxBackward1)


# ---- maximum / minimum ----

def _extremum_grad(a_loses: Callable[[Any, Any], Any], b_loses: Callable[[Any, Any], Any]
                   ) -> Whole:
    """The backward of maximum (minimum): the gradient goes to the larger (smaller), split
    in halves at ties, as PyTorch (a NaN, equal to nothing and unordered, passes it to
    both). ``a_loses(a, b)``/``b_loses(a, b)``: where each input gets none."""

    def extremum_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                      other: SavedTensor, self_: SavedTensor) -> Any:
        g = grads[0]
        a = _dual.raw(self_.unpack(node, False))
        b = _dual.raw(other.unpack(node, False))
        shared = _dual.where(a == b, g / 2, g)
        edges = node.next_edges
        ga = _dual.where(a_loses(a, b), 0, shared) if edges[0] is not None else None
        gb = _dual.where(b_loses(a, b), 0, shared) if edges[1] is not None else None
        return (ga, gb)

    return extremum_grad


MaximumBackward0 = Rule("MaximumBackward0", whole=_extremum_grad(operator.lt, operator.gt),
                        saves=("other", "self_"), doc="``maximum(a, b)``.")
MinimumBackward0 = Rule("MinimumBackward0", whole=_extremum_grad(operator.gt, operator.lt),
                        saves=("other", "self_"), doc="``minimum(a, b)``.")


def _extremum(name: str, rule: Rule) -> Any:
    def extremum(a: Tensor, other: Tensor) -> Tensor:
        tensor_arg(other, name, "other", 2)
        dev = check_same_device(a, other)
        rt = result_type(a, other)
        x = a.data if a.dtype == rt else a.data.astype(rt)
        y = other.data if other.dtype == rt else other.data.astype(rt)
        try:
            data = getattr(dev.xp, name)(x, y)
        except ValueError:
            raise broadcast_error(a.shape, other.shape) from None
        return rule.record((a, other), data, dev, (other, a))  # PyTorch's order of saving

    extremum.__name__ = name
    extremum.__doc__ = f"Elementwise {name} of two tensors (broadcast); NaN propagates."
    return extremum


maximum = _extremum("maximum", MaximumBackward0)
minimum = _extremum("minimum", MinimumBackward0)


# ---- where ----

# ``where(cond, x, y)``: the gradient goes to x where cond holds, to y elsewhere. A number
# operand has a None edge; ``condition`` saves the boolean array (no gradient).
WhereBackward0 = Rule("WhereBackward0",
                      lambda g, cond: _dual.where(cond, g, 0),
                      lambda g, cond: _dual.where(cond, 0, g),
                      saves=(Saved("condition", raw=True),), doc="``where(cond, x, y)``.")


def _condition_array(condition: Any) -> Any:
    cond = condition.data if isinstance(condition, Tensor) else condition
    dtype = getattr(cond, "dtype", None)
    if dtype is None or getattr(cond, "shape", None) is None:
        raise TypeError(
            "where: condition must be a bool Tensor or a bool array, got "
            f"{type(condition).__name__}; build one with a comparison, e.g. x > 0"
        )
    if dtype.kind != "b":
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got dtype {dtype}; "
            "compare it first, e.g. where(cond != 0, x, y)"
        )
    return cond


_ABSENT: Any = object()  # where(condition) has no input and other


def where(condition: Any, input: Any = _ABSENT, other: Any = _ABSENT) -> Any:  # noqa: A002
    """Elementwise ``input if condition else other``, broadcasting all three.

    ``condition``: a bool Tensor or a bool NumPy/CuPy array. ``input`` and
    ``other``: tensors, arrays or numbers; the result has their PyTorch result
    type (two Python floats give float32). ``where(condition)`` alone is
    ``condition.nonzero(as_tuple=True)``, as in PyTorch.
    """
    if input is _ABSENT or other is _ABSENT:
        if input is not other:
            raise TypeError("where() takes a condition alone, or a condition, input and other")
        return tensor_arg(condition, "where", "condition").nonzero(as_tuple=True)
    cond = _condition_array(condition)
    like = next((t for t in (input, other, condition) if isinstance(t, Tensor)), None)
    if like is None:
        like = Tensor._wrap(cond)
    x = scalar_or_tensor(input, like)
    y = scalar_or_tensor(other, like)
    dev = like.device
    for t in (x, y):
        if type(t) is Tensor:
            dev = check_same_device(like, t)
    cond_dev = condition.device if isinstance(condition, Tensor) else device_of_array(cond)
    if cond_dev is not dev:
        raise RuntimeError(
            f"where: condition is on {cond_dev} but the values are on {dev}; move the "
            "condition with .to(device)"
        )
    xd = x.data if type(x) is Tensor else x
    yd = y.data if type(y) is Tensor else y
    try:
        data = dev.xp.where(cond, xd, yd)
    except ValueError:
        raise broadcast_error_among(cond.shape, numpy.shape(xd), numpy.shape(yd)) from None
    dtype = result_type(x, y)  # Note [Type promotion]
    if data.dtype != dtype:
        data = data.astype(dtype)
    inputs = (x if type(x) is Tensor else None, y if type(y) is Tensor else None)
    kept = condition if isinstance(condition, Tensor) else Tensor._wrap(cond, dev)
    return WhereBackward0.record(inputs, data, dev, (kept,))


def _where_method(self: Tensor, condition: Any, other: Any) -> Tensor:
    """``self.where(condition, other)``: ``where(condition, self, other)``."""
    return where(condition, self, other)
