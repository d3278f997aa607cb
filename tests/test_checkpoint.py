"""aiograd.checkpoint: recompute activations in backward (reentrant and hook-based)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(120)


def make_params(seed=0, width=8, depth=3, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [ag.tensor(rng.standard_normal((width, width)).astype(dtype) * 0.3,
                      requires_grad=True) for _ in range(depth)]


def block(h, ws):
    for w in ws:
        h = (h @ w).tanh()
    return h


def grads_of(params, x, use_checkpoint, use_reentrant=True):
    for p in params:
        p.grad = None
    x = x.detach().requires_grad_()
    if use_checkpoint:
        h = ag.checkpoint(lambda inp: block(inp, params[:2]), x, use_reentrant=use_reentrant)
    else:
        h = block(x, params[:2])
    loss = (block(h, params[2:]) * 1.5).sum()
    ag.backward_sync(loss)
    return [p.grad.numpy().copy() for p in params] + [x.grad.numpy().copy()]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gives_the_same_gradients_as_no_checkpoint(use_reentrant):
    params = make_params()
    x = ag.tensor(np.random.default_rng(1).standard_normal((4, 8)))
    plain = grads_of(params, x, False)
    ckpt = grads_of(params, x, True, use_reentrant)
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_matches_torch_utils_checkpoint(use_reentrant):
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as tckpt

    params = make_params(seed=3)
    x = ag.tensor(np.random.default_rng(4).standard_normal((4, 8)))
    ours = grads_of(params, x, True, use_reentrant)
    tparams = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    tx = torch.tensor(x.numpy(), requires_grad=True)

    def tblock(h, ws):
        for w in ws:
            h = (h @ w).tanh()
        return h

    h = tckpt.checkpoint(lambda inp: tblock(inp, tparams[:2]), tx, use_reentrant=use_reentrant)
    (tblock(h, tparams[2:]) * 1.5).sum().backward()
    theirs = [p.grad.numpy() for p in tparams] + [tx.grad.numpy()]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.anyio
@pytest.mark.parametrize("use_reentrant", [True, False])
async def test_checkpoint_under_await_backward(use_reentrant):
    params = make_params(seed=5)
    x = ag.tensor(np.random.default_rng(6).standard_normal((2, 8)), requires_grad=True)
    await block(x, params).sum().backward()
    expected = params[0].grad.numpy().copy()
    params[0].grad = None
    h = ag.checkpoint(lambda inp: block(inp, params), x, use_reentrant=use_reentrant)
    await h.sum().backward()
    np.testing.assert_allclose(params[0].grad.numpy(), expected, rtol=1e-12)


def test_reentrant_checkpoint_refuses_grad_with_inputs():
    params = make_params()
    x = ag.tensor(np.ones((2, 8)), requires_grad=True)
    h = ag.checkpoint(lambda inp: block(inp, params), x)
    with pytest.raises(RuntimeError, match="use_reentrant=True, aiograd.checkpoint is "
                                           "incompatible with .grad()"):
        ag.grad_sync(h.sum(), x)


def test_non_reentrant_checkpoint_works_with_grad():
    params = make_params()
    x = ag.tensor(np.ones((2, 8)), requires_grad=True)
    h = ag.checkpoint(lambda inp: block(inp, params), x, use_reentrant=False)
    (gx,) = ag.grad_sync(h.sum(), x)
    (expected,) = ag.grad_sync(block(x, params).sum(), x)
    np.testing.assert_allclose(gx.numpy(), expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_replays_the_random_generator(use_reentrant):
    ag.manual_seed(0)
    w = ag.tensor(np.ones((4, 4)), requires_grad=True)

    def noisy(inp):
        mask = (ag.rand(2, 4, dtype="float64") > 0.5) * 1.0
        return (inp @ w) * mask

    x = ag.tensor(np.ones((2, 4)), requires_grad=True)
    ag.manual_seed(7)
    out = ag.checkpoint(noisy, x, use_reentrant=use_reentrant)
    ag.backward_sync(out.sum())
    ckpt = w.grad.numpy().copy()
    w.grad = None
    ag.manual_seed(7)
    ag.backward_sync(noisy(x).sum())
    np.testing.assert_array_equal(ckpt, w.grad.numpy())


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_keeps_fewer_activations(use_reentrant):
    params = make_params(width=256, depth=8, dtype="float32")
    x = ag.tensor(np.ones((256, 256), dtype="float32"), requires_grad=True)

    def held(fn):
        tracemalloc.start()
        try:
            out = fn()
            size = tracemalloc.get_traced_memory()[0]
            del out
        finally:
            tracemalloc.stop()
        return size

    plain = held(lambda: block(x, params))
    ckpt = held(lambda: ag.checkpoint(lambda inp: block(inp, params), x,
                                      use_reentrant=use_reentrant))
    assert ckpt < plain / 3


def test_reentrant_checkpoint_warns_when_no_input_requires_grad():
    w = ag.tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        ag.checkpoint(lambda inp: inp @ w, ag.tensor(np.ones((2, 2))))


def test_checkpoint_rejects_a_non_callable():
    with pytest.raises(TypeError, match="checkpoint expects a callable"):
        ag.checkpoint(3, ag.ones(2))
