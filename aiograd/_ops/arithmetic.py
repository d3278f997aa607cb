"""Arithmetic: broadcasting ``+ - * / **``, negation, comparisons.

A Python number operand stays a number (weak dtype, NEP 50); its next edge
is None, as in PyTorch: ``y * 2.0`` records a MulBackward0 whose next edges
are ``y``'s and None, so hooks see two gradients, the second None.
See Note [Dual backward formulas] and Note [Broadcast gradients].
"""

from __future__ import annotations

import math
from typing import Any

from .._tensor import Tensor
from ..graph._node import Node
from . import _dual
from ._record import (
    check_same_device,
    edges_of,
    edges_with_number,
    plain,
    record,
    save,
    scalar_or_tensor,
)

# ---- add / sub ----

class AddBackward0(Node):
    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        return (g, g if self.next_edges[1] is not None else None)


class SubBackward0(Node):
    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        return (g, -g if self.next_edges[1] is not None else None)


class RsubBackward1(Node):
    """``number - tensor``."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (-grads[0],)


def add(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        data = a.data + b.data
        edges = edges_of(a, b)
    else:
        dev = a.device
        data = a.data + b
        edges = edges_with_number(a)
    if edges is None:
        return plain(data, dev)
    return record(AddBackward0(edges), data, dev)


def sub(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        data = a.data - b.data
        edges = edges_of(a, b)
    else:
        dev = a.device
        data = a.data - b
        edges = edges_with_number(a)
    if edges is None:
        return plain(data, dev)
    return record(SubBackward0(edges), data, dev)


def rsub(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        return sub(b, a)
    data = b - a.data
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    return record(RsubBackward1(edges), data, a.device)


# ---- mul / div ----

class MulBackward0(Node):
    """``a * b``; with a number ``b`` only ``scalar`` is kept."""

    __slots__ = ("self_", "other", "scalar")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        if self.scalar is not None:
            return (g * self.scalar, None)
        edges = self.next_edges
        ga = g * self.other.unpack(self, create_graph) if edges[0] is not None else None
        gb = g * self.self_.unpack(self, create_graph) if edges[1] is not None else None
        return (ga, gb)

    def release_variables(self) -> None:
        for saved in (self.self_, self.other):
            if saved is not None:
                saved.release()


def mul(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        data = a.data * b.data
        edges = edges_of(a, b)
        if edges is None:
            return plain(data, dev)
        node = MulBackward0(edges)
        node.other = save(b) if edges[0] is not None else None
        node.self_ = save(a) if edges[1] is not None else None
        node.scalar = None
        return record(node, data, dev)
    data = a.data * b
    edges = edges_with_number(a)
    if edges is None:
        return plain(data, a.device)
    node = MulBackward0(edges)
    node.other = node.self_ = None
    node.scalar = b
    return record(node, data, a.device)


class DivBackward0(Node):
    """``a / b``. A number divisor is kept in ``scalar``, a number dividend in ``numer``."""

    __slots__ = ("self_", "other", "scalar", "numer")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        if self.scalar is not None:
            return (g / self.scalar, None)
        b = self.other.unpack(self, create_graph)
        if self.numer is not None:  # number / tensor
            return (-g * self.numer / (b * b),)
        edges = self.next_edges
        ga = g / b if edges[0] is not None else None
        gb = None
        if edges[1] is not None:
            a = self.self_.unpack(self, create_graph)
            gb = -g * a / (b * b)
        return (ga, gb)

    def release_variables(self) -> None:
        for saved in (self.self_, self.other):
            if saved is not None:
                saved.release()


def _div_node(edges: Any, self_: Any, other: Any, scalar: Any, numer: Any) -> DivBackward0:
    node = DivBackward0(edges)
    node.self_, node.other, node.scalar, node.numer = self_, other, scalar, numer
    return node


def div(a: Tensor, b: Any) -> Tensor:
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        dev = check_same_device(a, b)
        data = a.data / b.data
        edges = edges_of(a, b)
        if edges is None:
            return plain(data, dev)
        self_ = save(a) if edges[1] is not None else None
        return record(_div_node(edges, self_, save(b), None, None), data, dev)
    data = a.data / b
    edges = edges_with_number(a)
    if edges is None:
        return plain(data, a.device)
    return record(_div_node(edges, None, None, b, None), data, a.device)


def rdiv(a: Tensor, b: Any) -> Tensor:
    """``b / a`` for a number ``b``."""
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        return div(b, a)
    data = b / a.data
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    return record(_div_node(edges, None, save(a), None, b), data, a.device)


# ---- neg / pow ----

class NegBackward0(Node):
    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (-grads[0],)


def neg(a: Tensor) -> Tensor:
    data = -a.data
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    return record(NegBackward0(edges), data, a.device)


class PowBackward0(Node):
    """``tensor ** number``."""

    __slots__ = ("self_", "exponent")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        e = self.exponent
        a = self.self_.unpack(self, create_graph)
        if e == 0:
            return (g * 0,)
        return (g * e * a ** (e - 1),)

    def release_variables(self) -> None:
        self.self_.release()


class PowBackward1(Node):
    """``tensor ** tensor``: d/da = e a^(e-1) (0 where e == 0), d/de = a^e log a (0 where
    a == 0 and e >= 0), as PyTorch's ``pow_backward_self``/``pow_backward_exponent``."""

    __slots__ = ("self_", "exponent", "result")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        edges = self.next_edges
        a = self.self_.unpack(self, create_graph)
        e = self.exponent.unpack(self, create_graph)
        ga = None
        if edges[0] is not None:
            ga = _dual.where(_dual.raw(e) == 0, 0.0, g * e * a ** (e - 1))
        ge = None
        if edges[1] is not None:
            out = self.result.unpack(self, create_graph)
            mask = (_dual.raw(a) == 0) & (_dual.raw(e) >= 0)
            ge = _dual.where(mask, 0.0, g * out * _dual.log(a))
        return (ga, ge)

    def release_variables(self) -> None:
        self.self_.release()
        self.exponent.release()
        self.result.release()


class RpowBackward(Node):
    """``number ** tensor``: d/de = b^e log b (NaN for b < 0; for b == 0: 0 where e >= 0,
    that is where the result is finite, and -inf where e < 0), as PyTorch."""

    __slots__ = ("base", "result")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        out = self.result.unpack(self, create_graph)
        b = self.base
        if b == 0:
            return (_dual.where(_dual.raw(out) != math.inf, 0.0, g * -math.inf),)
        return (g * out * (math.log(b) if b > 0 else math.nan),)

    def release_variables(self) -> None:
        self.result.release()

    def name(self) -> str:
        return "PowBackward2"


def pow(a: Tensor, e: Any) -> Tensor:  # noqa: A001
    e = scalar_or_tensor(e, a)
    if type(e) is Tensor:
        dev = check_same_device(a, e)
        data = a.data ** e.data
        edges = edges_of(a, e)
        if edges is None:
            return plain(data, dev)
        node = PowBackward1(edges)
        node.self_ = save(a)
        node.exponent = save(e)
        out = record(node, data, dev)
        node.result = save(out, is_output=True)
        return out
    data = a.data ** e
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    node = PowBackward0(edges)
    node.self_ = save(a)
    node.exponent = e
    return record(node, data, a.device)


def rpow(a: Tensor, b: Any) -> Tensor:
    """``b ** a`` for a number ``b``."""
    b = scalar_or_tensor(b, a)
    if type(b) is Tensor:
        return pow(b, a)
    data = b ** a.data
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    node = RpowBackward(edges)
    node.base = b
    out = record(node, data, a.device)
    node.result = save(out, is_output=True)
    return out


# ---- comparisons (no gradient) ----

def _compare(name: str) -> Any:
    def compare(a: Tensor, b: Any) -> Tensor:
        if b is None or isinstance(b, str):
            return NotImplemented  # ``t == None`` is False, as in PyTorch; ``t < None`` raises
        b = scalar_or_tensor(b, a)
        other = b.data if type(b) is Tensor else b
        if type(b) is Tensor:
            check_same_device(a, b)
        return plain(getattr(a.data, name)(other), a.device)

    compare.__name__ = name.strip("_")
    return compare


# ---- Tensor methods ----

Tensor.__add__ = add
Tensor.__radd__ = add
Tensor.__sub__ = sub
Tensor.__rsub__ = rsub
Tensor.__mul__ = mul
Tensor.__rmul__ = mul
Tensor.__truediv__ = div
Tensor.__rtruediv__ = rdiv
Tensor.__neg__ = neg
Tensor.__pow__ = pow
Tensor.__rpow__ = rpow
Tensor.add = add
Tensor.sub = sub
Tensor.mul = mul
Tensor.div = div
Tensor.neg = neg
Tensor.pow = pow
for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(Tensor, _name, _compare(_name))
Tensor.lt, Tensor.le, Tensor.gt = Tensor.__lt__, Tensor.__le__, Tensor.__gt__
Tensor.ge, Tensor.eq, Tensor.ne = Tensor.__ge__, Tensor.__eq__, Tensor.__ne__
