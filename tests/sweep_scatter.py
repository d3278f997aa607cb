"""Sweep cases of aiograd/_ops/scatter.py: scatter, scatter_add, the index_* writes,
masked_select, masked_scatter, take, and the nodes their gradients record under
create_graph. See tests/sweep_base.py. Every gradient is constant in the inputs
(``linear``); scatter's indices repeat no position (its result would be undefined)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sweep_base import Case, row_mask

import aiograd as ag

_WRITES = [((3,), (2,)), ((3, 2), (2, 2))]  # (t, source) of the index_* writes at [2, 0]


def _along(lib: Any, x: Any, rows: list[list[int]]) -> tuple[int, Any]:
    """(dim, index) of a scatter into ``x``: ``rows`` along dim 1 of a matrix, its first row
    along dim 0 of a vector."""
    if x.ndim == 1:
        return 0, lib.tensor(rows[0])
    return 1, lib.tensor(rows)


def _scatter(lib: Any, x: Any, src: Any) -> Any:
    return x.scatter(*_along(lib, x, [[2, 0], [1, 0]]), src)


def _scatter_value(lib: Any, x: Any) -> Any:
    return x.scatter(*_along(lib, x, [[2, 0], [1, 0]]), value=0.5)


def _scatter_add(lib: Any, x: Any, src: Any) -> Any:
    return x.scatter_add(*_along(lib, x, [[0, 0], [1, 0]]), src)


def _source_grad(write: Callable[[Any, Any, Any], Any], source_shape: tuple[int, ...]
                 ) -> Callable[[Any, Any], Any]:
    """The gradient ``g`` gives, under create_graph, to a source of ``source_shape``
    written into zeros like ``g`` by ``write(lib, zeros, source)``: a function of ``g``
    whose node is the one the write's backward records."""

    def op(lib: Any, g: Any) -> Any:
        source = lib.zeros(source_shape, dtype=g.dtype, requires_grad=True)
        with lib.enable_grad():  # also when gradcheck evaluates ``op`` under no_grad
            out = write(lib, lib.zeros(g.shape, dtype=g.dtype), source)
        grad = ag.grad_sync if lib is ag else lib.autograd.grad
        return grad(out, source, g, create_graph=True)[0]

    return op


CASES: dict[str, Case] = {
    "ScatterBackward0": Case(_scatter, [((3,), (2,)), ((2, 3), (2, 2))], linear=True),
    "ScatterBackward1": Case(_scatter_value, [((3,),), ((2, 3),)], linear=True),
    "ScatterAddBackward0": Case(_scatter_add, [((3,), (2,)), ((2, 3), (2, 2))], linear=True),
    "IndexAddBackward0": Case(
        lambda lib, t, src: t.index_add(0, lib.tensor([2, 2]), src, alpha=2.5), _WRITES,
        linear=True),
    # index_add's source gradient scaled by alpha, under create_graph
    "MulBackward1": Case(_source_grad(
        lambda lib, t, src: t.index_add(0, lib.tensor([2, 0]), src, alpha=2.5), (2, 3)),
        [((3, 3),)], linear=True),
    "IndexCopyBackward0": Case(
        lambda lib, t, src: t.index_copy(0, lib.tensor([2, 0]), src), _WRITES, linear=True),
    "IndexFillBackward0": Case(lambda lib, t: t.index_fill(0, lib.tensor([2, 0]), 0.5),
                               [((3,),), ((3, 2),)], linear=True),
    "IndexFillBackward1": Case(lambda lib, t, v: t.index_fill(0, lib.tensor([2, 0, 2]), v),
                               [((3,), ()), ((3, 2), ())], linear=True),
    "MaskedSelectBackward0": Case(lambda lib, x: x.masked_select(row_mask(lib)),
                                  [((3,),), ((2, 3),)], linear=True),
    "MaskedScatterBackward0": Case(lambda lib, x, src: x.masked_scatter(row_mask(lib), src),
                                   [((3,), (4,)), ((2, 3), (2, 3)), ((2, 3), (5,))],
                                   linear=True),
    # masked_scatter's source gradient, under create_graph
    "MaskedScatterBackwardBackward0": Case(_source_grad(
        lambda lib, t, src: t.masked_scatter(row_mask(lib), src), (5,)), [((2, 3),)],
        linear=True),
    "TakeBackward0": Case(lambda lib, x: x.take(lib.tensor([[0, 2], [-1, 0]])),
                          [((3,),), ((2, 3),)], linear=True),
}
