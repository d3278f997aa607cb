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
import sys
from typing import Any

import numpy

from .. import _defaults
from .._tensor import Tensor
from ..devices import device_of_array
from ..graph._node import Node
from . import _dual
from ._promote import result_type
from ._record import check_same_device, edges_of, plain, record, save, scalar_or_tensor, tensor_arg
from .arithmetic import broadcast_error, broadcast_error_among
from .inplace import check_inplace, commit_inplace


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
    return x if x.dtype.kind == "f" else x.astype(_defaults.FLOAT)


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


# ---- log1p / expm1 / sin / cos ----

class Log1PBackward0(_SavesOne):
    """d log(1 + x) = 1 / (1 + x): saves the input."""

    __slots__ = ()

    @numpy.errstate(all="ignore")  # x == -1. See Note [Silent singular points].
    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0] / (self.saved.unpack(self, create_graph) + 1),)


class Expm1Backward0(_SavesOne):
    """d (exp(x) - 1) = exp(x): saves the output (``result + 1``)."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0] * (self.saved.unpack(self, create_graph) + 1),)


class SinBackward0(_SavesOne):
    """d sin(x) = cos(x): saves the input."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        x = self.saved.unpack(self, create_graph)
        return (grads[0] * (cos(x) if type(x) is Tensor else _dual.xp_of(x).cos(x)),)


class CosBackward0(_SavesOne):
    """d cos(x) = -sin(x): saves the input."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        x = self.saved.unpack(self, create_graph)
        return (grads[0] * -(sin(x) if type(x) is Tensor else _dual.xp_of(x).sin(x)),)


def log1p(a: Tensor) -> Tensor:
    data = _dual.quietly(a.device.xp.log1p, _floating(a))  # log1p(-1) == -inf
    return _record_unary(Log1PBackward0, a, data, saves_output=False)


def expm1(a: Tensor) -> Tensor:
    return _record_unary(Expm1Backward0, a, a.device.xp.expm1(_floating(a)), saves_output=True)


def sin(a: Tensor) -> Tensor:
    return _record_unary(SinBackward0, a, a.device.xp.sin(_floating(a)), saves_output=False)


def cos(a: Tensor) -> Tensor:
    return _record_unary(CosBackward0, a, a.device.xp.cos(_floating(a)), saves_output=False)


# ---- tanh / sigmoid ----

class TanhBackward0(_SavesOne):
    """d tanh(x) = 1 - tanh(x)^2: saves the output. Under create_graph the gradient is an
    op of its own, ``tanh_backward(g, y)``, as in PyTorch."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (tanh_backward(grads[0], self.saved.unpack(self, create_graph)),)


class SigmoidBackward0(_SavesOne):
    """d sigmoid(x) = (1 - s) s: saves the output. Under create_graph the gradient is an
    op of its own, ``sigmoid_backward(g, s)``, as in PyTorch."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (sigmoid_backward(grads[0], self.saved.unpack(self, create_graph)),)


class TanhBackwardBackward0(Node):
    """``tanh_backward(grad, y) = grad * (1 - y^2)``: d grad = ``tanh_backward(gg, y)``,
    d y = ``gg * (-2 y grad)`` (PyTorch's). Saves ``y``, and ``grad`` if ``y`` needs a
    gradient."""

    __slots__ = ("grad_output", "output")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        gg = grads[0]
        edges = self.next_edges
        y = self.output.unpack(self, create_graph)
        d_grad = tanh_backward(gg, y) if edges[0] is not None else None
        d_y = None
        if edges[1] is not None:
            d_y = gg * (-2 * y * self.grad_output.unpack(self, create_graph))
        return (d_grad, d_y)

    def release_variables(self) -> None:
        for saved in (self.grad_output, self.output):
            if saved is not None:
                saved.release()


class SigmoidBackwardBackward0(TanhBackwardBackward0):
    """``sigmoid_backward(grad, s) = grad * (1 - s) * s``: d grad =
    ``sigmoid_backward(gg, s)``, d s = ``gg * grad * (1 - 2 s)`` (PyTorch's)."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        gg = grads[0]
        edges = self.next_edges
        s = self.output.unpack(self, create_graph)
        d_grad = sigmoid_backward(gg, s) if edges[0] is not None else None
        d_s = None
        if edges[1] is not None:
            d_s = gg * self.grad_output.unpack(self, create_graph) * (1 - 2 * s)
        return (d_grad, d_s)


def _backward_op(node_cls: type[TanhBackwardBackward0], grad: Tensor, output: Tensor,
                 data: Any) -> Tensor:
    """The recorded form of tanh_backward/sigmoid_backward (both arguments Tensors)."""
    edges = edges_of(grad, output)
    if edges is None:
        return plain(data, grad.device)
    node = node_cls(edges)
    node.output = save(output)
    node.grad_output = save(grad) if edges[1] is not None else None
    return record(node, data, grad.device)


def tanh_backward(grad: Any, y: Any) -> Any:
    """tanh's gradient ``grad * (1 - y^2)`` from its output ``y``: two arrays, or two
    Tensors (then recorded as a TanhBackwardBackward0)."""
    if type(grad) is not Tensor:
        return grad * (1 - y * y)
    return _backward_op(TanhBackwardBackward0, grad, y, grad.data * (1 - y.data * y.data))


def sigmoid_backward(grad: Any, s: Any) -> Any:
    """sigmoid's gradient ``grad * (1 - s) * s`` from its output ``s``: two arrays, or
    two Tensors (then recorded as a SigmoidBackwardBackward0)."""
    if type(grad) is not Tensor:
        return grad * (1 - s) * s
    return _backward_op(SigmoidBackwardBackward0, grad, s, grad.data * (1 - s.data) * s.data)


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
    input, as PyTorch's ``threshold_backward``), and 0 elsewhere: saves the output.

    This is the MLP hot path: a finite gradient is multiplied by the mask, in
    place when it is the engine's alone (``_masked``).
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
        return (_masked(g, mask, type(g) is numpy.ndarray and g.base is None
                        and not self._post_hooks and sys.getrefcount(g) <= 3),)


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
    edges = edges_of(grad, result)
    if edges is None:
        return plain(data, grad.device)
    node = ThresholdBackwardBackward0(edges)
    node.self_ = save(result)
    return record(node, data, grad.device)


def abs(a: Tensor) -> Tensor:  # noqa: A001
    if a.data.dtype.kind == "b":
        raise NotImplementedError(f'"abs_{a.device.type}" not implemented for \'Bool\'')
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
    if a.data.dtype.kind == "b":
        raise RuntimeError("Boolean inputs not supported for relu")
    data = a.device.xp.maximum(a.data, 0)
    return _record_unary(ReluBackward0, a, data, saves_output=True)


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
    node = ReluBackward0(edges)
    commit_inplace(a, node)
    node.saved = save(a, is_output=True) if a._base is None else save(a.detach())
    return a


class ClampBackward1(_SavesOne):
    """Number bounds: passes the gradient where ``min <= x <= max`` (bounds included, as
    PyTorch)."""

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


class ClampMinBackward0(ClampBackward1):
    """``clamp_min`` with a number."""

    __slots__ = ()


class ClampMaxBackward0(ClampBackward1):
    """``clamp_max`` with a number."""

    __slots__ = ()


class ClampBackward0(Node):
    """Tensor bounds: the gradient goes to whichever of ``x``, ``min``, ``max`` the output
    took, as PyTorch's ``clamp_backward_min_max``: to ``x`` where ``min <= x <= max``, to
    ``min`` where ``x < min < max``, to ``max`` where ``x > max`` or ``max < min``. With
    one bound: to ``x`` where it is within, to the bound elsewhere. The masks come from
    the saved values (raw arrays: no gradient flows through them).
    """

    __slots__ = ("self_", "min", "max")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        x = _dual.raw(self.self_.unpack(self, False))
        lo = None if self.min is None else _dual.raw(self.min.unpack(self, False))
        hi = None if self.max is None else _dual.raw(self.max.unpack(self, False))
        if hi is None:
            inside, to_lo, to_hi = x >= lo, x < lo, None
        elif lo is None:
            inside, to_lo, to_hi = x <= hi, None, x > hi
        else:
            inside = (x >= lo) & (x <= hi)
            to_lo = (x < lo) & (lo < hi)
            to_hi = (x > hi) | (hi < lo)
        edges = self.next_edges
        gx = _dual.where(inside, g, 0) if edges[0] is not None else None
        if len(edges) == 2:  # clamp_min / clamp_max: (x, its one bound)
            to_bound = to_lo if hi is None else to_hi
            return (gx, _dual.where(to_bound, g, 0) if edges[1] is not None else None)
        glo = _dual.where(to_lo, g, 0) if edges[1] is not None else None
        ghi = _dual.where(to_hi, g, 0) if edges[2] is not None else None
        return (gx, glo, ghi)

    def release_variables(self) -> None:
        for saved in (self.self_, self.min, self.max):
            if saved is not None:
                saved.release()


class ClampMinBackward1(ClampBackward0):
    """``clamp_min`` with a tensor."""

    __slots__ = ()


class ClampMaxBackward1(ClampBackward0):
    """``clamp_max`` with a tensor."""

    __slots__ = ()


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


def _clamp_node(saved_a: Tensor, lo: Any, hi: Any, edges: Any,
                number_node: type[ClampBackward1], tensor_node: type[ClampBackward0]) -> Node:
    """The node of ``clamp(a, lo, hi)``; ``saved_a`` is ``a``'s value before the op."""
    if type(lo) is Tensor or type(hi) is Tensor:
        node = tensor_node(edges)
        node.max = save(hi) if hi is not None else None  # PyTorch's order of saving
        node.min = save(lo) if lo is not None else None
        node.self_ = save(saved_a)
        return node
    scalar = number_node(edges)
    scalar.saved = save(saved_a)
    scalar.min, scalar.max = lo, hi
    return scalar


def _clamp(a: Tensor, lo: Any, hi: Any, fn: str, number_node: type[ClampBackward1],
           tensor_node: type[ClampBackward0]) -> Tensor:
    """``clamp`` recorded as ``number_node`` (number bounds) or ``tensor_node``."""
    numbers_only = (type(lo) in _PLAIN_BOUNDS and type(hi) in _PLAIN_BOUNDS) or (
        _is_number_bound(lo) and _is_number_bound(hi))
    if not numbers_only or (lo is None and hi is None):
        return _clamp_by_tensors(a, lo, hi, fn, tensor_node)
    x = a.data
    if x.dtype.kind != "f":  # an integer tensor with a float bound computes in float32
        rt = _clamp_dtype(a, lo, hi)
        if x.dtype != rt:
            x = x.astype(rt)
    data = a.device.xp.clip(x, lo, hi)
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    node = number_node(edges)
    node.saved = save(a)
    node.min, node.max = lo, hi
    return record(node, data, a.device)


def _clamp_by_tensors(a: Tensor, lo: Any, hi: Any, fn: str,
                      tensor_node: type[ClampBackward0]) -> Tensor:
    _clamp_args(fn, lo, hi)
    data = _clamp_tensors(a, lo, hi)
    if tensor_node is ClampBackward0:
        edges = edges_of(a, lo, hi)
    else:  # clamp_min / clamp_max: one bound
        edges = edges_of(a, hi if lo is None else lo)
    if edges is None:
        return plain(data, a.device)
    return record(_clamp_node(a, lo, hi, edges, ClampBackward1, tensor_node), data, a.device)


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

class MaximumBackward0(Node):
    """``maximum(a, b)``: the gradient goes to the larger, split in halves at ties, as
    PyTorch (a NaN, equal to nothing and unordered, passes it to both)."""

    __slots__ = ("self_", "other")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        a = _dual.raw(self.self_.unpack(self, False))
        b = _dual.raw(self.other.unpack(self, False))
        a_loses, b_loses = self._losers(a, b)
        shared = _dual.where(a == b, g / 2, g)
        edges = self.next_edges
        ga = _dual.where(a_loses, 0, shared) if edges[0] is not None else None
        gb = _dual.where(b_loses, 0, shared) if edges[1] is not None else None
        return (ga, gb)

    @staticmethod
    def _losers(a: Any, b: Any) -> tuple[Any, Any]:
        return a < b, a > b

    def release_variables(self) -> None:
        self.self_.release()
        self.other.release()


class MinimumBackward0(MaximumBackward0):
    """``minimum(a, b)``: the gradient goes to the smaller, split in halves at ties."""

    __slots__ = ()

    @staticmethod
    def _losers(a: Any, b: Any) -> tuple[Any, Any]:
        return a > b, a < b


def _extremum(name: str, node_cls: type[MaximumBackward0]) -> Any:
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
        edges = edges_of(a, other)
        if edges is None:
            return plain(data, dev)
        node = node_cls(edges)
        node.other = save(other)  # PyTorch's order of saving
        node.self_ = save(a)
        return record(node, data, dev)

    extremum.__name__ = name
    extremum.__doc__ = f"Elementwise {name} of two tensors (broadcast); NaN propagates."
    return extremum


maximum = _extremum("maximum", MaximumBackward0)
minimum = _extremum("minimum", MinimumBackward0)


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
Tensor.relu_ = relu_
Tensor.log1p = log1p
Tensor.expm1 = expm1
Tensor.sin = sin
Tensor.cos = cos
Tensor.clamp = Tensor.clip = clamp
Tensor.clamp_min = clamp_min
Tensor.clamp_max = clamp_max
Tensor.maximum = maximum
Tensor.minimum = minimum


def _where_method(self: Tensor, condition: Any, other: Any) -> Tensor:
    """``self.where(condition, other)``: ``where(condition, self, other)``."""
    return where(condition, self, other)


Tensor.where = _where_method
