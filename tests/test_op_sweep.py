"""The systematic sweep (HIPS autograd's ``test_systematic``): every rule of the rule table
(``aiograd._ops._rule.RULES``) runs over several shapes and broadcasts with gradcheck and
gradgradcheck in float64, and against PyTorch where installed: values, gradients, the
node's name and second order. A rule without an entry in ``SWEEP`` fails
``test_every_rule_has_a_sweep_entry``, so a new op cannot skip it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, leaf

import aiograd as ag
from aiograd._ops import nn_extra, unary
from aiograd._ops._rule import RULES

pytestmark = pytest.mark.timeout(120)

# Domains: (low, high) of uniform values, kept 0.1 away from the listed kinks.
ANY = (-2.0, 2.0)
POSITIVE = (0.3, 3.0)
UNIT = (-0.9, 0.9)
INTEGERS = (-2.0, -1.0, 0.0, 1.0, 2.0)
HALVES = (-1.5, -0.5, 0.5, 1.5)

UNARY_SHAPES: list[tuple[tuple[int, ...], ...]] = [((),), ((3,),), ((2, 3),)]
BINARY_SHAPES: list[tuple[tuple[int, ...], ...]] = [
    ((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2,))]
CLAMP_SHAPES: list[tuple[tuple[int, ...], ...]] = [
    ((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), ()), ((2, 3), (2, 1), (1,))]
MATRIX_SHAPES: list[tuple[tuple[int, ...], ...]] = [((3, 3),), ((2, 3, 3),)]
SOLVE_SHAPES: list[tuple[tuple[int, ...], ...]] = [
    ((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)), ((2, 3, 3), (3, 2))]


class Case:
    """How to reach a rule: ``op(lib, *tensors)`` written once against aiograd and torch
    (``theirs`` when torch spells it differently), over ``shapes``, with inputs drawn
    from ``domains`` (one per input, or one for all) away from ``kinks``. ``linear``:
    the gradient is piecewise constant in the inputs, so PyTorch's first gradient has no
    graph to differentiate; second order is then gradgradcheck's alone. ``torch_node``:
    PyTorch's node where it records the op differently (the values and gradients are
    still compared)."""

    def __init__(self, op: Callable[..., Any], shapes: list[tuple[tuple[int, ...], ...]],
                 domains: tuple[float, float] | list[tuple[float, float]] = ANY,
                 kinks: tuple[float, ...] = (), theirs: Callable[..., Any] | None = None,
                 linear: bool = False, torch_node: str | None = None) -> None:
        self.op = op
        self.torch_node = torch_node
        self.linear = linear
        self.theirs = theirs or op
        self.shapes = shapes
        self.domains = domains
        self.kinks = kinks

    def arrays(self, shapes: tuple[tuple[int, ...], ...], seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        out = []
        for i, shape in enumerate(shapes):
            low, high = self.domains[i] if isinstance(self.domains, list) else self.domains
            x = rng.uniform(low, high, size=shape)
            for p in self.kinks:
                near = np.abs(x - p) < 0.1
                x = np.where(near, p + 0.2 * np.sign(x - p + 1e-12), x)
            out.append(x)
        return out


def _unary(name: str, domain: tuple[float, float] = ANY, kinks: tuple[float, ...] = (),
           linear: bool = False) -> Case:
    return Case(lambda lib, x: getattr(lib, name)(x), UNARY_SHAPES, domain, kinks,
                linear=linear)


def _aten(name: str, ours: Callable[..., Any], *extra: Any) -> Callable[..., Any]:
    """``ours(g, y)`` for aiograd, ``torch.ops.aten.<name>(g, y, *extra)`` for torch."""

    def op(lib: Any, g: Any, y: Any) -> Any:
        if lib is ag:
            return ours(g, y)
        return getattr(lib.ops.aten, name)(g, y, *extra)

    return op


def _leaky_relu_backward(lib: Any, g: Any, x: Any) -> Any:
    if lib is ag:
        return nn_extra.leaky_relu_backward(g, x, 0.1)
    return lib.ops.aten.leaky_relu_backward(g, x, 0.1, False)


def _embedding(lib: Any, w: Any) -> Any:
    """Rows of ``w`` by a (2, 2) index tensor, row 0 twice (a padding row has no gradient
    by definition, so gradcheck cannot see it: tests/test_nn_layers.py covers it)."""
    return lib.nn.functional.embedding(lib.tensor([[0, 2], [1, 0]]), w)


def _conditioned(lib: Any, a: Any) -> Any:
    """``a + 3 I``: a matrix of ANY entries kept far from singular (n = 3)."""
    return a + 3 * lib.eye(a.shape[-1], dtype=a.dtype)


SWEEP: dict[str, Case] = {  # by RULES key: the node name, and the variant if any
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
    "FloorBackward0": _unary("floor", kinks=INTEGERS, linear=True),
    "CeilBackward0": _unary("ceil", kinks=INTEGERS, linear=True),
    "TruncBackward0": _unary("trunc", kinks=INTEGERS, linear=True),
    "RoundBackward0": _unary("round", kinks=HALVES, linear=True),
    "RoundBackward1": Case(lambda lib, x: lib.round(x, decimals=0), UNARY_SHAPES,
                           kinks=HALVES, linear=True),
    "FracBackward0": _unary("frac", kinks=INTEGERS, linear=True),
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
    "ExpBackward0": _unary("exp"),
    "LogBackward0": _unary("log", POSITIVE),
    "SqrtBackward0": _unary("sqrt", POSITIVE),
    "Log1PBackward0": _unary("log1p", POSITIVE),
    "Expm1Backward0": _unary("expm1"),
    "SinBackward0": _unary("sin"),
    "CosBackward0": _unary("cos"),
    "TanhBackward0": _unary("tanh"),
    "SigmoidBackward0": _unary("sigmoid"),
    "AbsBackward0": _unary("abs", kinks=(0.0,)),
    "SignBackward0": _unary("sign", kinks=(0.0,), linear=True),
    "ReluBackward0": _unary("relu", kinks=(0.0,)),
    "AtanBackward0": _unary("atan"),
    "AsinBackward0": _unary("asin", UNIT),
    "AcosBackward0": _unary("acos", UNIT),
    "SinhBackward0": _unary("sinh"),
    "CoshBackward0": _unary("cosh"),
    "ErfinvBackward0": _unary("erfinv", UNIT),
    "ReciprocalBackward0": _unary("reciprocal", POSITIVE),
    "RsqrtBackward0": _unary("rsqrt", POSITIVE),
    "Log2Backward0": _unary("log2", POSITIVE),
    "Log10Backward0": _unary("log10", POSITIVE),
    "Exp2Backward0": _unary("exp2"),
    "NanToNumBackward0": _unary("nan_to_num", linear=True),
    "TanhBackwardBackward0": Case(_aten("tanh_backward", unary.tanh_backward),
                                  BINARY_SHAPES[:1], [ANY, UNIT]),
    "SigmoidBackwardBackward0": Case(_aten("sigmoid_backward", unary.sigmoid_backward),
                                     BINARY_SHAPES[:1], [ANY, (0.1, 0.9)]),
    "ThresholdBackwardBackward0": Case(
        _aten("threshold_backward", unary.threshold_backward, 0), BINARY_SHAPES[:1],
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
    "ErfBackward0": _unary("erf"),
    "GeluBackward0": Case(lambda lib, x: lib.nn.functional.gelu(x), UNARY_SHAPES),
    "CumprodBackward0": Case(lambda lib, x: lib.cumprod(x, dim=-1), UNARY_SHAPES[1:]),
    "LogcumsumexpBackward0": Case(lambda lib, x: lib.logcumsumexp(x, dim=-1), UNARY_SHAPES[1:]),
    "EmbeddingBackward0": Case(_embedding, [((3, 2),), ((4, 3),)], linear=True),
    "NativeLayerNormBackward0": Case(
        lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (3,), w, b),
        [((2, 3), (3,), (3,)), ((2, 2, 3), (3,), (3,))]),
    "LinalgInvExBackward0": Case(lambda lib, a: lib.linalg.inv(_conditioned(lib, a)),
                                 MATRIX_SHAPES),
    "LinalgDetBackward0": Case(lambda lib, a: lib.linalg.det(_conditioned(lib, a)),
                               MATRIX_SHAPES),
    "LinalgSolveExBackward0": Case(
        lambda lib, a, b: lib.linalg.solve(_conditioned(lib, a), b), SOLVE_SHAPES),
}

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
