"""Sweep cases of the neural-network families (aiograd/_ops/nn_ops.py and nn_more.py): see
tests/sweep_base.py."""

from __future__ import annotations

from typing import Any

from sweep_base import BINARY_SHAPES, UNARY_SHAPES, Case

ROWS = [((2, 3),), ((4, 5),)]  # (N, C) logits
LINEAR_SHAPES = [((2, 3), (4, 3)), ((1, 5), (2, 5))]


def _f(lib: Any) -> Any:
    return lib.nn.functional


def _classes(lib: Any, n: int, c: int) -> Any:
    """N class indices in [0, c), fixed."""
    return lib.tensor([i * 2 % c for i in range(n)])


def _nll_2d(lib: Any, x: Any) -> Any:
    """nll_loss of (N, C, d) log-probabilities."""
    n, c, d = x.shape
    t = lib.tensor([[(i + j) % c for j in range(d)] for i in range(n)])
    return _f(lib).nll_loss(x, t)


CASES: dict[str, Case] = {
    "SoftmaxBackward0": Case(lambda lib, x: lib.softmax(x, -1), UNARY_SHAPES[1:]),
    "LogSoftmaxBackward0": Case(lambda lib, x: lib.log_softmax(x, 0), UNARY_SHAPES[1:]),
    "AddmmBackward0 (linear)": Case(
        lambda lib, x, w, b: _f(lib).linear(x, w, b),
        [s + ((s[1][0],),) for s in LINEAR_SHAPES]),
    # PyTorch's linear without a bias is a matmul
    "AddmmBackward0 (linear, no bias)": Case(lambda lib, x, w: _f(lib).linear(x, w),
                                             LINEAR_SHAPES, torch_node="MmBackward0"),
    "MseLossBackward0": Case(lambda lib, x, t: _f(lib).mse_loss(x, t), BINARY_SHAPES[:1]),
    # PyTorch records log_softmax then nll_loss; aiograd fuses them
    "CrossEntropyLossBackward0": Case(
        lambda lib, x: _f(lib).cross_entropy(x, _classes(lib, *x.shape)), ROWS,
        torch_node="NllLossBackward0"),
    "NllLossBackward0": Case(lambda lib, x: _f(lib).nll_loss(x, _classes(lib, *x.shape)),
                             ROWS, linear=True),
    "NllLoss2DBackward0": Case(_nll_2d, [((2, 3, 2),), ((1, 4, 3),)], linear=True),
}

