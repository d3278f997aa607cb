"""Joining and splitting: ``cat stack`` and ``chunk split unbind``.

``cat``/``stack`` inputs may differ in dtype (the result has the promoted
dtype, and each input's gradient is cast back by the engine) but not in
device. Their backward slices the gradient, so under ``create_graph`` it
records ``SliceBackward0``/``SelectBackward0`` nodes.

``chunk``/``split``/``unbind`` return views of their input (see Note [Views
share the version counter] in :mod:`.shape`) that share one node with one
output per view (``output_nr``), as PyTorch's ``SplitBackward0``; its
backward joins the outputs' gradients (zeros for an output that got none)
with ``cat``/``stack``. PyTorch refuses to write such views in place with
autograd; here the write is recorded as for any view (``CopySlices``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, ClassVar

from .._tensor import Tensor
from ..graph._node import Node
from . import _dual
from ._record import _mark, _metadata, check_same_device, edges_of, plain, record
from ._rule import Rule, RuleNode
from .shape import wrap_dim
from .views import as_view, mark_forbidden_view

__all__ = ["cat", "stack", "chunk", "split", "unbind"]


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

def _cat_grad(node: RuleNode, grads: list[Any], create_graph: bool, dim: int,
              spans: tuple[tuple[int, int] | None, ...]) -> tuple[Any, ...]:
    """Input ``i``'s gradient is the slice ``spans[i]`` of the gradient along ``dim``; an
    input cat skipped gets an empty one."""
    g = grads[0]
    lead = (slice(None),) * dim
    return tuple(
        None if edge is None
        else _dual.zeros_of(g, (0,)) if span is None
        else g[lead + (slice(*span),)]
        for edge, span in zip(node.next_edges, spans)
    )


CatBackward0 = Rule(
    "CatBackward0", whole=_cat_grad, keeps=("dim", "spans"),
    doc="Invariant: input ``i`` is ``out[..., spans[i][0]:spans[i][1], ...]`` along ``dim``; "
        "``spans[i]`` is None for an input cat skipped (1-D and empty).")


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
    data = _dual.contiguous(first.device.xp.concatenate([t.data for _, t in used], axis=d))
    edges = edges_of(*ts)
    if edges is None:
        return plain(data, first.device)
    spans: list[tuple[int, int] | None] = []
    start = 0
    for t, skipped in zip(ts, skip):
        spans.append(None if skipped else (start, start + t.shape[d]))
        start += 0 if skipped else t.shape[d]
    return record(CatBackward0.make(edges, (), (d, tuple(spans))), data, first.device)


# ---- stack ----

def _stack_grad(node: RuleNode, grads: list[Any], create_graph: bool,
                dim: int) -> tuple[Any, ...]:
    """Input ``i``'s gradient is the gradient at index ``i`` of ``dim``."""
    g = grads[0]
    lead = (slice(None),) * dim
    return tuple(
        None if edge is None else g[lead + (i, Ellipsis)]
        for i, edge in enumerate(node.next_edges)
    )


StackBackward0 = Rule("StackBackward0", whole=_stack_grad, keeps=("dim",),
                      doc="Input ``i`` is ``out[..., i, ...]`` (index ``i`` at ``dim``).")


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
    data = _dual.contiguous(first.device.xp.stack([t.data for t in ts], axis=d))
    return StackBackward0.record(ts, data, first.device, (), (d,))


# ---- chunk / split / unbind ----

def _joined_grads(grads: list[Any], metadata: Sequence[Any], dim: int, new_dim: bool) -> Any:
    """The outputs' gradients joined along ``dim`` (stacked if ``new_dim``); zeros stand in
    for missing ones. None if none arrived."""
    known = next((g for g in grads if g is not None), None)
    if known is None:
        return None
    parts = [_dual.zeros_of(known, meta.shape) if g is None else g
             for g, meta in zip(grads, metadata)]
    if type(known) is Tensor:
        return stack(parts, dim) if new_dim else cat(parts, dim)
    xp = _dual.xp_of(known)
    return xp.stack(parts, axis=dim) if new_dim else xp.concatenate(parts, axis=dim)


class _PiecesBackward(Node):
    """A multi-output node (not a rule: each view is one of its outputs) whose backward
    joins its outputs' gradients along ``dim``, stacked if ``new_dim``."""

    __slots__ = ("dim",)

    dim: int
    new_dim: ClassVar[bool] = False

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (_joined_grads(grads, self.input_metadata, self.dim, self.new_dim),)


class SplitBackward0(_PiecesBackward):
    """``split(int)``/``chunk``: output ``i`` is the ``i``-th piece of the input along ``dim``."""

    __slots__ = ()


class SplitWithSizesBackward0(_PiecesBackward):
    """``split(list of sizes)``."""

    __slots__ = ()


class UnbindBackward0(_PiecesBackward):
    """Output ``i`` is ``t.select(dim, i)``."""

    __slots__ = ()
    new_dim = True


def _views(t: Tensor, datas: list[Any], node_cls: type[_PiecesBackward],
           dim: int) -> tuple[Tensor, ...]:
    """One view of ``t`` per array of ``datas``; output ``i`` of one ``node_cls`` node."""
    device = t.device
    outs = [Tensor._wrap(data, device) for data in datas]
    edges = edges_of(t)
    if edges is not None and outs:
        node = node_cls(edges)
        node.dim = dim
        node.input_metadata = tuple(_metadata(data, device) for data in datas)
        _mark(node)
        for i, out in enumerate(outs):
            out.grad_fn, out.output_nr, out._rg = node, i, True
            mark_forbidden_view(out, t, "multi_output")  # may not be written: views.py
        return tuple(outs)
    return tuple(as_view(out, t) for out in outs)


def _split_sizes(t: Tensor, sizes: Sequence[int], d: int,
                 node_cls: type[_PiecesBackward]) -> tuple[Tensor, ...]:
    lead = (slice(None),) * d
    datas = []
    start = 0
    for n in sizes:
        datas.append(t.data[lead + (slice(start, start + n),)])
        start += n
    return _views(t, datas, node_cls, d)


def split(t: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of ``t`` along ``dim``: pieces of ``split_size`` (the last may be smaller), or
    of the sizes in a list (which must add up to the dim's size)."""
    if t.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    if isinstance(split_size_or_sections, (list, tuple)):
        return _split_with_sizes(t, split_size_or_sections, dim)
    try:
        size = operator.index(split_size_or_sections)
    except TypeError:
        raise TypeError(
            "split(): split_size_or_sections must be an int or a list of ints, not "
            f"{type(split_size_or_sections).__name__}"
        ) from None
    if size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got split_size={size}")
    d = wrap_dim(dim, t.ndim)
    n = t.shape[d]
    if size == 0 and n:
        raise RuntimeError(
            f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}"
        )
    count = max(-(-n // size), 1) if size else 1
    sizes = [size] * (count - 1) + [n - size * (count - 1)]
    return _split_sizes(t, sizes, d, SplitBackward0)


def _split_with_sizes(t: Tensor, sections: Sequence[Any], dim: int) -> tuple[Tensor, ...]:
    try:
        sizes = [operator.index(s) for s in sections]
    except TypeError:
        raise TypeError(f"split(): sizes must be ints, got {list(sections)!r}") from None
    d = wrap_dim(dim, t.ndim)
    if any(s < 0 for s in sizes):
        raise RuntimeError("split_with_sizes expects split_sizes have only non-negative entries, "
                           f"but got split_sizes={sizes}")
    if sum(sizes) != t.shape[d]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {t.shape[d]} (input "
            f"tensor's size at dimension {d}), but got split_sizes={sizes}"
        )
    return _split_sizes(t, sizes, d, SplitWithSizesBackward0)


def chunk(t: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``t`` split along ``dim`` into at most ``chunks`` views of ``ceil(size / chunks)``."""
    if t.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if isinstance(chunks, bool) or not isinstance(chunks, int):
        raise TypeError(
            f"chunk(): argument 'chunks' (position 1) must be int, not {type(chunks).__name__}"
        )
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, t.ndim)
    n = t.shape[d]
    if n == 0:  # PyTorch's rule: ``chunks`` empty pieces
        return _split_sizes(t, [0] * chunks, d, SplitWithSizesBackward0)
    return split(t, -(-n // chunks), d)


def unbind(t: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices ``t.select(dim, i)`` for every ``i``, as views."""
    if t.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, t.ndim)
    lead = (slice(None),) * d
    datas = [t.data[lead + (i, Ellipsis)] for i in range(t.shape[d])]
    return _views(t, datas, UnbindBackward0, d)
