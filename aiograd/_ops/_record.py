"""Recording nodes: the small helpers every op family uses."""

from __future__ import annotations

import numbers
from typing import Any, cast

import numpy

from .._tensor import Tensor
from ..devices import CPU, Device
from ..grad_mode import _anomaly, _grad_enabled
from ..graph._node import InputMetadata, Node, grad_accumulator
from ..graph._saved import SavedTensor
from ..graph._saved import _hooks as _saved_hooks

__all__ = ["edges_of", "edges_with_number", "record", "save", "scalar_or_tensor",
           "check_same_device", "plain", "needs", "tensor_arg"]


def edges_of(*tensors: Tensor | None) -> tuple[tuple[Node, int] | None, ...] | None:
    """The next edges of a node over ``tensors``, or None when no node is needed.

    None means grad mode is off or no input requires grad: the op then
    returns a plain result and records nothing.
    """
    if not _grad_enabled.get():
        return None
    edges: list[tuple[Node, int] | None] = []
    found = False
    for t in tensors:
        if t is None or not t._rg:
            edges.append(None)
            continue
        found = True
        fn = t.grad_fn
        if fn is not None:
            edges.append((fn, t.output_nr))
        else:
            edges.append((t._accumulator or grad_accumulator(t), 0))
    return tuple(edges) if found else None


def edges_with_number(t: Tensor) -> tuple[tuple[Node, int], None] | None:
    """``edges_of(t, None)``, faster: the edges of ``t op number`` (the number's is None)."""
    if not t._rg or not _grad_enabled.get():
        return None
    fn = t.grad_fn
    if fn is not None:
        return (fn, t.output_nr), None
    return (t._accumulator or grad_accumulator(t), 0), None


def _metadata(data: Any, device: Device) -> InputMetadata:
    stream = None
    if device is not CPU and device.backend.has_streams:
        stream = device.backend.current_stream(device.index)
    return InputMetadata(data.shape, data.dtype, device, stream)


def _mark(node: Node) -> None:
    if _anomaly.get()[0]:
        node._capture_anomaly_trace()
    if _saved_hooks.get():  # its saves ran user hooks: the engine must not inline it
        node.metadata["saved_tensors_hooks"] = True


def record(node: Node, data: Any, device: Device) -> Tensor:
    """Make ``node`` the grad_fn of a new tensor holding ``data``; return it."""
    node.input_metadata = (
        InputMetadata(data.shape, data.dtype, CPU, None) if device is CPU
        else _metadata(data, device),
    )
    if _anomaly.get()[0] or _saved_hooks.get():
        _mark(node)
    out = Tensor._wrap(data, device)
    out.grad_fn = node
    out._rg = True
    return out


def plain(data: Any, device: Device) -> Tensor:
    """A result that records no history."""
    return Tensor._wrap(data, device)


def save(t: Tensor | None, is_output: bool = False) -> SavedTensor | None:
    return None if t is None else SavedTensor(t, is_output)


def needs(node: Node, i: int) -> bool:
    """True if the gradient for input ``i`` of the forward is needed."""
    return node.next_edges[i] is not None


def scalar_or_tensor(x: Any, like: Tensor) -> Tensor | int | float | bool:
    """Tensors stay; Python and NumPy scalars become Python numbers; arrays become tensors.

    Python numbers are *weak* in NumPy's promotion (NEP 50), like PyTorch's
    wrapped numbers: ``float32_tensor * 2.0`` stays float32.
    """
    kind = type(x)
    if kind is Tensor or kind is float or kind is int:
        return x
    if isinstance(x, (bool, numbers.Number)):
        if isinstance(x, numpy.generic):
            return x.item()
        if isinstance(x, complex):
            raise TypeError("complex numbers are not supported")
        # a bool, or another Number (Fraction, Decimal): NumPy takes it as it is
        return cast("int | float | bool", x)
    if isinstance(x, Tensor):
        return x
    if isinstance(x, numpy.ndarray) or like.device.backend.owns(x):
        return Tensor._wrap(x, like.device if like.device.backend.owns(x) else CPU)
    raise TypeError(
        f"unsupported operand type: expected a Tensor, an array or a number, got "
        f"{type(x).__name__}"
    )


def check_same_device(a: Tensor, b: Tensor) -> Device:
    if a.device is not b.device:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{a.device} and {b.device}!"
        )
    return a.device


def tensor_arg(value: Any, fn: str, name: str, position: int | None = None) -> Tensor:
    """``value``, which ``fn``'s argument ``name`` requires to be a Tensor; else PyTorch's
    TypeError (naming the argument's position if given)."""
    if not isinstance(value, Tensor):
        where = "" if position is None else f" (position {position})"
        raise TypeError(
            f"{fn}(): argument '{name}'{where} must be Tensor, not {type(value).__name__}"
        )
    return value
