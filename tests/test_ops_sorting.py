"""sort, argsort, topk, kthvalue, median, cumprod, cummax, cummin, logcumsumexp: PyTorch as
oracle (values, indices, ties, NaNs, gradients, second order, node names, errors) and
gradcheck."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
from oracles import (
    arr,
    check_against_torch,
    check_on_fake_device,
    check_second_order,
    leaf,
    run_both,
)

import aiograd as ag
import aiograd._ops.sorting  # noqa: F401
from aiograd._ops.sorting import (
    argsort,
    cumprod,
    kthvalue,
    logcumsumexp,
    median,
    nanmedian,
    sort,
    topk,
)

pytestmark = pytest.mark.timeout(60)

NAN = math.nan
INF = math.inf

# (shape, dim) pairs swept by the forward and gradient checks
SHAPES_DIMS = [((5,), 0), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1),
               ((2, 3, 4), -3)]
FLOATS = [np.float32, np.float64]


def torch_module():
    return pytest.importorskip("torch")


def pair(values, dtype=None):
    """The same values as an aiograd tensor and a torch tensor."""
    torch = torch_module()
    values = np.array(values, dtype=dtype)
    return ag.tensor(values), torch.tensor(values)


def assert_same(ours, theirs):
    """Equal values (NaN where PyTorch has NaN) and dtypes."""
    torch = torch_module()
    expected = theirs.detach().numpy()
    got = ours.detach().numpy()
    assert got.shape == expected.shape
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    if theirs.dtype in (torch.float32, torch.float64, torch.float16):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, expected)


def assert_same_pair(ours, theirs):
    assert_same(ours.values, theirs.values)
    assert_same(ours.indices, theirs.indices)


def ties(shape, seed=0):
    """Small integers (as float64): many ties in every slice."""
    return np.random.default_rng(seed).integers(0, 3, shape).astype(np.float64)


def with_nans(shape, seed=0):
    values = arr(shape, seed)
    values.reshape(-1)[::3] = NAN
    return values


def second_order_through_grad(fn, torch_fn, values):
    """The gradient's derivative with respect to the incoming gradient agrees with PyTorch's
    (the formulas are linear in it; their derivative in the input is zero)."""
    torch = torch_module()
    x, tx = leaf(values), torch.tensor(values, requires_grad=True)
    out, t_out = fn(x), torch_fn(tx)
    rng = np.random.default_rng(5)
    seed = rng.standard_normal(t_out.shape)
    w = rng.standard_normal(values.shape)
    v = ag.tensor(seed, requires_grad=True)
    tv = torch.tensor(seed, requires_grad=True)
    (g,) = ag.grad_sync(out, x, v, create_graph=True)
    (tg,) = torch.autograd.grad(t_out, tx, tv, create_graph=True)
    (gv,) = ag.grad_sync((g * ag.tensor(w)).sum(), v)
    (tgv,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), tv)
    np.testing.assert_allclose(gv.numpy(), tgv.numpy(), rtol=1e-12)


# ---- sort ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_sort_matches_torch(shape, dim, descending, dtype):
    x, tx = pair(arr(shape), dtype)
    assert_same_pair(sort(x, dim, descending), tx.sort(dim, descending))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_sort_gradient_matches_torch(shape, dim, descending):
    check_against_torch(lambda t: t.sort(dim, descending)[0],
                        lambda t: t.sort(dim, descending)[0], arr(shape))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint8, np.int32, bool])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stable_sort_of_ties_matches_torch(dim, descending, dtype):
    x, tx = pair(ties((4, 6, 5)), dtype)
    assert_same_pair(sort(x, dim, descending, stable=True),
                     tx.sort(dim=dim, descending=descending, stable=True))


@pytest.mark.parametrize("descending", [False, True])
def test_sort_puts_nan_above_every_number(descending):
    values = np.array([[3.0, NAN, -INF, 1.0, NAN, INF, 1.0], [NAN, 0.0, NAN, -1.0, 2.0, 0.0, 5.0]])
    x, tx = pair(values)
    assert_same_pair(sort(x, -1, descending, stable=True),
                     tx.sort(dim=-1, descending=descending, stable=True))


@pytest.mark.parametrize("descending", [False, True])
def test_unstable_sort_of_ties_matches_torch_values(descending):
    x, tx = pair(ties((3, 40)))
    assert_same(sort(x, 1, descending).values, tx.sort(1, descending).values)


def test_stable_sort_gradient_of_ties_matches_torch():
    check_against_torch(lambda t: t.sort(dim=0, descending=True, stable=True)[0],
                        lambda t: t.sort(dim=0, descending=True, stable=True)[0], ties((6, 3)))


def test_sort_gradcheck():
    assert ag.gradcheck(lambda t: sort(t, 1, True)[0], (leaf(arr((3, 4))),))


@pytest.mark.parametrize("kwargs, name", [({}, "SortBackward0"),
                                          ({"stable": True}, "SortBackward1"),
                                          ({"stable": None}, "SortBackward1")], ids=str)
def test_sort_node_name_matches_torch(kwargs, name):
    torch = torch_module()
    assert sort(leaf(arr((3,))), **kwargs).values.grad_fn.name() == name
    assert torch.sort(torch.ones(3, requires_grad=True), **kwargs).values.grad_fn.name() == name


def test_sort_result_is_a_values_indices_pair():
    values, indices = sort(leaf([2.0, 1.0]))
    assert values.tolist() == [1.0, 2.0] and indices.tolist() == [1, 0]
    assert indices.dtype == ag.int64 and not indices.requires_grad


@pytest.mark.parametrize("dim", [0, -1])
def test_sort_of_a_0d_tensor(dim):
    x, tx = pair(2.5)
    assert_same_pair(sort(x, dim), tx.sort(dim))
    a = leaf(2.5)
    (g,) = ag.grad_sync(sort(a, dim).values, a)
    assert g.item() == 1.0


@pytest.mark.parametrize("shape, dim", [((0,), 0), ((2, 0), 1), ((0, 3), 1)], ids=str)
def test_sort_of_an_empty_tensor(shape, dim):
    x, tx = pair(np.zeros(shape))
    assert_same_pair(sort(x, dim), tx.sort(dim))


def test_sort_errors_match_torch():
    torch = torch_module()
    x, tx = pair(arr((3,)))
    for fn, tfn in [(lambda: sort(x, 1), lambda: tx.sort(1)),
                    (lambda: sort(x, 0, False, True), lambda: torch.sort(tx, 0, False, True)),
                    (lambda: sort(x, 1.0), lambda: tx.sort(1.0))]:
        with pytest.raises(Exception) as ours:
            fn()
        with pytest.raises(Exception) as theirs:
            tfn()
        assert isinstance(ours.value, type(theirs.value))  # ours may subclass it: see _boundary


def test_sort_of_an_int_tensor_keeps_its_dtype():
    x, tx = pair(np.array([[5, -2, 7], [0, 0, -9]]), np.int64)
    assert_same_pair(sort(x, descending=True, stable=True), tx.sort(descending=True, stable=True))


# ---- argsort ----

@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
def test_argsort_matches_torch_stable(dim, descending):
    values = ties((5, 6))
    values[1, ::2] = NAN
    x, tx = pair(values)
    assert_same(argsort(x, dim, descending, stable=True),
                tx.argsort(dim=dim, descending=descending, stable=True))


def test_argsort_records_nothing():
    y = argsort(leaf(arr((4,))))
    assert y.grad_fn is None and not y.requires_grad and y.dtype == ag.int64


def test_argsort_of_a_0d_tensor():
    x, tx = pair(1.0)
    assert_same(argsort(x), tx.argsort())


# ---- topk ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_topk_matches_torch(shape, dim, largest, dtype):
    x, tx = pair(arr(shape), dtype)
    for k in (0, 1, shape[dim]):
        assert_same_pair(topk(x, k, dim, largest), tx.topk(k, dim, largest))


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_topk_gradient_matches_torch(shape, dim, largest):
    check_against_torch(lambda t: t.topk(2, dim, largest)[0],
                        lambda t: t.topk(2, dim, largest)[0], arr(shape))


@pytest.mark.parametrize("largest", [True, False])
def test_topk_unsorted_has_torch_elements(largest):
    x, tx = pair(arr((3, 9)))
    ours, theirs = topk(x, 4, 1, largest, sorted=False), tx.topk(4, 1, largest, sorted=False)
    assert_same(sort(ours.indices, 1).values, theirs.indices.sort(1).values)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_with_nans_and_ties_matches_torch_values(largest):
    values = ties((4, 9))
    values[:, 2] = NAN
    x, tx = pair(values)
    assert_same(topk(x, 5, 1, largest).values, tx.topk(5, 1, largest).values)


@pytest.mark.parametrize("k", [0, 1])
def test_topk_of_a_0d_tensor(k):
    x, tx = pair(2.0)
    assert_same_pair(topk(x, k), tx.topk(k))


def test_topk_gradcheck():
    assert ag.gradcheck(lambda t: topk(t, 2, 0, False)[0], (leaf(arr((4, 3))),))


def test_topk_node_name():
    assert topk(leaf(arr((3,))), 2).values.grad_fn.name() == "TopkBackward0"


@pytest.mark.parametrize("args", [(4,), (-1,), (2.0,), (True,), (1, 1)], ids=str)
def test_topk_errors_match_torch(args):
    x, tx = pair(arr((3,)))
    with pytest.raises(Exception) as ours:
        topk(x, *args)
    with pytest.raises(Exception) as theirs:
        torch_module().topk(tx, *args)
    assert isinstance(ours.value, type(theirs.value))  # ours may subclass it: see _boundary
    assert str(ours.value) == str(theirs.value)


def test_topk_of_bool_fails_as_torch():
    x, tx = pair([True, False])
    with pytest.raises(RuntimeError, match="topk does not support bool"):
        topk(x, 1)
    with pytest.raises(RuntimeError, match="topk does not support bool"):
        tx.topk(1)


# ---- kthvalue ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_kthvalue_matches_torch(shape, dim, keepdim, dtype):
    x, tx = pair(arr(shape), dtype)
    for k in (1, shape[dim]):
        assert_same_pair(kthvalue(x, k, dim, keepdim), tx.kthvalue(k, dim, keepdim))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_kthvalue_gradient_matches_torch(shape, dim, keepdim):
    check_against_torch(lambda t: t.kthvalue(2, dim, keepdim)[0],
                        lambda t: t.kthvalue(2, dim, keepdim)[0], arr(shape))


def test_kthvalue_counts_nan_as_largest():
    x, tx = pair([[1.0, NAN, 2.0, NAN, -1.0]])
    for k in range(1, 6):
        assert_same_pair(kthvalue(x, k), tx.kthvalue(k))


def test_kthvalue_of_ties_matches_torch_values():
    x, tx = pair(ties((3, 20)))
    for k in (1, 7, 20):
        assert_same(kthvalue(x, k).values, tx.kthvalue(k).values)


def test_kthvalue_of_ints_and_0d():
    for values in (np.array([4, -1, 7, 3]), np.float64(3.0)):
        x, tx = pair(values)
        assert_same_pair(kthvalue(x, 1), tx.kthvalue(1))


def test_kthvalue_node_name_and_gradcheck():
    x = leaf(arr((3, 4)))
    assert kthvalue(x, 2).values.grad_fn.name() == "KthvalueBackward0"
    assert ag.gradcheck(lambda t: kthvalue(t, 3, 0)[0], (x,))


@pytest.mark.parametrize("shape, args", [((3,), (0,)), ((3,), (4,)), ((3,), (2.0,)),
                                         ((0, 3), (1, 0)), ((3,), (1, 2)), ((), (2,))], ids=str)
def test_kthvalue_errors_match_torch(shape, args):
    x, tx = pair(np.zeros(shape))
    with pytest.raises(Exception) as ours:
        kthvalue(x, *args)
    with pytest.raises(Exception) as theirs:
        tx.kthvalue(*args)
    assert isinstance(ours.value, type(theirs.value))  # ours may subclass it: see _boundary


def test_kthvalue_of_bool_is_not_implemented():
    with pytest.raises(NotImplementedError, match="Bool"):
        kthvalue(ag.tensor([True, False]), 1)


def test_kthvalue_of_an_empty_other_dim():
    x, tx = pair(np.zeros((2, 0)))
    assert_same_pair(kthvalue(x, 1, 0), tx.kthvalue(1, 0))


# ---- median ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (1,), (5,), (4,), (3, 4), (2, 3, 3)], ids=str)
def test_full_median_matches_torch(shape, dtype):
    x, tx = pair(arr(shape), dtype)
    assert_same(median(x), tx.median())


@pytest.mark.parametrize("values", [ties((3, 4)), arr((4, 3)), [1.0, NAN, 2.0, NAN],
                                    [2.0, 2.0, 2.0]], ids=["ties", "plain", "nan", "equal"])
def test_full_median_gradient_matches_torch(values):
    check_against_torch(lambda t: t.median(), lambda t: t.median(), values)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_median_dim_matches_torch(shape, dim, keepdim, dtype):
    x, tx = pair(arr(shape), dtype)
    assert_same_pair(median(x, dim, keepdim), tx.median(dim, keepdim))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_median_dim_gradient_matches_torch(shape, dim, keepdim):
    check_against_torch(lambda t: t.median(dim, keepdim)[0],
                        lambda t: t.median(dim, keepdim)[0], arr(shape))


def test_median_dim_of_nan_slices_gives_the_first_nan():
    x, tx = pair(with_nans((4, 5)))
    assert_same_pair(median(x, 1), tx.median(1))
    assert_same_pair(median(x, 0), tx.median(0))


def test_median_dim_of_ties_matches_torch_values():
    x, tx = pair(ties((3, 20)))
    assert_same(median(x, 1).values, tx.median(1).values)


@pytest.mark.parametrize("dtype", [np.int64, np.uint8])
def test_median_of_ints(dtype):
    x, tx = pair(np.array([[5, 1, 3, 2], [9, 0, 4, 4]]), dtype)
    assert_same(median(x), tx.median())
    assert_same(median(x, 1).values, tx.median(1).values)


def test_median_of_an_empty_tensor_is_nan():
    x, tx = pair(np.zeros((2, 0)))
    assert_same(median(x), tx.median())
    assert_same_pair(median(x, 0), tx.median(0))


def test_median_node_names_match_torch():
    x = leaf(arr((3, 4)))
    assert median(x).grad_fn.name() == "MedianBackward0"
    assert median(x, 1).values.grad_fn.name() == "MedianBackward1"


def test_median_of_a_0d_tensor():
    x, tx = pair(2.0)
    assert_same(median(x), tx.median())
    assert_same_pair(median(x, 0, True), tx.median(0, True))


def test_median_gradcheck():
    x = leaf(arr((3, 5)))
    assert ag.gradcheck(lambda t: median(t, 1)[0], (x,))
    assert ag.gradcheck(median, (x,))


@pytest.mark.parametrize("call", ["keepdim_without_dim", "empty_dim", "dim_out_of_range",
                                  "dim_none"])
def test_median_errors_match_torch(call):
    x, tx = pair(np.zeros((0, 3)))
    calls = {"keepdim_without_dim": lambda m: m.median(keepdim=True),
             "empty_dim": lambda m: m.median(0),
             "dim_out_of_range": lambda m: m.median(2),
             "dim_none": lambda m: m.median(None)}
    with pytest.raises(Exception) as ours:
        calls[call](x)
    with pytest.raises(Exception) as theirs:
        calls[call](tx)
    assert isinstance(ours.value, type(theirs.value))  # ours may subclass it: see _boundary


def test_median_of_bool_is_not_implemented():
    with pytest.raises(NotImplementedError, match="Bool"):
        median(ag.tensor([True, False]))


# ---- nanmedian ----

NANMEDIAN_CASES = {"plain": arr((3, 5)), "nans": with_nans((4, 5)),
                   "nan_row": np.array([[NAN, NAN, NAN], [1.0, NAN, 2.0], [NAN, 3.0, NAN]]),
                   "all_nan": np.full((2, 3), NAN)}


@pytest.mark.parametrize("case", NANMEDIAN_CASES)
def test_full_nanmedian_matches_torch(case):
    check_against_torch(lambda t: t.nanmedian(), lambda t: t.nanmedian(), NANMEDIAN_CASES[case])


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("case", ["plain", "nans"])
def test_nanmedian_dim_matches_torch(case, dim, keepdim):
    x, tx = pair(NANMEDIAN_CASES[case])
    assert_same_pair(nanmedian(x, dim, keepdim), tx.nanmedian(dim, keepdim))
    check_against_torch(lambda t: t.nanmedian(dim, keepdim)[0],
                        lambda t: t.nanmedian(dim, keepdim)[0], NANMEDIAN_CASES[case])


def test_nanmedian_of_an_all_nan_slice_is_nan():
    x, tx = pair(NANMEDIAN_CASES["nan_row"])
    assert_same(nanmedian(x, 1).values, tx.nanmedian(1).values)
    assert nanmedian(x, 1).indices.tolist() == [0, 0, 1]


def test_nanmedian_of_ints_and_empty_match_torch():
    for values in (np.array([[5, 1, 3], [2, 2, 0]]), np.zeros((0,))):
        x, tx = pair(values)
        assert_same(nanmedian(x), tx.nanmedian())


def test_nanmedian_node_names_match_torch():
    x = leaf(arr((3, 4)))
    assert nanmedian(x).grad_fn.name() == "NanmedianBackward0"
    assert nanmedian(x, 0).values.grad_fn.name() == "NanmedianBackward1"


@pytest.mark.parametrize("call", ["keepdim_without_dim", "empty_dim", "bool", "bool_dim"])
def test_median_and_nanmedian_errors_match_torch(call):
    calls = {"keepdim_without_dim": (np.zeros(3), lambda m: m.nanmedian(keepdim=True)),
             "empty_dim": (np.zeros((0, 3)), lambda m: m.nanmedian(0)),
             "bool": (np.array([True]), lambda m: m.nanmedian()),
             "bool_dim": (np.array([True]), lambda m: m.median(0))}
    values, fn = calls[call]
    x, tx = pair(values)
    with pytest.raises(Exception) as ours:
        fn(x)
    with pytest.raises(Exception) as theirs:
        fn(tx)
    assert isinstance(ours.value, type(theirs.value))  # ours may subclass it: see _boundary
    assert str(ours.value) == str(theirs.value)


# ---- cumprod ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_cumprod_matches_torch(shape, dim, dtype):
    x, tx = pair(arr(shape), dtype)
    assert_same(cumprod(x, dim), tx.cumprod(dim))


@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_cumprod_gradient_matches_torch(shape, dim):
    check_against_torch(lambda t: t.cumprod(dim), lambda t: t.cumprod(dim), arr(shape))


ZERO_CASES = {"one": [[1.5, 0.0, 2.0, -1.2, 0.7]],
              "two": [[1.5, 0.0, 2.0, 0.0, 0.7]],
              "three": [[0.0, 1.3, 0.0, 0.0, -0.7, 2.0]],
              "first_and_last": [[0.0, 1.3, -2.0, 0.9, 0.0]],
              "slices": [[1.2, 0.0, -0.8], [0.5, 1.1, 2.0], [0.0, 0.0, 3.0]]}


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("case", ZERO_CASES)
def test_cumprod_gradient_with_zeros_matches_torch(case, dim):
    check_against_torch(lambda t: t.cumprod(dim), lambda t: t.cumprod(dim), ZERO_CASES[case])


@pytest.mark.parametrize("dim", [1, -1])
@pytest.mark.parametrize("case", ZERO_CASES)
def test_cumprod_second_order_with_zeros_matches_torch(case, dim):
    check_second_order(lambda t: t.cumprod(dim), lambda t: t.cumprod(dim), ZERO_CASES[case])


def test_cumprod_second_order_with_zeros_along_dim_0_matches_torch():
    check_second_order(lambda t: t.cumprod(0), lambda t: t.cumprod(0), ZERO_CASES["slices"])


@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 1), ((2, 3, 4), 1)], ids=str)
def test_cumprod_second_order_matches_torch(shape, dim):
    check_second_order(lambda t: t.cumprod(dim), lambda t: t.cumprod(dim), arr(shape))


@pytest.mark.parametrize("case", ["one", "three"])
def test_cumprod_gradcheck_with_zeros(case):
    assert ag.gradcheck(lambda t: cumprod(t, 1), (leaf(ZERO_CASES[case]),))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, bool])
def test_cumprod_of_ints_multiplies_in_int64(dtype):
    x, tx = pair(np.array([[1, 2, 3], [1, 0, 1]]), dtype)
    assert_same(cumprod(x, 1), tx.cumprod(1))


def test_cumprod_dtype_argument_matches_torch():
    torch = torch_module()
    x, tx = pair(np.array([1, 2, 3]), np.int32)
    assert_same(cumprod(x, 0, dtype=ag.float64), tx.cumprod(0, dtype=torch.float64))
    check_against_torch(lambda t: t.to(dtype=ag.float32).cumprod(0, dtype=ag.float64),
                        lambda t: t.float().cumprod(0, dtype=torch.float64), arr((4,)))


def test_cumprod_to_an_int_dtype_of_a_tensor_requiring_grad_fails():
    with pytest.raises(RuntimeError, match="Autograd not support dtype: Long"):
        cumprod(leaf(arr((3,))), 0, dtype=ag.int64)


@pytest.mark.parametrize("cast", [("float32", "float64"), ("float64", "float32")], ids=str)
@pytest.mark.parametrize("values", [[[1.5, -0.7, 2.0]], [[1.5, 0.0, 2.0]]], ids=["plain", "zero"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_cumprod_dtype_casts_inside_the_node_as_torch(values, cast, create_graph):
    """No ToCopyBackward0: the node has the input's own edge; the gradient comes back in the
    input's dtype."""

    def program(m):
        x = m.tensor(values, dtype=getattr(m, cast[0]), requires_grad=True)
        y = x.cumprod(1, dtype=getattr(m, cast[1]))
        (g,) = (ag.grad_sync if m is ag else m.autograd.grad)(
            y, x, m.tensor([[0.3, -1.2, 2.0]], dtype=y.dtype), create_graph=create_graph)
        return ([type(f).__name__ for f, _ in y.grad_fn.next_functions], str(y.dtype),
                str(g.dtype), g.detach().numpy())

    ours, theirs = run_both(program)
    assert ours[0] == theirs[0] == ["AccumulateGrad"]
    for a, b in zip(ours[1:3], theirs[1:3]):
        assert a.split(".")[-1] == b.split(".")[-1]
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-6)


INF_CASES = [[INF, 0.0, 2.0], [2.0, 0.0, INF, 0.0, 3.0], [0.0, INF, 2.0], [NAN, 0.0, 2.0, 0.0],
             [1.0, 0.0, NAN, 0.0, 2.0], [1e200, 1e200, 0.0, 2.0], [INF, 2.0, 3.0],
             [-INF, INF, NAN, 1.0], [INF, INF, 1.0]]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("values", INF_CASES, ids=str)
@pytest.mark.parametrize("op", ["cumprod", "logcumsumexp"])
def test_scan_gradients_with_inf_and_nan_match_torch_silently(op, values, create_graph):
    """PyTorch's values on inf and NaN, and NumPy warns nothing, forward or backward.
    cumprod under create_graph (PyTorch: a loop summing each term apart; aiograd: a scan)
    only with a seed of ones: a zero or mixed-sign seed times inf may give NaN in PyTorch
    and inf here."""

    def program(m):
        x = m.tensor(values, dtype=m.float64, requires_grad=True)
        y = getattr(x, op)(0)
        seed = m.tensor(np.ones(len(values)) if create_graph
                        else np.linspace(1.0, -1.0, len(values)))
        (g,) = (ag.grad_sync if m is ag else m.autograd.grad)(y, x, seed,
                                                              create_graph=create_graph)
        return y.detach().numpy(), g.detach().numpy()

    for ours, theirs in zip(*run_both(program)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-13)


def _version_error(m, op, values, written):
    """The message of the backward of ``op`` after ``written`` is modified in place, without
    the tensor's type name (``float32`` in aiograd, ``torch.FloatTensor`` in PyTorch)."""
    x = m.tensor(values, requires_grad=True)
    h = x * 1
    out = getattr(h, op)(0)
    y = out[0] if op in ("cummax", "cummin") else out
    if "input" in written:
        h.add_(1)
    if "indices" in written:
        out[1].add_(0)
    if "result" in written:
        y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
        (ag.grad_sync if m is ag else m.autograd.grad)(y.sum(), x)
    return re.sub(r"\[[\w.]+ \[", "[[", str(info.value)).split(" Hint:")[0]


VERSION_CASES = {
    "cummax_input": ("cummax", [[1.0, 2.0], [3.0, 4.0]], "input"),
    "cummin_input": ("cummin", [[1.0, 2.0], [3.0, 4.0]], "input"),
    "cummax_input_and_indices": ("cummax", [[1.0, 2.0], [3.0, 4.0]], "input indices"),
    "cummin_indices": ("cummin", [[1.0, 2.0], [3.0, 4.0]], "indices"),
    "cummin_0d_input": ("cummin", 2.0, "input"),
    "cumprod_zero_result": ("cumprod", [1.5, 0.0, -0.5], "result"),
    "cumprod_size_1_result": ("cumprod", [[1.0, 2.0]], "result"),
    "cumprod_0d_result": ("cumprod", 2.0, "result"),
    "cumprod_empty_result": ("cumprod", [], "result"),
    "cumprod_input_and_result": ("cumprod", [1.5, 2.0, -0.5], "input result"),
    "cumprod_0d_input": ("cumprod", 2.0, "input"),
    "logcumsumexp_0d_result": ("logcumsumexp", 2.0, "result"),
    "logcumsumexp_empty_input": ("logcumsumexp", [], "input"),
    "logcumsumexp_empty_result": ("logcumsumexp", [], "result"),
    "logcumsumexp_0d_input_and_result": ("logcumsumexp", 2.0, "input result"),
}


@pytest.mark.parametrize("case", VERSION_CASES)
def test_scans_check_their_saved_tensors_at_backward_as_torch(case):
    """PyTorch saves the input (cummax, cummin: besides the indices) and the result
    (cumprod, logcumsumexp) and checks them, input first, whatever the shape or values."""
    ours, theirs = run_both(lambda m: _version_error(m, *VERSION_CASES[case]))
    assert ours == theirs


def test_cumprod_node_name_and_0d():
    x = leaf(3.0)
    y = cumprod(x, 0)
    assert y.grad_fn.name() == "CumprodBackward0" and y.item() == 3.0
    (g,) = ag.grad_sync(y, x)
    assert g.item() == 1.0


@pytest.mark.parametrize("shape, dim", [((0,), 0), ((0, 3), 1), ((3, 0), 0)], ids=str)
def test_cumprod_of_an_empty_tensor(shape, dim):
    check_against_torch(lambda t: t.cumprod(dim), lambda t: t.cumprod(dim), np.zeros(shape))


def test_cumprod_errors_match_torch():
    x, tx = pair(arr((3,)))
    for call in (lambda m: m.cumprod(1), lambda m: m.cumprod(None)):
        with pytest.raises(Exception) as ours:
            call(x)
        with pytest.raises(Exception) as theirs:
            call(tx)
        assert isinstance(ours.value, type(theirs.value))  # ours may subclass it: see _boundary


# ---- cummax / cummin ----

@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_cummax_cummin_match_torch(shape, dim, dtype, op):
    x, tx = pair(arr(shape), dtype)
    assert_same_pair(getattr(x, op)(dim), getattr(tx, op)(dim))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint8, bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin_ties_take_the_later_index_as_torch(dim, dtype, op):
    x, tx = pair(ties((5, 9, 4), seed=2), dtype)
    assert_same_pair(getattr(x, op)(dim), getattr(tx, op)(dim))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_with_nans_match_torch(op):
    values = ties((3, 11))
    values[0, 3] = values[0, 7] = values[1, 0] = values[2, 10] = NAN
    x, tx = pair(values)
    assert_same_pair(getattr(x, op)(1), getattr(tx, op)(1))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("values", [arr((3, 4)), ties((3, 8))], ids=["plain", "ties"])
def test_cummax_cummin_gradient_matches_torch(values, op):
    check_against_torch(lambda t: getattr(t, op)(1)[0], lambda t: getattr(t, op)(1)[0], values)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_node_names_and_gradcheck(op):
    x = leaf(arr((3, 4)))
    assert getattr(x, op)(0).values.grad_fn.name() == op.capitalize() + "Backward0"
    assert ag.gradcheck(lambda t: getattr(t, op)(1)[0], (x,))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("shape, dim", [((), 0), ((0,), 0), ((0, 3), 1)], ids=str)
def test_cummax_cummin_of_0d_and_empty(shape, dim, op):
    x, tx = pair(np.ones(shape))
    assert_same_pair(getattr(x, op)(dim), getattr(tx, op)(dim))


def test_cummax_errors_match_torch():
    x, tx = pair(arr((3,)))
    for call in (lambda m: m.cummax(1), lambda m: m.cummin(None)):
        with pytest.raises(Exception) as ours:
            call(x)
        with pytest.raises(Exception) as theirs:
            call(tx)
        assert isinstance(ours.value, type(theirs.value))  # ours may subclass it: see _boundary


# ---- logcumsumexp ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_logcumsumexp_matches_torch(shape, dim, dtype):
    x, tx = pair(arr(shape) * 3, dtype)
    assert_same(logcumsumexp(x, dim), tx.logcumsumexp(dim))


@pytest.mark.parametrize("shape, dim", SHAPES_DIMS, ids=str)
def test_logcumsumexp_gradient_matches_torch(shape, dim):
    check_against_torch(lambda t: t.logcumsumexp(dim), lambda t: t.logcumsumexp(dim),
                        arr(shape))


@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 1), ((2, 3, 4), 1)], ids=str)
def test_logcumsumexp_second_order_matches_torch(shape, dim):
    check_second_order(lambda t: t.logcumsumexp(dim), lambda t: t.logcumsumexp(dim),
                       arr(shape))


def test_logcumsumexp_of_extreme_values_matches_torch():
    values = [[-1000.0, 0.0, 1000.0, -INF, 5.0], [-INF, -INF, 0.0, INF, NAN],
              [800.0, 800.0, -800.0, 700.0, 900.0]]
    x, tx = pair(values)
    assert_same(logcumsumexp(x, 1), tx.logcumsumexp(1))


def test_logcumsumexp_gradient_of_large_values_matches_torch():
    check_against_torch(lambda t: t.logcumsumexp(1), lambda t: t.logcumsumexp(1),
                        [[-1000.0, 0.0, 1000.0, 999.0, 5.0], [800.0, 800.0, -800.0, 700.0, 900.0]])


def test_logcumsumexp_node_name_gradcheck_and_0d():
    x = leaf(arr((3, 4)))
    assert logcumsumexp(x, 0).grad_fn.name() == "LogcumsumexpBackward0"
    assert ag.gradcheck(lambda t: logcumsumexp(t, 1), (x,))
    check_against_torch(lambda t: t.logcumsumexp(0), lambda t: t.logcumsumexp(0), 1.5)


@pytest.mark.parametrize("shape, dim", [((0,), 0), ((0, 3), 1)], ids=str)
def test_logcumsumexp_of_an_empty_tensor(shape, dim):
    check_against_torch(lambda t: t.logcumsumexp(dim), lambda t: t.logcumsumexp(dim),
                        np.zeros(shape))


@pytest.mark.parametrize("values", [np.array([1, 2]), np.array([True])], ids=["long", "bool"])
def test_logcumsumexp_of_ints_is_not_implemented_as_torch(values):
    x, tx = pair(values)
    with pytest.raises(NotImplementedError) as ours:
        logcumsumexp(x, 0)
    with pytest.raises(NotImplementedError) as theirs:
        tx.logcumsumexp(0)
    assert str(ours.value) == str(theirs.value)


def test_logcumsumexp_keeps_float32_gradients():
    x = ag.tensor(arr((3, 4)).astype(np.float32), requires_grad=True)
    (g,) = ag.grad_sync(logcumsumexp(x, 1).sum(), x)
    assert g.dtype == ag.float32


# ---- second order of the value-selecting ops ----

SEED_OPS = {
    "sort": lambda t: t.sort(1)[0],
    "topk": lambda t: t.topk(2)[0],
    "kthvalue": lambda t: t.kthvalue(2, 0)[0],
    "median_dim": lambda t: t.median(1, True)[0],
    "median": lambda t: t.median(),
    "nanmedian": lambda t: t.nanmedian(),
    "cummax": lambda t: t.cummax(1)[0],
    "cummin": lambda t: t.cummin(0)[0],
}


@pytest.mark.parametrize("name", sorted(SEED_OPS))
def test_gradient_of_the_gradient_with_respect_to_the_seed_matches_torch(name):
    """These formulas are linear in the incoming gradient and constant in the input (ties
    only where PyTorch's index among them is defined)."""
    values = ties((3, 4)) if name.startswith("cum") else arr((3, 4))
    second_order_through_grad(SEED_OPS[name], SEED_OPS[name], values)


# ---- long scans, other devices, saved indices ----

@pytest.mark.parametrize("op", ["cumprod", "logcumsumexp", "cummax", "cummin"])
def test_scans_of_long_slices_match_torch(op):
    """37 elements: scans by doubling shifts over a length that is no power of two."""
    values = ties((2, 37)) if op.startswith("cum") and op != "cumprod" else arr((2, 37)) * 0.3
    x, tx = pair(values)
    ours, theirs = getattr(x, op)(1), getattr(tx, op)(1)
    if op in ("cummax", "cummin"):
        assert_same_pair(ours, theirs)
    else:
        assert_same(ours, theirs)


def test_cumprod_gradients_with_zeros_in_a_long_3d_input_match_torch():
    values = arr((2, 19, 3), seed=4)
    values[0, 3, 0] = values[0, 11, 0] = values[1, 0, 2] = values[1, 18, 1] = 0.0
    check_against_torch(lambda t: t.cumprod(1), lambda t: t.cumprod(1), values)
    check_second_order(lambda t: t.cumprod(1), lambda t: t.cumprod(1), values)


FAKE_OPS = {
    "sort": lambda t: t.sort(1, descending=True).values,
    "topk": lambda t: t.topk(2, 1).values,
    "kthvalue": lambda t: t.kthvalue(2, 1).values,
    "median": lambda t: t.median(),
    "median_dim": lambda t: t.median(0).values,
    "cumprod": lambda t: t.cumprod(1),
    "cumprod_zeros": lambda t: (t * (t > 0)).cumprod(1),
    "cummax": lambda t: t.cummax(1).values,
    "cummin": lambda t: t.cummin(0).values,
    "logcumsumexp": lambda t: t.logcumsumexp(1),
}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_op_runs_on_another_device_backend(fake_backend, name):
    """Forward and backward stay on fake:1 and use its array module only."""
    check_on_fake_device(fake_backend, FAKE_OPS[name], rtol=1e-6)


def test_logcumsumexp_of_long_slices_on_another_device_backend(fake_backend):
    """Off NumPy, logcumsumexp scans by shifted slices: the same values as on the CPU."""
    values = arr((3, 37)) * 5
    y = logcumsumexp(ag.tensor(values, device="fake:1"), 1)
    expected = logcumsumexp(ag.tensor(values), 1).numpy()
    np.testing.assert_allclose(fake_backend.to_host(y.data), expected, rtol=1e-13)


def test_argsort_runs_on_another_device_backend(fake_backend):
    x = ag.tensor([[1.0, 3.0, 2.0]], device="fake:1")
    y = argsort(x, descending=True)
    assert y.device is ag.device("fake:1")
    np.testing.assert_array_equal(fake_backend.to_host(y.data), [[1, 2, 0]])


def test_new_arrays_of_0d_and_empty_inputs_stay_on_the_device(fake_backend):
    scalar = ag.tensor(2.0, device="fake:1")
    empty = ag.zeros(0, device="fake:1")
    for y in (*sort(scalar), *topk(scalar, 1), *kthvalue(scalar, 1), *median(scalar, 0),
              *scalar.cummax(0), argsort(scalar), median(empty)):
        assert y.device is ag.device("fake:1")
        assert fake_backend.to_host(y.data).shape == ()


def test_modifying_the_indices_in_place_fails_the_backward_as_torch():
    x = leaf(arr((4,)))
    values, indices = sort(x)
    indices.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ag.grad_sync(values.sum(), x)


# ---- Tensor methods ----

@pytest.mark.parametrize("name", ["sort", "argsort", "topk", "kthvalue", "median", "nanmedian",
                                  "cumprod", "cummax", "cummin", "logcumsumexp"])
def test_tensor_methods_are_bound(name):
    assert inspect.unwrap(getattr(ag.Tensor, name)) is getattr(aiograd._ops.sorting, name)
