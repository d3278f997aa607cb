"""atan, asin, acos, sinh, cosh, erf, erfinv and their in-place forms, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, leaf

import aiograd as ag

torch = pytest.importorskip("torch")

OPS = ["atan", "asin", "acos", "sinh", "cosh", "erf", "erfinv"]
# inside every op's domain, away from its edges
VALUES = np.array([[-0.93, -0.41, 0.0], [0.12, 0.58, 0.97]])


@pytest.mark.parametrize("name", OPS)
def test_values_and_gradients(name):
    check_against_torch(lambda x: getattr(ag, name)(x), lambda x: getattr(torch, name)(x),
                        VALUES)


@pytest.mark.parametrize("name", OPS)
def test_second_order(name):
    check_second_order(lambda x: getattr(ag, name)(x), lambda x: getattr(torch, name)(x),
                       VALUES)


@pytest.mark.parametrize("name", OPS)
def test_node_names_and_methods(name):
    x, t = leaf(VALUES), torch.tensor(VALUES, requires_grad=True)
    assert getattr(x, name)().grad_fn.name() == getattr(t, name)().grad_fn.name()
    assert getattr(ag, name)(x).grad_fn.name() == getattr(torch, name)(t).grad_fn.name()


@pytest.mark.parametrize("name", OPS)
def test_gradcheck(name):
    assert ag.gradcheck(getattr(ag, name), [leaf(VALUES * 0.9)])


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_dtypes_and_edges_match_torch(name, dtype):
    values = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, np.inf, np.nan])
    if dtype == "int64":
        values = np.array([-2, -1, 0, 1, 3])
    ours = getattr(ag, name)(ag.tensor(values.astype(dtype)))
    theirs = getattr(torch, name)(torch.tensor(values.astype(dtype)))
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", OPS)
def test_in_place_forms(name):
    x = leaf(VALUES)
    t = torch.tensor(VALUES, requires_grad=True)
    y, ty = x * 1.0, t * 1.0
    out, t_out = getattr(y, name + "_")(), getattr(ty, name + "_")()
    assert out is y and out.grad_fn.name() == t_out.grad_fn.name()
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12)
    (g,) = ag.grad_sync(out.sum(), [x])
    (tg,) = torch.autograd.grad(t_out.sum(), [t])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10)


def test_erfinv_inverts_erf_to_float64_precision():
    y = np.linspace(-0.999999, 0.999999, 2001)
    # rtol 1e-11: erfinv's condition number near +-1 is about 1e5
    np.testing.assert_allclose(ag.erfinv(ag.tensor(y)).numpy(),
                               torch.erfinv(torch.tensor(y)).numpy(), rtol=1e-11, atol=1e-13)
    edges = ag.erfinv(ag.tensor([-1.0, 1.0, 1.5])).numpy()
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2])
