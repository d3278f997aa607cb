"""Edge cases of reductions against PyTorch: var/std with no degrees of freedom (values,
gradients, second order, whether the gradient requires grad), the int64 sums of integers,
the argument combinations var/std reject, and amax/amin's checks on empty inputs."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import aiograd as ag

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.timeout(120)

NAN = math.nan
INF = math.inf


def assert_same(actual, expected):
    """Equal dtype and shape; NaN, inf and the sign of zeros where PyTorch has them; close
    elsewhere (NumPy and PyTorch sum in different orders)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(actual[~finite], expected[~finite])
    zeros = expected == 0
    np.testing.assert_array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros]))
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=1e-5, atol=1e-12)


def as_numpy(t):
    return None if t is None else t.detach().numpy()


def first_and_second_order(lib, fn, values, dtype):
    """``fn``'s value, its gradient (create_graph) for a non-uniform seed, whether that
    gradient requires grad, and (if it does) the second-order gradient."""
    x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # degrees of freedom <= 0
        y = fn(x)
    grad = torch.autograd.grad if lib is torch else ag.grad_sync
    seed = lib.tensor((np.arange(y.numel()) % 3 + 1.0).reshape(tuple(y.shape)).tolist(),
                      dtype=getattr(lib, dtype))
    (g,) = grad([y], [x], grad_outputs=[seed], create_graph=True)
    gg = None
    if g.requires_grad:
        v = lib.tensor((np.arange(g.numel()) % 2 + 1.0).reshape(tuple(g.shape)).tolist(),
                       dtype=getattr(lib, dtype))
        (gg,) = grad([g], [x], grad_outputs=[v], allow_unused=True)
    return as_numpy(y), as_numpy(g), g.requires_grad, as_numpy(gg)


def assert_matches_torch(fn, values, dtype="float64"):
    y, g, g_requires_grad, gg = first_and_second_order(ag, fn, values, dtype)
    ty, tg, tg_requires_grad, tgg = first_and_second_order(torch, fn, values, dtype)
    assert_same(y, ty)
    assert_same(g, tg)
    assert g_requires_grad == tg_requires_grad
    if gg is not None and tgg is not None:
        assert_same(gg, tgg)
    else:  # an unused input: no gradient, or zeros
        assert not np.any(gg if tgg is None else tgg)


# ---- var / std with correction >= the reduced element count ----

MOMENT_INPUTS = [
    [5.0], [[1.0, 5.0]], [[1.0, 1.0]], [1.0, 5.0, 2.0], [[1.0, 5.0, 2.0], [3.0, 3.0, 3.0]],
    NAN, 3.0, [[NAN, 1.0]], [[INF, 1.0]], [[[1.0, 2.0], [4.0, 7.0]], [[0.0, 0.0], [-1.0, 3.0]]],
]


def moment_calls(ndim):
    """(id, call) for each dim form (none, each int, tuples) with every keepdim and a
    correction from 0 to past the element count, or unbiased."""
    dims = [None, *range(-ndim, ndim), *([(0, 1), (1, 0), (0, -1)] if ndim >= 2 else [])]
    if ndim == 0:
        dims.append(0)
    corrections = [{"correction": c} for c in (0, 1, 2, 3, 4, 5, 0.5, 2.5)]
    corrections += [{"unbiased": True}, {"unbiased": False}]
    for op in ("var", "std"):
        for dim in dims:
            for keepdim in ((False,) if dim is None else (False, True)):
                for kw in corrections:
                    if dim is None:
                        yield (f"{op}-{kw}",
                               lambda t, op=op, kw=kw: getattr(t, op)(**kw))
                    else:
                        yield (f"{op}-{dim}-{keepdim}-{kw}",
                               lambda t, op=op, dim=dim, kd=keepdim, kw=kw:
                               getattr(t, op)(dim, keepdim=kd, **kw))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf, inf * 0
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("values", MOMENT_INPUTS, ids=str)
def test_var_std_at_and_past_zero_dof_match_torch_to_second_order(values, dtype):
    for name, call in moment_calls(np.ndim(values)):
        try:
            assert_matches_torch(call, values, dtype)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("correction", [0, 1, 2, 3])
def test_var_std_with_explicit_none_dim_and_keepdim_take_the_full_branch_as_torch(op, correction):
    for values in ([5.0], [[1.0, 5.0, 2.0], [3.0, 3.0, 3.0]], 3.0):
        assert_matches_torch(lambda t: getattr(t, op)(None, keepdim=True, correction=correction),
                             values)


def test_std_along_dim_with_negative_dof_has_signed_zero_gradient_as_torch():
    x = ag.tensor([[1.0, 5.0]], requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        y = x.std(1, correction=3).sum()
    (g,) = ag.grad_sync(y, [x])
    np.testing.assert_array_equal(g.numpy(), [[0.0, -0.0]])
    np.testing.assert_array_equal(np.signbit(g.numpy()), [[False, True]])


def test_var_of_one_element_slice_divides_by_the_negative_dof_as_torch():
    x = ag.tensor([[4.0], [7.0]], dtype=ag.float64, requires_grad=True)
    with pytest.warns(UserWarning):
        y = x.var(-1, keepdim=True, correction=2)
    (g,) = ag.grad_sync(y.sum(), [x])
    np.testing.assert_array_equal(np.signbit(g.numpy()), [[True], [True]])
    assert not np.any(g.numpy())


def test_full_var_of_nan_with_no_dof_has_inf_gradient_as_torch():
    x = ag.tensor(NAN, dtype=ag.float64, requires_grad=True)
    with pytest.warns(UserWarning):
        y = x.var()
    (g,) = ag.grad_sync(y, [x])
    assert g.item() == INF


def test_full_var_with_no_dof_has_a_constant_gradient_under_create_graph_as_torch():
    x = ag.tensor([5.0], requires_grad=True)
    with pytest.warns(UserWarning):
        y = x.var()
    (g,) = ag.grad_sync(y, [x], create_graph=True)
    assert np.isnan(g.numpy()).all()
    assert not g.requires_grad


# ---- sum of integers and bools ----

INTEGER_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
@pytest.mark.parametrize("call", [
    lambda t: t.sum(), lambda t: t.sum(0), lambda t: t.sum(1, keepdim=True),
    lambda t: t.sum((0, 1)), lambda t: t.sum(()),
], ids=["all", "dim", "dim_keepdim", "tuple", "empty_tuple"])
def test_sum_of_integers_and_bools_is_int64_as_torch(dtype, call):
    values = [[1, 0], [1, 1]] if dtype == "bool" else [[100, 100], [100, 1]]
    out = call(ag.tensor(values, dtype=getattr(ag, dtype)))
    expected = call(torch.tensor(values, dtype=getattr(torch, dtype)))
    assert str(out.dtype).split(".")[-1] == "int64" == str(expected.dtype).split(".")[-1]
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
@pytest.mark.parametrize("target", ["uint8", "int16", "int32", "float32", "float64"])
def test_sum_with_dtype_keeps_the_requested_dtype_as_torch(dtype, target):
    values = [[1, 0], [1, 1]] if dtype == "bool" else [[100, 100], [100, 1]]
    for dim in (None, 0):
        out = ag.tensor(values, dtype=getattr(ag, dtype)).sum(dim, dtype=getattr(ag, target))
        expected = torch.tensor(values, dtype=getattr(torch, dtype)).sum(
            dim, dtype=getattr(torch, target))
        assert str(out.dtype).split(".")[-1] == target == str(expected.dtype).split(".")[-1]
        np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_sum_of_empty_uint8_is_int64_zero_as_torch():
    out = ag.tensor([], dtype=ag.uint8).sum()
    assert out.dtype == ag.int64 and out.item() == 0


# ---- var / std argument combinations ----

REJECTED_MOMENT_ARGS = [
    ((), {"unbiased": False, "keepdim": True}), ((), {"unbiased": True, "keepdim": False}),
    ((True,), {"keepdim": True}), ((False,), {"keepdim": False}), ((True, True), {}),
    ((), {"unbiased": True, "correction": 0}), ((0, True), {"correction": 0}),
    ((0,), {"unbiased": True, "correction": None}), ((True,), {"correction": 1}),
    ((0,), {"unbiased": 1}), ((), {"unbiased": None}), ((0, None), {}),
    ((0,), {"keepdim": 1}), ((0,), {"keepdim": None}), ((), {"keepdim": None}),
    ((), {"correction": "a"}), ((False,), {"unbiased": True}),
]


@pytest.mark.parametrize("args, kwargs", REJECTED_MOMENT_ARGS, ids=str)
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_std_reject_argument_combinations_torch_rejects(op, args, kwargs):
    x, tx = ag.ones(2, 3), torch.ones(2, 3)
    with pytest.raises(TypeError, match="invalid combination of arguments") as expected:
        getattr(tx, op)(*args, **kwargs)
    prefix = f"{op}() received an invalid combination of arguments - got ("
    assert str(expected.value).startswith(prefix)
    with pytest.raises(TypeError) as error:
        getattr(x, op)(*args, **kwargs)
    assert str(error.value).startswith(prefix)
    assert "(bool unbiased = True)" in str(error.value)


ACCEPTED_MOMENT_ARGS = [
    ((), {"keepdim": True}), ((), {"keepdim": False}), ((None, True, True), {}),
    ((), {"dim": None, "unbiased": False, "keepdim": True}),
    ((None,), {"unbiased": False, "keepdim": True}), ((None,), {"correction": 2}),
    ((0,), {"keepdim": True, "correction": None}), ((), {"unbiased": False}), ((False,), {}),
    ((0, False, True), {}), ((), {"dim": 0, "unbiased": False}), ((0,), {"correction": True}),
]


@pytest.mark.parametrize("args, kwargs", ACCEPTED_MOMENT_ARGS, ids=str)
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_std_accept_the_combinations_torch_accepts(op, args, kwargs):
    values = [[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]]
    out = getattr(ag.tensor(values), op)(*args, **kwargs)
    expected = getattr(torch.tensor(values), op)(*args, **kwargs)
    assert tuple(out.shape) == tuple(expected.shape)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)


# ---- amax / amin: empty inputs and repeated dims ----

def messages(exc_type, op, shape, dim):
    """The messages of the ``exc_type`` errors torch's and aiograd's ``op`` raise."""
    with pytest.raises(exc_type) as expected:
        getattr(torch.zeros(*shape), op)(dim)
    with pytest.raises(exc_type) as error:
        getattr(ag.zeros(*shape), op)(dim)
    return str(expected.value), str(error.value)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("shape, dim", [
    ((0,), (0, -1)), ((0,), (0, 0)), ((0,), [0, 0]), ((0,), -1), ((0,), (-1, 1)),
    ((0,), (0, 5)), ((2, 0, 3), (1, 1)), ((2, 0, 3), (1, 0, 0)), ((2, 0, 3), (0, -2)),
], ids=str)
def test_amax_amin_check_empty_dims_before_repeats_as_torch(op, shape, dim):
    expected, got = messages(IndexError, op, shape, dim)
    assert got == expected


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("shape, dim", [
    ((2, 0, 3), (0, 0)), ((2, 3), (1, 1, 0, 0)), ((2, 3), (0, -2)),
], ids=str)
def test_amax_amin_name_the_first_repeated_dim_as_torch(op, shape, dim):
    expected, got = messages(RuntimeError, op, shape, dim)
    assert got.startswith(expected)


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin_of_empty_input_without_dim_raise_as_torch(op):
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        getattr(torch.zeros(0), op)()
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
        getattr(ag.zeros(0), op)()
