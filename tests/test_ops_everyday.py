"""Everyday ops a PyTorch user reaches for: isclose, nansum, unique, einsum, linalg."""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, leaf, raises_like

import aiograd as ag

torch = pytest.importorskip("torch")
rng = np.random.default_rng(0)


# ---- isclose ----

def test_isclose_matches_torch():
    a = np.array([1.0, 1.0 + 1e-9, np.inf, np.nan, -np.inf, 0.0])
    b = np.array([1.0, 1.0, np.inf, np.nan, np.inf, 1e-9])
    for equal_nan in (False, True):
        ours = ag.isclose(ag.tensor(a), ag.tensor(b), equal_nan=equal_nan)
        theirs = torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan)
        assert ours.tolist() == theirs.tolist()
        assert str(ours.dtype) == "bool"
    assert ag.tensor([[1.0], [2.0]]).isclose(ag.tensor([1.0, 2.0])).shape == (2, 2)
    raises_like(lambda: ag.isclose(ag.tensor([1.0]), ag.tensor([1.0]), rtol=-1),
                lambda: torch.isclose(torch.tensor([1.0]), torch.tensor([1.0]), rtol=-1))
    raises_like(lambda: ag.isclose(ag.tensor([1.0]), ag.tensor([1])),
                lambda: torch.isclose(torch.tensor([1.0]), torch.tensor([1])))


# ---- nansum ----

@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True)])
def test_nansum_values_gradients_and_node(dim, keepdim):
    x = rng.standard_normal((2, 3, 4))
    x[0, 1, 2] = x[1, 0, 0] = np.nan
    kwargs = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    check_against_torch(lambda t: ag.nansum(t, **kwargs), lambda t: torch.nansum(t, **kwargs),
                        x)
    check_second_order(lambda t: (ag.nansum(t, **kwargs) ** 2),
                       lambda t: (torch.nansum(t, **kwargs) ** 2), x)
    assert leaf(x).nansum().grad_fn.name() == torch.tensor(x, requires_grad=True).nansum(
    ).grad_fn.name()


def test_nansum_of_integers_is_int64():
    assert str(ag.nansum(ag.tensor([1, 2], dtype=ag.int32)).dtype) == "int64"


# ---- unique ----

@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_matches_torch(dim):
    x = np.array([[3, 1, 3], [1, 1, 2], [3, 1, 3]])
    ours = ag.unique(ag.tensor(x), return_inverse=True, return_counts=True, dim=dim)
    theirs = torch.unique(torch.tensor(x), return_inverse=True, return_counts=True, dim=dim)
    for o, t in zip(ours, theirs):
        assert o.tolist() == t.tolist() and str(o.dtype) == str(t.dtype).removeprefix("torch.")
    assert ag.tensor(x).unique().tolist() == torch.tensor(x).unique().tolist()


def test_unique_has_no_derivative_as_in_torch():
    x = leaf([3.0, 1.0, 3.0])
    u = ag.unique(x)
    assert u.grad_fn.name() == torch.unique(torch.tensor([3.0], requires_grad=True)
                                            ).grad_fn.name()
    with pytest.raises(NotImplementedError, match="derivative for 'unique'"):
        ag.backward_sync(u.sum())


# ---- einsum ----

EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]),
    ("i,i->", [(3,), (3,)]), ("ij,j->i", [(2, 3), (3,)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]), ("ii->i", [(3, 3)]), ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 5, 2, 3), (5, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("iij->j", [(3, 3, 2)]),
    ("abc,cd,a->bd", [(2, 3, 4), (4, 5), (2,)]), ("ij,ij->i", [(1, 3), (4, 3)]), ("ij", [(2, 3)]),
    ("ji", [(2, 3)]), ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("i,->i", [(3,), ()]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_values_gradients_second_order(equation, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    check_against_torch(lambda *xs: ag.einsum(equation, *xs),
                        lambda *ts: torch.einsum(equation, *ts), *arrays)
    check_second_order(lambda *xs: ag.einsum(equation, *xs) ** 2,
                       lambda *ts: torch.einsum(equation, *ts) ** 2, *arrays)


@pytest.mark.parametrize("equation,shapes", [e for e in EINSUM if e[0] not in (
    "ii->i", "...ij,...jk->...ik")], ids=lambda v: v if isinstance(v, str) else "")
def test_einsum_result_node_is_torchs(equation, shapes):
    xs = [leaf(rng.standard_normal(s)) for s in shapes]
    ts = [torch.tensor(x.detach().numpy(), requires_grad=True) for x in xs]
    assert ag.einsum(equation, *xs).grad_fn.name() == torch.einsum(equation,
                                                                   *ts).grad_fn.name()


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(2, 3), (4, 4)]), ("ij->ii", [(2, 2)]), ("i1->i", [(2,)]),
    ("ij->k", [(2, 2)]), ("ij,jk->ik", [(2, 3)]), ("ijk->i", [(2, 2)])])
def test_einsum_errors_match_torch(equation, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    raises_like(lambda: ag.einsum(equation, *[ag.tensor(a) for a in arrays]),
                lambda: torch.einsum(equation, *[torch.tensor(a) for a in arrays]))


def test_einsum_takes_a_list_of_operands():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3,))
    np.testing.assert_allclose(ag.einsum("ij,j", [ag.tensor(a), ag.tensor(b)]).numpy(), a @ b)


# ---- linalg ----

SQUARE = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)


@pytest.mark.parametrize("name,arrays", [
    ("inv", [SQUARE]), ("det", [SQUARE]), ("solve", [SQUARE, rng.standard_normal((2, 3, 2))]),
    ("solve", [SQUARE[0], rng.standard_normal(3)]),
    ("solve", [SQUARE[0], rng.standard_normal((4, 3, 2))]),  # batch dims broadcast
    ("norm", [SQUARE[0]]), ("vector_norm", [rng.standard_normal(5)]),
    ("matrix_norm", [SQUARE]),
])
def test_linalg_values_gradients_second_order_nodes(name, arrays):
    check_against_torch(getattr(ag.linalg, name), getattr(torch.linalg, name), *arrays)
    check_second_order(getattr(ag.linalg, name), getattr(torch.linalg, name), *arrays)
    xs = [leaf(a) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    assert getattr(ag.linalg, name)(*xs).grad_fn.name() == getattr(torch.linalg, name)(
        *ts).grad_fn.name()


@pytest.mark.parametrize("ord", [1, -1, math.inf, -math.inf, "fro"])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 1)])
def test_matrix_norm_orders(ord, dim):
    check_against_torch(lambda a: ag.linalg.matrix_norm(a, ord, dim),
                        lambda a: torch.linalg.matrix_norm(a, ord, dim),
                        rng.standard_normal((3, 4, 2)))


@pytest.mark.parametrize("kwargs", [{}, {"ord": 1}, {"dim": 0}, {"ord": 3, "dim": 1},
                                    {"ord": math.inf}, {"dim": (0, 1), "ord": -1}])
def test_norm_picks_vector_or_matrix_as_torch(kwargs):
    check_against_torch(lambda a: ag.linalg.norm(a, **kwargs),
                        lambda a: torch.linalg.norm(a, **kwargs), rng.standard_normal((3, 4)))


def test_singular_matrices():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    # det's gradient is the cofactor matrix (adj(A)^T), also where A is singular; torch
    # 2.13 gives zeros here (its det * inv(A)^T formula), which finite differences refute
    a = leaf(singular)
    (g,) = ag.grad_sync(ag.linalg.det(a), [a])
    np.testing.assert_allclose(g.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)
    assert ag.gradcheck(ag.linalg.det, [leaf(singular)])
    for lib in (ag, torch):
        with pytest.raises(RuntimeError, match=r"linalg\.inv: .*singular"):
            lib.linalg.inv(lib.tensor(singular))
        with pytest.raises(RuntimeError, match=r"linalg\.solve: .*singular"):
            lib.linalg.solve(lib.tensor(singular), lib.tensor(np.ones(2)))


def test_linalg_input_errors_match_torch():
    raises_like(lambda: ag.linalg.inv(ag.ones(2, 3)), lambda: torch.linalg.inv(torch.ones(2, 3)))
    raises_like(lambda: ag.linalg.det(ag.ones(3)), lambda: torch.linalg.det(torch.ones(3)))
    raises_like(lambda: ag.linalg.inv(ag.ones(2, 2, dtype=ag.int64)),
                lambda: torch.linalg.inv(torch.ones(2, 2, dtype=torch.int64)))
    with pytest.raises(NotImplementedError, match="singular values"):
        ag.linalg.matrix_norm(ag.ones(2, 2), ord=2)


def test_tensor_methods_and_top_level_functions():
    a = leaf(SQUARE[0])
    np.testing.assert_allclose(a.inverse().detach().numpy(), np.linalg.inv(SQUARE[0]))
    np.testing.assert_allclose(ag.det(a).item(), np.linalg.det(SQUARE[0]))
