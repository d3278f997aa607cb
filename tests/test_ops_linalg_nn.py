"""matmul, softmax, log_softmax and the losses: gradcheck, PyTorch as oracle, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracles import check_against_torch, check_second_order, leaf

import aiograd as ag
import aiograd.nn.functional as F

pytestmark = pytest.mark.timeout(60)


def arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---- matmul ----

MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 2)),
    ((2, 3), (3, 4)),
    ((2, 2, 3), (3, 2)),
    ((2, 2, 3), (3,)),
    ((3,), (2, 3, 2)),
    ((2, 3), (2, 3, 2)),
    ((2, 1, 2, 3), (3, 3, 2)),
]


@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES, ids=str)
def test_matmul_gradcheck(a_shape, b_shape):
    a, b = leaf(arr(a_shape, 1)), leaf(arr(b_shape, 2))
    assert ag.gradcheck(lambda x, y: x @ y, (a, b))


@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES, ids=str)
def test_matmul_matches_torch(a_shape, b_shape):
    check_against_torch(lambda x, y: x @ y, lambda x, y: x @ y, arr(a_shape, 1), arr(b_shape, 2))


# PyTorch computes 2-D @ N-D as a transposed product and names it CloneBackward0.
@pytest.mark.parametrize("a_shape, b_shape",
                         [s for s in MATMUL_SHAPES if s != ((2, 3), (2, 3, 2))], ids=str)
def test_matmul_node_names_match_torch(a_shape, b_shape):
    torch = pytest.importorskip("torch")
    ours = ag.ones(*a_shape, requires_grad=True) @ ag.ones(*b_shape, requires_grad=True)
    theirs = torch.ones(a_shape, requires_grad=True) @ torch.ones(b_shape, requires_grad=True)
    assert ours.grad_fn.name() == type(theirs.grad_fn).__name__


@pytest.mark.parametrize("a_shape, b_shape", [((2, 3), (3, 4)), ((2, 2, 3), (3,)),
                                              ((3,), (3, 2)), ((2, 3), (3,))], ids=str)
def test_matmul_second_order_matches_torch(a_shape, b_shape):
    check_second_order(lambda x, y: (x @ y) * (x @ y), lambda x, y: (x @ y) * (x @ y),
                       arr(a_shape, 3), arr(b_shape, 4))


def test_matmul_with_transposed_weight_backward_is_g_at_w_and_xt_at_g():
    x = leaf(arr((4, 3), 5))
    w = leaf(arr((2, 3), 6))
    g = arr((4, 2), 7)
    gx, gw = ag.grad_sync(x @ w.T, [x, w], ag.tensor(g))
    np.testing.assert_allclose(gx.numpy(), g @ w.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(gw.numpy(), (x.detach().numpy().T @ g).T, rtol=1e-12)


def test_matmul_saves_only_the_operand_the_other_gradient_needs():
    x = ag.tensor(arr((4, 3)))
    w = leaf(arr((3, 2), 1))
    node = (x @ w).grad_fn
    assert node.other is None and node.self_ is not None
    assert node.next_functions[0] == (None, 0)
    (gw,) = ag.grad_sync(x @ w, w, ag.ones(4, 2, dtype=ag.float64))
    np.testing.assert_allclose(gw.numpy(), x.numpy().T @ np.ones((4, 2)))


def _packed_by_matmul(lib, a_shape, b_shape, bmm):
    """The tensors (shape and sum) pack hooks see, in order, for ``a @ b`` (or ``bmm``)
    with both, then each one alone, requiring grad."""
    packed = []

    def pack(t):
        packed.append((tuple(t.shape), round(float(t.detach().numpy().sum()), 9)))
        return t

    hooks = ag.graph.saved_tensors_hooks if lib is ag else lib.autograd.graph.saved_tensors_hooks
    for grads in ((True, True), (True, False), (False, True)):
        a, b = (lib.tensor(arr(s, i), requires_grad=r) for i, (s, r) in
                enumerate(zip((a_shape, b_shape), grads)))
        with hooks(pack, lambda t: t):
            lib.bmm(a, b) if bmm else a @ b
        packed.append("|")
    return packed


@pytest.mark.parametrize("a_shape, b_shape, bmm", [
    ((3,), (3,), False), ((2, 3), (3,), False), ((2, 3), (3, 4), False),
    ((2, 2, 3), (2, 3, 4), False), ((2, 2, 3), (2, 3, 4), True)], ids=str)
def test_matmul_packs_saved_tensors_in_torchs_order(a_shape, b_shape, bmm):
    torch = pytest.importorskip("torch")
    assert (_packed_by_matmul(ag, a_shape, b_shape, bmm)
            == _packed_by_matmul(torch, a_shape, b_shape, bmm))


def test_array_at_tensor_uses_rmatmul():
    w = leaf(arr((3, 2), 1))
    x = arr((4, 3))
    y = x @ w
    assert isinstance(y, ag.Tensor) and y.grad_fn.name() == "MmBackward0"
    np.testing.assert_allclose(y.detach().numpy(), x @ w.detach().numpy())


def test_matmul_keeps_float32():
    x = ag.ones(2, 3, requires_grad=True)
    w = ag.ones(3, 4, requires_grad=True)
    y = x @ w
    assert y.dtype == ag.float32
    gx, gw = ag.grad_sync(y, [x, w], ag.ones(2, 4))
    assert gx.dtype == ag.float32 and gw.dtype == ag.float32


def test_matmul_of_a_0d_tensor_raises():
    with pytest.raises(RuntimeError, match="at least 1D, but they are 0D and 2D"):
        ag.tensor(2.0) @ ag.ones(2, 2)


def test_matmul_with_mismatched_inner_dims_raises():
    with pytest.raises(RuntimeError, match=r"shapes \(2, 3\) and \(2, 3\) cannot be multiplied"):
        ag.ones(2, 3) @ ag.ones(2, 3)


def test_matmul_with_mismatched_batch_dims_raises():
    with pytest.raises(RuntimeError, match=r"shapes \(2, 2, 3\) and \(3, 3, 2\) cannot be"):
        ag.ones(2, 2, 3) @ ag.ones(3, 3, 2)


def test_matmul_with_a_number_raises_type_error():
    with pytest.raises(TypeError, match="to scale by a number use \\*"):
        ag.ones(2, 2) @ 2.0


# ---- softmax / log_softmax ----

@pytest.mark.parametrize("shape, dim", [((4,), 0), ((2, 3), 1), ((2, 3), 0), ((2, 3, 2), -2),
                                        ((), 0)], ids=str)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_gradcheck(op, shape, dim):
    assert ag.gradcheck(lambda t: getattr(F, op)(t, dim), (leaf(arr(shape)),))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_matches_torch(op, dim):
    check_against_torch(lambda t: getattr(t, op)(dim), lambda t: getattr(t, op)(dim),
                        arr((3, 4)))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_second_order_matches_torch(op):
    check_second_order(lambda t: getattr(t, op)(1), lambda t: getattr(t, op)(1), arr((2, 3)))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_node_names_match_torch(op):
    y = getattr(ag.ones(2, 3, requires_grad=True), op)(1)
    assert y.grad_fn.name() == {"softmax": "SoftmaxBackward0",
                                "log_softmax": "LogSoftmaxBackward0"}[op]


def test_softmax_is_stable_for_large_logits():
    x = ag.tensor(np.array([[1000.0, 1000.0, -1000.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = F.softmax(x, 1).numpy()
        logp = F.log_softmax(x, 1).numpy()
    np.testing.assert_allclose(p, [[0.5, 0.5, 0.0]])
    np.testing.assert_allclose(logp, [[-np.log(2), -np.log(2), -2000.0 - np.log(2)]])


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_keeps_float32(op):
    x = ag.ones(2, 3, requires_grad=True)
    y = getattr(F, op)(x, 1)
    assert y.dtype == ag.float32
    (g,) = ag.grad_sync(y, x, ag.ones(2, 3))
    assert g.dtype == ag.float32


def test_softmax_with_a_bad_dim_raises_index_error():
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
        ag.ones(2, 3).softmax(2)


# ---- mse_loss ----

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_gradcheck(reduction):
    x, t = leaf(arr((2, 3), 1)), leaf(arr((2, 3), 2))
    assert ag.gradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), (x, t))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(reduction):
    torch = pytest.importorskip("torch")
    check_against_torch(lambda a, b: F.mse_loss(a, b, reduction=reduction),
                        lambda a, b: torch.nn.functional.mse_loss(a, b, reduction=reduction),
                        arr((2, 3), 1), arr((2, 3), 2))


def test_mse_loss_second_order_matches_torch():
    torch = pytest.importorskip("torch")
    check_second_order(lambda a, b: F.mse_loss(a.tanh(), b),
                       lambda a, b: torch.nn.functional.mse_loss(a.tanh(), b),
                       arr((2, 3), 1), arr((2, 3), 2))


def test_mse_loss_accepts_an_array_target():
    x = leaf([1.0, 2.0])
    loss = F.mse_loss(x, np.array([0.0, 0.0]))
    assert loss.item() == pytest.approx(2.5)
    assert loss.grad_fn.name() == "MseLossBackward0"
    (g,) = ag.grad_sync(loss, x)
    np.testing.assert_allclose(g.numpy(), [1.0, 2.0])


def test_mse_loss_warns_when_target_shape_differs():
    with pytest.warns(UserWarning, match=r"target size \(3,\) that is different to the input"):
        F.mse_loss(ag.ones(2, 3), ag.zeros(3))


def test_mse_loss_rejects_an_unknown_reduction():
    with pytest.raises(ValueError) as info:
        F.mse_loss(ag.ones(2), ag.zeros(2), reduction="avg")
    assert str(info.value) == "avg is not a valid value for reduction"


def test_mse_loss_rejects_a_number_target():
    with pytest.raises(TypeError, match="use aiograd.full_like"):
        F.mse_loss(ag.ones(2), 0.0)


# ---- cross_entropy ----

TARGET = np.array([0, 2, 1, 2])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradcheck(reduction):
    x = leaf(arr((4, 3)))
    assert ag.gradcheck(lambda t: F.cross_entropy(t, TARGET, reduction=reduction), (x,))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(reduction):
    torch = pytest.importorskip("torch")
    check_against_torch(
        lambda t: F.cross_entropy(t, ag.tensor(TARGET), reduction=reduction),
        lambda t: torch.nn.functional.cross_entropy(t, torch.tensor(TARGET), reduction=reduction),
        arr((4, 3)),
    )


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_of_a_single_sample_matches_torch(reduction):
    torch = pytest.importorskip("torch")
    check_against_torch(
        lambda t: F.cross_entropy(t, ag.tensor(2), reduction=reduction),
        lambda t: torch.nn.functional.cross_entropy(t, torch.tensor(2), reduction=reduction),
        arr((3,)),
    )


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_second_order_matches_torch(reduction):
    torch = pytest.importorskip("torch")
    check_second_order(
        lambda t: F.cross_entropy(t * t, TARGET, reduction=reduction),
        lambda t: torch.nn.functional.cross_entropy(t * t, torch.tensor(TARGET),
                                                    reduction=reduction),
        arr((4, 3)),
    )


def test_cross_entropy_records_one_fused_node():
    x = ag.ones(4, 3, requires_grad=True)
    node = F.cross_entropy(x, TARGET).grad_fn
    assert node.name() == "CrossEntropyLossBackward0"
    assert node.next_functions[0][0].name() == "AccumulateGrad"


def test_cross_entropy_gradient_is_softmax_minus_onehot_over_n():
    logits = arr((4, 3))
    x = leaf(logits)
    (g,) = ag.grad_sync(F.cross_entropy(x, TARGET), x)
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(g.numpy(), (p - np.eye(3)[TARGET]) / 4, rtol=1e-12)


def test_cross_entropy_is_stable_for_large_logits():
    x = ag.tensor(np.array([[1000.0, -1000.0], [-1000.0, 1000.0]]), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = F.cross_entropy(x, np.array([1, 1]))
        (g,) = ag.grad_sync(loss, x)
    assert loss.item() == pytest.approx(1000.0)
    np.testing.assert_allclose(g.numpy(), [[0.5, -0.5], [0.0, 0.0]])


def test_cross_entropy_keeps_float32():
    x = ag.ones(4, 3, requires_grad=True)
    loss = F.cross_entropy(x, TARGET)
    assert loss.dtype == ag.float32 and loss.shape == ()
    (g,) = ag.grad_sync(loss, x)
    assert g.dtype == ag.float32


def test_cross_entropy_backward_twice_without_retain_graph_raises():
    x = ag.ones(4, 3, requires_grad=True)
    loss = F.cross_entropy(x, TARGET)
    ag.backward_sync(loss)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ag.backward_sync(loss)


def test_cross_entropy_backward_twice_with_retain_graph_gives_the_same_gradient():
    x = ag.ones(4, 3, requires_grad=True)
    loss = F.cross_entropy(x, TARGET)
    (g1,) = ag.grad_sync(loss, x, retain_graph=True)
    (g2,) = ag.grad_sync(loss, x)
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())


def test_cross_entropy_rejects_an_out_of_bounds_target():
    with pytest.raises(IndexError, match=r"Target 5 is out of bounds: .* \[0, 3\)"):
        F.cross_entropy(ag.ones(2, 3), np.array([0, 5]))


def test_cross_entropy_rejects_a_negative_target():
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.cross_entropy(ag.ones(2, 3), np.array([-1, 0]))


def test_cross_entropy_rejects_float_targets():
    # PyTorch's error (a float target of the input's shape would be class probabilities)
    with pytest.raises(RuntimeError, match="target dtype to be Long or Byte, but got Float"):
        F.cross_entropy(ag.ones(2, 3), ag.tensor([0.0, 1.0]))


def test_cross_entropy_rejects_a_batch_size_mismatch():
    with pytest.raises(ValueError, match=r"target of shape \(2,\) for input of shape \(2, 3\)"):
        F.cross_entropy(ag.ones(2, 3), np.array([0]))


def test_cross_entropy_rejects_3d_logits():
    with pytest.raises(ValueError, match=r"shape \(N, C\) or \(C,\), got \(2, 3, 4\)"):
        F.cross_entropy(ag.ones(2, 3, 4), np.array([0, 1]))


# ---- through the async engine ----

@pytest.mark.anyio
async def test_mlp_step_backward_matches_torch():
    torch = pytest.importorskip("torch")
    xs, w1s, w2s = arr((5, 4), 1), arr((3, 4), 2), arr((2, 3), 3)
    target = np.array([0, 1, 1, 0, 1])
    x = ag.tensor(xs)
    w1, w2 = leaf(w1s), leaf(w2s)
    loss = F.cross_entropy(F.relu(x @ w1.T) @ w2.T, target)
    await loss.backward()
    tw1 = torch.tensor(w1s, requires_grad=True)
    tw2 = torch.tensor(w2s, requires_grad=True)
    t_loss = torch.nn.functional.cross_entropy(
        torch.relu(torch.tensor(xs) @ tw1.T) @ tw2.T, torch.tensor(target))
    t_loss.backward()
    assert loss.item() == pytest.approx(t_loss.item(), rel=1e-12)
    np.testing.assert_allclose(w1.grad.numpy(), tw1.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(w2.grad.numpy(), tw2.grad.numpy(), rtol=1e-10)


# ---- another device backend ----

FAKE_OPS = {
    "mm": (lambda x, w: x @ w.T, (4, 3), (2, 3)),
    "batched": (lambda x, w: x @ w, (2, 4, 3), (3,)),
    "softmax": (lambda x, w: F.softmax(x @ w.T, 1), (4, 3), (2, 3)),
    "log_softmax": (lambda x, w: F.log_softmax(x @ w.T, 0), (4, 3), (2, 3)),
    "mse_loss": (lambda x, w: F.mse_loss(x, w), (2, 3), (2, 3)),
    "cross_entropy": (lambda x, w: F.cross_entropy(x @ w.T, (x.data[:, 0] > 0).astype("int64")),
                      (4, 3), (2, 3)),
}


@pytest.mark.parametrize("name", sorted(FAKE_OPS))
def test_op_runs_on_another_device_backend(fake_backend, name):
    """Forward and backward stay on fake:1 and use its array module only."""
    fn, x_shape, w_shape = FAKE_OPS[name]
    xs, ws = arr(x_shape, 1), arr(w_shape, 2)
    x = ag.tensor(xs, device="fake:1", requires_grad=True)
    w = ag.tensor(ws, device="fake:1", requires_grad=True)
    y = fn(x, w)
    assert y.device is ag.device("fake:1")
    grads = ag.grad_sync(y.sum(), [x, w])
    assert all(g.device is ag.device("fake:1") for g in grads)
    cpu = [leaf(xs), leaf(ws)]
    expected = ag.grad_sync(fn(*cpu).sum(), cpu)
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(fake_backend.to_host(g.data), e.numpy(), rtol=1e-12)


# ---- linear (AddmmBackward0) ----


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_gradcheck(with_bias):
    rng = np.random.default_rng(11)
    x = ag.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = ag.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    b = ag.tensor(rng.standard_normal(5), requires_grad=True) if with_bias else None
    inputs = (x, w, b) if with_bias else (x, w)
    assert ag.gradcheck(lambda *t: F.linear(*t), inputs)


def test_linear_matches_torch_and_is_one_addmm_node():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    xs, ws, bs = (rng.standard_normal(s) for s in ((6, 4), (3, 4), (3,)))
    x, w, b = (ag.tensor(a, requires_grad=True) for a in (xs, ws, bs))
    out = F.linear(x, w, b)
    assert out.grad_fn.name() == "AddmmBackward0"
    ag.backward_sync(out.sum())
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (xs, ws, bs))
    tout = torch.nn.functional.linear(tx, tw, tb)
    assert type(tout.grad_fn).__name__ == "AddmmBackward0"
    tout.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    for ours, theirs in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)
    assert w.grad.data.flags.c_contiguous


def test_linear_second_order_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    xs, ws = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))
    x, w = ag.tensor(xs, requires_grad=True), ag.tensor(ws, requires_grad=True)
    (gx,) = ag.grad_sync((F.linear(x, w) ** 2).sum(), x, create_graph=True)
    (gw,) = ag.grad_sync(gx.sum(), w)
    tx, tw = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    (tgx,) = torch.autograd.grad((torch.nn.functional.linear(tx, tw) ** 2).sum(), tx,
                                 create_graph=True)
    (tgw,) = torch.autograd.grad(tgx.sum(), tw)
    np.testing.assert_allclose(gw.numpy(), tgw.numpy(), rtol=1e-10)


def test_linear_rejects_mismatched_shapes():
    with pytest.raises(RuntimeError, match="linear: input"):
        F.linear(ag.ones(2, 3), ag.ones(4, 5))
