"""Sweep cases of aiograd/_ops/structure.py's rules (see tests/sweep_base.py)."""

from __future__ import annotations

from typing import Any

from sweep_base import Case

import aiograd as ag
from aiograd._ops import structure

MATRICES: list[tuple[tuple[int, ...], ...]] = [((3, 3),), ((2, 3),), ((2, 3, 4),)]


def _diagonal_backward(lib: Any, g: Any) -> Any:
    """The gradient of a (3, 4) matrix's diagonal 1 from that diagonal's, recorded (PyTorch's
    ``diagonal_backward``, the create_graph gradient of ``diagonal``)."""
    if lib is ag:
        return structure.diagonal_backward(g, (3, 4), 1, 0, 1)
    return lib.ops.aten.diagonal_backward(g, [3, 4], 1, 0, 1)


CASES: dict[str, Case] = {
    "DiagonalBackward0": Case(lambda lib, x: lib.diagonal(x, 1, -1, 0), MATRICES, linear=True),
    "DiagonalBackward0_copy": Case(lambda lib, x: lib.diag(x, -1), MATRICES[:2], linear=True),
    "DiagonalBackwardBackward0": Case(_diagonal_backward, [((3,),)], linear=True),
    "DiagEmbedBackward0": Case(lambda lib, x: lib.diag_embed(x, 1, 0, -1),
                               [((3,),), ((2, 3),)], linear=True),
    "TraceBackward0": Case(lambda lib, x: lib.trace(x), MATRICES[:2], linear=True),
    "TrilBackward0": Case(lambda lib, x: lib.tril(x, -1), MATRICES, linear=True),
    "TriuBackward0": Case(lambda lib, x: lib.triu(x, 1), MATRICES, linear=True),
    "AddmmBackward0 (addmm)": Case(
        lambda lib, i, m1, m2: lib.addmm(i, m1, m2, beta=0.5, alpha=2.0),
        [((2, 4), (2, 3), (3, 4)), ((4,), (2, 3), (3, 4)), ((), (2, 3), (3, 1))]),
    "BaddbmmBackward0": Case(
        lambda lib, i, b1, b2: lib.baddbmm(i, b1, b2, beta=0.5, alpha=2.0),
        [((2, 2, 4), (2, 2, 3), (2, 3, 4)), ((4,), (2, 2, 3), (2, 3, 4))]),
    "RollBackward0": Case(lambda lib, x: lib.roll(x, (1, 2), (0, -1)), MATRICES, linear=True),
    "Rot90Backward0": Case(lambda lib, x: lib.rot90(x, 1, (0, -1)), MATRICES, linear=True),
}
