"""validate_outputs: check and fix the gradients a node returns (seed ``validate_outputs``).

For every gradient sent along a next edge, against the receiving node's
``input_metadata``: the count must match the edges; a broadcast shape is
summed down to the expected shape (Note [Broadcast gradients]); another
floating dtype is cast; a different device is an error (a 0-d gradient is
moved). Errors name the function and the index:
``Function MulBackward0 returned an invalid gradient at index 1 - ...``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy

from .._broadcast import sum_dims, sum_to_shape
from .._tensor import Tensor
from ..devices import CPU, device_of_array
from ..graph._node import Node

__all__ = ["plain_grads", "sum_dims", "sum_to_shape", "validate_outputs"]

_ndarray = numpy.ndarray


def _error(fn: Node, msg: str) -> RuntimeError:
    return RuntimeError(f"Function {fn.name()} returned an {msg}")


def plain_grads(edges: tuple[Any, ...], grads: Any) -> bool:
    """True if ``grads`` need no fixing: one per edge, each None or an array of exactly
    the shape, dtype and device its consumer expects (else ``validate_outputs``).

    A plain array is a NumPy array for a CPU consumer, or, for a device consumer,
    one of exactly its backend's ``array_type`` (Note [Device fast paths] in
    ``evaluate.py``); Tensors and other types always go through validation.
    """
    if len(grads) != len(edges):
        return False
    i = 0
    for edge in edges:
        grad = grads[i]
        i += 1
        if edge is None or grad is None:
            continue
        meta = edge[0].input_metadata[edge[1]]
        kind = type(grad)
        if kind is _ndarray:
            if meta.device is not CPU:
                return False
        else:
            dev = meta.device
            backend = dev.backend
            if kind is not backend.array_type or backend.device_index(grad) != dev.index:
                return False
        if grad.shape != meta.shape or grad.dtype is not meta.dtype and grad.dtype != meta.dtype:
            return False
    return True


def validate_outputs(fn: Node, grads: Sequence[Any]) -> list[Any]:
    """Return the gradients of ``fn`` checked and fixed up, one per next edge."""
    edges = fn.next_edges
    if len(grads) != len(edges):
        raise _error(fn, f"invalid number of gradients - expected {len(edges)}, but got "
                         f"{len(grads)}")
    out = list(grads)
    for i, edge in enumerate(edges):
        grad = out[i]
        if edge is None or grad is None:
            continue
        meta = edge[0].input_metadata[edge[1]]
        is_tensor = type(grad) is Tensor
        if not is_tensor and type(grad) is not _ndarray:
            if isinstance(grad, Tensor):
                is_tensor = True
            elif not hasattr(grad, "shape") or not hasattr(grad, "dtype"):
                raise _error(fn, f"invalid gradient at index {i} - expected an array or a "
                                 f"Tensor, got {type(grad).__name__}")
        if grad.shape != meta.shape:
            reduced = sum_to_shape(grad, meta.shape)
            if reduced is None:
                raise _error(fn, f"invalid gradient at index {i} - got {list(grad.shape)} but "
                                 f"expected shape compatible with {list(meta.shape)}")
            grad = reduced
        if grad.dtype != meta.dtype:
            if grad.dtype.kind not in "fiub":
                raise _error(fn, f"invalid gradient at index {i} - expected dtype "
                                 f"{meta.dtype} but got {grad.dtype}")
            grad = grad.to(dtype=meta.dtype) if is_tensor else grad.astype(meta.dtype)
        if is_tensor:
            gdev = grad.device
        elif type(grad) is _ndarray and meta.device is CPU:
            gdev = CPU
        else:
            gdev = device_of_array(grad)
        if gdev is not meta.device:
            if grad.ndim == 0:
                grad = _move(grad, meta.device, is_tensor)
            else:
                raise _error(fn, f"invalid gradient at index {i} - expected device "
                                 f"{meta.device} but got {gdev}")
        out[i] = grad
    return out


def _move(grad: Any, device: Any, is_tensor: bool) -> Any:
    if is_tensor:
        return grad.to(device)
    src = device_of_array(grad)
    host = src.backend.to_host(grad)
    return device.backend.from_host(host, device.index)
