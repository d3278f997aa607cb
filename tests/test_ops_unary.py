"""Unary ops and where: gradcheck sweeps, PyTorch as oracle, one behaviour per test."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, leaf

import aiograd as ag
from aiograd._ops.unary import where

pytestmark = pytest.mark.timeout(60)

SHAPES = [(), (3,), (2, 3)]


def arr(shape, low=-2.0, high=2.0, seed=0, away_from=None):
    """float64 values in [low, high), at least 0.1 from every point of ``away_from``."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, size=shape)
    for p in away_from or ():
        near = np.abs(x - p) < 0.1
        x = np.where(near, p + 0.2 * np.sign(x - p + 1e-12), x)
    return x


# ---- gradcheck sweeps ----

SMOOTH = {
    "exp": (lambda x: x.exp(), {}),
    "log": (lambda x: x.log(), {"low": 0.3, "high": 3.0}),
    "sqrt": (lambda x: x.sqrt(), {"low": 0.3, "high": 3.0}),
    "tanh": (lambda x: x.tanh(), {}),
    "sigmoid": (lambda x: x.sigmoid(), {}),
    "abs": (lambda x: abs(x), {"away_from": [0.0]}),
    "relu": (lambda x: x.relu(), {"away_from": [0.0]}),
    "clamp": (lambda x: x.clamp(-0.5, 0.7), {"away_from": [-0.5, 0.7]}),
    "clamp_min": (lambda x: x.clamp(min=-0.5), {"away_from": [-0.5]}),
    "clamp_max": (lambda x: x.clamp(max=0.7), {"away_from": [0.7]}),
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_unary_gradcheck(name, shape):
    fn, domain = SMOOTH[name]
    assert ag.gradcheck(fn, (leaf(arr(shape, **domain)),))


@pytest.mark.parametrize(
    "cond_shape, x_shape, y_shape",
    [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((3,), (2, 3), ()), ((2, 1), (1, 3), (3,))],
    ids=str,
)
def test_where_gradcheck_with_broadcasting(cond_shape, x_shape, y_shape):
    cond = np.random.default_rng(3).random(cond_shape) > 0.5
    x, y = leaf(arr(x_shape, seed=4)), leaf(arr(y_shape, seed=5))
    assert ag.gradcheck(lambda a, b: where(cond, a, b), (x, y))


# ---- PyTorch as oracle ----

TORCH_OPS = {
    "exp": (lambda x: x.exp(), "exp", {}),
    "log": (lambda x: x.log(), "log", {"low": 0.3, "high": 3.0}),
    "sqrt": (lambda x: x.sqrt(), "sqrt", {"low": 0.3, "high": 3.0}),
    "tanh": (lambda x: x.tanh(), "tanh", {}),
    "sigmoid": (lambda x: x.sigmoid(), "sigmoid", {}),
    "abs": (lambda x: x.abs(), "abs", {}),
    "relu": (lambda x: x.relu(), "relu", {}),
    "sign": (lambda x: x.sign(), "sign", {}),
}


@pytest.mark.parametrize("name", sorted(TORCH_OPS))
def test_unary_matches_torch(name):
    fn, method, domain = TORCH_OPS[name]
    values = arr((2, 3), **domain)
    values[0, 0] = 0.0 if name in ("abs", "relu", "sign") else values[0, 0]
    check_against_torch(fn, lambda t: getattr(t, method)(), values)


@pytest.mark.parametrize("lo, hi", [(-0.5, 0.5), (None, 0.2), (-0.2, None), (0.5, -0.5)])
def test_clamp_matches_torch(lo, hi):
    values = np.array([[-1.0, -0.5, -0.2, 0.0], [0.2, 0.5, 1.0, 0.3]])
    check_against_torch(lambda x: x.clamp(lo, hi), lambda t: t.clamp(lo, hi), values)


def test_where_matches_torch():
    torch = pytest.importorskip("torch")
    cond = np.array([[True, False, True], [False, False, True]])
    check_against_torch(
        lambda x, y: where(cond, x, y),
        lambda x, y: torch.where(torch.tensor(cond), x, y),
        arr((2, 3), seed=6), arr((3,), seed=7),
    )


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "log", "sqrt", "abs", "relu"])
def test_unary_second_order_matches_torch(name):
    """``f(x) * x``: a piecewise-linear f alone has a constant first gradient (no graph)."""
    fn, method, domain = TORCH_OPS[name]
    values = arr((2, 3), **domain, away_from=[0.0] if name in ("abs", "relu") else None)
    check_second_order(lambda x: fn(x) * x, lambda t: getattr(t, method)() * t, values)


def test_where_second_order_matches_torch():
    torch = pytest.importorskip("torch")
    cond = np.array([True, False, True])
    check_second_order(
        lambda x, y: where(cond, x * x, y.exp()),
        lambda x, y: torch.where(torch.tensor(cond), x * x, y.exp()),
        arr((3,), seed=8), arr((3,), seed=9),
    )


@pytest.mark.parametrize("name", sorted(TORCH_OPS))
def test_unary_node_names_match_torch(name):
    torch = pytest.importorskip("torch")
    fn, method, _ = TORCH_OPS[name]
    x = ag.ones(2, requires_grad=True)
    expected = type(getattr(torch.ones(2, requires_grad=True), method)().grad_fn).__name__
    assert fn(x).grad_fn.name() == expected


def test_clamp_and_where_node_names():
    x = ag.ones(2, requires_grad=True)
    assert x.clamp(0, 1).grad_fn.name() == "ClampBackward1"
    assert where(np.array([True, False]), x, 0.0).grad_fn.name() == "WhereBackward0"


# ---- behaviours ----

def test_relu_gradient_is_zero_at_zero():
    x = leaf([-1.0, 0.0, 2.0])
    (g,) = ag.grad_sync(x.relu(), x, ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 1.0])


def test_abs_gradient_is_zero_at_zero():
    x = leaf([-1.0, 0.0, 2.0])
    (g,) = ag.grad_sync(abs(x), x, ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [-1.0, 0.0, 1.0])


def test_clamp_passes_gradient_at_the_bounds():
    x = leaf([-2.0, -1.0, 0.0, 1.0, 2.0])
    (g,) = ag.grad_sync(x.clamp(-1.0, 1.0), x, ag.ones(5, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0, 1.0, 1.0, 0.0])


def test_clamp_with_min_above_max_gives_max_everywhere():
    x = ag.tensor([-3.0, 0.0, 3.0])
    np.testing.assert_array_equal(x.clamp(1.0, -1.0).numpy(), [-1.0, -1.0, -1.0])


def test_clamp_without_bounds_raises():
    with pytest.raises(RuntimeError, match="at least one of 'min' or 'max'"):
        ag.ones(2).clamp()


def test_sign_has_zero_gradient():
    x = leaf([-2.0, 0.0, 3.0])
    y = x.sign()
    np.testing.assert_array_equal(y.detach().numpy(), [-1.0, 0.0, 1.0])
    (g,) = ag.grad_sync(y, x, ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0])


def test_sigmoid_is_stable_for_large_inputs():
    x = ag.tensor(np.array([-1000.0, 0.0, 1000.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = x.sigmoid()
    np.testing.assert_allclose(y.numpy(), [0.0, 0.5, 1.0])


def test_integer_input_to_exp_gives_float32():
    y = ag.tensor([0, 1]).exp()
    assert y.dtype == ag.float32
    np.testing.assert_allclose(y.numpy(), [1.0, np.e], rtol=1e-6)


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_float32_is_preserved_forward_and_backward(name):
    fn, _ = SMOOTH[name]
    x = ag.tensor(np.array([0.5, 1.5], dtype=np.float32), requires_grad=True)
    y = fn(x)
    assert y.dtype == ag.float32
    (g,) = ag.grad_sync(y, x, ag.ones(2))
    assert g.dtype == ag.float32


def test_where_accepts_a_bool_tensor_condition():
    x = leaf([1.0, 2.0, 3.0])
    cond = x > 1.5
    y = where(cond, x, -x)
    np.testing.assert_array_equal(y.detach().numpy(), [-1.0, 2.0, 3.0])
    (g,) = ag.grad_sync(y, x, ag.ones(3, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [-1.0, 1.0, 1.0])


def test_where_number_branch_gets_no_edge():
    x = leaf([1.0, -2.0])
    y = where(np.array([True, False]), x, 0.0)
    assert y.grad_fn.next_functions[1] == (None, 0)
    (g,) = ag.grad_sync(y, x, ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [1.0, 0.0])


def test_where_keeps_float32_with_a_number_branch():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    assert where(np.array([True, False]), x, 0.0).dtype == ag.float32


def test_where_of_two_python_floats_is_float32():
    y = where(np.array([True, False]), 1.0, 0.0)
    assert y.dtype == ag.float32
    np.testing.assert_array_equal(y.numpy(), [1.0, 0.0])


def test_where_rejects_a_non_bool_condition():
    with pytest.raises(RuntimeError, match="boolean tensor, but got dtype float32"):
        where(ag.ones(2), ag.ones(2), ag.zeros(2))


def test_where_rejects_a_list_condition():
    with pytest.raises(TypeError, match="condition must be a bool Tensor or a bool array"):
        where([True, False], ag.ones(2), ag.zeros(2))


def test_where_backward_twice_without_retain_graph_raises():
    x = leaf([1.0, 2.0])
    y = where(np.array([True, False]), x, x).sum()
    ag.backward_sync(y)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ag.backward_sync(y)


def test_no_grad_records_nothing():
    x = leaf([1.0, 2.0])
    with ag.no_grad():
        for y in (x.exp(), x.relu(), x.clamp(0, 1), x.sign()):
            assert y.grad_fn is None and not y.requires_grad


# ---- another device backend ----

FAKE_OPS = {**{name: fn for name, (fn, _) in SMOOTH.items()},
            "sign": lambda x: x.sign(),
            "where": lambda x: where(x > 0, x, x * 2.0)}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_unary_runs_on_another_device_backend(fake_backend, name):
    """Forward and backward stay on fake:1 and use its array module only."""
    values = arr((2, 3), low=0.3, high=3.0)
    x = ag.tensor(values, device="fake:1", requires_grad=True)
    y = FAKE_OPS[name](x)
    assert y.device is ag.device("fake:1")
    (g,) = ag.grad_sync(y, x, ag.ones(2, 3, dtype=ag.float64, device="fake:1"))
    assert g.device is ag.device("fake:1")
    cpu_x = leaf(values)
    (expected,) = ag.grad_sync(FAKE_OPS[name](cpu_x), cpu_x, ag.ones(2, 3, dtype=ag.float64))
    np.testing.assert_allclose(fake_backend.to_host(g.data), expected.numpy())


def test_relu_backward_never_modifies_a_gradient_someone_else_sees():
    x = ag.tensor(np.array([-1.0, 2.0, 3.0]), requires_grad=True)
    r = x.relu()
    seen = []
    r.grad_fn.register_hook(lambda gi, go: seen.append(go[0].numpy().copy()))
    out = r + x * 2.0  # AddBackward0 hands one array to both branches
    ag.backward_sync(out, ag.tensor(np.array([1.0, 1.0, 1.0])))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 3.0, 3.0])
    np.testing.assert_array_equal(seen[0], [1.0, 1.0, 1.0])  # the post-hook's grad_outputs


def test_clamp_result_type_promotes_all_three_operands_as_torch():
    """A 0-d float16 input, int8 bounds with dims and a 0-d float64 bound: float64."""
    torch = pytest.importorskip("torch")
    dtypes = []
    for lib in (ag, torch):
        x = lib.tensor(np.array(1.5, np.float16))
        lo, hi = lib.tensor(np.array([1, 2], np.int8)), lib.tensor(np.array(3.0))
        dtypes.append(str(x.clamp(lo, hi).dtype).replace("torch.", ""))
    assert dtypes[0] == dtypes[1] == "float64"
