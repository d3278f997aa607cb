"""Sweep cases of aiograd/_ops/linalg.py: matmul's nodes, one per case of its operands
(and bmm's). See tests/sweep_base.py."""

from __future__ import annotations

from typing import Any

from sweep_base import Case


def _matmul(lib: Any, a: Any, b: Any) -> Any:
    return a @ b


def _mm(lib: Any, a: Any, b: Any) -> Any:
    """``a @ b``, or ``a @ b.T`` (a column-major operand, whose gradient keeps b's layout)
    when b comes as a Linear's (out, in) weight."""
    return a @ b if a.shape[-1] == b.shape[0] else a @ b.T


CASES: dict[str, Case] = {
    "DotBackward0": Case(_matmul, [((3,), (3,))]),
    "MvBackward0": Case(_matmul, [((2, 3), (3,))]),
    "MmBackward0": Case(_mm, [((2, 3), (3, 4)), ((2, 3), (4, 3))]),
    "SqueezeBackward4 (matmul)": Case(_matmul, [((3,), (3, 4))]),
    "UnsafeViewBackward0 (matmul)": Case(
        _matmul, [((2, 2, 3), (3, 4)), ((2, 2, 3), (2, 3, 4)), ((3,), (2, 3, 4)),
                  ((2, 2, 3), (3,)), ((2, 2, 3), (1, 3, 4))]),
    "BmmBackward0": Case(lambda lib, a, b: lib.bmm(a, b), [((2, 2, 3), (2, 3, 4))]),
}
