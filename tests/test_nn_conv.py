"""conv1d / conv2d, max_pool2d / avg_pool2d / adaptive_avg_pool2d and their modules.

PyTorch is the oracle for values, first- and second-order gradients, node names,
module attributes, reprs, state_dict keys, init bounds and errors.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from oracles import arr, check_against_torch, check_on_fake_device, check_second_order, raises_like

import aiograd as ag
from aiograd._ops.conv import adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, max_pool2d
from aiograd.nn._conv import AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv2d, MaxPool2d

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")
TF = torch.nn.functional


CONV2D_CASES = [
    # input shape, weight shape, bias, options
    ((2, 3, 7, 6), (4, 3, 3, 3), True, {}),
    ((2, 4, 7, 6), (6, 2, 3, 2), True,
     dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
    ((1, 4, 6, 6), (4, 1, 2, 2), False, dict(stride=2, groups=4)),
    ((2, 2, 5, 6), (3, 2, 2, 3), True, dict(padding="same", dilation=(2, 1))),
    ((2, 2, 5, 6), (3, 2, 3, 3), False, dict(padding="valid", stride=(1, 3))),
    ((3, 5, 4), (2, 3, 2, 2), True, dict(padding=1)),  # unbatched
]

CONV1D_CASES = [
    ((2, 3, 9), (4, 3, 3), True, {}),
    ((2, 4, 9), (6, 2, 2), True, dict(stride=2, padding=2, dilation=2, groups=2)),
    ((2, 2, 8), (3, 2, 4), False, dict(padding="same")),
    ((4, 7), (2, 4, 3), True, dict(padding=(1,))),  # unbatched
]


def _arrays(x_shape, w_shape, bias):
    arrays = [arr(x_shape, 0), arr(w_shape, 1)]
    if bias:
        arrays.append(arr(w_shape[:1], 2))
    return arrays


def _with(fn, opts):
    return lambda *t: fn(*t, **opts)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x_shape, w_shape, bias, opts", CONV2D_CASES)
def test_conv2d_matches_torch_to_second_order(x_shape, w_shape, bias, opts):
    arrays = _arrays(x_shape, w_shape, bias)
    check_against_torch(_with(conv2d, opts), _with(TF.conv2d, opts), *arrays)
    check_second_order(_with(conv2d, opts), _with(TF.conv2d, opts), *arrays)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x_shape, w_shape, bias, opts", CONV1D_CASES)
def test_conv1d_matches_torch_to_second_order(x_shape, w_shape, bias, opts):
    arrays = _arrays(x_shape, w_shape, bias)
    check_against_torch(_with(conv1d, opts), _with(TF.conv1d, opts), *arrays)
    check_second_order(_with(conv1d, opts), _with(TF.conv1d, opts), *arrays)


def test_third_order_gradients_match_torch():
    def third(lib, grad, fn, xs):
        y = fn(*xs)
        firsts = grad((y * y * y).sum(), xs, create_graph=True)
        seconds = grad(sum((g * g).sum() for g in firsts), xs, create_graph=True)
        return grad(sum((g * g).sum() for g in seconds), xs)

    x, w = arr((2, 4, 6, 5)), arr((6, 2, 3, 2), 1)
    opts = dict(stride=(2, 1), padding=1, groups=2)
    got = third(ag, ag.grad_sync, _with(conv2d, opts),
                [ag.tensor(x, requires_grad=True), ag.tensor(w, requires_grad=True)])
    expected = third(torch, torch.autograd.grad, _with(TF.conv2d, opts),
                     [torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)])
    for g, tg in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-9)


@pytest.mark.parametrize("fn, torch_fn, x_shape, w_shape", [
    (conv2d, TF.conv2d, (2, 3, 5, 5), (4, 3, 2, 2)),
    (conv2d, TF.conv2d, (3, 5, 5), (4, 3, 2, 2)),
    (conv1d, TF.conv1d, (2, 3, 5), (4, 3, 2)),
])
def test_node_names_match_torch(fn, torch_fn, x_shape, w_shape):
    x, w = arr(x_shape), arr(w_shape, 1)
    y = fn(ag.tensor(x, requires_grad=True), ag.tensor(w))
    ty = torch_fn(torch.tensor(x, requires_grad=True), torch.tensor(w))
    assert y.grad_fn.name() == ty.grad_fn.name()
    if len(x_shape) == len(w_shape) - 1:  # unbatched: Squeeze -> Convolution -> Unsqueeze, as torch
        inner = y.grad_fn.next_functions[0][0]
        t_inner = ty.grad_fn.next_functions[0][0]
        assert inner.name() == t_inner.name()
        assert inner.next_functions[0][0].name() == t_inner.next_functions[0][0].name()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_and_float64_keep_their_dtype_and_match_torch(dtype):
    x, w, b = (a.astype(dtype) for a in (arr((2, 4, 6, 6)), arr((6, 2, 3, 3), 1), arr((6,), 2)))
    xs = [ag.tensor(a, requires_grad=True) for a in (x, w, b)]
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = conv2d(*xs, stride=2, padding=1, groups=2)
    ty = TF.conv2d(*ts, stride=2, padding=1, groups=2)
    assert y.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    v = arr(tuple(ty.shape), 3).astype(dtype)
    grads = ag.grad_sync(y, xs, ag.tensor(v))
    t_grads = torch.autograd.grad(ty, ts, torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=tol * 10, atol=tol * 10)


def test_gradcheck_conv2d_with_groups_and_padding():
    x = ag.tensor(arr((1, 2, 4, 5)), requires_grad=True)
    w = ag.tensor(arr((2, 1, 2, 3), 1), requires_grad=True)
    b = ag.tensor(arr((2,), 2), requires_grad=True)
    assert ag.gradcheck(
        lambda *t: conv2d(*t, stride=(1, 2), padding=(1, 0), groups=2), (x, w, b))


def test_only_the_needed_gradients_are_computed():
    x = ag.tensor(arr((2, 3, 5, 5)))
    w = ag.tensor(arr((4, 3, 2, 2), 1), requires_grad=True)
    y = conv2d(x, w)
    (gw,) = ag.grad_sync(y.sum(), [w])
    tw = torch.tensor(arr((4, 3, 2, 2), 1), requires_grad=True)
    (tgw,) = torch.autograd.grad(TF.conv2d(torch.tensor(arr((2, 3, 5, 5))), tw).sum(), [tw])
    np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-10)


def test_empty_batch_gives_empty_output():
    y = conv2d(ag.zeros(0, 4, 5, 5), ag.zeros(6, 4, 2, 2))
    assert y.shape == TF.conv2d(torch.zeros(0, 4, 5, 5), torch.zeros(6, 4, 2, 2)).shape


def test_integer_convolution_matches_torch():
    x = np.arange(2 * 3 * 4 * 4).reshape(2, 3, 4, 4) % 7
    w = np.arange(2 * 3 * 2 * 2).reshape(2, 3, 2, 2) % 5 - 2
    y = conv2d(ag.tensor(x), ag.tensor(w))
    ty = TF.conv2d(torch.tensor(x), torch.tensor(w))
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y.numpy(), ty.numpy())


def test_same_padding_with_an_even_kernel_warns_as_torch():
    x, w = ag.zeros(1, 1, 5, 5), ag.zeros(1, 1, 2, 2)
    with pytest.warns(UserWarning, match="Using padding='same' with even kernel lengths"):
        conv2d(x, w, padding="same")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conv2d(x, ag.zeros(1, 1, 3, 3), padding="same")


X = np.zeros((2, 4, 5, 5))


@pytest.mark.parametrize("args, kwargs", [
    ((X, np.zeros((6, 3, 2, 2))), {}),
    ((X, np.zeros((6, 4, 2, 2))), dict(groups=2)),
    ((X, np.zeros((5, 2, 2, 2))), dict(groups=2)),
    ((X, np.zeros((6, 4, 7, 7))), {}),
    ((X, np.zeros((6, 4, 3, 3))), dict(dilation=3)),
    ((X[0, 0], np.zeros((6, 4, 2, 2))), {}),
    ((X, np.zeros((6, 4, 2, 2))), dict(stride=2, padding="same")),
    ((X, np.zeros((6, 4, 2, 2))), dict(padding="foo")),
    ((X, np.zeros((6, 4, 2, 2))), dict(padding=-1)),
    ((X, np.zeros((6, 4, 2, 2))), dict(stride=0)),
    ((X, np.zeros((6, 4, 2, 2))), dict(dilation=0)),
    ((X, np.zeros((6, 4, 2, 2))), dict(groups=0)),
    ((X, np.zeros((6, 4, 2, 2)), np.zeros(5)), {}),
    ((X, np.zeros((6, 4, 2, 2)), np.zeros((6, 1))), {}),
    ((X, np.zeros((6, 4, 2, 2)).astype(np.float32)), {}),
    ((X.astype(np.float32), np.zeros((6, 4, 2, 2))), {}),
    ((X.astype(np.float32), np.zeros((6, 4, 2, 2)).astype(np.float32), np.zeros(6)), {}),
    ((X, np.zeros((6, 4, 2, 2))), dict(stride=(1, 2, 3))),
    ((X, np.zeros((6, 4, 2))), {}),
    ((X.astype(bool), np.zeros((6, 4, 2, 2), dtype=bool)), {}),
])
def test_conv2d_errors_match_torch(args, kwargs):
    raises_like(lambda: conv2d(*map(ag.tensor, args), **kwargs),
                 lambda: TF.conv2d(*map(torch.tensor, args), **kwargs))


@pytest.mark.parametrize("args", [
    (X, np.zeros((6, 4, 2))),
    (X[0], np.zeros((6, 4, 7))),
    (X[0, 0], np.zeros((6, 4, 2))),
])
def test_conv1d_errors_match_torch(args):
    raises_like(lambda: conv1d(*map(ag.tensor, args)),
                 lambda: TF.conv1d(*map(torch.tensor, args)))


# ---- modules ----

MODULE_CASES = [
    (Conv2d, torch.nn.Conv2d, (4, 6, 3), {}),
    (Conv2d, torch.nn.Conv2d, (4, 6, (3, 2)),
     dict(stride=2, padding=1, dilation=2, groups=2, bias=False)),
    (Conv2d, torch.nn.Conv2d, (4, 6, 3), dict(padding="same")),
    (Conv2d, torch.nn.Conv2d, (4, 6, 3), dict(padding="valid", stride=(1, 2))),
    (Conv1d, torch.nn.Conv1d, (4, 6, 3), dict(padding="same", groups=2)),
    (Conv1d, torch.nn.Conv1d, (4, 6, 5), dict(stride=3, padding=(2,), dilation=1)),
]


@pytest.mark.parametrize("cls, torch_cls, args, kwargs", MODULE_CASES)
def test_module_attributes_repr_and_state_dict_match_torch(cls, torch_cls, args, kwargs):
    m, tm = cls(*args, **kwargs), torch_cls(*args, **kwargs)
    assert repr(m) == repr(tm)
    for name in ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                 "dilation", "groups", "transposed", "output_padding", "padding_mode"):
        assert getattr(m, name) == getattr(tm, name), name
    assert list(m.state_dict()) == list(tm.state_dict())
    for (name, p), (t_name, tp) in zip(m.named_parameters(), tm.named_parameters()):
        assert name == t_name and p.shape == tuple(tp.shape) and p.dtype == np.float32


@pytest.mark.parametrize("cls, torch_cls, args, kwargs", MODULE_CASES)
def test_module_forward_and_backward_match_torch(cls, torch_cls, args, kwargs):
    m, tm = cls(*args, **kwargs).double(), torch_cls(*args, **kwargs).double()
    tm.load_state_dict({k: torch.tensor(v) for k, v in m.state_dict().items()})
    shape = (2, 4, 7) if cls is Conv1d else (2, 4, 7, 8)
    x = arr(shape)
    y, ty = m(ag.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = arr(tuple(ty.shape), 4)
    params = list(m.parameters())
    grads = ag.grad_sync(y, params, ag.tensor(v))
    t_grads = torch.autograd.grad(ty, list(tm.parameters()), torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)


def test_init_bounds_are_one_over_sqrt_fan_in_and_seeded():
    ag.manual_seed(0)
    m = Conv2d(8, 16, 3, groups=2)
    bound = 1 / math.sqrt(4 * 3 * 3)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert np.abs(b).max() <= bound
    ag.manual_seed(0)
    np.testing.assert_array_equal(Conv2d(8, 16, 3, groups=2).weight.detach().numpy(), w)


@pytest.mark.parametrize("kwargs", [
    dict(groups=3), dict(groups=0), dict(groups=4), dict(padding="same", stride=2),
])
def test_module_errors_match_torch(kwargs):
    raises_like(lambda: Conv2d(4, 6, 3, **kwargs), lambda: torch.nn.Conv2d(4, 6, 3, **kwargs))


def test_padding_strings_and_modes_are_checked_and_only_zeros_is_implemented():
    # torch prints the set of modes in its hash order, which varies from run to run
    with pytest.raises(ValueError, match=r"padding_mode must be one of \{.*\}, but got "
                                         r"padding_mode='foo'"):
        Conv2d(4, 6, 3, padding_mode="foo")
    with pytest.raises(ValueError, match=r"Invalid padding string 'foo', should be one of \{"):
        Conv2d(4, 6, 3, padding="foo")
    with pytest.raises(NotImplementedError, match="padding_mode='reflect'"):
        Conv2d(4, 6, 3, padding_mode="reflect")


# ---- pooling ----

MAX_POOL_CASES = [
    dict(kernel_size=3),
    dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), ceil_mode=True),
    dict(kernel_size=2, stride=1),
]

AVG_POOL_CASES = [
    dict(kernel_size=3),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(2, 2), padding=(1, 1), ceil_mode=True),
    dict(kernel_size=2, divisor_override=3),
]


@pytest.mark.parametrize("opts", MAX_POOL_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 7, 6), (3, 6, 5)])
def test_max_pool2d_matches_torch_to_second_order(opts, shape):
    x = arr(shape)
    check_against_torch(_with(max_pool2d, opts), _with(TF.max_pool2d, opts), x)
    check_second_order(_with(max_pool2d, opts), _with(TF.max_pool2d, opts), x)


def test_max_pool2d_ties_indices_and_node_name_match_torch():
    x = np.round(arr((2, 3, 7, 6)) * 2) / 2  # many ties in overlapping windows
    x[0, 0, :3, :3] = 1.0
    opts = dict(kernel_size=3, stride=1, padding=1, return_indices=True)
    xs, ts = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (y, idx), (ty, t_idx) = max_pool2d(xs, **opts), TF.max_pool2d(ts, **opts)
    assert y.grad_fn.name() == ty.grad_fn.name() == "MaxPool2DWithIndicesBackward0"
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx.numpy(), t_idx.numpy())
    v = arr(tuple(ty.shape), 3)
    (g,) = ag.grad_sync(y, [xs], ag.tensor(v), create_graph=True)
    (tg,) = torch.autograd.grad(ty, [ts], torch.tensor(v), create_graph=True)
    assert g.grad_fn.name() == tg.grad_fn.name()
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("opts", AVG_POOL_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 7, 6), (3, 6, 5)])
def test_avg_pool2d_matches_torch_to_second_order(opts, shape):
    x = arr(shape)
    check_against_torch(_with(avg_pool2d, opts), _with(TF.avg_pool2d, opts), x)
    check_second_order(_with(avg_pool2d, opts), _with(TF.avg_pool2d, opts), x)


@pytest.mark.parametrize("size", [(7, 2), (None, 3), 1, (1, 1), (7, 6)])
@pytest.mark.parametrize("shape", [(2, 3, 7, 6), (3, 7, 6)])
def test_adaptive_avg_pool2d_matches_torch_to_second_order(size, shape):
    x = arr(shape)
    fn, torch_fn = _with(adaptive_avg_pool2d, dict(output_size=size)), _with(
        TF.adaptive_avg_pool2d, dict(output_size=size))
    check_against_torch(fn, torch_fn, x)
    xs, ts = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = fn(xs), torch_fn(ts)
    assert y.grad_fn.name() == ty.grad_fn.name()
    if y.grad_fn.name() == "MeanBackward1":  # the (1, 1) case: its gradient is constant
        (g,) = ag.grad_sync(y, [xs], ag.ones(*y.shape, dtype=y.dtype), create_graph=True)
        (tg,) = torch.autograd.grad(ty, [ts], torch.ones_like(ty), create_graph=True)
        assert not g.requires_grad and not tg.requires_grad
    else:
        check_second_order(fn, torch_fn, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn, torch_fn, opts", [
    (max_pool2d, TF.max_pool2d, dict(kernel_size=3, stride=2, padding=1)),
    (avg_pool2d, TF.avg_pool2d, dict(kernel_size=3, stride=2, padding=1)),
    (adaptive_avg_pool2d, TF.adaptive_avg_pool2d, dict(output_size=(4, 2))),
])
def test_pooling_keeps_float_dtypes_and_matches_torch(dtype, fn, torch_fn, opts):
    x = arr((2, 3, 8, 6)).astype(dtype)
    xs, ts = ag.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = fn(xs, **opts), torch_fn(ts, **opts)
    assert y.dtype == dtype and y.grad_fn.name() == ty.grad_fn.name()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
    v = arr(tuple(ty.shape), 3).astype(dtype)
    (g,) = ag.grad_sync(y, [xs], ag.tensor(v))
    (tg,) = torch.autograd.grad(ty, [ts], torch.tensor(v))
    assert g.dtype == dtype
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-6, atol=1e-7)


def test_integer_pooling_matches_torch():
    x = np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5) * 7 % 11 - 5
    for fn, torch_fn in ((max_pool2d, TF.max_pool2d), (avg_pool2d, TF.avg_pool2d)):
        y = fn(ag.tensor(x), 2, padding=1, ceil_mode=True)
        ty = torch_fn(torch.tensor(x), 2, padding=1, ceil_mode=True)
        assert y.dtype == np.int64
        np.testing.assert_array_equal(y.numpy(), ty.numpy())


def test_gradcheck_pooling():
    x = ag.tensor(arr((1, 2, 5, 4)), requires_grad=True)
    assert ag.gradcheck(lambda t: max_pool2d(t, 2, 1, 1, ceil_mode=True), (x,))
    assert ag.gradcheck(lambda t: avg_pool2d(t, 3, 2, 1, True, False), (x,))


P = np.zeros((2, 3, 7, 6))


@pytest.mark.parametrize("name, args, kwargs", [
    ("max_pool2d", (P, 3), dict(padding=2)),
    ("max_pool2d", (P, 3), dict(dilation=2, padding=2)),
    ("max_pool2d", (P, 8), {}),
    ("max_pool2d", (P, 0), {}),
    ("max_pool2d", (P, 2), dict(stride=0)),
    ("max_pool2d", (P, 2), dict(stride=-1)),
    ("max_pool2d", (P, 2), dict(dilation=0)),
    ("max_pool2d", (P, 2), dict(padding=-1)),
    ("max_pool2d", (P[0, 0], 2), {}),
    ("avg_pool2d", (P, 3), dict(padding=2)),
    ("avg_pool2d", (P, 8), {}),
    ("avg_pool2d", (P, 2), dict(stride=0)),
    ("adaptive_avg_pool2d", (P[0, 0], (1, 3)), {}),
    ("adaptive_avg_pool2d", (P, (1, 3, 4)), {}),
    ("adaptive_avg_pool2d", (P.astype(np.int64), (1, 3)), {}),
])
def test_pooling_errors_match_torch(name, args, kwargs):
    fn = {"max_pool2d": max_pool2d, "avg_pool2d": avg_pool2d,
          "adaptive_avg_pool2d": adaptive_avg_pool2d}[name]
    x, rest = args[0], args[1:]
    raises_like(lambda: fn(ag.tensor(x), *rest, **kwargs),
                 lambda: getattr(TF, name)(torch.tensor(x), *rest, **kwargs))


def test_adaptive_sizes_that_do_not_divide_are_not_implemented():
    with pytest.raises(NotImplementedError, match="must divide"):
        adaptive_avg_pool2d(ag.zeros(1, 1, 7, 6), (3, 3))


@pytest.mark.parametrize("cls, torch_cls, args, kwargs", [
    (MaxPool2d, torch.nn.MaxPool2d, (3,), {}),
    (MaxPool2d, torch.nn.MaxPool2d, ((3, 2), 2, 1, 2, True, True), {}),
    (AvgPool2d, torch.nn.AvgPool2d, (3,), {}),
    (AvgPool2d, torch.nn.AvgPool2d, (3, 2, 1, True, False, 2), {}),
    (AdaptiveAvgPool2d, torch.nn.AdaptiveAvgPool2d, ((2, None),), {}),
    (AdaptiveAvgPool2d, torch.nn.AdaptiveAvgPool2d, (1,), {}),
])
def test_pooling_modules_match_torch(cls, torch_cls, args, kwargs):
    m, tm = cls(*args, **kwargs), torch_cls(*args, **kwargs)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict()) == []
    for name in vars(tm):
        if not name.startswith("_") and name != "training":
            assert getattr(m, name) == getattr(tm, name), name
    x = arr((2, 3, 8, 6))
    y, ty = m(ag.tensor(x)), tm(torch.tensor(x))
    if isinstance(ty, tuple):
        np.testing.assert_array_equal(y[1].numpy(), ty[1].numpy())
        y, ty = y[0], ty[0]
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12)


# ---- other devices ----

def _kernel_like(t):
    return ag.tensor(arr((2, 1, 2, 2), 5), device=t.device)


FAKE_OPS = {
    "conv2d": lambda t: conv2d(t.reshape(1, 1, 2, 3), _kernel_like(t), padding=1) * 1,
    "conv1d": lambda t: conv1d(t.reshape(1, 1, 6), _kernel_like(t)[:, :, 0], padding=1) * 1,
    "max_pool2d": lambda t: max_pool2d(t.reshape(1, 2, 3), 2, 1, 1),
    "avg_pool2d": lambda t: avg_pool2d(t.reshape(1, 2, 3), 2, 1, 1, ceil_mode=True),
}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_ops_stay_on_their_device(fake_backend, name):
    check_on_fake_device(fake_backend, FAKE_OPS[name])


def test_max_pool2d_indices_stay_on_the_device(fake_backend):
    x = arr((1, 2, 3))
    _, idx = max_pool2d(ag.tensor(x, device="fake:1"), 2, 1, 1, return_indices=True)
    assert idx.device is ag.device("fake:1")
    _, expected = max_pool2d(ag.tensor(x), 2, 1, 1, return_indices=True)
    np.testing.assert_array_equal(fake_backend.to_host(idx.data), expected.numpy())
