"""Reductions (sum, mean, max, min): gradcheck sweeps, PyTorch as oracle, tie rules, errors."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import check_against_torch, check_on_fake_device, leaf

import aiograd as ag

pytestmark = pytest.mark.timeout(60)


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# (dim, keepdim) combinations swept over a (2, 3, 2) input.
DIMS = [(None, False), (None, True), (0, False), (1, True), (-1, False), ((0, 2), False),
        ((0, 2), True), ((-1, 0, 1), False), ((), False)]


# ---- sum / mean ----

@pytest.mark.parametrize("dim, keepdim", DIMS, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_mean_gradcheck(op, dim, keepdim):
    x = leaf(arr((2, 3, 2)))
    assert ag.gradcheck(lambda t: getattr(t, op)(dim=dim, keepdim=keepdim), (x,))


@pytest.mark.parametrize("dim, keepdim", DIMS, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_mean_match_torch(op, dim, keepdim):
    kwargs = {} if dim is None and not keepdim else {"dim": dim, "keepdim": keepdim}
    check_against_torch(lambda t: getattr(t, op)(**kwargs),
                        lambda t: getattr(t, op)(**kwargs), arr((2, 3, 2)))


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_mean_of_a_0d_tensor(op):
    x = leaf(2.5)
    for y in (getattr(x, op)(), getattr(x, op)(0), getattr(x, op)(-1, keepdim=True)):
        assert y.shape == () and y.item() == 2.5
        (g,) = ag.grad_sync(y, x)
        assert g.item() == 1.0


def test_sum_of_a_broadcast_input_reduces_its_gradient():
    x = leaf(arr((3,)))
    assert ag.gradcheck(lambda t: (t * ag.tensor(arr((2, 3), 4))).sum(0), (x,))


@pytest.mark.parametrize("dim, keepdim, name", [(None, False, "SumBackward0"),
                                                (None, True, "SumBackward1"),
                                                (0, False, "SumBackward1"),
                                                ((), False, "SumBackward1")])
def test_sum_node_names_match_torch(dim, keepdim, name):
    x = ag.ones(2, 3, requires_grad=True)
    y = x.sum() if dim is None and not keepdim else x.sum(dim=dim, keepdim=keepdim)
    assert y.grad_fn.name() == name


def test_mean_node_names_match_torch():
    x = ag.ones(2, 3, requires_grad=True)
    assert x.mean().grad_fn.name() == "MeanBackward0"
    assert x.mean(1).grad_fn.name() == "MeanBackward1"


def test_full_sum_is_a_0d_array():
    y = ag.ones(2, 3).sum()
    assert isinstance(y.data, np.ndarray) and y.shape == ()


def test_sum_of_integers_is_int64():
    y = ag.tensor(np.array([1, 2, 3], dtype=np.int32)).sum()
    assert y.dtype == ag.int64 and y.item() == 6


def test_mean_of_integers_raises():
    with pytest.raises(RuntimeError, match="floating point dtype, got int64"):
        ag.tensor([1, 2]).mean()


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_mean_keep_float32(op):
    x = ag.ones(2, 3, requires_grad=True)
    y = getattr(x, op)(1)
    assert y.dtype == ag.float32
    (g,) = ag.grad_sync(y, x, ag.ones(2))
    assert g.dtype == ag.float32


def test_sum_second_order_through_create_graph():
    torch = pytest.importorskip("torch")
    values = arr((2, 3))
    x, tx = leaf(values), torch.tensor(values, requires_grad=True)
    (g,) = ag.grad_sync((x.sum(1) ** 3).mean(), x, create_graph=True)
    (tg,) = torch.autograd.grad((tx.sum(1) ** 3).mean(), tx, create_graph=True)
    (gg,) = ag.grad_sync((g * g).sum(), x)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-7)


# ---- max / min ----

@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_full_gradcheck(op):
    assert ag.gradcheck(lambda t: getattr(t, op)(), (leaf(arr((2, 3))),))


@pytest.mark.parametrize("dim, keepdim", [(0, False), (1, True), (-1, False), (2, True)], ids=str)
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_dim_gradcheck(op, dim, keepdim):
    x = leaf(arr((2, 3, 2)))
    assert ag.gradcheck(lambda t: getattr(t, op)(dim, keepdim=keepdim).values, (x,))


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_full_match_torch(op):
    values = np.array([[1.0, 3.0, 3.0], [-1.0, -1.0, 0.5]])
    check_against_torch(lambda t: getattr(t, op)(), lambda t: getattr(t, op)(), values)


@pytest.mark.parametrize("dim, keepdim", [(0, False), (1, True), (-1, False)], ids=str)
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_dim_match_torch_with_ties(op, dim, keepdim):
    torch = pytest.importorskip("torch")
    values = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0], [-1.0, 2.0, -1.0]])
    check_against_torch(lambda t: getattr(t, op)(dim, keepdim).values,
                        lambda t: getattr(t, op)(dim, keepdim).values, values)
    ours = getattr(ag.tensor(values), op)(dim, keepdim).indices.numpy()
    theirs = getattr(torch.tensor(values), op)(dim, keepdim).indices.numpy()
    np.testing.assert_array_equal(ours, theirs)


def test_max_full_reduction_splits_ties_evenly():
    x = leaf([1.0, 3.0, 3.0])
    (g,) = ag.grad_sync(x.max(), x)
    np.testing.assert_allclose(g.numpy(), [0.0, 0.5, 0.5])


def test_min_full_reduction_splits_ties_evenly():
    x = leaf([[2.0, -1.0], [-1.0, -1.0]])
    (g,) = ag.grad_sync(x.min(), x)
    np.testing.assert_allclose(g.numpy(), [[0.0, 1 / 3], [1 / 3, 1 / 3]])


def test_max_dim_sends_gradient_to_first_tied_index():
    x = leaf([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0]])
    values, indices = x.max(1)
    np.testing.assert_array_equal(indices.numpy(), [1, 0])
    (g,) = ag.grad_sync(values, x, ag.ones(2, dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def test_max_dim_returns_values_and_indices_fields():
    x = ag.tensor([[1.0, 5.0], [4.0, 2.0]], requires_grad=True)
    result = x.max(dim=0)
    np.testing.assert_array_equal(result.values.detach().numpy(), [4.0, 5.0])
    np.testing.assert_array_equal(result.indices.numpy(), [1, 0])
    assert result[0] is result.values and result[1] is result.indices


def test_max_dim_indices_are_int64_and_not_differentiable():
    _, indices = ag.ones(2, 3, requires_grad=True).max(1)
    assert indices.dtype == ag.int64
    assert not indices.requires_grad and indices.grad_fn is None


def test_max_dim_keepdim_keeps_the_reduced_dim():
    values, indices = ag.ones(2, 3).min(1, keepdim=True)
    assert values.shape == (2, 1) and indices.shape == (2, 1)


def test_max_of_a_0d_tensor_with_dim():
    x = leaf(4.0)
    values, indices = x.max(0)
    assert values.item() == 4.0 and indices.item() == 0
    (g,) = ag.grad_sync(values, x)
    assert g.item() == 1.0


def test_max_node_names_match_torch():
    x = ag.ones(2, 3, requires_grad=True)
    assert x.max().grad_fn.name() == "MaxBackward1"
    assert x.max(0).values.grad_fn.name() == "MaxBackward0"
    assert x.min().grad_fn.name() == "MinBackward1"
    assert x.min(0).values.grad_fn.name() == "MinBackward0"


def test_max_keeps_float32():
    x = ag.ones(2, 3, requires_grad=True)
    for y in (x.max(), x.max(1).values):
        assert y.dtype == ag.float32
        (g,) = ag.grad_sync(y.sum(), x)
        assert g.dtype == ag.float32


def test_max_second_order_through_create_graph():
    torch = pytest.importorskip("torch")
    values = arr((3, 2))
    x, tx = leaf(values), torch.tensor(values, requires_grad=True)
    (g,) = ag.grad_sync((x * x).max(0).values.sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((tx * tx).max(0).values.sum(), tx, create_graph=True)
    (gg,) = ag.grad_sync((g * g).sum(), x)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-7)


def test_max_of_an_empty_tensor_needs_a_dim():
    with pytest.raises(RuntimeError, match="Specify the reduction dim"):
        ag.zeros(0).max()


def test_max_over_an_empty_dim_raises():
    with pytest.raises(IndexError, match="reduction dim 0 to have non-zero size"):
        ag.zeros(0, 3).max(0)


# ---- bad dims ----

@pytest.mark.parametrize("call", [lambda t: t.sum(2), lambda t: t.mean(-3),
                                  lambda t: t.max(5), lambda t: t.min(dim=2)])
def test_dim_out_of_range_raises_index_error(call):
    with pytest.raises(IndexError, match=r"expected to be in range of \[-2, 1\]"):
        call(ag.ones(2, 3))


def test_repeated_dims_raise():
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        ag.ones(2, 3).sum((0, -2))


def test_non_integer_dim_raises_type_error():
    with pytest.raises(TypeError, match="dim must be an int, got float"):
        ag.ones(2, 3).sum(1.0)


# ---- another device backend ----

FAKE_OPS = {
    "sum": lambda t: t.sum(),
    "sum_dim": lambda t: t.sum(1),
    "mean_keepdim": lambda t: t.mean(0, keepdim=True),
    "max": lambda t: t.max(),
    "min_dim": lambda t: t.min(1).values,
    "max_0d_dim": lambda t: t.sum().max(0).values,
}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_reduction_runs_on_another_device_backend(fake_backend, name):
    """Forward and backward stay on fake:1 and use its array module only."""
    check_on_fake_device(fake_backend, FAKE_OPS[name])
