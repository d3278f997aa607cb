"""The per-node pipeline's has-hooks flag (Note [Has-hooks flag]) and GraphTask's
completion transitions (Note [Completion]).

Every async test runs under asyncio and Trio (see conftest.py); torch is the oracle
for which hooks run and the gradients they give.
"""

from __future__ import annotations

import numpy as np
import pytest

import aiograd as ag
from aiograd.engine.graph_task import GraphTask
from aiograd.graph._node import grad_accumulator

pytestmark = pytest.mark.timeout(60)


def leaf(values):
    return ag.tensor(np.array(values, dtype="float64"), requires_grad=True)


def test_node_hooks_set_the_flag_and_their_removal_clears_it():
    x = leaf([1.0, 2.0])
    y = x * 2.0
    node = y.grad_fn
    assert node.has_hooks is False
    handles = [node.register_hook(lambda gi, go: None),
               node.register_prehook(lambda go: None),
               y.register_hook(lambda g: None)]
    for handle in handles:
        assert node.has_hooks is True
        handle.remove()
    assert node.has_hooks is False
    handles[0].remove()  # idempotent, and still no hook
    assert node.has_hooks is False
    y.retain_grad()
    assert node.has_hooks is True


def test_leaf_hooks_set_the_flag_of_its_accumulator_made_before_or_after():
    x = leaf([1.0])
    early = x.register_hook(lambda g: g)
    acc = grad_accumulator(x)  # made after the hook: reads it
    assert acc.has_hooks is True
    early.remove()
    assert acc.has_hooks is False
    late = x.register_post_accumulate_grad_hook(lambda t: None)
    assert acc.has_hooks is True  # made before the hook: told by the leaf
    own = acc.register_prehook(lambda go: None)
    late.remove()
    assert acc.has_hooks is True  # its own prehook is left
    own.remove()
    assert acc.has_hooks is False


def _hooked_graph(lib, x, log):
    """y = sin(x * 3).sum() with hooks, two of them removed before backward."""
    a = x * 3.0
    b = a.sin()
    removed = [a.register_hook(lambda g: log.append("removed-a") or g * 100.0),
               b.grad_fn.register_prehook(lambda go: log.append("removed-pre"))]
    b.register_hook(lambda g: log.append("b") or g * 2.0)
    x.register_hook(lambda g: log.append("x") or g + 1.0)
    x.register_post_accumulate_grad_hook(lambda t: log.append("acc"))
    for handle in removed:
        handle.remove()
    return b.sum()


@pytest.fixture(params=["default", "workers"])
def where(request):
    """Run the passes where the engine chooses (a hook-free small graph: inline on the
    loop), or on the workers whatever their size."""
    if request.param == "workers":
        request.getfixturevalue("workers_only")
    return request.param


@pytest.mark.anyio
async def test_removed_hooks_do_not_run_and_kept_ones_run_as_torch(where):
    torch = pytest.importorskip("torch")
    values = [0.5, -1.0, 2.0]
    x = leaf(values)
    log: list[str] = []
    await ag.backward(_hooked_graph(ag, x, log))
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    tlog: list[str] = []
    _hooked_graph(torch, tx, tlog).backward()
    assert log == tlog == ["b", "x", "acc"]
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.anyio
async def test_a_hook_registered_after_a_pass_runs_in_the_next(where):
    torch = pytest.importorskip("torch")
    values = [0.25, 1.5]
    x = leaf(values)
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    grads = []
    for lib, t in ((ag, x), (torch, tx)):
        y = (t * t).exp().sum()
        node = y.grad_fn.next_functions[0][0]  # exp's node, run once without hooks
        if lib is ag:
            await ag.backward(y, retain_graph=True)
        else:
            y.backward(retain_graph=True)
        seen: list[int] = []
        node.register_prehook(lambda go, seen=seen: seen.append(1))
        if lib is ag:
            await ag.backward(y)
        else:
            y.backward()
        assert seen == [1]
        grads.append(np.asarray(t.grad.detach().numpy()))
    np.testing.assert_allclose(grads[0], grads[1])


def _task() -> GraphTask:
    node = (leaf([1.0]) * 2.0).grad_fn
    return GraphTask(keep_graph=False, create_graph=False, depth=0, root_node=node,
                     root_inputs=[], roots=[node], outputs=None, accumulate_grad=True,
                     parent=None)


def test_graph_task_finishes_once_when_its_last_task_retires():
    gt = _task()
    wakes: list[int] = []
    gt.waker = lambda: wakes.append(1)
    gt.start(None, None, check_nan=False, direct=True)  # the root: one task
    assert gt.try_finish() is None
    assert gt.enter(1)
    with gt.lock:
        gt.add_ready_locked(3)  # the root ran and made three nodes ready
    gt.leave(0)
    assert gt.try_finish() is None  # three tasks left
    assert gt.enter(3)
    gt.retire(2)
    assert gt.try_finish() is None  # an executor is still inside
    gt.leave(1)
    waker = gt.try_finish()
    assert waker is gt.waker and gt.finished
    assert gt.try_finish() is None  # only one caller gets the waker


def test_a_failed_graph_task_retires_what_it_holds_and_keeps_its_first_error():
    gt = _task()
    gt.waker = lambda: None
    gt.start(None, None, check_nan=False, direct=True)
    assert gt.enter(1)
    with gt.lock:
        gt.add_ready_locked(2)
    first, second = ValueError("first"), ValueError("second")
    gt.node_failed(gt.root_node, first, 1)
    gt.fail(second)
    assert gt.enter(1) is False  # stopped: the task is retired, not run
    assert gt.try_finish() is None  # an executor is still inside
    gt.leave(0)
    assert gt.try_finish() is gt.waker
    assert gt.error is first and gt.outstanding == 0


@pytest.fixture
def max_nodes():
    """Sets the node limit of inline graphs; restores the built-in limits after."""
    yield lambda n: ag.engine.set_inline_limits(max_nodes=n)
    ag.engine.set_inline_limits()


def _chain(x, ops):
    """``ops`` muls, summed: ops + 2 nodes (with the leaf's AccumulateGrad), depth ops + 1."""
    for _ in range(ops):
        x = x * 1.5
    return x.sum()


def _wide(x):
    """Two muls added, summed: 5 nodes, depth 3."""
    return (x * 1.5 + x * 2.5).sum()


@pytest.mark.anyio
@pytest.mark.parametrize(("graph", "limit", "inline"), [
    (lambda x: _chain(x, 3), 5, True),   # 5 nodes
    (lambda x: _chain(x, 4), 5, False),  # 6 nodes: deeper than the limit, no walk
    (_wide, 5, True),
    (_wide, 4, False),                   # shallow, but the walk counts 5 nodes
])
async def test_the_node_limit_of_inline_graphs(loop_wakes, max_nodes, graph, limit, inline):
    torch = pytest.importorskip("torch")
    max_nodes(limit)
    x = leaf([1.0, 2.0])
    await ag.backward(graph(x))
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    graph(tx).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    assert loop_wakes == ([] if inline else [1])


@pytest.mark.anyio
async def test_a_removed_hook_does_not_keep_a_small_graph_off_the_loop(loop_wakes):
    x = leaf([1.0, 2.0])
    y = x * 3.0
    y.register_hook(lambda g: g).remove()
    x.register_post_accumulate_grad_hook(lambda t: None).remove()
    await ag.backward(y.sum())
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])
    assert loop_wakes == []
