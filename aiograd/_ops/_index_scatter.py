"""The scatter-add behind every indexing gradient: zeros with a gradient added at an index
key, itself differentiable (its backward indexes again), so ``create_graph`` works to any
order. Used by indexing, views (as_strided), scatter, sorting and embedding gradients.
"""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ..graph._node import Node
from . import _dual
from ._record import edges_of, plain, record

__all__ = ["IndexScatterBackward", "index_scatter_add"]


class IndexScatterBackward(Node):
    """Backward of :func:`index_scatter_add`: index the gradient with the same key.

    Named as PyTorch names the node of an indexing gradient (``IndexPutImplBackward0``,
    ``SelectBackwardBackward0``, ...).
    """

    __slots__ = ("key", "label")
    key: tuple[Any, ...]
    label: str

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0][self.key],)

    def name(self) -> str:
        return self.label


def index_scatter_add(g: Any, shape: tuple[int, ...], key: tuple[Any, ...], basic: bool,
                      label: str) -> Any:
    """Zeros of ``shape`` with ``g`` added at ``key`` (an array, or a Tensor that records)."""
    data = _dual.raw(g)
    out = _dual.xp_of(data).zeros(shape, dtype=data.dtype)
    if basic:  # a basic key hits every position at most once
        out[key] = data
    else:
        _dual.xp_of(data).add.at(out, key, data)
    if type(g) is not Tensor:
        return out
    edges = edges_of(g)
    if edges is None:
        return plain(out, g.device)
    node = IndexScatterBackward(edges)
    node.key, node.label = key, label
    return record(node, out, g.device)
