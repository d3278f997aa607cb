"""Joining: ``cat(tensors, dim)`` and ``stack(tensors, dim)``.

Inputs may differ in dtype (the result has the promoted dtype, and each
input's gradient is cast back by the engine) but not in device. The
backward slices the gradient, so under ``create_graph`` it records
``SliceBackward0``/``SelectBackward0`` nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._tensor import Tensor
from ..graph._node import Node
from . import _dual
from ._record import check_same_device, edges_of, plain, record
from .shape import wrap_dim

__all__ = ["cat", "stack"]


def _tensors(tensors: Sequence[Tensor], what: str) -> list[Tensor]:
    """``tensors`` checked: a non-empty sequence of Tensors on one device."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"{what}(): expected a list or tuple of Tensors, got {type(tensors).__name__}"
        )
    if not tensors:
        raise ValueError(f"{what}(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"{what}(): expected Tensor as element {i} in argument 0, but got "
                f"{type(t).__name__}"
            )
        check_same_device(tensors[0], t)
    return list(tensors)


# ---- cat ----

class CatBackward0(Node):
    """Invariant: input ``i`` is ``out[..., spans[i][0]:spans[i][1], ...]`` along ``dim``;
    ``spans[i]`` is None for an input cat skipped (1-D and empty)."""

    __slots__ = ("dim", "spans")

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        lead = (slice(None),) * self.dim
        return tuple(
            None if edge is None
            else _dual.zeros_of(g, (0,)) if span is None
            else g[lead + (slice(*span),)]
            for edge, span in zip(self.next_edges, self.spans)
        )


def _skipped(t: Tensor) -> bool:
    """PyTorch's legacy rule: cat ignores 1-D empty tensors (``cat([tensor([]), x])``)."""
    return t.ndim == 1 and t.shape[0] == 0


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate ``tensors`` along the existing dim ``dim``; other sizes must match."""
    ts = _tensors(tensors, "cat")
    skip = [_skipped(t) for t in ts]
    if all(skip):
        skip = [False] * len(ts)
    used = [(i, t) for i, t in enumerate(ts) if not skip[i]]
    first = used[0][1]
    for i, t in enumerate(ts):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    d = wrap_dim(dim, first.ndim)
    for i, t in used:
        if t.ndim != first.ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {first.ndim} and {t.ndim}"
            )
        for j, (n, m) in enumerate(zip(first.shape, t.shape)):
            if j != d and n != m:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {n} "
                    f"but got size {m} for tensor number {i} in the list."
                )
    data = first.device.xp.concatenate([t.data for _, t in used], axis=d)
    edges = edges_of(*ts)
    if edges is None:
        return plain(data, first.device)
    node = CatBackward0(edges)
    node.dim = d
    spans = []
    start = 0
    for t, skipped in zip(ts, skip):
        spans.append(None if skipped else (start, start + t.shape[d]))
        start += 0 if skipped else t.shape[d]
    node.spans = tuple(spans)
    return record(node, data, first.device)


# ---- stack ----

class StackBackward0(Node):
    """Input ``i`` is ``out[..., i, ...]`` (index ``i`` at ``dim``)."""

    __slots__ = ("dim",)

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        g = grads[0]
        lead = (slice(None),) * self.dim
        return tuple(
            None if edge is None else g[lead + (i, Ellipsis)]
            for i, edge in enumerate(self.next_edges)
        )


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack equally shaped ``tensors`` along a new dim ``dim`` (in ``[-ndim - 1, ndim]``)."""
    ts = _tensors(tensors, "stack")
    first = ts[0]
    for i, t in enumerate(ts):
        if t.shape != first.shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(first.shape)} at "
                f"entry 0 and {list(t.shape)} at entry {i}"
            )
    d = wrap_dim(dim, first.ndim + 1)
    data = first.device.xp.stack([t.data for t in ts], axis=d)
    edges = edges_of(*ts)
    if edges is None:
        return plain(data, first.device)
    node = StackBackward0(edges)
    node.dim = d
    return record(node, data, first.device)
