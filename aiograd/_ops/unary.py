"""Elementwise unary ops (``exp log sqrt abs tanh sigmoid relu sign clamp``) and ``where``.

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

import numbers
import sys
from typing import Any

import numpy

from .._tensor import Tensor, float32
from ..devices import device_of_array
from ..graph._node import Node
from . import _dual
from ._promote import result_type
from ._record import check_same_device, edges_of, plain, record, save, scalar_or_tensor


class _SavesOne(Node):
    """A unary node keeping one tensor in ``saved`` (its input or its output)."""

    __slots__ = ("saved",)

    def release_variables(self) -> None:
        self.saved.release()


def _record_unary(node_cls: type[_SavesOne], a: Tensor, data: Any, saves_output: bool) -> Tensor:
    """Return ``data`` as the result of ``node_cls`` applied to ``a`` (or plain)."""
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    node = node_cls(edges)
    if saves_output:
        out = record(node, data, a.device)
        node.saved = save(out, is_output=True)
        return out
    node.saved = save(a)
    return record(node, data, a.device)


def _floating(a: Tensor) -> Any:
    """The array of ``a``, as float32 when it is an integer or bool array (PyTorch's rule)."""
    x = a.data
    return x if x.dtype.kind == "f" else x.astype(float32)


# ---- exp / log / sqrt ----

class ExpBackward0(_SavesOne):
    """d exp(x) = exp(x): saves the output."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0] * self.saved.unpack(self, create_graph),)


class LogBackward0(_SavesOne):
    __slots__ = ()

    @numpy.errstate(all="ignore")  # x == 0. See Note [Silent singular points].
    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0] / self.saved.unpack(self, create_graph),)


class SqrtBackward0(_SavesOne):
    """d sqrt(x) = 1 / (2 sqrt(x)): saves the output."""

    __slots__ = ()

    @numpy.errstate(all="ignore")  # sqrt(x) == 0. See Note [Silent singular points].
    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0] / (2 * self.saved.unpack(self, create_graph)),)


def exp(a: Tensor) -> Tensor:
    return _record_unary(ExpBackward0, a, a.device.xp.exp(_floating(a)), saves_output=True)


def log(a: Tensor) -> Tensor:
    data = _dual.quietly(a.device.xp.log, _floating(a))  # log(0) == -inf, log(-1) is NaN
    return _record_unary(LogBackward0, a, data, saves_output=False)


def sqrt(a: Tensor) -> Tensor:
    data = _dual.quietly(a.device.xp.sqrt, _floating(a))  # sqrt(-1) is NaN
    return _record_unary(SqrtBackward0, a, data, saves_output=True)


# ---- tanh / sigmoid ----

class TanhBackward0(_SavesOne):
    """d tanh(x) = 1 - tanh(x)^2: saves the output."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        y = self.saved.unpack(self, create_graph)
        return (grads[0] * (1 - y * y),)


class SigmoidBackward0(_SavesOne):
    """d sigmoid(x) = (1 - s) s: saves the output."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        s = self.saved.unpack(self, create_graph)
        return (grads[0] * (1 - s) * s,)


def tanh(a: Tensor) -> Tensor:
    return _record_unary(TanhBackward0, a, a.device.xp.tanh(_floating(a)), saves_output=True)


def sigmoid(a: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``, computed from ``exp(-|x|)`` so no exp overflows."""
    x = _floating(a)
    xp = a.device.xp
    e = xp.exp(-xp.abs(x))
    r = 1 / (1 + e)
    return _record_unary(SigmoidBackward0, a, xp.where(x >= 0, r, e * r), saves_output=True)


# ---- abs / sign / relu / clamp ----

class AbsBackward0(_SavesOne):
    """d |x| = sign(x): 0 at 0 and at NaN, as PyTorch's ``grad * sgn(x)``."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0] * _dual.sign(self.saved.unpack(self, create_graph)),)


class SignBackward0(Node):
    """sign is piecewise constant: its gradient is zero everywhere (as PyTorch's)."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (_dual.zeros_of(grads[0]),)


class ReluBackward0(_SavesOne):
    """Passes the gradient where the output is not 0 (positive, or NaN for a NaN
    input, as PyTorch's ``threshold_backward``): saves the output.

    ``g * mask``, not ``where(mask, g, 0)``: several times faster in NumPy, and
    this is the MLP hot path. Unlike PyTorch, a NaN gradient stays NaN where
    the output is 0.
    """

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        if create_graph:
            return (threshold_backward(grads[0], self.saved.unpack(self, True)),)
        mask = self.saved.unpack(self, False) != 0
        g = grads[0]
        # In place when nothing else can see g (see Note [Stealing gradients]): the
        # engine's buffer slot, the local and getrefcount's argument; no post-hook
        # will be shown the incoming gradient.
        if (type(g) is numpy.ndarray and g.base is None and not self._post_hooks
                and sys.getrefcount(g) <= 3):
            g *= mask
            return (g,)
        return (g * mask,)


class ThresholdBackwardBackward0(Node):
    """The node of relu's create_graph gradient ``threshold_backward(grad, result)``.

    The mask is piecewise constant in ``result``: the gradient is
    ``threshold_backward(gg, result)`` for ``grad`` and zeros for ``result``,
    as PyTorch's. ``self_`` saves relu's result.
    """

    __slots__ = ("self_",)

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        edges = self.next_edges
        gg = None
        if edges[0] is not None:
            gg = threshold_backward(g, self.self_.unpack(self, create_graph))
        return (gg, _dual.zeros_of(g) if edges[1] is not None else None)

    def release_variables(self) -> None:
        self.self_.release()


def threshold_backward(grad: Any, result: Any) -> Any:
    """relu's gradient ``grad * (result != 0)``: two arrays, or two Tensors (then recorded
    as a ThresholdBackwardBackward0). ``result`` is relu's output (>= 0 or NaN)."""
    if type(grad) is not Tensor:
        return grad * (_dual.raw(result) != 0)
    data = grad.data * (result.data != 0)
    edges = edges_of(grad, result)
    if edges is None:
        return plain(data, grad.device)
    node = ThresholdBackwardBackward0(edges)
    node.self_ = save(result)
    return record(node, data, grad.device)


def abs(a: Tensor) -> Tensor:  # noqa: A001
    return _record_unary(AbsBackward0, a, a.device.xp.abs(a.data), saves_output=False)


def sign(a: Tensor) -> Tensor:
    """-1, 0 or 1; 0 at NaN as in PyTorch (NumPy's is NaN); a bool tensor is its own sign."""
    x = a.data
    data = x.copy() if x.dtype.kind == "b" else _dual.sign(x)
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    return record(SignBackward0(edges), data, a.device)


def relu(a: Tensor) -> Tensor:
    data = a.device.xp.maximum(a.data, 0)
    return _record_unary(ReluBackward0, a, data, saves_output=True)


class ClampBackward1(_SavesOne):
    """Passes the gradient where ``min <= x <= max`` (bounds included, as PyTorch)."""

    __slots__ = ("min", "max")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        x = _dual.raw(self.saved.unpack(self, False))
        if self.min is None:
            mask = x <= self.max
        elif self.max is None:
            mask = x >= self.min
        else:
            mask = (x >= self.min) & (x <= self.max)
        return (_dual.where(mask, grads[0], 0),)


def _bound(value: Any, which: str) -> int | float | None:
    if value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool)):
        return value
    raise TypeError(
        f"clamp: {which} must be a number or None, got {type(value).__name__}; for "
        "tensor bounds use where(x < lo, lo, x)"
    )


def clamp(a: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Limit ``a`` to ``[min, max]``; when ``min > max`` every element becomes ``max``."""
    lo = _bound(min, "min")
    hi = _bound(max, "max")
    if lo is None and hi is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    data = a.device.xp.clip(a.data, lo, hi)
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    node = ClampBackward1(edges)
    node.saved = save(a)
    node.min, node.max = lo, hi
    return record(node, data, a.device)


# ---- where ----

class WhereBackward0(Node):
    """``where(cond, x, y)``: the gradient goes to x where cond holds, to y elsewhere.

    ``condition`` saves the boolean array (no gradient). A number operand
    has a None edge.
    """

    __slots__ = ("condition",)

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        cond = self.condition.unpack(self, False)
        gx = _dual.where(cond, g, 0) if self.next_edges[0] is not None else None
        gy = _dual.where(cond, 0, g) if self.next_edges[1] is not None else None
        return (gx, gy)

    def release_variables(self) -> None:
        self.condition.release()


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


def where(condition: Any, input: Any, other: Any) -> Tensor:  # noqa: A002
    """Elementwise ``input if condition else other``, broadcasting all three.

    ``condition``: a bool Tensor or a bool NumPy/CuPy array. ``input`` and
    ``other``: tensors, arrays or numbers; the result has their PyTorch result
    type (two Python floats give float32).
    """
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
    data = dev.xp.where(cond, xd, yd)
    dtype = result_type(x, y)  # Note [Type promotion]
    if data.dtype != dtype:
        data = data.astype(dtype)
    edges = edges_of(x if type(x) is Tensor else None, y if type(y) is Tensor else None)
    if edges is None:
        return plain(data, dev)
    node = WhereBackward0(edges)
    node.condition = save(condition if isinstance(condition, Tensor) else Tensor._wrap(cond, dev))
    return record(node, data, dev)


# ---- Tensor methods ----

Tensor.exp = exp
Tensor.log = log
Tensor.sqrt = sqrt
Tensor.tanh = tanh
Tensor.sigmoid = sigmoid
Tensor.abs = abs
Tensor.__abs__ = abs
Tensor.sign = sign
Tensor.relu = relu
Tensor.clamp = clamp
