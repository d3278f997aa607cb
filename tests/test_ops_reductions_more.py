"""prod, std, var, amax, amin, argmax, argmin, any, all, norm, cumsum, logsumexp, the
dtype= of sum/mean and max's keepdim: PyTorch as oracle (values, gradients, second order,
node names, errors), gradcheck sweeps, and another device backend."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from oracles import arr, check_against_torch, check_on_fake_device, check_second_order, leaf

import aiograd as ag

pytestmark = pytest.mark.timeout(60)

INF = math.inf
NAN = math.nan


def torch_module():
    return pytest.importorskip("torch")


def with_zeros(*positions):
    """A (3, 4) input with zeros at ``positions``."""
    values = arr((3, 4), seed=3)
    for p in positions:
        values[p] = 0.0
    return values


def grads_match_torch(fn, values):
    """Value and gradient (for a ones seed) equal PyTorch's, NaN where PyTorch's is NaN."""
    torch = torch_module()
    x = leaf(values)
    tx = torch.tensor(np.array(values, dtype=np.float64), requires_grad=True)
    y, ty = fn(x), fn(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-7)
    (g,) = ag.grad_sync(y, x, ag.ones(*y.shape, dtype=ag.float64))
    (tg,) = torch.autograd.grad(ty, tx, torch.ones_like(ty))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-7, atol=1e-12)


# Each differentiable op of this module, on a float64 tensor; the same call works on torch.
DIFFERENTIABLE = {
    "prod": lambda t: t.prod(),
    "prod_dim": lambda t: t.prod(1),
    "prod_dim_keepdim": lambda t: t.prod(-1, True),
    "std": lambda t: t.std(),
    "std_dim_unbiased_false": lambda t: t.std(0, False),
    "std_correction_keepdim": lambda t: t.std((0, 1), correction=2, keepdim=True),
    "var": lambda t: t.var(),
    "var_dim_correction": lambda t: t.var(1, correction=0.5),
    "var_unbiased_keepdim": lambda t: t.var(0, True, True),
    "amax": lambda t: t.amax(),
    "amax_dim": lambda t: t.amax(1, keepdim=True),
    "amin_dims": lambda t: t.amin((0, 1)),
    "norm": lambda t: t.norm(),
    "norm_fro_dim": lambda t: t.norm("fro", dim=1),
    "norm_1": lambda t: t.norm(1),
    "norm_inf_dim": lambda t: t.norm(INF, 0, True),
    "norm_-inf": lambda t: t.norm(-INF),
    "norm_3": lambda t: t.norm(3, dim=1),
    "norm_1.5": lambda t: t.norm(1.5),
    "norm_0.5": lambda t: t.norm(0.5, dim=0),
    "cumsum": lambda t: t.cumsum(1),
    "cumsum_0": lambda t: t.cumsum(-2),
    "logsumexp": lambda t: t.logsumexp(1),
    "logsumexp_dims_keepdim": lambda t: t.logsumexp((0, 1), keepdim=True),
}


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_values_and_gradients_match_torch(name):
    check_against_torch(DIFFERENTIABLE[name], DIFFERENTIABLE[name], arr((3, 4)))


@pytest.mark.parametrize("op, args", [("sum", (0,)), ("mean", ()), ("prod", (1,))])
def test_float32_dtype_of_a_float64_input_matches_torch(op, args):
    """The input is cast first; the gradient comes back as float64."""
    torch = torch_module()
    values = arr((3, 4))
    x = leaf(values)
    tx = torch.tensor(values, requires_grad=True)
    y = getattr(x, op)(*args, dtype=ag.float32)
    ty = getattr(tx, op)(*args, dtype=torch.float32)
    assert y.dtype == ag.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    (g,) = ag.grad_sync(y, x, ag.ones(*y.shape))
    (tg,) = torch.autograd.grad(ty, tx, torch.ones_like(ty))
    assert g.dtype == ag.float64
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_second_order_matches_torch(name):
    """Squared, so that the gradient depends on x even for the linear ops."""
    def fn(t):
        return DIFFERENTIABLE[name](t) ** 2

    check_second_order(fn, fn, arr((3, 4)))


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_gradcheck(name):
    assert ag.gradcheck(DIFFERENTIABLE[name], (leaf(arr((2, 3), seed=5)),))


@pytest.mark.parametrize("name", ["prod", "std", "norm_3", "cumsum", "logsumexp", "amax"])
def test_gradient_of_the_gradient_passes_gradcheck(name):
    fn = DIFFERENTIABLE[name]

    def first_grad(t):
        with ag.enable_grad():  # gradcheck's finite differences run in no_grad
            (g,) = ag.grad_sync((fn(t) ** 2).sum(), t, create_graph=True)
        return g

    assert ag.gradcheck(first_grad, (leaf(arr((2, 3), seed=6)),))


@pytest.mark.parametrize("call, name", [
    (lambda t: t.prod(), "ProdBackward0"), (lambda t: t.prod(0), "ProdBackward1"),
    (lambda t: t.std(), "StdBackward0"), (lambda t: t.var(0), "VarBackward0"),
    (lambda t: t.amax(), "AmaxBackward0"), (lambda t: t.amin(1), "AminBackward0"),
    (lambda t: t.norm(), "LinalgVectorNormBackward0"),
    (lambda t: t.norm(1, dim=0), "LinalgVectorNormBackward0"),
    (lambda t: t.cumsum(0), "CumsumBackward0"),
    (lambda t: t.logsumexp(1), "LogsumexpBackward0"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_node_names_match_torch(call, name):
    torch = torch_module()
    assert call(ag.ones(2, 3, requires_grad=True)).grad_fn.name() == name
    assert call(torch.ones(2, 3, requires_grad=True)).grad_fn.name() == name


# ---- prod ----

@pytest.mark.parametrize("zeros", [[(1, 2)], [(1, 2), (0, 0)], [(1, 2), (1, 0), (2, 3)],
                                   [(0, 1), (0, 2), (0, 3)]], ids=str)
@pytest.mark.parametrize("dim", [None, 0, 1])
def test_prod_with_zeros_matches_torch_to_second_order(zeros, dim):
    def fn(t):
        return t.prod() if dim is None else t.prod(dim)

    values = with_zeros(*zeros)
    check_against_torch(fn, fn, values)
    check_second_order(fn, fn, values)


@pytest.mark.parametrize("zeros", [[(1, 2), (1, 0)], [(1, 2), (1, 0), (1, 3)],
                                   [(0, 0), (0, 1), (0, 2), (0, 3)], [(0, 1), (1, 1), (2, 1)]],
                         ids=str)
@pytest.mark.parametrize("dim", [None, 0, 1])
def test_prod_with_several_zeros_matches_torch_to_third_order(zeros, dim):
    torch = torch_module()
    values = with_zeros(*zeros)
    v, u = arr((3, 4), seed=5), arr((3, 4), seed=6)

    def third(lib, grad):
        x = lib.tensor(values, requires_grad=True)
        p = x.prod() if dim is None else x.prod(dim).sum()
        (g,) = grad(p, x, create_graph=True)
        (hv,) = grad((g * lib.tensor(v)).sum(), x, create_graph=True)
        (t3,) = grad((hv * lib.tensor(u)).sum(), x)
        return t3.detach().numpy()

    np.testing.assert_allclose(third(ag, ag.grad_sync), third(torch, torch.autograd.grad),
                               rtol=1e-12, atol=1e-12)


def test_prod_gradient_with_one_zero_is_the_product_of_the_others():
    x = leaf([2.0, 0.0, 3.0, 4.0])
    (g,) = ag.grad_sync(x.prod(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 24.0, 0.0, 0.0])


def test_prod_gradient_with_two_zeros_is_zero():
    x = leaf([2.0, 0.0, 3.0, 0.0])
    (g,) = ag.grad_sync(x.prod(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0, 0.0])


def test_prod_second_derivative_between_two_zeros_is_the_product_of_the_rest():
    x = leaf([2.0, 0.0, 3.0, 0.0])
    (g,) = ag.grad_sync(x.prod(), x, create_graph=True)
    (gg,) = ag.grad_sync(g[1], x)  # d/dx of (d prod / dx_1) = x_0 x_2 at x_3
    np.testing.assert_array_equal(gg.numpy(), [0.0, 0.0, 0.0, 6.0])


def test_prod_with_zeros_passes_gradcheck_twice():
    values = with_zeros((0, 1), (1, 1), (1, 3))[:2]

    def first_grad(t):
        with ag.enable_grad():
            (g,) = ag.grad_sync(t.prod(1).sum(), t, create_graph=True)
        return g

    assert ag.gradcheck(lambda t: t.prod(1), (leaf(values),))
    assert ag.gradcheck(first_grad, (leaf(values),))


def test_prod_of_integers_and_bools_is_int64_and_dtype_casts_first():
    torch = torch_module()
    ints = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    for values in (ints, ints.astype(np.uint8), np.array([True, True, False])):
        y, ty = ag.tensor(values).prod(), torch.tensor(values).prod()
        assert y.dtype == ag.int64 and y.item() == ty.item()
    y = ag.tensor(ints).prod(1, dtype=ag.int32)
    assert y.dtype == ag.int32
    np.testing.assert_array_equal(y.numpy(), torch.tensor(ints).prod(1, dtype=torch.int32))
    assert ag.tensor([1.5, 2.0]).prod(dtype=ag.int64).item() == 2  # 1.5 -> 1 first


def test_prod_of_a_0d_tensor_passes_the_gradient():
    x = leaf(3.0)
    for y in (x.prod(), x.prod(0), x.prod(-1, True)):
        assert y.shape == () and y.item() == 3.0
        (g,) = ag.grad_sync(y, x)
        assert g.item() == 1.0


def test_prod_over_an_empty_dim_is_one():
    np.testing.assert_array_equal(ag.zeros(0, 2).prod(0).numpy(), [1.0, 1.0])


@pytest.mark.parametrize("call, error, match", [
    (lambda t: t.prod(keepdim=True), TypeError, "prod.. received an invalid combination"),
    (lambda t: t.prod((0, 1)), TypeError, "dim must be an int"),
    (lambda t: t.prod(2), IndexError, "Dimension out of range"),
])
def test_prod_bad_arguments_raise_as_torch(call, error, match):
    torch = torch_module()
    with pytest.raises(error, match=match):
        call(ag.ones(2, 3))
    with pytest.raises(error):
        call(torch.ones(2, 3))


# ---- std / var ----

@pytest.mark.parametrize("args, kwargs", [
    ((), {}), ((False,), {}), ((True,), {}), ((0, False), {}), ((1, True, True), {}),
    ((None, True), {}), ((), {"unbiased": False}), ((0,), {"correction": 0}),
    ((), {"correction": 2.5, "dim": 1}), (((0, 1),), {"keepdim": True}),
    ((), {"correction": -1}), ((), {"dim": [0, 1], "unbiased": False, "keepdim": True}),
], ids=str)
@pytest.mark.parametrize("op", ["std", "var"])
def test_std_var_argument_forms_match_torch(op, args, kwargs):
    def fn(t):
        return getattr(t, op)(*args, **kwargs)

    check_against_torch(fn, fn, arr((3, 4)))


@pytest.mark.parametrize("call", [
    lambda t: t.std(0, 1), lambda t: t.std(True, True), lambda t: t.var(0, True, correction=1),
    lambda t: t.var(True, keepdim=True),
], ids=["unbiased_int", "bool_then_bool", "unbiased_and_correction", "bool_and_keepdim"])
def test_std_var_bad_argument_combinations_raise_type_error_as_torch(call):
    torch = torch_module()
    with pytest.raises(TypeError):
        call(ag.ones(2, 3))
    with pytest.raises(TypeError):
        call(torch.ones(2, 3))


def test_std_of_a_constant_slice_has_zero_gradient_as_torch():
    grads_match_torch(lambda t: t.std(0), [[1.0, 1.0, 2.0], [1.0, 1.0, 5.0]])


def test_std_var_with_no_degrees_of_freedom_warn_and_give_nan_as_torch():
    torch = torch_module()
    for op in ("std", "var"):
        x = leaf([1.5])
        with pytest.warns(UserWarning, match=f"{op}\\(\\): degrees of freedom is <= 0"):
            y = getattr(x, op)()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ty = getattr(torch.tensor([1.5]), op)()
        assert math.isnan(y.item()) and math.isnan(ty.item())
        (g,) = ag.grad_sync(y, x)
        assert math.isnan(g.item())


def test_std_var_of_integers_raise():
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        ag.tensor([1, 2]).std()


def test_std_keeps_float32():
    x = ag.tensor(arr((3, 4)).astype(np.float32), requires_grad=True)
    y = x.std(1)
    assert y.dtype == ag.float32
    (g,) = ag.grad_sync(y.sum(), x)
    assert g.dtype == ag.float32


# ---- amax / amin ----

@pytest.mark.parametrize("dim", [(), 0, 1, (0, 1)], ids=str)
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin_split_ties_evenly_as_torch(op, dim):
    values = [[1.0, 3.0, 3.0], [-1.0, 3.0, -1.0], [-1.0, 0.0, 3.0]]
    grads_match_torch(lambda t: getattr(t, op)(dim), values)


def test_amax_splits_ties_where_max_dim_picks_one():
    x = leaf([[1.0, 3.0, 3.0]])
    (g,) = ag.grad_sync(x.amax(1).sum(), x)
    np.testing.assert_allclose(g.numpy(), [[0.0, 0.5, 0.5]])
    (g,) = ag.grad_sync(x.max(1).values.sum(), x)
    np.testing.assert_allclose(g.numpy(), [[0.0, 1.0, 0.0]])


def test_amax_of_a_slice_with_nan_is_nan_with_nan_gradient_as_torch():
    grads_match_torch(lambda t: t.amax(0), [[1.0, NAN], [3.0, 2.0]])


@pytest.mark.parametrize("shape, dim, error, match", [
    ((0, 3), (), RuntimeError, "Expected reduction dim to be specified"),
    ((0, 3), 0, IndexError, "Expected reduction dim 0 to have non-zero size"),
    ((0, 3), (0, 1), IndexError, "Expected reduction dim 0 to have non-zero size"),
])
def test_amax_of_nothing_raises_as_torch(shape, dim, error, match):
    torch = torch_module()
    with pytest.raises(error, match=match):
        ag.zeros(*shape).amax(dim)
    with pytest.raises(error, match=match):
        torch.zeros(*shape).amax(dim)


def test_amax_over_a_nonempty_dim_of_an_empty_tensor_is_empty():
    assert ag.zeros(0, 3).amax(1).shape == (0,)


# ---- argmax / argmin ----

ARG_CASES = [
    (np.array([[1.0, 3.0, 3.0], [4.0, -1.0, 4.0]]), [None, 0, 1, -1]),
    (np.array([1.0, NAN, 3.0, NAN, -INF]), [None, 0]),
    (np.array([[2, 2], [1, 5]], dtype=np.int32), [None, 1]),
    (np.array(2.5), [None, 0, -1]),
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_match_torch_first_occurrence_and_nan(op, keepdim):
    torch = torch_module()
    for values, dims in ARG_CASES:
        for dim in dims:
            y = getattr(ag.tensor(values), op)(dim, keepdim)
            ty = getattr(torch.tensor(values), op)(dim, keepdim)
            assert y.dtype == ag.int64 and y.shape == tuple(ty.shape)
            np.testing.assert_array_equal(y.numpy(), ty.numpy())


def test_argmax_records_no_gradient():
    y = ag.ones(2, 3, requires_grad=True).argmax(1)
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("values, dim, error, match", [
    (np.zeros(0), None, IndexError, "Expected reduction dim to be specified"),
    (np.zeros((2, 0)), 1, IndexError, "Expected reduction dim 1 to have non-zero size"),
    (np.array([True, False]), None, RuntimeError, "does not support bool input"),
    (np.zeros((2, 3)), 2, IndexError, "Dimension out of range"),
    (np.zeros((2, 3)), (0, 1), TypeError, "must be"),
])
def test_argmax_bad_input_raises_as_torch(values, dim, error, match):
    torch = torch_module()
    with pytest.raises(error, match=match):
        ag.tensor(values).argmax(dim)
    with pytest.raises(error, match=match):
        torch.tensor(values).argmax(dim)


# ---- any / all ----

@pytest.mark.parametrize("dim, keepdim", [(None, False), (None, True), (0, False), (1, True),
                                          ((0, 1), False), ((), False), ([1], True)], ids=str)
@pytest.mark.parametrize("op", ["any", "all"])
def test_any_all_match_torch(op, dim, keepdim):
    torch = torch_module()
    cases = [np.array([[1.0, 0.0, NAN], [0.0, 0.0, 2.0]]), np.array([[1, 2, 0], [3, 4, 5]]),
             np.array([[True, False, True], [True, True, True]]),
             np.array([[1, 0, 2], [3, 0, 5]], dtype=np.uint8), np.zeros((0, 3))]
    for values in cases:
        kwargs = {"keepdim": keepdim} if keepdim else {}
        if dim is not None:
            kwargs["dim"] = dim
        y = getattr(ag.tensor(values), op)(**kwargs)
        ty = getattr(torch.tensor(values), op)(**kwargs)
        assert y.dtype == (np.uint8 if values.dtype == np.uint8 else ag.bool_)
        np.testing.assert_array_equal(y.numpy(), ty.numpy())


def test_any_all_of_a_0d_tensor():
    assert ag.tensor(2.0).any(0, True).item() is True
    assert ag.tensor(0.0).all().item() is False


# ---- norm ----

@pytest.mark.parametrize("p", [2, 1, INF, -INF], ids=str)
def test_norm_gradient_at_the_zero_vector_is_torch(p):
    grads_match_torch(lambda t: t.norm(p), [0.0, 0.0, 0.0])
    grads_match_torch(lambda t: t.norm(p, dim=1), [[0.0, 0.0], [3.0, -4.0]])


def test_norm_p2_gradient_at_zero_is_zero():
    x = leaf([0.0, 0.0])
    (g,) = ag.grad_sync(x.norm(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])


@pytest.mark.parametrize("p", [INF, -INF], ids=str)
def test_norm_inf_splits_the_gradient_among_ties_as_torch(p):
    grads_match_torch(lambda t: t.norm(p), [-2.0, 2.0, 1.0, -1.0])


@pytest.mark.parametrize("p", [0.5, -1, 3], ids=str)
def test_norm_with_a_zero_element_matches_torch(p):
    grads_match_torch(lambda t: t.norm(p), [-2.0, 0.0, 1.0])


def test_norm_p0_counts_nonzeros_and_has_no_gradient_as_torch():
    x = leaf([-2.0, 0.0, 1.0])
    y = x.norm(0)
    assert y.item() == 2.0
    assert ag.grad_sync(y, x, allow_unused=True) == (None,)


def test_norm_dtype_computes_in_the_wider_dtype():
    torch = torch_module()
    values = arr((2, 3)).astype(np.float32)
    y = ag.tensor(values).norm(dtype=ag.float64)
    ty = torch.tensor(values).norm(dtype=torch.float64)
    assert y.dtype == ag.float64
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-12)


def test_norm_of_integers_raises_as_torch():
    torch = torch_module()
    match = "Expected a floating point or complex tensor as input. Got Long"
    with pytest.raises(RuntimeError, match=match):
        ag.tensor([1, 2]).norm()
    with pytest.raises(RuntimeError, match=match):
        torch.tensor([1, 2]).norm()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"p": INF}, RuntimeError, "cannot compute the inf norm on an empty tensor"),
    ({"p": -1, "dim": 0}, RuntimeError, "cannot compute the -1 norm on the dimension 0"),
    ({"p": "fro", "dim": (0, 1, 2)}, RuntimeError, "dim must be a 2-tuple"),
    ({"p": "abc"}, RuntimeError, "Order abc not supported"),
])
def test_norm_bad_arguments_raise_as_torch(kwargs, error, match):
    torch = torch_module()
    with pytest.raises(error, match=match):
        ag.zeros(0, 2, 1).norm(**kwargs)
    with pytest.raises(error, match=match):
        torch.zeros(0, 2, 1).norm(**kwargs)


def test_norm_dtype_must_not_narrow_as_torch():
    torch = torch_module()
    match = "should be convertible without narrowing"
    with pytest.raises(RuntimeError, match=match):
        ag.zeros(2, dtype=ag.float64).norm(dtype=ag.float32)
    with pytest.raises(RuntimeError, match=match):
        torch.zeros(2, dtype=torch.float64).norm(dtype=torch.float32)


# ---- cumsum ----

def test_cumsum_gradient_is_the_reversed_cumsum():
    x = leaf([1.0, 2.0, 3.0])
    (g,) = ag.grad_sync(x.cumsum(0), x, ag.tensor([1.0, 10.0, 100.0], dtype=ag.float64))
    np.testing.assert_array_equal(g.numpy(), [111.0, 110.0, 100.0])


def test_cumsum_dtypes_match_torch():
    torch = torch_module()
    for values in (np.array([1, 2, 3], dtype=np.int32), np.array([1, 2, 3], dtype=np.uint8),
                   np.array([True, True, False])):
        y, ty = ag.tensor(values).cumsum(0), torch.tensor(values).cumsum(0)
        assert y.dtype == ag.int64
        np.testing.assert_array_equal(y.numpy(), ty.numpy())
    y = ag.tensor(np.array([1, 2], dtype=np.int64)).cumsum(0, dtype=ag.int32)
    assert y.dtype == ag.int32
    np.testing.assert_array_equal(ag.tensor([1.5, 2.0]).cumsum(0, dtype=ag.int64).numpy(),
                                  torch.tensor([1.5, 2.0]).cumsum(0, dtype=torch.int64))


def test_cumsum_of_a_0d_tensor():
    x = leaf(2.0)
    y = x.cumsum(0)
    assert y.shape == () and y.item() == 2.0
    assert ag.grad_sync(y, x)[0].item() == 1.0


def test_cumsum_needs_a_dim():
    with pytest.raises(TypeError):
        ag.ones(3).cumsum()


# ---- logsumexp ----

@pytest.mark.parametrize("values", [[1000.0, 1000.0, -5.0], [-1000.0, -1000.0, -1001.0],
                                    [INF, 1.0, 0.0], [-INF, -INF, -INF], [NAN, 1.0, 0.0]],
                         ids=str)
def test_logsumexp_is_stable_and_matches_torch_at_extremes(values):
    grads_match_torch(lambda t: t.logsumexp(0), values)


def test_logsumexp_gradient_is_the_softmax():
    values = arr((2, 5))
    x = leaf(values)
    (g,) = ag.grad_sync(x.logsumexp(1).sum(), x)
    softmax = np.exp(values) / np.exp(values).sum(1, keepdims=True)
    np.testing.assert_allclose(g.numpy(), softmax, rtol=1e-12)


def test_logsumexp_of_integers_is_float32_and_of_nothing_is_minus_inf():
    torch = torch_module()
    y, ty = ag.tensor([1, 2]).logsumexp(0), torch.tensor([1, 2]).logsumexp(0)
    assert y.dtype == ag.float32
    np.testing.assert_allclose(y.item(), ty.item(), rtol=1e-6)
    y = ag.zeros(0, 2).logsumexp(0, keepdim=True)
    assert y.shape == (1, 2) and np.all(y.numpy() == -INF)


# ---- sum / mean dtype, max keepdim ----

def test_sum_mean_dtype_cast_the_input_first_as_torch():
    torch = torch_module()
    ints = np.array([[1, 2], [3, 4]], dtype=np.int32)
    y = ag.tensor(ints).sum(dtype=ag.int32)
    assert y.dtype == ag.int32 and y.item() == 10
    y, ty = ag.tensor([1.5, 2.5]).sum(dtype=ag.int64), torch.tensor([1.5, 2.5]).sum(
        dtype=torch.int64)
    assert y.item() == ty.item() == 3
    y = ag.tensor(ints).mean(1, dtype=ag.float64)
    assert y.dtype == ag.float64
    np.testing.assert_array_equal(y.numpy(), torch.tensor(ints).mean(1, dtype=torch.float64))


def test_mean_with_an_integer_dtype_raises_as_torch():
    torch = torch_module()
    match = "Optional dtype must be either a floating point or complex dtype. Got: Int"
    with pytest.raises(RuntimeError, match=match):
        ag.tensor([1.0, 2.0]).mean(dtype=ag.int32)
    with pytest.raises(RuntimeError, match=match):
        torch.tensor([1.0, 2.0]).mean(dtype=torch.int32)


@pytest.mark.parametrize("op", ["sum", "prod", "cumsum"])
def test_an_integer_dtype_of_a_tensor_requiring_grad_raises_as_torch(op):
    torch = torch_module()
    args = (0,) if op == "cumsum" else ()
    with pytest.raises(RuntimeError, match="Autograd not support dtype: Int"):
        getattr(ag.ones(2, requires_grad=True), op)(*args, dtype=ag.int32)
    with pytest.raises(RuntimeError, match="Autograd not support dtype: Int"):
        getattr(torch.ones(2, requires_grad=True), op)(*args, dtype=torch.int32)


@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_keepdim_without_dim_raise_type_error_as_torch(op, keepdim):
    torch = torch_module()
    match = f"{op}\\(\\) received an invalid combination of arguments"
    with pytest.raises(TypeError, match=match):
        getattr(ag.ones(2, 3), op)(keepdim=keepdim)
    with pytest.raises(TypeError, match=match):
        getattr(torch.ones(2, 3), op)(keepdim=keepdim)


def test_max_with_dim_keeps_keepdim_default_false():
    values, indices = ag.ones(2, 3).max(1)
    assert values.shape == (2,) and indices.shape == (2,)


# ---- another device backend ----

FAKE_OPS = {
    "prod": lambda t: t.prod(1),
    "prod_zero": lambda t: (t * (t > 0)).prod(),
    "std": lambda t: t.std(0),
    "var": lambda t: t.var(),
    "amax": lambda t: t.amax(1),
    "norm": lambda t: t.norm(),
    "norm_inf": lambda t: t.norm(INF, 1),
    "norm_3": lambda t: t.norm(3),
    "cumsum": lambda t: t.cumsum(1),
    "logsumexp": lambda t: t.logsumexp(1),
    "sum_dtype": lambda t: t.sum(0, dtype=ag.float32),
}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_reduction_runs_on_another_device_backend(fake_backend, name):
    """Forward and backward stay on fake:1 and use its array module only."""
    check_on_fake_device(fake_backend, FAKE_OPS[name], rtol=1e-6)


def test_search_ops_run_on_another_device_backend(fake_backend):
    x = ag.tensor([[1.0, 3.0, 3.0], [0.0, -1.0, 0.0]], device="fake:1")
    for y, expected in ((x.argmax(1), [1, 0]), (x.argmin(), 4), (x.any(1), [True, True]),
                        (x.all(0), [False, True, False])):
        assert y.device is ag.device("fake:1")
        np.testing.assert_array_equal(fake_backend.to_host(y.data), expected)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_of_two_tensors_are_elementwise_as_in_torch(name):
    torch = torch_module()
    results = []
    for lib in (torch, ag):
        a = lib.tensor([1.0, 5.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 2.0, 2.0], requires_grad=True)
        out = getattr(lib, name)(a, b)
        assert out.grad_fn.name() == ("MaximumBackward0" if name == "max" else "MinimumBackward0")
        out.sum().backward() if lib is torch else out.sum().backward_sync()
        results.append((out.detach().numpy().tolist(), a.grad.numpy().tolist(),
                        b.grad.numpy().tolist()))
        with pytest.raises(TypeError, match="must be int, not Tensor"):
            getattr(a, name)(b, keepdim=True)
    assert results[1] == results[0]
