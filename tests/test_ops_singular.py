"""Elementwise ops at singular points and under create_graph, each run in both libraries.

PyTorch is the oracle for values, gradients, second derivatives, the graph a
create_graph gradient records, error types and messages, and for silence:
NumPy's RuntimeWarnings ("divide by zero encountered", ...) must not reach
the user where PyTorch computes inf or NaN without a word.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


def _grad(lib: Any, out: Any, inp: Any, go: Any, create_graph: bool = False) -> Any:
    if lib is torch:
        return torch.autograd.grad(out, inp, go, create_graph=create_graph)[0]
    return ag.grad_sync(out, inp, go, create_graph=create_graph)[0]


def _array(t: Any) -> np.ndarray:
    return t.detach().numpy()


def _ones(lib: Any, shape: Any) -> Any:
    return lib.ones(*shape) if shape else lib.tensor(1.0)


def _fn_name(lib: Any, t: Any) -> str | None:
    if t.grad_fn is None:
        return None
    return type(t.grad_fn).__name__ if lib is torch else t.grad_fn.name()


# ---- the graph of a create_graph gradient ----

OPS: dict[str, Callable[[Any, Any], Any]] = {
    "exp": lambda lib, x: x.exp(),
    "log": lambda lib, x: x.log(),
    "sqrt": lambda lib, x: x.sqrt(),
    "tanh": lambda lib, x: x.tanh(),
    "sigmoid": lambda lib, x: x.sigmoid(),
    "abs": lambda lib, x: x.abs(),
    "sign": lambda lib, x: x.sign(),
    "relu": lambda lib, x: x.relu(),
    "clamp": lambda lib, x: x.clamp(0.7, 1.5),
    "clamp_min": lambda lib, x: x.clamp(min=1.0),
    "where": lambda lib, x: lib.where(x > 1.0, x, x * 2.0),
    "add_number": lambda lib, x: x + 1.0,
    "add_self": lambda lib, x: x + x,
    "sub_number": lambda lib, x: x - 1.0,
    "rsub": lambda lib, x: 1.0 - x,
    "neg": lambda lib, x: -x,
    "mul_number": lambda lib, x: x * 2.0,
    "mul_constant": lambda lib, x: x * lib.tensor([1.0, 2.0, 3.0]),
    "mul_self": lambda lib, x: x * x,
    "div_number": lambda lib, x: x / 2.0,
    "div_constant": lambda lib, x: x / lib.tensor([1.0, 2.0, 3.0]),
    "div_into_constant": lambda lib, x: lib.tensor([1.0, 2.0, 3.0]) / x,
    "rdiv": lambda lib, x: 2.0 / x,
    "pow_2": lambda lib, x: x ** 2,
    "pow_1": lambda lib, x: x ** 1,
    "pow_0": lambda lib, x: x ** 0,
    "pow_tensor": lambda lib, x: x ** lib.tensor([2.0, 1.0, 3.0]),
    "tensor_pow": lambda lib, x: lib.tensor([2.0, 1.0, 3.0]) ** x,
    "rpow": lambda lib, x: 2.0 ** x,
    "rpow_zero_base": lambda lib, x: 0.0 ** x,
    "max_dim": lambda lib, x: x.reshape(1, 3).max(1)[0],
    "min_dim": lambda lib, x: x.reshape(1, 3).min(1)[0],
}
@pytest.mark.parametrize("name", sorted(OPS))
def test_create_graph_gradient_has_torchs_history(name):
    seen = []
    for lib in (ag, torch):
        x = lib.tensor([0.5, 1.25, 2.0], requires_grad=True)
        y = OPS[name](lib, x)
        g = _grad(lib, y, x, _ones(lib, tuple(y.shape)), create_graph=True)
        seen.append((g.requires_grad, _fn_name(lib, g)))
    assert seen[0] == seen[1]


@pytest.mark.parametrize("name", ["tanh", "sigmoid"])
def test_tanh_and_sigmoid_gradients_are_ops_of_their_own_to_third_order(name):
    # tanh_backward(g, y) / sigmoid_backward(g, s) as PyTorch records them, differentiable
    # in the incoming gradient and in the output, at any order
    seen = []
    for lib in (ag, torch):
        x = lib.tensor([-1.5, 0.25, 2.0], requires_grad=True)
        v = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)  # an incoming gradient with history
        y = OPS[name](lib, x)
        g = _grad(lib, y, x, v * 1.0, create_graph=True)
        names = [_fn_name(lib, g)] + sorted(
            type(fn).__name__ if lib is torch else fn.name()
            for fn, _ in g.grad_fn.next_functions if fn is not None)
        gg = _grad(lib, g.sum(), x, None, create_graph=True)
        ggg = _grad(lib, gg.sum(), x, None)
        gv = _grad(lib, g.sum(), v, None)
        seen.append((names, _array(g), _array(gg), _array(ggg), _array(gv)))
    assert seen[0][0] == seen[1][0]
    for ours, theirs in zip(seen[0][1:], seen[1][1:]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_relu_gradient_of_its_gradient_is_zero_not_an_error():
    results = []
    for lib in (ag, torch):
        x = lib.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        g = _grad(lib, x.relu(), x, lib.ones(3), create_graph=True)
        gg = _grad(lib, g, x, lib.ones(3))
        results.append((_array(g), _array(gg)))
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(results[0][1], [0.0, 0.0, 0.0])


def test_relu_gradient_is_differentiable_in_the_incoming_gradient():
    results = []
    for lib in (ag, torch):
        x = lib.tensor([-1.0, 0.5, 2.0], requires_grad=True)
        w = lib.tensor([3.0, 4.0, 5.0], requires_grad=True)
        g = _grad(lib, x.relu(), x, w, create_graph=True)  # g == w * mask
        gw = _grad(lib, g * g, w, lib.ones(3), create_graph=True)  # 2 w mask
        gww = _grad(lib, gw, w, lib.ones(3))
        results.append((_fn_name(lib, g), _fn_name(lib, gw), _array(gw), _array(gww)))
    ours, theirs = results
    assert ours[:2] == theirs[:2] == ("ThresholdBackwardBackward0",) * 2
    for a, b in zip(ours[2:], theirs[2:]):
        np.testing.assert_array_equal(a, b)


# ---- NaN ----

@pytest.mark.parametrize("op", ["abs", "sign", "relu"])
def test_nan_value_and_gradient_match_torch(op):
    results = []
    for lib in (ag, torch):
        x = lib.tensor([NAN, 0.0, -0.0, -1.5, 2.0, INF, -INF], requires_grad=True)
        y = getattr(x, op)()
        results.append((_array(y), _array(_grad(lib, y, x, lib.ones(7)))))
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)


def test_sign_of_nan_is_zero_as_torch():
    x = ag.tensor(np.array([NAN, -2.0, 0.0], np.float32))
    np.testing.assert_array_equal(x.sign().numpy(), torch.tensor([NAN, -2.0, 0.0]).sign())
    assert ag.tensor(NAN).sign().item() == 0.0
    assert ag.tensor([True, False]).sign().numpy().tolist() == [True, False]


def test_pow_0_gradient_is_zero_even_for_a_nan_gradient():
    for lib in (ag, torch):
        x = lib.tensor([0.0, 2.0], requires_grad=True)
        g = _grad(lib, x ** 0, x, lib.tensor([NAN, INF]))
        np.testing.assert_array_equal(_array(g), [0.0, 0.0])


# ---- integer powers ----

@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor([2, 3]) ** -1,
    lambda lib: lib.tensor([-1, 1]).pow(-2),
    lambda lib: lib.tensor([True]) ** -1,
    lambda lib: lib.tensor([], dtype=lib.int64) ** -1,
])
def test_integer_tensor_to_a_negative_integer_raises_torchs_error(make):
    for lib in (ag, torch):
        with pytest.raises(RuntimeError) as info:
            make(lib)
        assert str(info.value) == "Integers to negative integer powers are not allowed."


@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor([-1, 1, 0, 5, -1, 2]) ** lib.tensor([-3, -2, -1, -1, -4, 3]),
    lambda lib: lib.tensor([2, 3]) ** lib.tensor(-1),
    lambda lib: 2 ** lib.tensor([1, -1, 0]),
    lambda lib: 1 ** lib.tensor([-5, 3]),
    lambda lib: (-1) ** lib.tensor([-5, -4]),
    lambda lib: lib.tensor([2, 3]) ** 2,
])
def test_integer_powers_with_tensor_exponents_follow_torch(make):
    ours, theirs = make(ag), make(torch)
    assert ours.numpy().tolist() == theirs.tolist()
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")


# ---- singular points: values, derivatives, silence ----

SINGULAR: dict[str, tuple[Callable[[Any, Any], Any], list[float]]] = {
    "log": (lambda lib, x: x.log(), [0.0, -1.0, 2.0]),
    "sqrt": (lambda lib, x: x.sqrt(), [0.0, -1.0, 2.0]),
    "rdiv": (lambda lib, x: 1.0 / x, [0.0, -0.0, 2.0]),
    "div_by_zero_number": (lambda lib, x: x / 0.0, [0.0, -1.0, 2.0]),
    "div_self": (lambda lib, x: x / x, [0.0, -1.0, 2.0]),
    "div_into_constant": (lambda lib, x: lib.tensor([1.0, 0.0, 3.0]) / x, [0.0, 0.0, 2.0]),
    "div_by_constant": (lambda lib, x: x / lib.tensor([0.0, 0.0, 2.0]), [1.0, 0.0, 2.0]),
    "pow_minus_1": (lambda lib, x: x ** -1, [0.0, -0.0, 2.0]),
    "pow_half": (lambda lib, x: x ** 0.5, [0.0, -1.0, 2.0]),
    "pow_1_5": (lambda lib, x: x ** 1.5, [0.0, -1.0, 2.0]),
    "pow_tensor": (lambda lib, x: x ** lib.tensor([-1.0, 0.5, -2.0]), [0.0, -1.0, 2.0]),
    "tensor_pow": (lambda lib, x: lib.tensor([0.0, -1.0, 0.0]) ** x, [-1.0, 0.5, 2.0]),
    "rpow_zero_base": (lambda lib, x: 0.0 ** x, [-1.0, 0.5, 0.0]),
    "rpow_negative_base": (lambda lib, x: (-2.0) ** x, [-1.0, 0.5, 2.0]),
    "mean_of_empty": (lambda lib, x: x[:0].mean(), [1.0, 2.0]),
    "mean_of_empty_dim": (lambda lib, x: x.reshape(2, 1)[:0].mean(0), [1.0, 2.0]),
}


# Their second derivative is PyTorch's NaN from ``0 * log(0)`` in mul's backward, and
# NumPy warns there: mul is the hot path, so it runs without an errstate.
_SECOND_ORDER_WARNS = {"tensor_pow", "rpow_zero_base"}


def _derivatives(lib: Any, name: str) -> list[Any]:
    """Value, gradient, and (when the gradient has history) second derivative."""
    fn, values = SINGULAR[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = lib.tensor(values, requires_grad=True)
        y = fn(lib, x)
        g = _grad(lib, y, x, _ones(lib, tuple(y.shape)), create_graph=True)
        out = [_array(y), _array(g)]
        if not g.requires_grad:
            return out
        if name in _SECOND_ORDER_WARNS:
            warnings.simplefilter("ignore")
        out.append(_array(_grad(lib, g, x, lib.ones(len(values)))))
    return out


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_singular_point_matches_torch_without_warnings(name):
    ours = _derivatives(ag, name)
    theirs = _derivatives(torch, name)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, equal_nan=True)
        np.testing.assert_array_equal(np.isinf(a) & (a > 0), np.isinf(b) & (b > 0))


def test_div_second_derivative_at_zero_is_inf_not_nan():
    # (a / b) / b, PyTorch's formula: b * b would give 0 * inf = NaN here.
    results = []
    for lib in (ag, torch):
        b = lib.tensor([0.0, 1.0], requires_grad=True)
        a = lib.tensor([1.0, 1.0])
        g = _grad(lib, a / b, b, lib.ones(2), create_graph=True)
        results.append(_array(_grad(lib, g, b, lib.ones(2))))
    np.testing.assert_array_equal(results[0], results[1])
    assert results[0][0] == INF


def test_mean_of_empty_gradient_is_empty_and_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = ag.zeros(0, 3, requires_grad=True)
        m = x.mean(0)
        (g,) = ag.grad_sync(m, x, ag.ones(3))
    assert np.isnan(m.detach().numpy()).all() and g.shape == (0, 3)
