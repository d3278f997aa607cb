"""Sweep cases of the neural-network families (aiograd/_ops/nn_ops.py and nn_more.py): see
tests/sweep_base.py."""

from __future__ import annotations

from typing import Any

import numpy as np
from sweep_base import ANY, BINARY_SHAPES, POSITIVE, UNARY_SHAPES, Case, aten, backward_of

import aiograd as ag
from aiograd._ops import nn_more

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


def _activation(name: str, *args: Any, kinks: tuple[float, ...] = (),
                inplace: bool = False) -> Case:
    """``F.<name>(x, *args)``, or in place on a copy of x."""
    if inplace:
        return Case(lambda lib, x: getattr(_f(lib), name)(x * 1.0, *args, inplace=True),
                    UNARY_SHAPES, kinks=kinks)
    return Case(lambda lib, x: getattr(_f(lib), name)(x, *args), UNARY_SHAPES, kinks=kinks)


def _xlogy_self(lib: Any, t: Any) -> Any:
    """kl_div's ``xlogy(t, t)``."""
    return nn_more._xlogy_self(t) if lib is ag else lib.xlogy(t, t)


def _pos_weight(lib: Any, n: int) -> Any:
    return lib.tensor(np.linspace(0.5, 2.0, n))


# The loss cases keep |x - t| in (1.3, 2.2): quadratic for smooth_l1 (beta 3), linear for
# huber (delta 1), away from the kinks.
DIFFERENT = [(1.5, 2.0), (-0.2, 0.2)]
PROBABILITIES = [(0.1, 0.9), (0.1, 0.9)]
PAD_SHAPES = {1: ((2, 4), (1, 2, 4)), 2: ((2, 3, 4), (1, 2, 3, 4)),
              3: ((1, 3, 3, 3), (1, 1, 3, 3, 3))}
PADS = {1: (2, 1), 2: (1, 2, 2, 0), 3: (1, 0, 2, 1, 0, 2)}


def _pad_cases() -> dict[str, Case]:
    cases = {}
    for mode, kind in (("reflect", "Reflection"), ("replicate", "Replication")):
        for k, shapes in PAD_SHAPES.items():

            def forward(lib: Any, x: Any, k: int = k, mode: str = mode) -> Any:
                return _f(lib).pad(x, PADS[k], mode=mode)

            cases[f"{kind}Pad{k}DBackward0"] = Case(forward, [(s,) for s in shapes],
                                                    linear=True)
            cases[f"{kind}Pad{k}DBackwardBackward0"] = backward_of(forward, shapes[0])
    return cases


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
    "SiluBackward0": _activation("silu"),
    "MishBackward0": _activation("mish"),
    "EluBackward0": _activation("elu", 1.5, kinks=(0.0,)),
    "EluBackward1": _activation("elu", 1.5, kinks=(0.0,), inplace=True),
    "SoftplusBackward0": _activation("softplus", 2.0, 1.0, kinks=(0.5,)),
    "LogSigmoidBackward0": _activation("logsigmoid"),
    "HardtanhBackward0": _activation("hardtanh", -1.0, 1.0, kinks=(-1.0, 1.0)),
    "HardtanhBackward0 (in place)": _activation("hardtanh", -1.0, 1.0, kinks=(-1.0, 1.0),
                                                inplace=True),
    "HardtanhBackwardBackward0": Case(
        aten("hardtanh_backward", lambda g, x: nn_more.hardtanh_backward(g, x, -1.0, 1.0),
             -1.0, 1.0), BINARY_SHAPES[:1], kinks=(-1.0, 1.0)),
    "BinaryCrossEntropyBackward0": Case(
        lambda lib, x, t: _f(lib).binary_cross_entropy(x, t), BINARY_SHAPES[:1], PROBABILITIES),
    "BinaryCrossEntropyWithLogitsBackward0": Case(
        lambda lib, x, t: _f(lib).binary_cross_entropy_with_logits(
            x, t, pos_weight=_pos_weight(lib, x.shape[-1]) if x.ndim == 2 else None),
        [((2, 3), (2, 3)), ((4,), (4,))], [ANY, (0.0, 1.0)]),
    "SmoothL1LossBackward0": Case(lambda lib, x, t: _f(lib).smooth_l1_loss(x, t, beta=3.0),
                                  BINARY_SHAPES[:1], DIFFERENT),
    "HuberLossBackward0": Case(lambda lib, x, t: _f(lib).huber_loss(x, t, delta=1.0),
                               BINARY_SHAPES[:1], DIFFERENT),
    "XlogyBackward0": Case(_xlogy_self, UNARY_SHAPES, POSITIVE),
    "ConstantPadNdBackward0": Case(lambda lib, x: _f(lib).pad(x, (1, 2)), UNARY_SHAPES[1:],
                                   linear=True),
    **_pad_cases(),
}

