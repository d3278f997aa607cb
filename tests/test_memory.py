"""Graphs are freed by reference counting alone (DESIGN.md, Note [No reference cycles])."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np
import pytest
from probes import passthrough

import aiograd as ag

pytestmark = pytest.mark.timeout(120)


def aiograd_garbage() -> list[str]:
    """Run the cyclic collector and return the aiograd objects it had to free."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [type(o).__name__ for o in gc.garbage
                 if type(o).__module__.startswith("aiograd")]
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
    return found


def _mlp_loss(x, weights):
    h = x
    for w in weights:
        h = (h @ w).relu()
    return h.sum()


def test_large_graph_memory_returns_when_loss_goes_out_of_scope(no_cyclic_gc):
    rng = np.random.default_rng(0)
    weights = [ag.tensor(rng.standard_normal((256, 256)).astype("float32") * 0.05,
                         requires_grad=True) for _ in range(8)]
    x = ag.tensor(rng.standard_normal((512, 256)).astype("float32"))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        loss = _mlp_loss(x, weights)
        held = tracemalloc.get_traced_memory()[0] - base
        first = weakref.ref(loss.grad_fn)
        del loss
        after = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held > 8 * 512 * 256 * 4  # the saved activations were really held
    assert first() is None
    assert after < held / 20


def test_backward_leaves_no_reference_cycles(no_cyclic_gc):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x * 3.0) / (x + 1.0)
    node = weakref.ref(y.grad_fn)
    ag.backward_sync(y, ag.ones(2))
    del y
    assert node() is None
    assert aiograd_garbage() == []


@pytest.mark.anyio
async def test_await_backward_and_grad_leave_no_reference_cycles(no_cyclic_gc):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        y = x * x * 2.0
        node = weakref.ref(y.grad_fn)
        await ag.backward(y, ag.ones(2))
        (g,) = await ag.grad(x * 3.0, x, ag.ones(2))
        del y
        assert node() is None
    assert aiograd_garbage() == []


def test_output_saved_by_its_own_node_is_not_a_cycle(no_cyclic_gc):
    x = ag.tensor([0.5, 1.5], requires_grad=True)
    y = x.exp()  # ExpBackward0 saves its own output
    node = weakref.ref(y.grad_fn)
    del y
    assert node() is None
    assert aiograd_garbage() == []


def test_retain_grad_hook_does_not_keep_tensor_alive(no_cyclic_gc):
    x = ag.tensor([1.0], requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    ref = weakref.ref(h)
    loss = h * 3.0
    del h
    ag.backward_sync(loss)
    del loss
    assert ref() is None
    assert aiograd_garbage() == []


def test_pack_hook_returning_the_output_itself_is_not_a_cycle(no_cyclic_gc):
    x = ag.tensor([0.5, 1.5], requires_grad=True)
    with ag.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = x.exp()  # saves its own output through the pack hook
    node = weakref.ref(y.grad_fn)
    ag.backward_sync(y, ag.ones(2), retain_graph=True)
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.5]), rtol=1e-6)
    del y
    assert node() is None
    assert aiograd_garbage() == []


# ---- Note [Stealing gradients] ----

N = 1 << 20  # 4 MiB of float32


def backward_peak_bytes(loss, *args) -> int:
    """Peak traced memory of ``backward_sync(loss, *args)`` above what existed before."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ag.backward_sync(loss, *args)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_first_gradient_is_stored_without_a_copy():
    x = ag.tensor(np.ones(N, np.float32), requires_grad=True)
    seed = ag.ones(N)
    # MulBackward makes one fresh array; .grad takes it as is (a copy would be 8 MiB).
    assert backward_peak_bytes(x * 2.0, seed) < 1.5 * 4 * N
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 2.0, np.float32))


def test_first_gradient_is_stored_without_a_copy_by_the_accumulate_grad_node():
    x = ag.tensor(np.ones(N, np.float32), requires_grad=True)
    seed = ag.ones(N)
    # inputs= runs the AccumulateGrad as a node, not directly (Note [Direct accumulation]).
    assert backward_peak_bytes(x * 2.0, seed, None, False, [x]) < 1.5 * 4 * N
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 2.0, np.float32))


def test_gradient_someone_else_holds_is_copied_into_grad():
    kept = []

    def keep(g):
        kept.append(g * 3.0)
        return kept[-1]

    Keep = passthrough(gradient=keep)  # its gradient stays referenced by `kept`
    for inputs in (None, "x"):  # directly, and by the AccumulateGrad node
        x = ag.tensor(np.ones(4, np.float32), requires_grad=True)
        ag.backward_sync(Keep.apply(x).sum(), inputs=None if inputs is None else [x])
        assert not np.shares_memory(x.grad.data, kept[-1].data)
    z = ag.tensor(np.ones(4, np.float32), requires_grad=True)
    w = ag.tensor(np.ones(4, np.float32), requires_grad=True)
    ag.backward_sync((z + w) * 1.0, ag.ones(4))  # AddBackward passes one array to both
    assert not np.shares_memory(z.grad.data, w.grad.data)
    z.grad.add_(1.0)
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0, 1.0, 1.0])


def test_sum_gradient_becomes_a_grad_of_its_own_memory():
    x = ag.tensor(np.ones(4, np.float32), requires_grad=True)
    ag.backward_sync(x.sum())  # its backward gives a read-only broadcast view
    grad = x.grad.data
    assert grad.flags.writeable and grad.flags.c_contiguous and grad.strides == (4,)
    x.grad.mul_(3.0)  # a .grad can be changed in place (an optimizer's step)
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0, 3.0])


def test_backward_twice_accumulates_like_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib, backward):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        backward(x.sum())
        backward(x.mean())
        backward((x * x).sum())
        return x.grad.numpy()

    ours = run(ag, ag.backward_sync)
    theirs = run(torch, lambda loss: loss.backward())
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
def test_create_graph_gradient_is_cloned_then_accumulated_by_plain_backward():
    x = ag.tensor(np.ones(4, np.float32), requires_grad=True)
    seed = ag.ones(4)
    ag.backward_sync(x, seed, create_graph=True)  # the seed reaches x's AccumulateGrad
    assert not np.shares_memory(x.grad.data, seed.data)
    y = ag.tensor(np.ones(4, np.float32), requires_grad=True)
    ag.backward_sync(y.sum(), create_graph=True)
    ag.backward_sync(y.sum())  # adds in place into the first, cloned gradient
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 2.0, 2.0, 2.0])
