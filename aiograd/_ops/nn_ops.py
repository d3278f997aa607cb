"""Neural-network ops: ``softmax log_softmax mse_loss cross_entropy``.

Softmax and log_softmax subtract the max along ``dim`` before ``exp``, so
no exp overflows, and save their output, from which their gradient is
computed (as PyTorch).

Note [Fused cross entropy]
    ``cross_entropy(logits, target)`` records ONE node,
    ``CrossEntropyLossBackward0``, instead of PyTorch's NllLossBackward0 ->
    LogSoftmaxBackward0 pair: its gradient is ``(softmax - onehot) * g``
    (``/ N`` for the mean), written in a single pass over the softmax the
    forward already computed and saved. With ``create_graph`` the softmax is
    recomputed from the saved logits so its dependence on them is recorded.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy

from .._tensor import Tensor
from ..devices import device_of_array
from ..graph._node import Node
from . import _dual
from ._record import check_same_device, edges_of, plain, record, save
from .reductions import as_array, normalize_dim

_REDUCTIONS = ("mean", "sum", "none")
_max_reduce = numpy.maximum.reduce


def _max_dims(x: Any, dim: int | None, keepdim: bool = False) -> Any:
    """``x.max`` over ``dim`` for an array (NumPy's without its Python wrapper)."""
    if type(x) is numpy.ndarray:
        return _max_reduce(x, dim, keepdims=keepdim)
    return x.max(axis=dim, keepdims=keepdim)


def _reduction(reduction: Any) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"{reduction!r} is not a valid value for reduction; use 'mean', 'sum' or 'none'"
        )
    return reduction


def _reduce(losses: Any, reduction: str) -> Any:
    if reduction == "none":
        return losses
    total = _dual.sum_dims(losses, None)
    return as_array(total / losses.size if reduction == "mean" else total)


# ---- softmax / log_softmax ----

class SoftmaxBackward0(Node):
    """d x = y * (g - sum(g * y, dim)): saves the output y."""

    __slots__ = ("result", "dim")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        y = self.result.unpack(self, create_graph)
        return (y * (g - _dual.sum_dims(g * y, self.dim, keepdim=True)),)

    def release_variables(self) -> None:
        self.result.release()


class LogSoftmaxBackward0(Node):
    """d x = g - exp(y) * sum(g, dim): saves the output y."""

    __slots__ = ("result", "dim")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        y = self.result.unpack(self, create_graph)
        return (g - _dual.exp(y) * _dual.sum_dims(g, self.dim, keepdim=True),)

    def release_variables(self) -> None:
        self.result.release()


def _shifted(x: Any, dim: int | None) -> Any:
    """``x - max(x, dim)``: every entry <= 0, so its exp is at most 1."""
    return x - _max_dims(x, dim, keepdim=True)


def _softmax_like(node_cls: type[Node], a: Tensor, dim: Any, log: bool) -> Tensor:
    d = normalize_dim(dim, a.ndim)
    axis = d if a.ndim else None  # a 0-d tensor is its own (only) slice
    xp = a.device.xp
    z = _shifted(a.data, axis)
    e = xp.exp(z)
    if log:
        data = z - xp.log(_dual.sum_dims(e, axis, keepdim=True))
    else:
        data = e / _dual.sum_dims(e, axis, keepdim=True)
    edges = edges_of(a)
    if edges is None:
        return plain(data, a.device)
    node = node_cls(edges)
    node.dim = axis
    out = record(node, data, a.device)
    node.result = save(out, is_output=True)
    return out


def softmax(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """``exp(x) / sum(exp(x), dim)``; each slice along ``dim`` sums to 1."""
    return _softmax_like(SoftmaxBackward0, input, dim, log=False)


def log_softmax(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    """``x - logsumexp(x, dim)``, computed without overflow."""
    return _softmax_like(LogSoftmaxBackward0, input, dim, log=True)


# ---- linear ----

class AddmmBackward0(Node):
    """``x @ weight.T + bias`` for 2-D x, as one node (PyTorch's nn.Linear records the same).

    d x = g W, d W = g^T x (row-major, like W), d bias = sum of g over rows.
    Saves x only if W needs a gradient and W only if x does.
    """

    __slots__ = ("input", "weight")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        edges = self.next_edges
        gx = gw = None
        if edges[0] is not None:
            gx = g @ self.weight.unpack(self, create_graph)
        if edges[1] is not None:
            gw = _dual.swap_last(g) @ self.input.unpack(self, create_graph)
        gb = _dual.sum_dims(g, 0) if len(edges) == 3 and edges[2] is not None else None
        return (gx, gw, gb) if len(edges) == 3 else (gx, gw)

    def release_variables(self) -> None:
        for saved in (self.input, self.weight):
            if saved is not None:
                saved.release()


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    """``input @ weight.T + bias`` (``torch.nn.functional.linear``).

    A 2-D input records one AddmmBackward0 node and adds the bias in place into
    the fresh product; other inputs fall back to ``@`` and ``+``.
    """
    for name, value in (("input", input), ("weight", weight)):
        if not isinstance(value, Tensor):
            raise TypeError(f"linear: {name} must be a Tensor, got {type(value).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"linear: bias must be a Tensor or None, got {type(bias).__name__}")
    x, w, b = input.data, weight.data, None if bias is None else bias.data
    if x.ndim != 2 or w.ndim != 2 or (b is not None and b.ndim != 1):
        out = input @ weight.transpose(0, 1)
        return out if bias is None else out + bias
    dev = check_same_device(input, weight)
    if bias is not None:
        check_same_device(input, bias)
    if x.shape[1] != w.shape[1] or (b is not None and b.shape[0] != w.shape[0]):
        raise RuntimeError(
            f"linear: input {tuple(x.shape)}, weight {tuple(w.shape)} and bias "
            f"{None if b is None else tuple(b.shape)} do not fit: expected input "
            "(N, in), weight (out, in), bias (out,)"
        )
    data = x @ w.T
    if b is not None:
        data += b  # the product is fresh: nobody else sees it
    edges = edges_of(input, weight) if bias is None else edges_of(input, weight, bias)
    if edges is None:
        return plain(data, dev)
    node = AddmmBackward0(edges)
    node.input = save(input) if edges[1] is not None else None
    node.weight = save(weight) if edges[0] is not None else None
    return record(node, data, dev)


# ---- mse_loss ----

class MseLossBackward0(Node):
    """d input = 2 (input - target) g / N for the mean (N elements); d target = -d input."""

    __slots__ = ("self_", "target", "scale")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        diff = self.self_.unpack(self, create_graph) - self.target.unpack(self, create_graph)
        grad = diff * (grads[0] * self.scale)
        edges = self.next_edges
        return (grad if edges[0] is not None else None, -grad if edges[1] is not None else None)

    def release_variables(self) -> None:
        self.self_.release()
        self.target.release()


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Mean (or sum, or elementwise with ``'none'``) of ``(input - target) ** 2``."""
    reduction = _reduction(reduction)
    if not isinstance(target, Tensor):
        if not hasattr(target, "shape"):
            raise TypeError(
                f"mse_loss expects target to be a Tensor or an array, got "
                f"{type(target).__name__}; use aiograd.full_like(input, value)"
            )
        target = Tensor._wrap(target, device_of_array(target))
    dev = check_same_device(input, target)
    if target.shape != input.shape:
        warnings.warn(
            f"Using a target size {tuple(target.shape)} that is different to the input size "
            f"{tuple(input.shape)}. This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            UserWarning,
            stacklevel=2,
        )
    diff = input.data - target.data
    losses = diff * diff
    data = _reduce(losses, reduction)
    edges = edges_of(input, target)
    if edges is None:
        return plain(data, dev)
    node = MseLossBackward0(edges)
    node.self_ = save(input)
    node.target = save(target)
    # An empty input has an empty gradient whatever the scale (its mean is nan, as PyTorch's).
    node.scale = 2 / losses.size if reduction == "mean" and losses.size else 2
    return record(node, data, dev)


# ---- cross_entropy ----

class CrossEntropyLossBackward0(Node):
    """See Note [Fused cross entropy]. ``probs`` is the (N, C) softmax of the logits."""

    __slots__ = ("self_", "probs", "target", "reduction")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        target = self.target.unpack(self, False)
        n = target.shape[0]
        if self.reduction == "none":
            scale = _dual.reshape(g, (n, 1))
        else:
            scale = g / n if self.reduction == "mean" else g
        rows = _dual.xp_of(target).arange(n)
        if create_graph:
            probs = softmax(self.self_.unpack(self, True), -1)
            onehot = probs.device.xp.zeros((n, probs.shape[-1]), dtype=probs.dtype)
            onehot[rows, target] = 1
            return ((probs - onehot) * scale,)
        grad = self.probs.unpack(self, False) * scale
        grad[rows, target] -= scale[:, 0] if self.reduction == "none" else scale
        return (grad,)

    def release_variables(self) -> None:
        self.self_.release()
        self.probs.release()
        self.target.release()


def _class_targets(target: Any, logits: Tensor) -> Any:
    """The (N,) int array of class indices, checked against (N, C) logits."""
    t = target.data if isinstance(target, Tensor) else target
    dtype = getattr(t, "dtype", None)
    if dtype is None or dtype.kind not in "iu":
        raise TypeError(
            "cross_entropy expects target to hold class indices (an integer Tensor or "
            f"array), got {getattr(dtype, 'name', type(t).__name__)}; class probabilities "
            "are not supported"
        )
    t_dev = target.device if isinstance(target, Tensor) else device_of_array(t)
    if t_dev is not logits.device:
        raise RuntimeError(
            f"cross_entropy: target is on {t_dev} but input is on {logits.device}; move the "
            "target with .to(device)"
        )
    n, c = (1, logits.shape[0]) if logits.ndim == 1 else logits.shape
    expected = () if logits.ndim == 1 else (n,)
    if t.shape != expected:
        raise ValueError(
            f"cross_entropy: expected target of shape {expected} for input of shape "
            f"{tuple(logits.shape)}, got {tuple(t.shape)}"
        )
    t = t.reshape((n,))
    # One pass: as unsigned, a negative index is huge (``uint`` view of the same bytes).
    if n and int(_max_dims(t.view(t.dtype.str.replace("i", "u")), None)) >= c:
        lo, hi = int(t.min()), int(t.max())
        raise IndexError(
            f"Target {lo if lo < 0 else hi} is out of bounds: class indices must be in "
            f"[0, {c}). (ignore_index is not supported.)"
        )
    return t


def cross_entropy(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:  # noqa: A002
    """``-log_softmax(input)[target]`` per sample, then ``reduction``.

    ``input``: logits of shape (N, C), or (C,) with a 0-d target.
    ``target``: class indices in ``[0, C)`` (an integer Tensor or array).
    """
    reduction = _reduction(reduction)
    if input.ndim not in (1, 2):
        raise ValueError(
            f"cross_entropy expects logits of shape (N, C) or (C,), got {tuple(input.shape)}; "
            "reshape other layouts to (N, C)"
        )
    t = _class_targets(target, input)
    xp = input.device.xp
    x = input.data if input.ndim == 2 else input.data.reshape((1, -1))
    z = _shifted(x, 1)
    probs = xp.exp(z)
    sums = _dual.sum_dims(probs, 1, keepdim=True)
    losses = xp.log(sums[:, 0]) - z[xp.arange(t.shape[0]), t]
    if input.ndim == 1:
        losses = losses.reshape(())
    data = _reduce(losses, reduction)
    edges = edges_of(input)
    if edges is None:
        return plain(data, input.device)
    probs /= sums
    node = CrossEntropyLossBackward0(edges)
    node.self_ = save(input)
    node.probs = save(Tensor._wrap(probs, input.device))
    node.target = save(Tensor._wrap(t, input.device))
    node.reduction = reduction
    return record(node, data, input.device)


# ---- Tensor methods ----

Tensor.softmax = softmax
Tensor.log_softmax = log_softmax
