"""Pointwise ops (aiograd/_ops/pointwise.py): in-place unary ops, rounding, logs, nan_to_num,
atan2/hypot/fmod/remainder/fmax/fmin, lerp, addcmul/addcdiv. PyTorch is the oracle."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, leaf

import aiograd as ag
import aiograd._ops.pointwise  # noqa: F401
from aiograd._ops.pointwise import (
    addcdiv,
    addcmul,
    atan2,
    fmax,
    fmin,
    fmod,
    hypot,
    isfinite,
    isinf,
    isnan,
    lerp,
    nan_to_num,
    remainder,
)

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")

SHAPES = [(), (3,), (2, 3), (0, 2)]
# (0, 2): NumPy gives x * 1 zero strides, which check_inplace refuses (a known issue)
INPLACE_SHAPES = [(), (2, 3), (0,)]


def values(shape, low=-2.0, high=2.0, seed=0, away_from=()):
    """float64 values in [low, high), at least 0.1 from every point of ``away_from``."""
    x = np.random.default_rng(seed).uniform(low, high, size=shape)
    for p in away_from:
        near = np.abs(x - p) < 0.1
        x = np.where(near, p + 0.2 * np.sign(x - p + 1e-12), x)
    return x


def both(array, dtype=None):
    """The same values as an aiograd and a torch tensor."""
    a = np.asarray(array if dtype is None else np.asarray(array).astype(dtype))
    return ag.tensor(a.copy()), torch.tensor(a.copy())


def outcome(fn, *tensors):
    """``fn``'s result as (dtype, values), or its exception as (type name, message)."""
    try:
        out = fn(*tensors)
    except Exception as e:  # noqa: BLE001  (the outcome is what is compared)
        return type(e).__name__, str(e)
    data = out.numpy() if isinstance(out, ag.Tensor) else out.detach().numpy()
    return data.dtype, data


RTOL = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-14}  # libm and FMA differ by an ulp


def assert_same_outcome(fn, *arrays):
    """``fn`` gives both libraries' tensors the same dtype and values, or the same error."""
    mine = outcome(fn, *(both(a)[0] for a in arrays))
    theirs = outcome(fn, *(both(a)[1] for a in arrays))
    assert mine[0] == theirs[0], (mine, theirs)
    if isinstance(mine[1], str):
        assert mine[1] == theirs[1]
    elif mine[0].kind == "f":
        np.testing.assert_allclose(mine[1], theirs[1], rtol=RTOL[mine[0].name])
    else:
        np.testing.assert_array_equal(mine[1], theirs[1])


# ---- in-place forms of the unary ops ----

INPLACE_UNARY = {  # name: domain of values
    "exp_": {}, "log_": {"low": 0.3, "high": 3.0}, "sqrt_": {"low": 0.3, "high": 3.0},
    "sigmoid_": {}, "tanh_": {}, "sin_": {}, "cos_": {}, "abs_": {"away_from": [0.0]},
    "neg_": {}, "reciprocal_": {"away_from": [0.0]}, "rsqrt_": {"low": 0.3, "high": 3.0},
    "square_": {}, "floor_": {}, "ceil_": {}, "round_": {}, "trunc_": {}, "frac_": {},
    "log2_": {"low": 0.3, "high": 3.0}, "log10_": {"low": 0.3, "high": 3.0}, "exp2_": {},
    "nan_to_num_": {}, "sign_": {}, "log1p_": {"low": -0.5, "high": 2.0}, "expm1_": {},
}
SAVES_RESULT = {"exp_", "sqrt_", "sigmoid_", "tanh_", "reciprocal_", "rsqrt_", "exp2_",
                "expm1_"}


def _inplace_program(name):
    def program(x):
        y = x * 1
        getattr(y, name)()
        return y, y * x  # the gradient depends on x through both factors

    return program


@pytest.mark.parametrize("shape", INPLACE_SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(INPLACE_UNARY))
def test_inplace_unary_matches_torch(name, shape):
    a = values(shape, **INPLACE_UNARY[name])
    program = _inplace_program(name)
    x, tx = leaf(a), torch.tensor(a, requires_grad=True)
    (y, out), (ty, t_out) = program(x), program(tx)
    assert y.grad_fn.name() == ty.grad_fn.name()
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12)
    v = np.random.default_rng(2).standard_normal(shape)
    (g,) = ag.grad_sync(out, [x], ag.tensor(v))
    (tg,) = torch.autograd.grad(t_out, [tx], torch.tensor(v))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(INPLACE_UNARY))
def test_inplace_unary_second_order_matches_torch(name):
    a = values((2, 3), **INPLACE_UNARY[name])
    check_second_order(lambda x: _inplace_program(name)(x)[1],
                       lambda x: _inplace_program(name)(x)[1], a)


def test_inplace_unary_returns_the_tensor_and_bumps_its_version():
    for name, domain in INPLACE_UNARY.items():
        y = ag.tensor(values((3,), **domain))
        assert getattr(y, name)() is y
        assert y._version == 1, name


@pytest.mark.parametrize("name", sorted(INPLACE_UNARY))
def test_writing_the_result_again_raises_as_in_torch(name):
    a = values((3,), **INPLACE_UNARY[name])

    def raises(lib_leaf):
        y = lib_leaf * 1
        getattr(y, name)()
        y.mul_(2)
        try:
            if isinstance(y, ag.Tensor):
                y.sum().backward_sync()
            else:
                y.sum().backward()
        except RuntimeError as e:
            return "modified by an inplace operation" in str(e)
        return False

    expected = raises(torch.tensor(a, requires_grad=True))
    assert raises(leaf(a)) is expected
    assert expected is (name in SAVES_RESULT)


@pytest.mark.parametrize("name", sorted(INPLACE_UNARY))
def test_inplace_unary_on_a_leaf_that_requires_grad_raises(name):
    x = leaf(values((3,), **INPLACE_UNARY[name]))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        getattr(x, name)()


def _view_program(name):
    def program(x):
        y = x.abs() + 0.5
        getattr(y[1:], name)()
        return (y * y).sum()

    return program


@pytest.mark.parametrize("name", sorted(INPLACE_UNARY))
def test_inplace_unary_through_a_view_rebases_the_base(name):
    a = values((4,), seed=3, away_from=[0.0])
    x, tx = leaf(a), torch.tensor(a, requires_grad=True)
    program = _view_program(name)
    (g,) = ag.grad_sync(program(x), [x])
    (tg,) = torch.autograd.grad(program(tx), [tx])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10)


@pytest.mark.parametrize("name", sorted(INPLACE_UNARY))
def test_inplace_unary_through_a_view_second_order(name):
    a = values((4,), seed=3, away_from=[0.0])
    check_second_order(_view_program(name), _view_program(name), a)


@pytest.mark.parametrize("name", sorted(SAVES_RESULT))
def test_writing_a_view_result_again_raises(name):
    x = leaf(values((4,), seed=3, away_from=[0.0]))
    y = x.abs() + 0.5
    view = y[1:]
    getattr(view, name)()
    view.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ag.grad_sync(y.sum(), [x])


INT_VALUES = np.array([3, -2, 0, 7])


INTEGER_DTYPES = [np.int64, np.int32, np.uint8, np.bool_]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(INPLACE_UNARY))
def test_inplace_unary_on_integer_and_bool_tensors_as_torch(name):
    for dtype in INTEGER_DTYPES:
        assert_same_outcome(lambda t: getattr(t, name)(), INT_VALUES.astype(dtype))


# ---- new unary ops ----

UNARY = {  # name: (torch function, domain, smooth)
    "reciprocal": {"away_from": [0.0]},
    "rsqrt": {"low": 0.3, "high": 3.0},
    "square": {},
    "floor": {"away_from": [-1.0, 0.0, 1.0]},
    "ceil": {"away_from": [-1.0, 0.0, 1.0]},
    "round": {"away_from": [-1.5, -0.5, 0.5, 1.5]},
    "trunc": {"away_from": [-1.0, 0.0, 1.0]},
    "frac": {"away_from": [-1.0, 0.0, 1.0]},
    "log2": {"low": 0.3, "high": 3.0},
    "log10": {"low": 0.3, "high": 3.0},
    "exp2": {},
    "nan_to_num": {},
}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch(name, shape):
    check_against_torch(lambda x: getattr(x, name)(), lambda x: getattr(x, name)(),
                        values(shape, **UNARY[name]))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_records_torchs_node(name):
    a = values((3,), **UNARY[name])
    out, t_out = getattr(leaf(a), name)(), getattr(torch.tensor(a, requires_grad=True), name)()
    assert out.grad_fn.name() == t_out.grad_fn.name()


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradcheck(name):
    assert ag.gradcheck(lambda x: getattr(x, name)(), (leaf(values((2, 3), **UNARY[name])),))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_second_order_matches_torch(name):
    check_second_order(lambda x: getattr(x, name)() * x, lambda x: getattr(x, name)() * x,
                       values((2, 3), **UNARY[name]))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_keeps_float32(name):
    a = values((5,), **UNARY[name]).astype(np.float32)
    x, tx = both(a)
    out, t_out = getattr(x, name)(), getattr(tx, name)()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(UNARY) + ["isnan", "isinf", "isfinite"])
def test_unary_on_integer_and_bool_tensors_as_torch(name):
    for dtype in INTEGER_DTYPES:
        assert_same_outcome(lambda t: getattr(t, name)(), INT_VALUES.astype(dtype))


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 1e30])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(UNARY) + ["isnan", "isinf", "isfinite"])
def test_unary_at_special_values_as_torch(name):
    for dtype in (np.float16, np.float32, np.float64):
        with np.errstate(all="ignore"):
            special = SPECIAL.astype(dtype)
        assert_same_outcome(lambda t: getattr(t, name)(), special)


@pytest.mark.parametrize("fn", [isnan, isinf, isfinite])
def test_classification_records_nothing(fn):
    out = fn(leaf(values((3,))))
    assert out.dtype == np.bool_ and not out.requires_grad and out.grad_fn is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_with_decimals_matches_torch(dtype):
    a = np.array([1.2345, -25.5, 2.5, 0.5, 1234.5678, -0.05, 15.0, 149.99], dtype=dtype)
    x, tx = both(a)
    for decimals in (-2, -1, 0, 1, 2, 3):
        np.testing.assert_array_equal(x.round(decimals=decimals).numpy(),
                                      tx.round(decimals=decimals).numpy())


def test_round_with_decimals_records_round_backward1_with_a_zero_gradient():
    x = leaf(values((3,)))
    out = x.round(decimals=1)
    assert out.grad_fn.name() == "RoundBackward1"
    (g,) = ag.grad_sync(out.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), np.zeros(3))


@pytest.mark.parametrize("decimals", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_round_with_decimals_of_an_integer_tensor_raises_as_torch(dtype, decimals):
    assert_same_outcome(lambda t: t.round(decimals=decimals), INT_VALUES.astype(dtype))


def test_round_inplace_with_decimals():
    a = np.array([1.2345, -25.5, 2.55])
    x, tx = both(a)
    x.round_(decimals=1)
    tx.round_(decimals=1)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5}, {"posinf": 9.0, "neginf": -9.0},
                                    {"posinf": 1e39}, {"nan": -1.0, "neginf": 0.0},
                                    {"nan": None}], ids=str)
def test_nan_to_num_matches_torch(kwargs):
    for dtype in (np.float16, np.float32, np.float64):
        with np.errstate(over="ignore"):
            special = SPECIAL.astype(dtype)
        assert_same_outcome(lambda t: t.nan_to_num(**kwargs), special)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf * 0
def test_nan_to_num_gradient_is_zero_where_the_input_is_not_finite():
    a = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])
    x, tx = leaf(a), torch.tensor(a, requires_grad=True)
    v = np.array([1.0, 2.0, np.inf, 3.0, 4.0])
    (g,) = ag.grad_sync(nan_to_num(x, posinf=5.0), [x], ag.tensor(v))
    (tg,) = torch.autograd.grad(torch.nan_to_num(tx, posinf=5.0), [tx], torch.tensor(v))
    np.testing.assert_array_equal(g.numpy(), tg.numpy())


@pytest.mark.parametrize("nan", [2.0, None])
def test_nan_to_num_inplace_matches_torch(nan):
    x, tx = both(SPECIAL)
    assert x.nan_to_num_(nan=nan) is x
    tx.nan_to_num_(nan=nan)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


# ---- binary ops ----

BINARY = {  # name: (domain of input, domain of other)
    "atan2": ({}, {"away_from": [0.0]}),
    "hypot": ({"away_from": [0.0]}, {}),
    "fmod": ({}, {"low": 0.5, "high": 1.5}),
    "remainder": ({}, {"low": -1.5, "high": -0.5}),
    "fmax": ({}, {"seed": 9}),
    "fmin": ({}, {"seed": 9}),
}
BROADCASTS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), (2, 1)), ((), (2, 3)), ((0, 3), (3,))]


def _binary(name):
    """``name(a, b)`` from the library of ``a``: torch, or aiograd's pointwise module."""
    def call(a, b):
        lib = torch if isinstance(a, torch.Tensor) else aiograd._ops.pointwise
        return getattr(lib, name)(a, b)

    return call


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_torch(name, shapes):
    da, db = BINARY[name]
    a, b = values(shapes[0], **da), values(shapes[1], **{"seed": 5, **db})
    fn = getattr(ag.Tensor, name)
    check_against_torch(fn, _binary(name), a, b)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_second_order_matches_torch(name):
    da, db = BINARY[name]
    a, b = values((2, 3), **da), values((3,), **{"seed": 5, **db})
    fn = getattr(ag.Tensor, name)
    check_second_order(lambda x, y: fn(x, y) * x * y, lambda x, y: _binary(name)(x, y) * x * y,
                       a, b)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradcheck(name):
    da, db = BINARY[name]
    x, y = leaf(values((2, 3), **da)), leaf(values((2, 3), **{"seed": 5, **db}))
    assert ag.gradcheck(getattr(ag.Tensor, name), (x, y))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_records_torchs_node(name):
    a, b = values((3,)), values((3,), seed=4, away_from=[0.0])
    out = getattr(leaf(a), name)(leaf(b))
    t_out = _binary(name)(torch.tensor(a, requires_grad=True), torch.tensor(b))
    assert out.grad_fn.name() == t_out.grad_fn.name()


DTYPES = [np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_]


@pytest.mark.parametrize("dtype_a", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_result_types_and_errors_as_torch(name, dtype_a):
    a = np.array([5, -7, 3, 1]).astype(dtype_a)
    for dtype_b in DTYPES:
        for b in (np.array([2, 3, -2, 4]), np.array(3)):  # with dims, and 0-d
            assert_same_outcome(_binary(name), a, b.astype(dtype_b))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.uint8,
                                   np.bool_])
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_modulo_by_a_number_as_torch(name, dtype):
    a = np.array([5, -7, 3, 0, 8]).astype(dtype)
    for number in (2, -3, 2.5, -0.75, True, 300, 2 ** 40):
        assert_same_outcome(lambda t, n=number: getattr(t, name)(n), a)


@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_modulo_by_a_number_passes_the_gradient_through(name):
    x = leaf(values((2, 3)))
    out = getattr(x, name)(0.7)
    assert out.grad_fn.name() == getattr(torch.ones(1, requires_grad=True) * 1,
                                         name)(0.7).grad_fn.name()
    (g,) = ag.grad_sync(out.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), np.ones((2, 3)))


@pytest.mark.parametrize("divisor", [0, np.array([1, 0, 2])], ids=["number", "tensor"])
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_integer_modulo_by_zero_raises_as_torch(name, divisor):
    a = np.array([5, -7, 3])
    if isinstance(divisor, np.ndarray):
        assert_same_outcome(_binary(name), a, divisor)
    else:
        assert_same_outcome(lambda t: getattr(t, name)(divisor), a)


def test_remainder_has_the_divisors_sign():
    a = np.array([-4.0, -3.5, 3.5, 4.0, -0.0, 7.0])
    for b in (2.0, -2.0):
        x, tx = both(a)
        np.testing.assert_array_equal(remainder(x, b).numpy(), torch.remainder(tx, b).numpy())
        np.testing.assert_array_equal(np.signbit(remainder(x, b).numpy()),
                                      np.signbit(torch.remainder(tx, b).numpy()))


@pytest.mark.parametrize("number", [7, -7, 7.5])
@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.uint8, np.bool_])
def test_number_modulo_tensor_as_torch(number, dtype):
    b = np.array([2, -3, 4]).astype(dtype)
    assert_same_outcome(lambda t: number % t, b)
    assert_same_outcome(lambda t: (torch if isinstance(t, torch.Tensor) else ag._ops.pointwise)
                        .remainder(number, t), b)


def test_number_modulo_tensor_has_no_derivative_as_torch():
    x = leaf(values((3,), away_from=[0.0]))
    out = 2.0 % x
    assert out.requires_grad and out.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::remainder is not implemented"):
        ag.grad_sync(out.sum(), [x])


def test_mod_operators():
    a, b = values((2, 3)), values((3,), seed=5, away_from=[0.0])
    check_against_torch(lambda x, y: x % y, lambda x, y: x % y, a, b)
    check_against_torch(lambda x, y: (x * 1).__imod__(y), lambda x, y: (x * 1).__imod__(y), a, b)


@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_fmod_of_a_float_by_zero_is_nan(name):
    x, tx = both(np.array([1.5, -2.0]))
    assert_same_outcome(lambda t: getattr(t, name)(0.0), np.array([1.5, -2.0]))
    assert np.isnan(getattr(x, name)(0.0).numpy()).all()
    assert np.isnan(getattr(tx, name)(0.0).numpy()).all()


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_ignore_nan_and_route_ties_as_torch(name):
    a = np.array([1.0, np.nan, 2.0, np.nan, 3.0])
    b = np.array([np.nan, 1.0, 2.0, np.nan, -1.0])
    check_against_torch(getattr(ag.Tensor, name), _binary(name), a, b)


@pytest.mark.parametrize("name", ["atan2", "hypot", "fmax", "fmin"])
def test_binary_with_a_number_raises_type_error_as_torch(name):
    x, tx = both(values((3,)))
    with pytest.raises(TypeError) as mine:
        getattr(ag._ops.pointwise, name)(x, 2.0)
    with pytest.raises(TypeError) as theirs:
        getattr(torch, name)(tx, 2.0)
    assert str(mine.value) == str(theirs.value)


@pytest.mark.parametrize("fn", [atan2, hypot, fmax, fmin, fmod, remainder],
                         ids=lambda f: f.__name__)
def test_binary_shapes_that_do_not_broadcast_raise_as_torch(fn):
    x, tx = both(values((2, 3)))
    y, ty = both(values((2,)))
    with pytest.raises(RuntimeError) as mine:
        fn(x, y)
    with pytest.raises(RuntimeError) as theirs:
        getattr(torch, fn.__name__)(tx, ty)
    assert str(mine.value) == str(theirs.value)


INPLACE_BINARY = {
    "atan2_": lambda y, w: y.atan2_(w),
    "hypot_": lambda y, w: y.hypot_(w),
    "fmod_": lambda y, w: y.fmod_(w),
    "fmod_number": lambda y, w: y.fmod_(0.7) * w,
    "remainder_": lambda y, w: y.remainder_(w),
    "remainder_number": lambda y, w: y.remainder_(-0.7) * w,
    "lerp_": lambda y, w: y.lerp_(w, 0.3),
    "lerp_tensor": lambda y, w: y.lerp_(w, w * 0.5),
    "addcmul_": lambda y, w: y.addcmul_(w, w * 2, value=0.5),
    "addcdiv_": lambda y, w: y.addcdiv_(w * 2, w, value=-1.5),
}


def _inplace_binary_run(fn, x, w):
    y = x * 1 + 0.25
    out = fn(y, w)
    return y, out * x


@pytest.mark.parametrize("wshape", [(2, 3), (3,)], ids=str)
@pytest.mark.parametrize("name", sorted(INPLACE_BINARY))
def test_inplace_binary_matches_torch(name, wshape):
    fn = INPLACE_BINARY[name]
    a, b = values((2, 3)), values(wshape, seed=5, low=0.6, high=1.8)
    x, w = leaf(a), leaf(b)
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (y, out), (ty, t_out) = _inplace_binary_run(fn, x, w), _inplace_binary_run(fn, tx, tw)
    assert y.grad_fn.name() == ty.grad_fn.name()
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12)
    v = np.random.default_rng(2).standard_normal((2, 3))
    grads = ag.grad_sync(out, [x, w], ag.tensor(v))
    t_grads = torch.autograd.grad(t_out, [tx, tw], torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(INPLACE_BINARY))
def test_inplace_binary_second_order_matches_torch(name):
    fn = INPLACE_BINARY[name]
    a, b = values((2, 3)), values((3,), seed=5, low=0.6, high=1.8)
    program = lambda x, w: _inplace_binary_run(fn, x, w)[1]  # noqa: E731
    check_second_order(program, program, a, b)


@pytest.mark.parametrize("name", sorted(INPLACE_BINARY))
def test_inplace_binary_through_a_view_matches_torch(name):
    fn = INPLACE_BINARY[name]

    def program(x, w):
        y = x * 1 + 0.25
        out = fn(y[1], w)
        return (y * y).sum() + out.sum()

    a, b = values((2, 3)), values((3,), seed=5, low=0.6, high=1.8)
    check_against_torch(program, program, a, b)
    check_second_order(program, program, a, b)


@pytest.mark.parametrize("name", sorted(n for n in INPLACE_BINARY if not n.endswith("number")))
def test_inplace_binary_may_not_broadcast_the_written_tensor(name):
    fn = INPLACE_BINARY[name]
    y, ty = both(values((3,)))
    w, tw = both(values((2, 3), low=0.6, high=1.8))
    with pytest.raises(RuntimeError) as mine:
        fn(y, w)
    with pytest.raises(RuntimeError) as theirs:
        fn(ty, tw)
    assert str(mine.value) == str(theirs.value)


@pytest.mark.parametrize("name", ["atan2_", "hypot_", "fmod_", "remainder_"])
def test_inplace_binary_result_type_must_cast_as_torch(name):
    def program(t):
        other = t * 0.5 + 1 if isinstance(t, ag.Tensor) else t * 0.5 + 1
        return getattr(t, name)(other)

    assert_same_outcome(program, np.array([3, 5, 7]))


# ---- lerp ----

@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), (2, 1)), ((), ())],
                         ids=str)
def test_lerp_with_a_number_weight_matches_torch(shapes):
    a, b = values(shapes[0]), values(shapes[1], seed=5)
    for weight in (0.3, 0.7, -0.2, 1.0, 1.6):
        check_against_torch(lambda x, y, w=weight: lerp(x, y, w),
                            lambda x, y, w=weight: torch.lerp(x, y, w), a, b)


@pytest.mark.parametrize("wshape", [(2, 3), (3,), (), (2, 1)], ids=str)
def test_lerp_with_a_tensor_weight_matches_torch(wshape):
    a, b, w = values((2, 3)), values((2, 3), seed=5), values(wshape, low=-0.5, high=1.5, seed=6)
    check_against_torch(lerp, torch.lerp, a, b, w)
    check_second_order(lambda x, y, z: lerp(x, y, z) * z, lambda x, y, z: torch.lerp(x, y, z) * z,
                       a, b, w)


def test_lerp_gradcheck():
    a, b, w = (leaf(values((2, 3), seed=s)) for s in (1, 2, 3))
    assert ag.gradcheck(lerp, (a, b, w))


def test_lerp_records_torchs_nodes():
    x, y = leaf(values((3,))), leaf(values((3,), seed=2))
    assert lerp(x, y, 0.5).grad_fn.name() == "LerpBackward0"
    assert lerp(x, y, y).grad_fn.name() == "LerpBackward1"


def test_lerp_keeps_float32_values_as_torch():
    a, b, w = (values((50,), seed=s, low=-1, high=2).astype(np.float32) for s in (1, 2, 3))
    (x, tx), (y, ty), (z, tz) = both(a), both(b), both(w)
    out, t_out = lerp(x, y, z), torch.lerp(tx, ty, tz)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-6, atol=1e-7)  # torch: FMA
    np.testing.assert_allclose(lerp(x, y, 0.3).numpy(), torch.lerp(tx, ty, 0.3).numpy(),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", [
    (np.float32, np.float64, None), (np.float64, np.float32, None),
    (np.float32, np.float32, np.float64), (np.float32, np.float32, "0d-float64"),
    (np.float32, np.float32, "0d-int64"), (np.int64, np.int64, None),
    (np.int64, np.int64, np.int64), (np.float32, np.float32, np.int64)], ids=str)
def test_lerp_dtypes_as_torch(case):
    dtype_a, dtype_b, weight = case
    a, b = np.array([1.0, 2.0, 3.0]).astype(dtype_a), np.array([2.0, 0.0, 5.0]).astype(dtype_b)
    if weight is None:
        assert_same_outcome(lambda x, y: x.lerp(y, 0.25), a, b)
    else:
        w = (np.array(0.25, np.float64) if weight == "0d-float64" else np.array(1)
             if weight == "0d-int64" else np.array([0.25, 0.5, 1.0]).astype(weight))
        assert_same_outcome(lambda x, y, z: x.lerp(y, z), a, b, w)


# ---- addcmul / addcdiv ----

ADDC_SHAPES = [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (3,), ()),
               ((1, 3), (2, 1), (3,))]


@pytest.mark.parametrize("shapes", ADDC_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addc_matches_torch(name, shapes):
    a, b = values(shapes[0]), values(shapes[1], seed=2)
    c = values(shapes[2], seed=3, away_from=[0.0])
    fn, t_fn = {"addcmul": addcmul, "addcdiv": addcdiv}[name], getattr(torch, name)
    for value in (1, 0.5, -2):
        check_against_torch(lambda x, y, z, v=value: fn(x, y, z, value=v),
                            lambda x, y, z, v=value: t_fn(x, y, z, value=v), a, b, c)
        check_second_order(lambda x, y, z, v=value: fn(x, y, z, value=v) * y,
                           lambda x, y, z, v=value: t_fn(x, y, z, value=v) * y, a, b, c)


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addc_records_torchs_node_and_gradchecks(name):
    fn = {"addcmul": addcmul, "addcdiv": addcdiv}[name]
    a, b, c = leaf(values((2, 3))), leaf(values((3,), seed=2)), leaf(values((2, 3), seed=3,
                                                                            away_from=[0.0]))
    assert fn(a, b, c).grad_fn.name() == getattr(torch, name)(
        *(torch.tensor(t.detach().numpy(), requires_grad=True) for t in (a, b, c))
    ).grad_fn.name()
    assert ag.gradcheck(lambda x, y, z: fn(x, y, z, value=0.3), (a, b, c))


@pytest.mark.parametrize("dtypes", [
    (np.int64, np.int64, np.int64), (np.float32, np.int64, np.int64),
    (np.float32, np.float64, np.float32), (np.int32, np.float32, np.int64),
    (np.bool_, np.bool_, np.bool_), (np.float32, np.float64, "0d"),
    (np.uint8, np.int64, "0d")], ids=str)
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addc_dtypes_and_errors_as_torch(name, dtypes):
    a = np.array([1, 2, 3]).astype(dtypes[0])
    b = np.array([4, 5, 6]).astype(dtypes[1])
    c = np.array(2.0) if dtypes[2] == "0d" else np.array([2, 1, 3]).astype(dtypes[2])
    for value in (1, 0.5, 2.5, True):
        assert_same_outcome(lambda x, y, z, v=value: getattr(x, name)(y, z, value=v), a, b, c)


@pytest.mark.parametrize("name", ["addcmul_", "addcdiv_"])
def test_addc_inplace_keeps_the_written_dtype(name):
    def program(x, y, z):
        return getattr(x, name)(y, z, value=0.5)

    assert_same_outcome(program, np.array([1.0, 2.0], np.float32), np.array([2.0, 3.0]),
                        np.array([4.0, 8.0]))


# ---- in-place rules and bindings ----

def test_inplace_under_no_grad_writes_a_leaf_and_records_nothing():
    x = leaf(values((3,)))
    with ag.no_grad():
        x.exp_()
    np.testing.assert_allclose(x.detach().numpy(), np.exp(values((3,))))
    assert x.grad_fn is None and x.is_leaf and x._version == 1


@pytest.mark.parametrize("name", ["lerp_", "addcmul_", "atan2_"])
def test_inplace_into_a_plain_tensor_records_the_other_operand(name):
    def program(w):
        y = w.detach() * 0 + 0.5  # no history
        args = {"lerp_": (w, 0.3), "addcmul_": (w, w), "atan2_": (w,)}[name]
        getattr(y, name)(*args)
        return y

    a = values((2, 3), seed=4, away_from=[0.0])
    w, tw = leaf(a), torch.tensor(a, requires_grad=True)
    y, ty = program(w), program(tw)
    assert y.requires_grad and y.grad_fn.name() == ty.grad_fn.name()
    (g,) = ag.grad_sync(y.sum(), [w])
    (tg,) = torch.autograd.grad(ty.sum(), [tw])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12)


def test_every_op_is_a_tensor_method():
    for name in aiograd._ops.pointwise.__all__:
        assert callable(getattr(ag.Tensor, name)), name
    assert ag.Tensor.__mod__ is remainder


@pytest.mark.parametrize("program", [
    lambda x, y, z, lib: x.round(decimals=2),
    lambda x, y, z, lib: x.round(decimals=-1),
    lambda x, y, z, lib: lib.lerp(x, y, 0.3),
    lambda x, y, z, lib: lib.lerp(x, y, z),
    lambda x, y, z, lib: lib.addcmul(x, y, z, value=0.3),
    lambda x, y, z, lib: lib.addcdiv(x, y, z + 1, value=0.3),
], ids=["round2", "round-1", "lerp", "lerp_tensor", "addcmul", "addcdiv"])
def test_float16_is_computed_in_float32_and_rounded_once_as_torch(program):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(500) * 100).astype(np.float16)
    b = rng.standard_normal(500).astype(np.float16)
    w = rng.uniform(0, 1, 500).astype(np.float16)
    (x, tx), (y, ty), (z, tz) = both(a), both(b), both(w)
    out = program(x, y, z, aiograd._ops.pointwise)
    t_out = program(tx, ty, tz, torch)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out.numpy(), t_out.numpy())


SELF_OPERAND = {
    "addcmul_": lambda y: y.addcmul_(y, y),
    "atan2_": lambda y: y.atan2_(y),
    "lerp_": lambda y: y.lerp_(y * 2, y),
    "hypot_": lambda y: y.hypot_(y),
    "fmod_": lambda y: y.fmod_(y + 3),
}


@pytest.mark.parametrize("name", sorted(SELF_OPERAND))
def test_inplace_with_the_written_tensor_as_operand_as_torch(name):
    """The node saves the written tensor as an operand: the backward raises where PyTorch's
    does, and is right where PyTorch's is."""
    a = np.array([0.5, 1.2, -0.7])

    def run(x):
        y = x * 1
        SELF_OPERAND[name](y)
        try:
            (g,) = (ag.grad_sync(y.sum(), [x]) if isinstance(x, ag.Tensor)
                    else torch.autograd.grad(y.sum(), [x]))
        except RuntimeError as e:
            return str(e).split(":")[0]
        return g.numpy()

    mine, theirs = run(leaf(a)), run(torch.tensor(a, requires_grad=True))
    if isinstance(theirs, str):
        assert mine == theirs
    else:
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)


# ---- atan2's gradient at the origin ----

ORIGIN_A = np.array([0.0, -0.0, 0.0, 1e-200, 1.0, 0.0, 0.0])
ORIGIN_B = np.array([0.0, -0.0, -0.0, 1e-200, 0.0, 2.0, np.nan])


@pytest.mark.parametrize("inplace", [False, True])
def test_atan2_gradient_at_the_origin_is_zero_as_torch(inplace):
    """Where ``a^2 + b^2 == 0`` both gradients are (signed) zeros; a create_graph backward
    through them is NaN there, as PyTorch's."""
    v = np.array([3.0, 3.0, 1.0, 1.0, 3.0, 3.0, 1.0])

    def run(lib, a, b, grad):
        out = (a * 1).atan2_(b) if inplace else lib.atan2(a, b)
        firsts = grad(out, [a, b], lib.tensor(v), create_graph=True)
        total = (firsts[0] * firsts[0]).sum() + (firsts[1] * 2).sum()
        return firsts, grad(total, [a, b])

    firsts, seconds = run(ag, leaf(ORIGIN_A), leaf(ORIGIN_B), ag.grad_sync)
    t_firsts, t_seconds = run(torch, torch.tensor(ORIGIN_A, requires_grad=True),
                              torch.tensor(ORIGIN_B, requires_grad=True), torch.autograd.grad)
    for g, tg in zip(firsts + seconds, t_firsts + t_seconds):
        got, expected = g.detach().numpy(), tg.detach().numpy()
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got) | np.isnan(got),
                                      np.signbit(expected) | np.isnan(expected))


# ---- clamp_min_ / clamp_max_ ----

CLAMP_BOUNDS = {
    "number": lambda lib: 0.3,
    "tensor": lambda lib: lib.tensor([0.5, -0.5, 0.1], dtype=lib.float64, requires_grad=True),
    "0-d": lambda lib: lib.tensor(-0.2, dtype=lib.float64, requires_grad=True),
}


@pytest.mark.parametrize("bound", sorted(CLAMP_BOUNDS))
@pytest.mark.parametrize("name", ["clamp_min_", "clamp_max_"])
def test_clamp_bound_inplace_matches_torch(name, bound):
    a = np.array([0.2, -0.9, 1.4])

    def run(lib, x, grad):
        b = CLAMP_BOUNDS[bound](lib)
        y = x * 1
        assert getattr(y, name)(b) is y and y._version == 1
        inputs = [x] + ([b] if isinstance(b, lib.Tensor) else [])
        firsts = grad((y * x).sum(), inputs, create_graph=True)
        seconds = grad(sum((g * g).sum() for g in firsts), [x], allow_unused=True)
        arrays = [y.detach().numpy()] + [g.detach().numpy() for g in firsts + seconds]
        return y.grad_fn.name(), arrays

    name_, arrays = run(ag, leaf(a), ag.grad_sync)
    t_name, t_arrays = run(torch, torch.tensor(a, requires_grad=True), torch.autograd.grad)
    assert name_ == t_name and len(arrays) == len(t_arrays)
    for got, expected in zip(arrays, t_arrays):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["clamp_min_", "clamp_max_"])
def test_clamp_bound_inplace_through_a_view_matches_torch(name):
    a = values((4,), seed=3)

    def program(x):
        y = x * 1
        getattr(y[1:], name)(0.1)
        return (y * y).sum()

    check_against_torch(program, program, a)
    check_second_order(program, program, a)


@pytest.mark.parametrize("name", ["clamp_min_", "clamp_max_"])
def test_clamp_bound_inplace_checks_as_torch(name):
    for data, bound in [([1, 2], 0.5), ([1, 2], 2), ([True, False], 0.5),
                        ([1, 2], "tensor"), ([1.0, 2.0], "tensor")]:
        def fn(t, data=data, bound=bound):
            lib = torch if isinstance(t, torch.Tensor) else ag
            b = lib.tensor(0.5) if bound == "tensor" else bound
            return getattr(t, name)(b)

        assert_same_outcome(fn, np.array(data))
    assert_same_outcome(lambda t: getattr(t, name)(t.new_ones((2, 1))), np.array([1.0, 2.0]))


def test_clamp_bound_inplace_on_a_leaf_that_requires_grad_raises():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf([1.0]).clamp_min_(0.0)


# ---- cumsum_ ----

def test_cumsum_inplace_matches_torch():
    def program(x):
        y = x * 1
        assert y.cumsum_(1) is y
        return y * x

    a = values((2, 3))
    check_against_torch(program, program, a)
    check_second_order(program, program, a)
    x, tx = leaf(a) * 1, torch.tensor(a, requires_grad=True) * 1
    assert x.cumsum_(0).grad_fn.name() == tx.cumsum_(0).grad_fn.name() == "CumsumBackward0"


def test_cumsum_inplace_through_a_view_matches_torch():
    def program(x):
        y = x * 1
        y[1:].cumsum_(0)
        return (y * y).sum()

    check_against_torch(program, program, values((4,)))


@pytest.mark.parametrize("case", [
    (np.array([100, 100], dtype=np.int8), {}),
    (np.array([True, True]), {}),
    (np.array([1, 2]), {"dtype": "float32"}),
    (np.array([1.0, 2.0], dtype=np.float32), {"dtype": "int64"}),
    (np.array([1.0, 2.0], dtype=np.float32), {"dtype": "float32"}),
], ids=["int8", "bool", "int-to-float", "float-to-int", "same-dtype"])
def test_cumsum_inplace_dtypes_as_torch(case):
    data, kwargs = case

    def fn(t):
        lib = torch if isinstance(t, torch.Tensor) else ag
        return t.cumsum_(0, **{k: getattr(lib, v) for k, v in kwargs.items()})

    assert_same_outcome(fn, data)


# ---- logical_not_ / bitwise_not_ ----

@pytest.mark.parametrize("name", ["logical_not_", "bitwise_not_"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.bool_])
def test_not_inplace_as_torch(name, dtype):
    assert_same_outcome(lambda t: getattr(t, name)(), np.array([0, 2, 1]).astype(dtype))


def test_logical_not_inplace_records_nothing_as_torch():
    """No gradient: the written tensor keeps its history, even a leaf that requires grad."""
    for x in (leaf([0.0, 2.0]), torch.tensor([0.0, 2.0], requires_grad=True)):
        y = x * 1
        assert y.logical_not_() is y and y._version == 1
        assert y.grad_fn.name() == "MulBackward0"
        assert x.logical_not_() is x and x.requires_grad and x.grad_fn is None
        np.testing.assert_array_equal(x.detach().numpy(), [1.0, 0.0])
        x[1:].logical_not_()  # a view of a leaf that requires grad, too
        np.testing.assert_array_equal(x.detach().numpy(), [1.0, 1.0])
        assert x._version == 2


def test_new_inplace_ops_are_tensor_methods():
    for name in ("sign_", "log1p_", "expm1_", "clamp_min_", "clamp_max_", "cumsum_",
                 "logical_not_", "bitwise_not_"):
        assert hasattr(torch.Tensor, name)
        assert inspect.unwrap(getattr(ag.Tensor, name)) is getattr(aiograd._ops.pointwise, name)


# ---- bool arithmetic (aiograd/_ops/arithmetic.py, aiograd/_ops/scatter.py) ----

B = np.array([True, False])


@pytest.mark.parametrize("fn", [
    lambda t: t.pow(t), lambda t: t ** t, lambda t: t.pow(t[:1]), lambda t: t.pow(t.int()),
    lambda t: t.pow(t.float()), lambda t: t.pow(True), lambda t: t.pow(False),
    lambda t: t.pow(2), lambda t: t.pow(0.5), lambda t: True ** t, lambda t: False ** t,
    lambda t: 2 ** t, lambda t: t[0].pow(t), lambda t: t.clone().pow_(t),
    lambda t: t.clone().pow_(True), lambda t: t.clone().pow_(False),
    lambda t: t.clone().pow_(2), lambda t: t.int().pow(t),
], ids=["pow", "**", "0-d", "int", "float", "True", "False", "2", "0.5", "True**",
        "False**", "2**", "0-d base", "pow_", "pow_True", "pow_False", "pow_2", "int base"])
def test_bool_pow_as_torch(fn):
    """PyTorch's pow kernel is not implemented for a bool result: a bool base with a bool
    exponent raises, except a bool number exponent (0 and 1 skip the kernel)."""
    assert_same_outcome(fn, B)


def test_pow_of_a_number_and_a_tensor_as_torch():
    from aiograd._ops.arithmetic import pow as ag_pow

    assert_same_outcome(lambda t: (torch.pow if isinstance(t, torch.Tensor) else ag_pow)(2, t),
                        B)
    assert_same_outcome(lambda t: (torch.pow if isinstance(t, torch.Tensor) else ag_pow)(True, t),
                        B)
    check_against_torch(lambda x: ag_pow(2.0, x), lambda x: torch.pow(2.0, x), values((3,)))


ALPHA_CASES = {
    "bool-1": (B, B[::-1], -1), "bool2": (B, B, 2), "bool0": (B[:1], B, 0),
    "boolTrue": (B, B, True), "bool0.5": (B, B, 0.5), "bool1.0": (B, B, 1.0),
    "bool-number": (B, True, -1), "uint8-bool": (np.array([3, 4], np.uint8), B, -1),
    "uint8-256": (np.array([3, 4], np.uint8), np.array([1, 1], np.uint8), 256),
    "uint8-number": (np.array([3, 4], np.uint8), 2, 200),
    "int0.5": (np.array([1, 2]), np.array([1, 2]), 0.5),
    "int-number0.5": (np.array([1, 2]), 1, 0.5),
    "floatTrue": (np.array([1.0, 2.0]), np.array([1.0, 2.0]), True),
    "float-numberFalse": (np.array([1.0, 2.0]), 1, False),
    "float32-1e40": (np.array([1.0], np.float32), np.array([1.0], np.float32), 1e40),
    "int-float": (np.array([1, 2]), np.array([1.0, 2.0]), 0.5),
    "float16-number": (np.array([1.0, 2.0], np.float16), 1.1, 3.3),
}


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("case", sorted(ALPHA_CASES))
def test_alpha_as_torch(op, case):
    """``add``/``sub`` with ``alpha``: computed in the result type, alpha converted to it
    (a bool for a bool result), with PyTorch's checks of alpha and bool subtraction."""
    a, b, alpha = ALPHA_CASES[case]
    if isinstance(b, np.ndarray):
        assert_same_outcome(lambda s, t: getattr(s, op)(t, alpha=alpha), a, b)
    else:
        assert_same_outcome(lambda s: getattr(s, op)(b, alpha=alpha), a)


@pytest.mark.parametrize("fn", [lambda t: t - True, lambda t: True - t, lambda t: t.sub(True)])
def test_subtracting_a_bool_number_raises_as_torch(fn):
    assert_same_outcome(fn, np.array([1, 2]))
    assert_same_outcome(fn, B)


def test_alpha_with_a_number_records_torchs_node():
    def program(x):
        return x.add(2.0, alpha=3) * x.sub(x * 2, alpha=0.5)

    check_against_torch(program, program, values((3,)))
    check_second_order(program, program, values((3,)))
    x = leaf([1.0])
    assert x.add(2.0, alpha=3).grad_fn.name() == "AddBackward0"


@pytest.mark.parametrize("alpha", [-1, 2, 0, 0.5, True])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int64, np.float32])
def test_index_add_alpha_is_converted_to_the_dtype_as_torch(dtype, alpha):
    index = np.array([0, 1, 0])

    def fn(t):
        lib = torch if isinstance(t, torch.Tensor) else ag
        return t.index_add(0, lib.tensor(index), t.new_ones(3), alpha=alpha)

    assert_same_outcome(fn, np.array([1, 0]).astype(dtype))
    if dtype is np.int8:
        assert_same_outcome(lambda t: fn(t).index_add(0, t.new_zeros(1).long(), t[:1],
                                                         alpha=300), np.array([1, 0], dtype))


@pytest.mark.parametrize("name", ["atan2", "hypot", "fmax", "fmin", "fmod", "remainder"])
def test_binary_ops_pack_saved_tensors_in_torchs_order(name):
    packed = []
    for lib in (ag, torch):
        a = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
        b = lib.tensor(np.array([3.0, 0.5]), requires_grad=True)
        seen = []
        hooks = ag.saved_tensors_hooks if lib is ag else torch.autograd.graph.saved_tensors_hooks
        with hooks(lambda t, seen=seen: seen.append(float(t.detach().numpy()[0])) or t,
                   lambda t: t):
            getattr(lib, name)(a, b)
        packed.append(seen)
    assert packed[0] == packed[1]
