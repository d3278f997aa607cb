"""Cancellation: stopping a backward pass cleanly (docs/cancellation.md).

The guarantee: once the awaiting task is cancelled, no node of its
GraphTask starts; the cancellation reaches the caller only when no worker
is still running a node of it; its buffers are released; other GraphTasks
and the next call are unaffected. Synchronisation is by events only.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import anyio
import pytest
from anyio import wait_all_tasks_blocked

import aiograd as ag
from aiograd import engine
from aiograd.engine.graph_task import current_graph_task

pytestmark = pytest.mark.timeout(60)


class Gate:
    """A backward node that blocks its worker until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.events: list[str] = []
        self.graph_task: weakref.ref | None = None
        gate = self

        class GateFn(ag.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                gate.graph_task = weakref.ref(current_graph_task.get())
                gate.started.set()
                gate.release.wait(30)
                gate.events.append("gate-done")
                return g

        self.fn = GateFn

    def graph(self):
        """x -> before (MulBackward0) -> gate -> loss; 'before' must never run if cancelled."""
        x = ag.tensor([1.0, 2.0], requires_grad=True)
        before = x * 2.0
        before.grad_fn.register_prehook(lambda go: self.events.append("node-after-gate"))
        return x, self.fn.apply(before) * 3.0


async def wait_started(gate: Gate) -> None:
    await anyio.to_thread.run_sync(gate.started.wait)


@pytest.mark.anyio
async def test_cancel_scope_stops_graph_task_after_running_node_finishes():
    gate = Gate()
    x, loss = gate.graph()
    scope = anyio.CancelScope()

    async def run() -> None:
        with scope:
            await ag.backward(loss, ag.ones(2))
            gate.events.append("completed")
        gate.events.append("cancel-delivered")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wait_started(gate)
        scope.cancel()
        await wait_all_tasks_blocked()
        assert "cancel-delivered" not in gate.events  # the gate node is still running
        gate.release.set()
    assert gate.events == ["gate-done", "cancel-delivered"]
    assert x.grad is None
    assert engine.stats().running_graph_tasks == 0


@pytest.mark.anyio
async def test_cancelled_graph_task_is_released():
    gate = Gate()
    x, loss = gate.graph()
    scope = anyio.CancelScope()

    async def run(root: ag.Tensor) -> None:
        with scope:
            await ag.backward(root, ag.ones(2))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, loss)
        await wait_started(gate)
        scope.cancel()
        gate.release.set()
    del loss
    gc.collect()
    assert gate.graph_task is not None and gate.graph_task() is None


@pytest.mark.anyio
async def test_engine_serves_next_call_after_cancellation():
    gate = Gate()
    _, loss = gate.graph()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ag.backward, loss, ag.ones(2))
            await wait_started(gate)
            scope.cancel()
            gate.release.set()
    y = ag.tensor([3.0], requires_grad=True)
    await ag.backward(y * y)
    assert y.grad.item() == 6.0


@pytest.mark.anyio
async def test_other_graph_tasks_are_not_disturbed_by_a_cancellation():
    gate = Gate()
    _, loss = gate.graph()
    other = ag.tensor([1.0, 2.0], requires_grad=True)
    scope = anyio.CancelScope()

    async def cancelled() -> None:
        with scope:
            await ag.backward(loss, ag.ones(2))

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancelled)
        await wait_started(gate)
        scope.cancel()
        gate.release.set()
        y = other
        for _ in range(200):
            y = y * 1.0
        await ag.backward(y, ag.ones(2))
    assert other.grad.numpy().tolist() == [1.0, 1.0]


@pytest.mark.anyio
async def test_fail_after_raises_timeout_and_leaves_engine_clean():
    x = ag.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(2000):
        y = y * 1.0
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0):
            await ag.backward(y)
    assert engine.stats().running_graph_tasks == 0
    z = ag.tensor([2.0], requires_grad=True)
    await ag.backward(z * z)
    assert z.grad.item() == 4.0


@pytest.mark.anyio
async def test_move_on_after_returns_without_result():
    x = ag.tensor([1.0], requires_grad=True)
    y = x * 2.0
    with anyio.move_on_after(0) as scope:
        await ag.backward(y)
    assert scope.cancelled_caught
    assert engine.stats().running_graph_tasks == 0


async def test_asyncio_task_cancel_waits_for_running_node():
    gate = Gate()
    x, loss = gate.graph()
    task = asyncio.ensure_future(ag.backward(loss, ag.ones(2)))
    await asyncio.get_running_loop().run_in_executor(None, gate.started.wait)
    task.cancel()
    await anyio.wait_all_tasks_blocked()  # the task has seen the cancellation
    assert not task.done()  # still waiting for the gate node
    gate.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gate.events == ["gate-done"]
    assert x.grad is None


test_asyncio_task_cancel_waits_for_running_node = pytest.mark.asyncio(
    test_asyncio_task_cancel_waits_for_running_node
)


class NestedGate(ag.Function):
    """An async backward that awaits a nested grad through a Gate."""

    gate: Gate

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        gate = NestedGate.gate
        with ag.enable_grad():
            inner_x, inner = gate.graph()
            await ag.grad(inner, inner_x, ag.ones(2))
        gate.events.append("outer-after-nested")
        return g


@pytest.mark.anyio
async def test_cancelling_outer_backward_cancels_nested_backward():
    gate = Gate()
    NestedGate.gate = gate
    x = ag.tensor([1.0], requires_grad=True)
    scope = anyio.CancelScope()

    async def run() -> None:
        with scope:
            await ag.backward(NestedGate.apply(x) * 2.0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wait_started(gate)
        scope.cancel()
        await wait_all_tasks_blocked()
        gate.release.set()
    assert gate.events == ["gate-done"]
    assert x.grad is None
    assert engine.stats().running_graph_tasks == 0


@pytest.mark.anyio
async def test_cancelled_async_backward_function_does_not_fail_the_task():
    entered = anyio.Event()

    class Waits(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        async def backward(ctx, g):
            entered.set()
            await anyio.sleep_forever()

    x = ag.tensor([1.0], requires_grad=True)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ag.backward, Waits.apply(x))
            await entered.wait()
            scope.cancel()
    assert scope.cancelled_caught
    assert engine.stats().running_graph_tasks == 0
