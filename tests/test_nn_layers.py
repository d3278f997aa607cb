"""Dropout, Embedding, LayerNorm and the small activations, layers and losses.

PyTorch is the oracle for values, first- and second-order gradients, node names,
module reprs and errors; dropout's random mask is checked by its statistics.
"""

from __future__ import annotations

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
    raises_like,
)

import aiograd as ag
import aiograd.nn as nn
import aiograd.nn.functional as F

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")
TF = torch.nn.functional


# ---- dropout ----

def test_dropout_zeroes_about_p_and_scales_the_rest():
    ag.manual_seed(0)
    x = ag.ones(200, 500)
    y = F.dropout(x, 0.3).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    assert y.dtype == np.float32


def test_dropout_gradient_is_mask_over_keep_probability():
    x = leaf(arr((4, 6)))
    y = F.dropout(x, 0.4)
    assert y.grad_fn.name() == TF.dropout(torch.ones(2, requires_grad=True), 0.4).grad_fn.name()
    (g,) = ag.grad_sync(y.sum(), x)
    mask = (y.detach().numpy() != 0) / 0.6
    np.testing.assert_allclose(g.numpy(), mask)
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() * mask)


def test_dropout_is_reproducible_under_manual_seed():
    ag.manual_seed(7)
    a = F.dropout(ag.ones(50), 0.5).numpy()
    ag.manual_seed(7)
    b = F.dropout(ag.ones(50), 0.5).numpy()
    np.testing.assert_array_equal(a, b)


def test_dropout_passes_gradcheck_with_a_fixed_mask():
    x = leaf(arr((3, 4)))

    def fn(t):
        ag.manual_seed(3)
        return F.dropout(t, 0.5)

    assert ag.gradcheck(fn, (x,))


def test_dropout_returns_input_itself_in_eval_and_for_p_zero():
    x = leaf(arr((2, 3)))
    t = torch.ones(2, requires_grad=True)
    assert (F.dropout(x, 0.5, training=False) is x) == (TF.dropout(t, 0.5, training=False) is t)
    assert (F.dropout(x, 0.0) is x) == (TF.dropout(t, 0.0) is t)


def test_dropout_p_one_zeroes_everything_with_a_mul_node():
    x = leaf(arr((2, 3)))
    y = F.dropout(x, 1.0)
    assert not y.detach().numpy().any()
    assert y.grad_fn.name() == TF.dropout(torch.ones(2, requires_grad=True), 1.0).grad_fn.name()
    (g,) = ag.grad_sync(y.sum(), x)
    assert not g.numpy().any()


def test_dropout_inplace_writes_into_input():
    x = ag.ones(100)
    ag.manual_seed(1)
    y = F.dropout(x, 0.5, inplace=True)
    assert y is x
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}
    leaf_x = leaf(arr((3,)))
    raises_like(lambda: F.dropout(leaf_x, 0.5, inplace=True),
                 lambda: TF.dropout(torch.ones(3, requires_grad=True), 0.5, inplace=True))


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_dropout_rejects_p_outside_unit_interval(p):
    raises_like(lambda: F.dropout(ag.ones(3), p), lambda: TF.dropout(torch.ones(3), p))
    raises_like(lambda: nn.Dropout(p), lambda: torch.nn.Dropout(p))


def test_dropout_rejects_integer_input():
    raises_like(lambda: F.dropout(ag.tensor(np.arange(4)), 0.5),
                 lambda: TF.dropout(torch.arange(4), 0.5))


def test_dropout_module_repr_and_eval_identity():
    for args in ((), (0.2, True)):
        assert repr(nn.Dropout(*args)) == repr(torch.nn.Dropout(*args))
    m = nn.Dropout(0.5)
    x = ag.ones(1000)
    assert (m(x).numpy() == 0).any()
    m.eval()
    assert m(x) is x


# ---- embedding ----

INDICES = np.array([[0, 2, 2], [4, 1, 2]])


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_matches_torch_values_and_gradients(padding_idx):
    w = arr((5, 3))

    def fn(weight):
        return F.embedding(ag.tensor(INDICES), weight, padding_idx=padding_idx)

    def torch_fn(weight):
        return TF.embedding(torch.tensor(INDICES), weight, padding_idx=padding_idx)

    check_against_torch(fn, torch_fn, w)
    check_second_order(lambda t: fn(t) ** 2, lambda t: torch_fn(t) ** 2, w)


def test_embedding_passes_gradcheck():
    # Not with padding_idx: its row's zero gradient is by design, not the true derivative.
    assert ag.gradcheck(lambda w: F.embedding(ag.tensor(INDICES), w), (leaf(arr((5, 3))),))


def test_embedding_node_names_match_torch():
    w, tw = leaf(arr((5, 3))), torch.tensor(arr((5, 3)), requires_grad=True)
    y, ty = F.embedding(ag.tensor(INDICES), w), TF.embedding(torch.tensor(INDICES), tw)
    assert y.grad_fn.name() == ty.grad_fn.name()
    (g,) = ag.grad_sync((y ** 2).sum(), w, create_graph=True)
    (tg,) = torch.autograd.grad((ty ** 2).sum(), tw, create_graph=True)
    assert g.grad_fn.name() == tg.grad_fn.name()


def test_embedding_of_a_scalar_index_is_one_row():
    w = arr((5, 3))
    y = F.embedding(ag.tensor(np.array(3)), ag.tensor(w))
    np.testing.assert_array_equal(y.numpy(), w[3])


@pytest.mark.parametrize("bad", [np.array([5]), np.array([-1]), np.array([1.0])])
def test_embedding_rejects_bad_indices(bad):
    w = arr((5, 3))
    raises_like(lambda: F.embedding(ag.tensor(bad), ag.tensor(w)),
                 lambda: TF.embedding(torch.tensor(bad), torch.tensor(w)))


def test_embedding_rejects_a_weight_that_is_not_2d():
    raises_like(lambda: F.embedding(ag.tensor(INDICES), ag.ones(5)),
                 lambda: TF.embedding(torch.tensor(INDICES), torch.ones(5)))


@pytest.mark.parametrize("pad", [5, -6])
def test_embedding_rejects_padding_idx_out_of_range(pad):
    raises_like(lambda: F.embedding(ag.tensor(INDICES), ag.ones(5, 3), padding_idx=pad),
                 lambda: TF.embedding(torch.tensor(INDICES), torch.ones(5, 3), padding_idx=pad))
    raises_like(lambda: nn.Embedding(5, 3, padding_idx=pad),
                 lambda: torch.nn.Embedding(5, 3, padding_idx=pad))


def test_embedding_module_init_repr_and_padding_row():
    for kwargs in ({}, {"padding_idx": 1}, {"padding_idx": -1}):
        m, tm = nn.Embedding(10, 3, **kwargs), torch.nn.Embedding(10, 3, **kwargs)
        assert repr(m) == repr(tm)
        assert m.padding_idx == tm.padding_idx
        assert m.weight.shape == (10, 3) and m.weight.dtype == np.float32
    ag.manual_seed(0)
    m = nn.Embedding(2000, 50, padding_idx=3)
    w = m.weight.detach().numpy()
    assert not w[3].any()
    assert abs(w.mean()) < 0.01 and abs(w.std() - 1) < 0.01
    y = m(ag.tensor(np.array([3, 4, 3])))
    (g,) = ag.grad_sync(y.sum(), m.weight)
    assert not g.numpy()[3].any() and (g.numpy()[4] == 1).all()


# ---- layer_norm ----

LN_CASES = [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5,), (5,))]


@pytest.mark.parametrize(("shape", "normalized"), LN_CASES)
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm_matches_torch_first_and_second_order(shape, normalized, affine):
    arrays = [arr(shape, 1)]
    if affine != "none":
        arrays.append(arr(normalized, 2))
    if affine == "both":
        arrays.append(arr(normalized, 3))

    def fn(x, *wb):
        return F.layer_norm(x, normalized, *wb)

    def torch_fn(x, *wb):
        return TF.layer_norm(x, normalized, *wb)

    check_against_torch(fn, torch_fn, *arrays)
    check_second_order(fn, torch_fn, *arrays)
    assert ag.gradcheck(fn, tuple(leaf(a) for a in arrays))


def test_layer_norm_node_name_and_eps_match_torch():
    x, w = arr((3, 4)), arr((4,), 2)
    y = F.layer_norm(leaf(x), (4,), leaf(w), eps=0.5)
    ty = TF.layer_norm(torch.tensor(x, requires_grad=True), (4,), torch.tensor(w), eps=0.5)
    assert y.grad_fn.name() == ty.grad_fn.name()
    assert len(y.grad_fn.next_functions) == len(ty.grad_fn.next_functions)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-7)


def test_layer_norm_keeps_float32():
    x = np.float32(arr((2, 4)))
    y = F.layer_norm(ag.tensor(x), (4,))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), TF.layer_norm(torch.tensor(x), (4,)).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("args", [((5,),), ((4,), "w3"), ((4,), None, "w3"),
                                  ((2, 3, 4, 5),), (4,)])
def test_layer_norm_rejects_bad_shapes(args):
    x = arr((2, 3, 4))

    def build(lib):
        return tuple(lib.tensor(arr((3,))) if a == "w3" else a for a in args)

    raises_like(lambda: F.layer_norm(ag.tensor(x), *build(ag)),
                 lambda: TF.layer_norm(torch.tensor(x), *build(torch)))


@pytest.mark.parametrize("kwargs", [{}, {"eps": 1e-3, "elementwise_affine": False},
                                    {"bias": False}])
def test_layer_norm_module_matches_torch(kwargs):
    m, tm = nn.LayerNorm((3, 4), **kwargs), torch.nn.LayerNorm((3, 4), **kwargs)
    assert repr(m) == repr(tm)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    for (_, p), (_, tp) in zip(m.named_parameters(), tm.named_parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), tp.detach().numpy())
    x = np.float32(arr((2, 3, 4)))
    np.testing.assert_allclose(m(ag.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert repr(nn.LayerNorm(4)) == repr(torch.nn.LayerNorm(4))


# ---- flatten, softmax, log_softmax modules ----

@pytest.mark.parametrize("args", [(), (0, 1), (1, 2), (-2, -1)])
def test_flatten_module_matches_torch(args):
    x = arr((2, 3, 4))
    m, tm = nn.Flatten(*args), torch.nn.Flatten(*args)
    assert repr(m) == repr(tm)
    np.testing.assert_array_equal(m(ag.tensor(x)).numpy(), tm(torch.tensor(x)).numpy())
    check_against_torch(m, tm, x)


@pytest.mark.parametrize("cls", ["Softmax", "LogSoftmax"])
def test_softmax_modules_match_torch(cls):
    x = arr((3, 4))
    for dim in (0, 1, -1):
        m, tm = getattr(nn, cls)(dim), getattr(torch.nn, cls)(dim=dim)
        assert repr(m) == repr(tm)
        check_against_torch(m, tm, x)
        assert m(leaf(x)).grad_fn.name() == tm(torch.tensor(x, requires_grad=True)).grad_fn.name()
    assert repr(getattr(nn, cls)()) == repr(getattr(torch.nn, cls)())
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        y = getattr(nn, cls)()(ag.tensor(x))
    with pytest.warns(UserWarning):
        ty = getattr(torch.nn, cls)()(torch.tensor(x))
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12)


# ---- leaky_relu ----

@pytest.mark.parametrize("slope", [0.01, 0.2, -0.5])
def test_leaky_relu_matches_torch_first_and_second_order(slope):
    x = arr((3, 5))
    x[0, 0] = 0.0  # torch's gradient at 0 is the slope's
    check_against_torch(lambda t: F.leaky_relu(t, slope), lambda t: TF.leaky_relu(t, slope), x)
    check_second_order(lambda t: F.leaky_relu(t, slope) ** 2,
                       lambda t: TF.leaky_relu(t, slope) ** 2, x)
    assert ag.gradcheck(lambda t: F.leaky_relu(t, slope), (leaf(arr((3, 5))),))


def test_leaky_relu_create_graph_gradient_requires_grad_as_pytorchs():
    # Its slope is piecewise constant: PyTorch records LeakyReluBackwardBackward0 anyway,
    # so the gradient requires grad and its own gradient w.r.t. the input is zeros.
    def run(lib, functional, grad):
        x = lib.tensor(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
        (g,) = grad(functional.leaky_relu(x, 0.2).sum(), x, create_graph=True)
        return g.requires_grad, g.grad_fn.name(), grad(g.sum(), x)[0].tolist()

    assert run(ag, F, ag.grad_sync) == run(torch, TF, torch.autograd.grad)


def test_leaky_relu_node_names_match_torch():
    x = arr((4,))
    y = F.leaky_relu(leaf(x))
    ty = TF.leaky_relu(torch.tensor(x, requires_grad=True))
    assert y.grad_fn.name() == ty.grad_fn.name()
    a, ta = leaf(x) * 1, torch.tensor(x, requires_grad=True) * 1
    F.leaky_relu(a, 0.1, inplace=True)
    TF.leaky_relu(ta, 0.1, inplace=True)
    assert a.grad_fn.name() == ta.grad_fn.name()


def test_leaky_relu_inplace_matches_torch_gradient():
    x = arr((6,))
    xl, tl = leaf(x), torch.tensor(x, requires_grad=True)
    a, ta = xl * 2, tl * 2
    assert F.leaky_relu(a, 0.1, inplace=True) is a
    assert TF.leaky_relu(ta, 0.1, inplace=True) is ta
    np.testing.assert_allclose(a.detach().numpy(), ta.detach().numpy())
    (g,) = ag.grad_sync((a ** 2).sum(), xl)
    (tg,) = torch.autograd.grad((ta ** 2).sum(), tl)
    np.testing.assert_allclose(g.numpy(), tg.numpy())


def test_leaky_relu_errors_match_torch():
    raises_like(lambda: F.leaky_relu(ag.tensor(np.arange(3))),
                 lambda: TF.leaky_relu(torch.arange(3)))
    with pytest.raises(RuntimeError) as expected:
        TF.leaky_relu(torch.ones(3, requires_grad=True) * 1, -0.1, inplace=True).sum().backward()
    first_sentence = str(expected.value).split(". ")[0]
    with pytest.raises(RuntimeError, match=re.escape(first_sentence)):
        F.leaky_relu(leaf(arr((3,))) * 1, -0.1, inplace=True)


def test_leaky_relu_module_repr_matches_torch():
    for args in ((), (0.2,), (0.2, True)):
        assert repr(nn.LeakyReLU(*args)) == repr(torch.nn.LeakyReLU(*args))
    x = arr((5,))
    np.testing.assert_allclose(nn.LeakyReLU(0.3)(ag.tensor(x)).numpy(),
                               torch.nn.LeakyReLU(0.3)(torch.tensor(x)).numpy())


# ---- erf and gelu ----

def test_erf_is_float32_accurate_against_math_erf():
    from aiograd._ops.nn_extra import erf

    z = np.linspace(-6, 6, 4001)
    expected = np.array([math.erf(v) for v in z])
    np.testing.assert_allclose(erf(ag.tensor(z)).numpy(), expected, rtol=0, atol=1.2e-7)
    z32 = z.astype(np.float32)
    got = erf(ag.tensor(z32)).numpy()
    assert got.dtype == np.float32
    expected32 = np.array([math.erf(v) for v in z32.astype(np.float64)])
    np.testing.assert_allclose(got, expected32, rtol=0, atol=3e-7)
    assert ag.gradcheck(erf, (leaf(arr((5,))),))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch_first_and_second_order(approximate):
    x = arr((3, 5)) * 2
    tol = 1e-12  # float64: erf is libm's (float32 arrays take a ~1e-7 approximation)
    xs, ts = leaf(x), torch.tensor(x, requires_grad=True)
    y, ty = F.gelu(xs, approximate=approximate), TF.gelu(ts, approximate=approximate)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=0, atol=tol)
    assert y.grad_fn.name() == ty.grad_fn.name()
    (g,) = ag.grad_sync((y ** 2).sum(), xs, create_graph=True)
    (tg,) = torch.autograd.grad((ty ** 2).sum(), ts, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=0, atol=10 * tol)
    (gg,) = ag.grad_sync(g.sum(), xs)
    (tgg,) = torch.autograd.grad(tg.sum(), ts)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=0, atol=10 * tol)
    assert ag.gradcheck(lambda t: F.gelu(t, approximate=approximate), (leaf(x),))


def test_gelu_keeps_float32_and_matches_torch():
    x = np.float32(arr((50,)) * 3)
    for approximate in ("none", "tanh"):
        np.testing.assert_allclose(F.gelu(ag.tensor(x), approximate=approximate).numpy(),
                                   TF.gelu(torch.tensor(x), approximate=approximate).numpy(),
                                   rtol=1e-6, atol=1e-6)


def test_gelu_errors_and_module_repr_match_torch():
    raises_like(lambda: F.gelu(ag.ones(2), approximate="foo"),
                 lambda: TF.gelu(torch.ones(2), approximate="foo"))
    raises_like(lambda: nn.GELU("foo")(ag.ones(2)), lambda: torch.nn.GELU("foo")(torch.ones(2)))
    raises_like(lambda: F.gelu(ag.tensor(np.arange(3))), lambda: TF.gelu(torch.arange(3)))
    for args in ((), ("tanh",)):
        assert repr(nn.GELU(*args)) == repr(torch.nn.GELU(*args))


# ---- l1_loss ----

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_l1_loss_matches_torch(reduction):
    x, t = arr((3, 4), 1), arr((3, 4), 2)

    def fn(a, b):
        return F.l1_loss(a, b, reduction=reduction)

    def torch_fn(a, b):
        return TF.l1_loss(a, b, reduction=reduction)

    check_against_torch(fn, torch_fn, x, t)
    check_second_order(lambda a, b: fn(a, b) * fn(a, b).sum(),
                       lambda a, b: torch_fn(a, b) * torch_fn(a, b).sum(), x, t)
    y, ty = fn(leaf(x), leaf(t)), torch_fn(torch.tensor(x, requires_grad=True), torch.tensor(t))
    assert y.grad_fn.name() == ty.grad_fn.name()
    assert ag.gradcheck(fn, (leaf(x), leaf(t)))
    m, tm = nn.L1Loss(reduction=reduction), torch.nn.L1Loss(reduction=reduction)
    assert repr(m) == repr(tm)
    np.testing.assert_allclose(m(ag.tensor(x), ag.tensor(t)).numpy(),
                               tm(torch.tensor(x), torch.tensor(t)).numpy(), rtol=1e-12)


def test_l1_loss_errors_and_warning_match_torch():
    x = arr((3, 4))
    with pytest.warns(UserWarning, match="Using a target size"):
        y = F.l1_loss(ag.tensor(x), ag.tensor(arr((4,))))
    with pytest.warns(UserWarning, match="Using a target size"):
        ty = TF.l1_loss(torch.tensor(x), torch.tensor(arr((4,))))
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.l1_loss(ag.tensor(x), ag.tensor(x), reduction="avg")
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        TF.l1_loss(torch.tensor(x), torch.tensor(x), reduction="avg")
    raises_like(lambda: F.l1_loss(ag.tensor(np.arange(3)), ag.tensor(np.arange(3))),
                 lambda: TF.l1_loss(torch.arange(3), torch.arange(3)))
    with pytest.warns(UserWarning):
        raises_like(lambda: F.l1_loss(ag.tensor(x), ag.tensor(arr((5,)))),
                     lambda: TF.l1_loss(torch.tensor(x), torch.tensor(arr((5,)))))


# ---- other devices ----

FAKE_OPS = {
    "dropout_eval": lambda t: F.dropout(t, 0.5, training=False) * 1,
    "layer_norm": lambda t: F.layer_norm(t, (3,)) * t,
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "gelu": lambda t: F.gelu(t),
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "embedding": lambda t: F.embedding(np.array([1, 0, 1]), t),
}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_new_ops_stay_on_their_device(fake_backend, name):
    # A device array's erf is the float32-accurate one; the CPU's float64 one is libm's.
    check_on_fake_device(fake_backend, FAKE_OPS[name], rtol=1e-6 if name == "gelu" else 1e-7)


def test_dropout_mask_is_made_on_the_input_device(fake_backend):
    x = ag.ones(4, 5, device="fake:1", requires_grad=True)
    y = F.dropout(x, 0.5)
    assert y.device is ag.device("fake:1")
    (g,) = ag.grad_sync(y.sum(), x)
    assert g.device is ag.device("fake:1")
    np.testing.assert_array_equal(fake_backend.to_host(g.data), fake_backend.to_host(y.data))
