"""aiograd._ops.nn_more and aiograd.nn._more against PyTorch: losses (BCE, BCE with
logits, smooth L1, Huber, KL divergence), activations (silu, elu, softplus, mish,
hardtanh, relu6, logsigmoid, softsign), one_hot, normalize, cosine_similarity and pad."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import aiograd as ag
from aiograd._ops import nn_more as F
from aiograd.nn import _more as nn
from tests.oracles import arr, check_against_torch, check_on_fake_device, check_second_order

pytestmark = pytest.mark.timeout(60)
torch = pytest.importorskip("torch")
TF = torch.nn.functional

X = arr((3, 4), seed=3) * 3
X[0, :3] = (0.0, 1.0, -1.0)  # hardtanh's and relu's kinks, elu's switch
P = 1 / (1 + np.exp(-arr((3, 4), seed=4)))
T = np.random.default_rng(5).random((3, 4))
W = np.random.default_rng(6).random(4)


def _grad_fn_name(t):
    return None if t.grad_fn is None else t.grad_fn.name()


ACTIVATIONS = {
    "silu": (F.silu, TF.silu),
    "mish": (F.mish, TF.mish),
    "elu": (lambda a: F.elu(a, 0.7), lambda a: TF.elu(a, 0.7)),
    "softplus": (F.softplus, TF.softplus),
    "softplus_beta": (lambda a: F.softplus(a, 2.0, 3.0), lambda a: TF.softplus(a, 2.0, 3.0)),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid),
    "hardtanh": (lambda a: F.hardtanh(a, -1.5, 2.0), lambda a: TF.hardtanh(a, -1.5, 2.0)),
    "relu6": (F.relu6, TF.relu6),
    "softsign": (F.softsign, TF.softsign),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_float64_first_and_second_order(name):
    fn, tfn = ACTIVATIONS[name]
    check_against_torch(fn, tfn, X)
    check_second_order(fn, tfn, X)
    assert _grad_fn_name(fn(ag.tensor(X, requires_grad=True))) == tfn(
        torch.tensor(X, requires_grad=True)).grad_fn.name()


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_float32(name):
    fn, tfn = ACTIVATIONS[name]
    x32 = (X * 10).astype(np.float32)  # overflow territory for exp
    x = ag.tensor(x32, requires_grad=True)
    tx = torch.tensor(x32, requires_grad=True)
    y, ty = fn(x), tfn(tx)
    assert y.dtype == ag.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-6, atol=1e-6)
    (g,) = ag.grad_sync(y.sum(), [x])
    (tg,) = torch.autograd.grad(ty.sum(), [tx])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=2e-6, atol=1e-6)


INPLACE = {
    "silu": (F.silu, TF.silu),
    "mish": (F.mish, TF.mish),
    "elu": (lambda a, inplace: F.elu(a, 0.5, inplace), lambda a, inplace: TF.elu(a, 0.5, inplace)),
    "hardtanh": (F.hardtanh, TF.hardtanh),
    "relu6": (F.relu6, TF.relu6),
}


@pytest.mark.parametrize("name", INPLACE)
def test_activation_inplace(name):
    fn, tfn = INPLACE[name]
    x = ag.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    y = x * 1
    ty = tx * 1
    v = y._version
    out = fn(y, inplace=True)
    t_out = tfn(ty, inplace=True)
    assert out is y and y._version == v + 1
    assert _grad_fn_name(out) == t_out.grad_fn.name()
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12)
    (g,) = ag.grad_sync(out, [x], ag.tensor(T))
    (tg,) = torch.autograd.grad(t_out, [tx], torch.tensor(T))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12)


def test_activation_inplace_without_grad_and_in_place_errors():
    x = ag.tensor(X.copy())
    assert F.hardtanh(x, inplace=True) is x
    np.testing.assert_array_equal(x.numpy(), np.clip(X, -1, 1))
    leaf = ag.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        F.silu(leaf, inplace=True)
    with pytest.raises(RuntimeError, match="In-place elu backward"):
        F.elu(leaf * 1, -1.0, inplace=True)
    np.testing.assert_allclose(F.elu(ag.tensor(X), -1.0).numpy(),
                               TF.elu(torch.tensor(X), -1.0).numpy())


@pytest.mark.parametrize("fn,kernel", [(F.silu, "silu"), (F.elu, "elu"),
                                       (F.softplus, "softplus"), (F.mish, "mish"),
                                       (F.logsigmoid, "log_sigmoid")])
def test_activation_integer_input_raises(fn, kernel):
    with pytest.raises(NotImplementedError, match=f'"{kernel}_cpu" not implemented for'):
        fn(ag.arange(3))


def test_hardtanh_integer_and_bound_errors():
    np.testing.assert_array_equal(F.hardtanh(ag.arange(3)).numpy(), [0, 1, 1])
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(ag.tensor(X), 2.0, 1.0)
    with pytest.raises(AssertionError):
        nn.Hardtanh(2.0, 1.0)


# ---- losses ----

LOSSES = {
    "bce": (lambda a, b, r: F.binary_cross_entropy(a, b, reduction=r),
            lambda a, b, r: TF.binary_cross_entropy(a, b, reduction=r), P),
    "bce_weight": (lambda a, b, r: F.binary_cross_entropy(a, b, ag.tensor(W), reduction=r),
                   lambda a, b, r: TF.binary_cross_entropy(a, b, torch.tensor(W), reduction=r),
                   P),
    "bce_logits": (lambda a, b, r: F.binary_cross_entropy_with_logits(a, b, reduction=r),
                   lambda a, b, r: TF.binary_cross_entropy_with_logits(a, b, reduction=r), X),
    "bce_logits_weights": (
        lambda a, b, r: F.binary_cross_entropy_with_logits(
            a, b, ag.tensor(W), reduction=r, pos_weight=ag.tensor(W * 3)),
        lambda a, b, r: TF.binary_cross_entropy_with_logits(
            a, b, torch.tensor(W), reduction=r, pos_weight=torch.tensor(W * 3)), X),
    "smooth_l1": (lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.5),
                  lambda a, b, r: TF.smooth_l1_loss(a, b, reduction=r, beta=0.5), X),
    "smooth_l1_beta0": (lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.0),
                        lambda a, b, r: TF.smooth_l1_loss(a, b, reduction=r, beta=0.0), X),
    "huber": (lambda a, b, r: F.huber_loss(a, b, r, 0.5),
              lambda a, b, r: TF.huber_loss(a, b, r, 0.5), X),
    "kl_div": (lambda a, b, r: F.kl_div(a, b, reduction=r),
               lambda a, b, r: TF.kl_div(a, b, reduction=r), X),
    "kl_div_log_target": (lambda a, b, r: F.kl_div(a, b, reduction=r, log_target=True),
                          lambda a, b, r: TF.kl_div(a, b, reduction=r, log_target=True), X),
}


@pytest.mark.filterwarnings("ignore:reduction. 'mean'")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", LOSSES)
def test_loss_float64_first_and_second_order(name, reduction):
    fn, tfn, inputs = LOSSES[name]
    target = T.copy()
    if name == "kl_div":
        target[1, 1] = 0.0  # xlogy's zero
    check_against_torch(lambda a, b: fn(a, b, reduction), lambda a, b: tfn(a, b, reduction),
                        inputs, target)
    check_second_order(lambda a, b: fn(a, b, reduction), lambda a, b: tfn(a, b, reduction),
                       inputs, target)
    out = fn(ag.tensor(inputs, requires_grad=True), ag.tensor(target), reduction)
    t_out = tfn(torch.tensor(inputs, requires_grad=True), torch.tensor(target), reduction)
    assert _grad_fn_name(out) == t_out.grad_fn.name()


@pytest.mark.parametrize("name", LOSSES)
def test_loss_float32(name):
    fn, tfn, inputs = LOSSES[name]
    a32, t32 = inputs.astype(np.float32), T.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = ag.tensor(a32, requires_grad=True)
        tx = torch.tensor(a32, requires_grad=True)
        y, ty = fn(x, ag.tensor(t32), "sum"), tfn(tx, torch.tensor(t32), "sum")
    assert y.dtype == ag.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    (g,) = ag.grad_sync(y, [x])
    (tg,) = torch.autograd.grad(ty, [tx])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-7)


def test_kl_div_batchmean_and_mean_warning():
    check_against_torch(lambda a, b: F.kl_div(a, b, reduction="batchmean"),
                        lambda a, b: TF.kl_div(a, b, reduction="batchmean"), X, T)
    with pytest.warns(UserWarning, match="'mean' divides the total loss"):
        F.kl_div(ag.tensor(X), ag.tensor(T))
    t = ag.tensor(T, requires_grad=True)
    losses = F.kl_div(ag.tensor(X), t, reduction="none")
    assert losses.grad_fn.next_functions[0][0].name() == "XlogyBackward0"
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.kl_div(ag.tensor(X), ag.tensor(T), reduction="foo")


def test_bce_clamps_log_at_minus_100():
    x = ag.tensor([0.0, 1.0, 0.0, 1.0], requires_grad=True)
    t = ag.tensor([1.0, 0.0, 0.0, 1.0])
    tx = torch.tensor([0.0, 1.0, 0.0, 1.0], requires_grad=True)
    out = F.binary_cross_entropy(x, t, reduction="none")
    t_out = TF.binary_cross_entropy(tx, torch.tensor([1.0, 0.0, 0.0, 1.0]), reduction="none")
    np.testing.assert_array_equal(out.detach().numpy(), t_out.detach().numpy())
    (g,) = ag.grad_sync(out.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), torch.autograd.grad(t_out.sum(), [tx])[0].numpy())


def test_bce_logits_large_logits_stay_finite():
    x = np.array([-1000.0, 1000.0, 0.0], dtype=np.float32)
    t = np.array([1.0, 0.0, 0.5], dtype=np.float32)
    out = F.binary_cross_entropy_with_logits(ag.tensor(x), ag.tensor(t), reduction="none")
    expected = TF.binary_cross_entropy_with_logits(torch.tensor(x), torch.tensor(t),
                                                   reduction="none")
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)


def test_loss_errors():
    p, t = ag.tensor(P), ag.tensor(T)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(p * 2, t)
    with pytest.raises(ValueError, match=r"Using a target size \(torch.Size\(\[4\]\)\)"):
        F.binary_cross_entropy(p, t[0])
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        F.binary_cross_entropy(p.float(), t)
    with pytest.raises(ValueError, match=r"Target size \(torch.Size\(\[4\]\)\) must be the same"):
        F.binary_cross_entropy_with_logits(p, t[0])
    w = ag.tensor(W, requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        F.binary_cross_entropy(p, t, w)
    with pytest.raises(RuntimeError, match="argument 'pos_weight'"):
        F.binary_cross_entropy_with_logits(p, t, pos_weight=w)
    with pytest.raises(RuntimeError, match="does not support negative values for beta"):
        F.smooth_l1_loss(p, t, beta=-1.0)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        F.huber_loss(p, t, delta=0.0)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.binary_cross_entropy(p, t, reduction="foo")
    with pytest.warns(UserWarning, match="target size"):
        F.smooth_l1_loss(p, t[:1])


# ---- one_hot, normalize, cosine_similarity, pad ----

def test_one_hot():
    idx = np.array([[0, 3], [2, 1]])
    out = F.one_hot(ag.tensor(idx))
    assert out.dtype == ag.int64 and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), TF.one_hot(torch.tensor(idx)).numpy())
    np.testing.assert_array_equal(F.one_hot(ag.tensor(idx), 6).numpy(),
                                  TF.one_hot(torch.tensor(idx), 6).numpy())
    assert F.one_hot(ag.tensor(np.zeros(0, np.int64)), 3).shape == (0, 3)
    for bad, n, message in [(np.array([1.0]), -1, "only applicable to index tensor"),
                            (np.array([-1]), -1, "must be non-negative"),
                            (np.array([3]), 3, "must be smaller than num_classes"),
                            (np.zeros(0, np.int64), -1, "Can not infer total number")]:
        with pytest.raises(RuntimeError, match=message):
            F.one_hot(ag.tensor(bad), n)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1)])
def test_normalize(p, dim):
    x = X.copy()
    x[1] = 0.0  # a zero row: clamped by eps
    check_against_torch(lambda a: F.normalize(a, p, dim), lambda a: TF.normalize(a, p, dim), x)
    check_second_order(lambda a: F.normalize(a, p, dim), lambda a: TF.normalize(a, p, dim), X)


@pytest.mark.parametrize("shapes,dim", [(((3, 4), (3, 4)), 1), (((3, 4), (1, 4)), 0),
                                        (((2, 3, 4), (3, 4)), -1)])
def test_cosine_similarity(shapes, dim):
    a, b = arr(shapes[0], seed=7), arr(shapes[1], seed=8)
    check_against_torch(lambda u, v: F.cosine_similarity(u, v, dim),
                        lambda u, v: TF.cosine_similarity(u, v, dim), a, b)
    check_second_order(lambda u, v: F.cosine_similarity(u, v, dim),
                       lambda u, v: TF.cosine_similarity(u, v, dim), a, b)


def test_cosine_similarity_tiny_norm_gradient_passes_the_clamp():
    a = np.array([[1e-10, 0.0], [1.0, 2.0]])
    b = np.array([[1.0, 1.0], [0.5, -1.0]])
    check_against_torch(lambda u, v: F.cosine_similarity(u, v, eps=1e-6),
                        lambda u, v: TF.cosine_similarity(u, v, eps=1e-6), a, b)


@pytest.mark.parametrize("pads", [(1, 2), (1, -2, 2, 1), (0, 0, -1, 3), (2, -4), (-3, 3, 1, 1)])
def test_pad_constant(pads):
    check_against_torch(lambda a: F.pad(a, pads, value=1.5),
                        lambda a: TF.pad(a, pads, value=1.5), X)
    assert _grad_fn_name(F.pad(ag.tensor(X, requires_grad=True), pads)) == "ConstantPadNdBackward0"


def test_pad_create_graph_records_pad_and_float32():
    x = ag.tensor(X.astype(np.float32), requires_grad=True)
    v = ag.tensor(np.ones((3, 7), np.float32), requires_grad=True)
    (g,) = ag.grad_sync(F.pad(x, (1, 2)), [x], v, create_graph=True)
    assert g.dtype == ag.float32 and _grad_fn_name(g) == "ConstantPadNdBackward0"
    np.testing.assert_array_equal(g.detach().numpy(), np.ones((3, 4)))


def test_pad_integer_and_errors():
    out = F.pad(ag.arange(3), (1, 1), value=2.5)
    np.testing.assert_array_equal(out.numpy(), TF.pad(torch.arange(3), (1, 1), value=2.5).numpy())
    assert out.dtype == ag.int64
    x = ag.tensor(P[0])
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(RuntimeError, match="padding length 4 and input of dimension 1"):
        F.pad(x, (1, 1, 1, 1))
    for cropped_past_the_end in [(-3, -3), (5, -5)]:
        with pytest.raises(RuntimeError, match="length must be non-negative"):
            F.pad(x, cropped_past_the_end)
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode foo"):
        F.pad(x, (1, 1), mode="foo")


# ---- modules ----

MODULES = [
    (lambda m: m.SiLU(), "SiLU()"), (lambda m: m.SiLU(True), "SiLU(inplace=True)"),
    (lambda m: m.Mish(), "Mish()"), (lambda m: m.ELU(), "ELU(alpha=1.0)"),
    (lambda m: m.ELU(0.5, True), "ELU(alpha=0.5, inplace=True)"),
    (lambda m: m.Softplus(2, 10), "Softplus(beta=2, threshold=10)"),
    (lambda m: m.Hardtanh(-2, 3, True), "Hardtanh(min_val=-2, max_val=3, inplace=True)"),
    (lambda m: m.ReLU6(), "ReLU6()"), (lambda m: m.ReLU6(True), "ReLU6(inplace=True)"),
    (lambda m: m.LogSigmoid(), "LogSigmoid()"), (lambda m: m.Softsign(), "Softsign()"),
    (lambda m: m.HuberLoss("sum", 2.0), "HuberLoss()"),
    (lambda m: m.SmoothL1Loss(reduction="sum", beta=0.5), "SmoothL1Loss()"),
    (lambda m: m.KLDivLoss(reduction="batchmean", log_target=True), "KLDivLoss()"),
]


@pytest.mark.parametrize("make,expected", MODULES)
def test_module_repr_attributes_and_forward(make, expected):
    mod, t_mod = make(nn), make(torch.nn)
    assert repr(mod) == repr(t_mod) == expected
    public = {k: v for k, v in vars(t_mod).items() if not k.startswith("_") and k != "training"}
    for key, value in public.items():
        assert getattr(mod, key) == value
    args = (X,) if "Loss" not in expected else (X, T)
    out = mod(*(ag.tensor(a) for a in args))
    t_out = t_mod(*(torch.tensor(a) for a in args))
    np.testing.assert_allclose(out.numpy(), t_out.numpy(), rtol=1e-12)


def test_bce_modules_buffers_and_forward():
    w, pw = ag.tensor(W), ag.tensor(W * 2)
    bce = nn.BCELoss(w, reduction="sum")
    assert list(bce.state_dict()) == ["weight"] and repr(bce) == "BCELoss()"
    assert list(nn.BCELoss().state_dict()) == []
    np.testing.assert_allclose(
        bce(ag.tensor(P), ag.tensor(T)).numpy(),
        torch.nn.BCELoss(torch.tensor(W), reduction="sum")(torch.tensor(P), torch.tensor(T)))
    logits = nn.BCEWithLogitsLoss(w, pos_weight=pw)
    assert list(logits.state_dict()) == ["weight", "pos_weight"]
    assert list(nn.BCEWithLogitsLoss(pos_weight=pw).state_dict()) == ["pos_weight"]
    t_logits = torch.nn.BCEWithLogitsLoss(torch.tensor(W), pos_weight=torch.tensor(W * 2))
    np.testing.assert_allclose(logits(ag.tensor(X), ag.tensor(T)).numpy(),
                               t_logits(torch.tensor(X), torch.tensor(T)))


ON_DEVICE = {
    "silu": F.silu, "mish": F.mish, "elu": F.elu, "softplus": F.softplus,
    "logsigmoid": F.logsigmoid, "hardtanh": F.hardtanh,
    "bce_logits": lambda a: F.binary_cross_entropy_with_logits(a, a.detach().sigmoid()),
    "bce": lambda a: F.binary_cross_entropy(a.sigmoid(), a.detach().sigmoid() * 0.5),
    "smooth_l1": lambda a: F.smooth_l1_loss(a, a.detach() * 0.5),
    "huber": lambda a: F.huber_loss(a, a.detach() * 0.5),
    "kl_div": lambda a: F.kl_div(a, a.detach().sigmoid(), reduction="batchmean"),
    "normalize": F.normalize,
    "cosine_similarity": lambda a: F.cosine_similarity(a, a.detach() + 1),
    "pad": lambda a: F.pad(a, (1, -1, 2, 0), value=3.0),
}


@pytest.mark.parametrize("name", ON_DEVICE)
def test_ops_stay_on_their_device(fake_backend, name):
    check_on_fake_device(fake_backend, ON_DEVICE[name])


def test_one_hot_on_device(fake_backend):
    out = F.one_hot(ag.tensor(np.array([2, 0]), device="fake:1"))
    assert out.device is ag.device("fake:1")
    np.testing.assert_array_equal(fake_backend.to_host(out.data), [[0, 0, 1], [1, 0, 0]])


def test_pad_makes_its_result_on_the_input_device(fake_backend):
    x = ag.tensor(arr((2, 3)), device="fake:1", requires_grad=True)
    out = F.pad(x, (1, 1))
    assert fake_backend.to_host(out.data).shape == (2, 5) and out.data.fake_index == 1


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_huber_loss_weight(reduction):
    w = np.random.default_rng(9).random((3, 4))
    fn = lambda a, b: F.huber_loss(a, b, reduction, 0.5, ag.tensor(w))  # noqa: E731
    tfn = lambda a, b: TF.huber_loss(a, b, reduction, 0.5, torch.tensor(w))  # noqa: E731
    check_against_torch(fn, tfn, X, T)
    check_second_order(fn, tfn, X, T)
    names = []
    node = fn(ag.tensor(X, requires_grad=True), ag.tensor(T)).grad_fn
    while node is not None:
        names.append(node.name())
        node = node.next_functions[0][0] if node.next_functions else None
    expected = {"mean": ["MeanBackward0"], "sum": ["SumBackward0"], "none": []}[reduction]
    assert names[:-1] == expected + ["MulBackward0", "HuberLossBackward0"]
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        F.huber_loss(ag.tensor(X), ag.tensor(T), weight=ag.tensor(W))


@pytest.mark.parametrize("name", INPLACE)
def test_activation_inplace_second_order(name):
    fn, tfn = INPLACE[name]
    check_second_order(lambda a: fn(a * 1, inplace=True), lambda a: tfn(a * 1, inplace=True), X)


@pytest.mark.parametrize("name,x_dtype,t_dtype", [
    ("bce_logits", np.float32, np.float64), ("bce_logits", np.float64, np.float32),
    ("smooth_l1", np.float32, np.float64), ("smooth_l1", np.float32, np.int64),
    ("kl_div", np.float32, np.float64),
])
def test_loss_mixed_dtypes(name, x_dtype, t_dtype):
    fn, tfn, inputs = LOSSES[name]
    a, t = inputs.astype(x_dtype), (T * 3).astype(t_dtype)
    x, tx = ag.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y, ty = fn(x, ag.tensor(t), "sum"), tfn(tx, torch.tensor(t), "sum")
    assert str(y.dtype) == str(ty.dtype).removeprefix("torch.")
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5)
    (g,) = ag.grad_sync(y, [x])
    (tg,) = torch.autograd.grad(ty, [tx])
    assert g.dtype == x.dtype
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-5, atol=1e-6)


def test_dtype_errors():
    x = ag.tensor(X)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        F.binary_cross_entropy_with_logits(x, ag.ones(3, 4, dtype=ag.int64))
    with pytest.raises(RuntimeError, match="Found dtype Float but expected Double"):
        F.huber_loss(x, x.float())
    with pytest.raises(RuntimeError, match="kl_div: Integral inputs not supported"):
        F.kl_div(x, ag.ones(3, 4, dtype=ag.int64), reduction="sum")
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(2\) must match"):
        F.cosine_similarity(ag.ones(2, 3), ag.ones(3, 3))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pads", [((3, 4), (1, 2)), ((2, 3, 4), (3, 3)), ((2, 3, 4), (-1, 2)),
                                        ((2, 3, 4), (2, 2, 1, 1)), ((2, 3, 4, 5), (1, 0, 2, 1)),
                                        ((1, 2, 3, 4, 5), (1, 2, 2, 1, 0, 1))])
def test_pad_reflect_and_replicate(mode, shape, pads):
    if mode == "replicate" and shape == (3, 4):
        pads = (5, 6)  # replicate takes pads beyond the size
    fn = lambda a: F.pad(a, pads, mode)  # noqa: E731
    tfn = lambda a: TF.pad(a, pads, mode)  # noqa: E731
    x = arr(shape, seed=11)
    check_against_torch(fn, tfn, x)
    out, t_out = fn(ag.tensor(x, requires_grad=True)), tfn(torch.tensor(x, requires_grad=True))
    assert _grad_fn_name(out) == t_out.grad_fn.name()
    v = arr(tuple(t_out.shape), seed=12)
    x_ag, v_ag = ag.tensor(x, requires_grad=True), ag.tensor(v, requires_grad=True)
    (g,) = ag.grad_sync(fn(x_ag), [x_ag], v_ag, create_graph=True)
    x_t, v_t = torch.tensor(x, requires_grad=True), torch.tensor(v, requires_grad=True)
    (tg,) = torch.autograd.grad(tfn(x_t), [x_t], v_t, create_graph=True)
    assert _grad_fn_name(g) == tg.grad_fn.name()
    w = arr(shape, seed=13)
    (gv,) = ag.grad_sync((g * ag.tensor(w)).sum(), [v_ag])
    (tgv,) = torch.autograd.grad((tg * torch.tensor(w)).sum(), [v_t])
    np.testing.assert_allclose(gv.numpy(), tgv.numpy(), rtol=1e-12)


def test_pad_mode_errors():
    x = ag.tensor(arr((2, 3, 4)))
    with pytest.raises(RuntimeError, match=r"padding \(4, 0\) at dimension 2 of input \[2, 3, 4\]"):
        F.pad(x, (4, 0), "reflect")
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 1D input"):
        F.pad(x[0, 0], (1, 1), "replicate")
    with pytest.raises(NotImplementedError, match="Padding size 6 is not supported for 3D input"):
        F.pad(x, (1, 1, 1, 1, 1, 1), "reflect")
    with pytest.raises(RuntimeError, match="possibly 0 batch size"):
        F.pad(x[:, :, :0], (1, 1), "replicate")
    with pytest.raises(RuntimeError, match="doesn't take in value argument"):
        F.pad(x, (1, 1), "reflect", 2.0)
    with pytest.raises(NotImplementedError, match="circular"):
        F.pad(x, (1, 1), "circular")
    np.testing.assert_array_equal(F.pad(ag.arange(6).reshape(2, 3), (2, 1), "reflect").numpy(),
                                  TF.pad(torch.arange(6).reshape(2, 3), (2, 1), "reflect").numpy())


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_modes_stay_on_their_device(fake_backend, mode):
    check_on_fake_device(fake_backend, lambda a: F.pad(a, (2, 1), mode))
    x = ag.tensor(arr((2, 3)), device="fake:1")
    assert F.pad(x, (1, 1), mode).data.fake_index == 1
