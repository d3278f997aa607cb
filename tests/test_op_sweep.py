"""The systematic sweep (HIPS autograd's ``test_systematic``): every rule of the rule table
(``aiograd._ops._rule.RULES``) runs over several shapes and broadcasts with gradcheck and
gradgradcheck in float64, and against PyTorch where installed: values, gradients, the
node's name and second order. ``SWEEP`` is the cases below and those of every
``tests/sweep_<family>.py`` (see tests/sweep_base.py); a rule without an entry fails
``test_every_rule_has_a_sweep_entry``, so a new op cannot skip it."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, leaf
from sweep_base import (
    ANY,
    BINARY_SHAPES,
    CLAMP_SHAPES,
    HALVES,
    INTEGERS,
    MATRIX_SHAPES,
    POSITIVE,
    SOLVE_SHAPES,
    UNARY_SHAPES,
    UNIT,
    Case,
    aten,
    conditioned,
    unary_case,
)

import aiograd as ag
from aiograd._ops import nn_extra, unary
from aiograd._ops._rule import RULES

pytestmark = pytest.mark.timeout(120)


def _leaky_relu_backward(lib: Any, g: Any, x: Any) -> Any:
    if lib is ag:
        return nn_extra.leaky_relu_backward(g, x, 0.1)
    return lib.ops.aten.leaky_relu_backward(g, x, 0.1, False)


def _embedding(lib: Any, w: Any) -> Any:
    """Rows of ``w`` by a (2, 2) index tensor, row 0 twice (a padding row has no gradient
    by definition, so gradcheck cannot see it: tests/test_nn_layers.py covers it)."""
    return lib.nn.functional.embedding(lib.tensor([[0, 2], [1, 0]]), w)



FIRST_FAMILIES: dict[str, Case] = {  # by RULES key: the node name, and the variant if any
    "AddBackward0": Case(lambda lib, a, b: a + b, BINARY_SHAPES, linear=True),
    "SubBackward0": Case(lambda lib, a, b: a - b, BINARY_SHAPES, linear=True),
    "AddBackward0 (alpha)": Case(lambda lib, a, b: lib.add(a, b, alpha=2.5), BINARY_SHAPES,
                                 linear=True),
    "SubBackward0 (alpha)": Case(lambda lib, a, b: lib.sub(a, b, alpha=2.5), BINARY_SHAPES,
                                 linear=True),
    "CloneBackward0": Case(lambda lib, x: x.clone(), UNARY_SHAPES, linear=True),
    "ZeroBackward0": Case(lambda lib, x: x.clone().zero_(), UNARY_SHAPES, linear=True),
    "FillBackward2": Case(lambda lib, x: x.clone().fill_(2.0), UNARY_SHAPES, linear=True),
    "FillBackward3": Case(lambda lib, x, v: (x * 1.0).fill_(v), [((2, 3), ()), ((3,), ())],
                          linear=True),
    "CopyBackwards": Case(lambda lib, x, src: (x * 1.0).copy_(src),
                          [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 3), ())], linear=True),
    "FloorBackward0": unary_case("floor", kinks=INTEGERS, linear=True),
    "CeilBackward0": unary_case("ceil", kinks=INTEGERS, linear=True),
    "TruncBackward0": unary_case("trunc", kinks=INTEGERS, linear=True),
    "RoundBackward0": unary_case("round", kinks=HALVES, linear=True),
    "RoundBackward1": Case(lambda lib, x: lib.round(x, decimals=0), UNARY_SHAPES,
                           kinks=HALVES, linear=True),
    "FracBackward0": unary_case("frac", kinks=INTEGERS, linear=True),
    "FmodBackward0": Case(lambda lib, x: lib.fmod(x, 1.5), UNARY_SHAPES,
                          kinks=(-1.5, 0.0, 1.5), linear=True),
    "RemainderBackward0": Case(lambda lib, x: lib.remainder(x, 1.5), UNARY_SHAPES,
                               kinks=(-1.5, 0.0, 1.5), linear=True),
    "ToCopyBackward0": Case(lambda lib, x: x.to(lib.float64, copy=True), UNARY_SHAPES,
                            linear=True),
    "MulBackward0": Case(lambda lib, a, b: a * b, BINARY_SHAPES),
    "MulBackward0 (number)": Case(lambda lib, x: x * 2.5, UNARY_SHAPES, linear=True),
    "DivBackward0": Case(lambda lib, a, b: a / b, BINARY_SHAPES, [ANY, POSITIVE]),
    "DivBackward0 (number)": Case(lambda lib, x: x / 2.5, UNARY_SHAPES, linear=True),
    # PyTorch records ``number / x`` as ``reciprocal(x) * number``
    "DivBackward0 (number dividend)": Case(lambda lib, x: 2.5 / x, UNARY_SHAPES, POSITIVE,
                                           torch_node="MulBackward0"),
    "RsubBackward1": Case(lambda lib, x: 2.0 - x, UNARY_SHAPES, linear=True),
    "NegBackward0": Case(lambda lib, x: -x, UNARY_SHAPES, linear=True),
    "ExpBackward0": unary_case("exp"),
    "LogBackward0": unary_case("log", POSITIVE),
    "SqrtBackward0": unary_case("sqrt", POSITIVE),
    "Log1PBackward0": unary_case("log1p", POSITIVE),
    "Expm1Backward0": unary_case("expm1"),
    "SinBackward0": unary_case("sin"),
    "CosBackward0": unary_case("cos"),
    "TanhBackward0": unary_case("tanh"),
    "SigmoidBackward0": unary_case("sigmoid"),
    "AbsBackward0": unary_case("abs", kinks=(0.0,)),
    "SignBackward0": unary_case("sign", kinks=(0.0,), linear=True),
    "ReluBackward0": unary_case("relu", kinks=(0.0,)),
    "AtanBackward0": unary_case("atan"),
    "AsinBackward0": unary_case("asin", UNIT),
    "AcosBackward0": unary_case("acos", UNIT),
    "SinhBackward0": unary_case("sinh"),
    "CoshBackward0": unary_case("cosh"),
    "ErfinvBackward0": unary_case("erfinv", UNIT),
    "ReciprocalBackward0": unary_case("reciprocal", POSITIVE),
    "RsqrtBackward0": unary_case("rsqrt", POSITIVE),
    "Log2Backward0": unary_case("log2", POSITIVE),
    "Log10Backward0": unary_case("log10", POSITIVE),
    "Exp2Backward0": unary_case("exp2"),
    "NanToNumBackward0": unary_case("nan_to_num", linear=True),
    "TanhBackwardBackward0": Case(aten("tanh_backward", unary.tanh_backward),
                                  BINARY_SHAPES[:1], [ANY, UNIT]),
    "SigmoidBackwardBackward0": Case(aten("sigmoid_backward", unary.sigmoid_backward),
                                     BINARY_SHAPES[:1], [ANY, (0.1, 0.9)]),
    "ThresholdBackwardBackward0": Case(
        aten("threshold_backward", unary.threshold_backward, 0), BINARY_SHAPES[:1],
        [ANY, POSITIVE]),
    "ClampBackward1": Case(lambda lib, x: lib.clamp(x, -0.5, 0.7), UNARY_SHAPES,
                           kinks=(-0.5, 0.7), linear=True),
    "ClampMinBackward0": Case(lambda lib, x: lib.clamp_min(x, -0.5), UNARY_SHAPES,
                              kinks=(-0.5,), linear=True),
    "ClampMaxBackward0": Case(lambda lib, x: lib.clamp_max(x, 0.7), UNARY_SHAPES,
                              kinks=(0.7,), linear=True),
    "ClampBackward0": Case(lambda lib, x, lo, hi: lib.clamp(x, lo, hi), CLAMP_SHAPES,
                           [ANY, (-1.5, -0.5), (0.5, 1.5)], linear=True),
    "ClampMinBackward1": Case(lambda lib, x, lo: lib.clamp_min(x, lo), BINARY_SHAPES, linear=True),
    "ClampMaxBackward1": Case(lambda lib, x, hi: lib.clamp_max(x, hi), BINARY_SHAPES, linear=True),
    "MaximumBackward0": Case(lambda lib, a, b: lib.maximum(a, b), BINARY_SHAPES, linear=True),
    "MinimumBackward0": Case(lambda lib, a, b: lib.minimum(a, b), BINARY_SHAPES, linear=True),
    "WhereBackward0": Case(lambda lib, x, y: lib.where(x.detach() > 0, x, y), BINARY_SHAPES,
                           linear=True),
    "LeakyReluBackward0": Case(lambda lib, x: lib.nn.functional.leaky_relu(x, 0.1),
                               UNARY_SHAPES, kinks=(0.0,)),
    "LeakyReluBackward1": Case(
        lambda lib, x: lib.nn.functional.leaky_relu(x * 1.0, 0.1, inplace=True), UNARY_SHAPES,
        kinks=(0.0,)),
    "LeakyReluBackwardBackward0": Case(_leaky_relu_backward, BINARY_SHAPES[:1], kinks=(0.0,)),
    "ErfBackward0": unary_case("erf"),
    "GeluBackward0": Case(lambda lib, x: lib.nn.functional.gelu(x), UNARY_SHAPES),
    "CumprodBackward0": Case(lambda lib, x: lib.cumprod(x, dim=-1), UNARY_SHAPES[1:]),
    "LogcumsumexpBackward0": Case(lambda lib, x: lib.logcumsumexp(x, dim=-1), UNARY_SHAPES[1:]),
    "EmbeddingBackward0": Case(_embedding, [((3, 2),), ((4, 3),)], linear=True),
    "NativeLayerNormBackward0": Case(
        lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (3,), w, b),
        [((2, 3), (3,), (3,)), ((2, 2, 3), (3,), (3,))]),
    "LinalgInvExBackward0": Case(lambda lib, a: lib.linalg.inv(conditioned(lib, a)),
                                 MATRIX_SHAPES),
    "LinalgDetBackward0": Case(lambda lib, a: lib.linalg.det(conditioned(lib, a)),
                               MATRIX_SHAPES),
    "LinalgSolveExBackward0": Case(
        lambda lib, a, b: lib.linalg.solve(conditioned(lib, a), b), SOLVE_SHAPES),
}


def _collect() -> dict[str, Case]:
    """The cases above and every ``tests/sweep_<family>.py`` module's ``CASES``; a key given
    twice is an error."""
    sweep = dict(FIRST_FAMILIES)
    for path in sorted(Path(__file__).parent.glob("sweep_*.py")):
        if path.stem == "sweep_base":
            continue
        cases = importlib.import_module(path.stem).CASES
        if twice := sorted(set(sweep) & set(cases)):
            raise ValueError(f"{path.name} repeats sweep entries: {twice}")
        sweep.update(cases)
    return sweep


SWEEP = _collect()

CASES = [pytest.param(key, i, id=f"{key}-{i}")
         for key, case in sorted(SWEEP.items()) for i in range(len(case.shapes))]


def test_every_rule_has_a_sweep_entry() -> None:
    missing = sorted(set(RULES) - set(SWEEP))
    assert not missing, f"rules without a sweep entry in tests/test_op_sweep.py: {missing}"
    assert not sorted(set(SWEEP) - set(RULES)), "sweep entries naming no rule"


def _inputs(key: str, i: int) -> tuple[Case, list[np.ndarray]]:
    case = SWEEP[key]
    return case, case.arrays(case.shapes[i], seed=i)


@pytest.mark.parametrize(("key", "i"), CASES)
def test_gradcheck(key: str, i: int) -> None:
    case, arrays = _inputs(key, i)
    name = RULES[key].name
    xs = [leaf(a) for a in arrays]

    def fn(*args: ag.Tensor) -> ag.Tensor:
        return case.op(ag, *args)

    assert fn(*xs).grad_fn.name() == name
    assert ag.gradcheck(fn, xs)
    assert ag.gradgradcheck(fn, xs)


@pytest.mark.parametrize(("key", "i"), CASES)
def test_against_torch(key: str, i: int) -> None:
    torch = pytest.importorskip("torch")
    case, arrays = _inputs(key, i)
    name = RULES[key].name
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    # the node is PyTorch's (which qualifies a few: torch::autograd::CopyBackwards)
    expected = case.torch_node or name
    assert case.theirs(torch, *ts).grad_fn.name().split("::")[-1] == expected

    def ours(*xs: Any) -> Any:
        return case.op(ag, *xs)

    def theirs(*xs: Any) -> Any:
        return case.theirs(torch, *xs)

    check_against_torch(ours, theirs, *arrays)
    if not case.linear:
        check_second_order(ours, theirs, *arrays)
