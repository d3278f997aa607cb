"""Scheduling across GraphTasks on a shared worker: fairness and deadlines.

Note [Fair scheduling] and Note [Deadlines] (``aiograd/engine/graph_task.py``).
Every test first blocks the CPU worker with a *gate* pass (its backward waits
on an event), queues the passes under test behind it, then opens the gate:
the order in which the worker then runs their nodes is the policy's, and is
recorded by the backward of a custom Function (custom Functions never run
inline on the loop thread). Synchronisation is by events and
``wait_all_tasks_blocked`` only.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from anyio import wait_all_tasks_blocked

import aiograd as ag
from aiograd import engine

pytestmark = pytest.mark.timeout(60)

WAIT = 30


class Record(ag.Function):
    """The identity; its backward appends ``tag`` to ``log``."""

    @staticmethod
    def forward(ctx, t, tag, log):
        ctx.tag = tag
        ctx.log = log
        return t * 1.0

    @staticmethod
    def backward(ctx, g):
        ctx.log.append(ctx.tag)
        return g, None, None


class Gate(ag.Function):
    """Blocks the executor in its backward until ``opened`` is set."""

    @staticmethod
    def forward(ctx, t, entered, opened):
        ctx.entered = entered
        ctx.opened = opened
        return t * 1.0

    @staticmethod
    def backward(ctx, g):
        ctx.entered.set()
        assert ctx.opened.wait(WAIT)
        return g, None, None


def chain(tag: str, length: int, log: list[str]) -> ag.Tensor:
    x = ag.tensor(np.ones(3), requires_grad=True)
    y = x
    for _ in range(length):
        y = Record.apply(y, tag, log)
    return y.sum()


class GatedWorker:
    """Holds the CPU worker until ``open()``; ``log`` records the nodes run after it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.log: list[str] = []

    async def close(self, tg: Any) -> None:
        x = ag.tensor(np.ones(2), requires_grad=True)
        tg.start_soon(ag.backward, Gate.apply(x, self.entered, self.opened).sum())
        assert await anyio.to_thread.run_sync(self.entered.wait, WAIT)

    def open(self) -> None:
        self.opened.set()


@pytest.fixture
def horizon() -> Iterator[Any]:
    yield engine.set_no_deadline_horizon
    engine.set_no_deadline_horizon()


@pytest.mark.anyio
async def test_an_older_pass_never_waits_behind_newer_ones() -> None:
    """Pass A is queued before passes B0..B4: all of A runs first, then each B in
    arrival order (before the rank, the newest pass's nodes always came first)."""
    gate = GatedWorker()
    async with anyio.create_task_group() as tg:
        await gate.close(tg)
        tg.start_soon(ag.backward, chain("A", 40, gate.log))
        await wait_all_tasks_blocked()
        for i in range(5):
            tg.start_soon(ag.backward, chain(f"B{i}", 3, gate.log))
            await wait_all_tasks_blocked()
        gate.open()
    assert gate.log == ["A"] * 40 + [f"B{i}" for i in range(5) for _ in range(3)]


@pytest.mark.anyio
async def test_a_long_pass_keeps_its_place_across_time_slices() -> None:
    """Slices of a pass end while newer passes wait (each node here outlasts a
    slice), yet the newer passes still run only after it."""
    class Slow(ag.Function):
        @staticmethod
        def forward(ctx, t, log):
            ctx.log = log
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            end = time.perf_counter() + 2 * engine._engine.SLICE_SECONDS
            while time.perf_counter() < end:  # CPU work longer than a slice
                pass
            ctx.log.append("A")
            return g, None

    gate = GatedWorker()
    async with anyio.create_task_group() as tg:
        await gate.close(tg)
        x = ag.tensor(np.ones(3), requires_grad=True)
        y = x
        for _ in range(6):
            y = Slow.apply(y, gate.log)
        tg.start_soon(ag.backward, y.sum())
        await wait_all_tasks_blocked()
        for i in range(3):
            tg.start_soon(ag.backward, chain(f"B{i}", 2, gate.log))
            await wait_all_tasks_blocked()
        gate.open()
    assert gate.log == ["A"] * 6 + [f"B{i}" for i in range(3) for _ in range(2)]


async def _in_scope(seconds: float, loss: ag.Tensor) -> None:
    with anyio.move_on_after(seconds):
        await ag.backward(loss)


@pytest.mark.anyio
async def test_earliest_deadline_first(horizon: Any) -> None:
    """Deadlines from cancel scopes and ``deadline=`` order the passes; with a long
    horizon the pass without a deadline comes last, with the default one (1 s) it
    comes before passes due later than its horizon."""
    horizon(1000.0)
    gate = GatedWorker()
    async with anyio.create_task_group() as tg:
        await gate.close(tg)
        tg.start_soon(ag.backward, chain("none", 2, gate.log))
        await wait_all_tasks_blocked()
        tg.start_soon(_in_scope, 50, chain("scope50", 2, gate.log))
        await wait_all_tasks_blocked()
        tg.start_soon(_in_scope, 40, chain("scope40", 2, gate.log))
        await wait_all_tasks_blocked()
        loss = chain("explicit30", 2, gate.log)
        tg.start_soon(lambda: ag.backward(loss, deadline=time.monotonic() + 30))
        await wait_all_tasks_blocked()
        gate.open()
    order = ["explicit30", "scope40", "scope50", "none"]
    assert gate.log == [tag for tag in order for _ in range(2)]

    horizon()
    gate = GatedWorker()
    async with anyio.create_task_group() as tg:
        await gate.close(tg)
        tg.start_soon(_in_scope, 50, chain("scope50", 2, gate.log))
        await wait_all_tasks_blocked()
        tg.start_soon(ag.backward, chain("none", 2, gate.log))
        await wait_all_tasks_blocked()
        tg.start_soon(_in_scope, 0.5 * WAIT, chain("scope_soon", 2, gate.log))
        await wait_all_tasks_blocked()
        gate.open()
    assert gate.log == ["none", "none", "scope_soon", "scope_soon", "scope50", "scope50"]


@pytest.mark.anyio
async def test_an_expired_deadline_starts_no_node() -> None:
    """``deadline=`` passes while the pass is queued: TimeoutError, no node ran, and
    the worker goes on with the next pass."""
    gate = GatedWorker()
    due = time.monotonic() + 0.05
    errors: list[BaseException] = []

    async def late() -> None:
        try:
            await ag.backward(chain("late", 3, gate.log), deadline=due)
        except TimeoutError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        await gate.close(tg)
        tg.start_soon(late)
        await wait_all_tasks_blocked()
        tg.start_soon(ag.backward, chain("next", 2, gate.log))
        await wait_all_tasks_blocked()
        await anyio.sleep_until(anyio.current_time() + (due - time.monotonic()))
        while time.monotonic() <= due:  # the clocks may differ by a rounding
            await anyio.sleep(0)
        gate.open()
    assert gate.log == ["next", "next"]
    assert len(errors) == 1 and "deadline expired" in str(errors[0])


@pytest.mark.anyio
async def test_a_scope_deadline_expired_in_the_queue_ends_as_the_scope_says() -> None:
    gate = GatedWorker()
    outcome: list[str] = []

    async def fail_after() -> None:
        try:
            with anyio.fail_after(0.05):
                await ag.backward(chain("failed", 2, gate.log))
        except TimeoutError:
            outcome.append("TimeoutError")

    async def move_on_after() -> None:
        with anyio.move_on_after(0.05) as scope:
            await ag.backward(chain("moved", 2, gate.log))
        outcome.append(f"moved on {scope.cancelled_caught}")

    async with anyio.create_task_group() as tg:
        await gate.close(tg)
        tg.start_soon(fail_after)
        tg.start_soon(move_on_after)
        await wait_all_tasks_blocked()
        await anyio.sleep_until(anyio.current_time() + 0.1)
        gate.open()
    assert gate.log == []
    assert sorted(outcome) == ["TimeoutError", "moved on True"]


def test_an_expired_deadline_starts_no_node_sync_and_inline() -> None:
    log: list[str] = []
    with pytest.raises(TimeoutError, match="deadline expired"):
        ag.backward_sync(chain("sync", 2, log), deadline=time.monotonic() - 1)
    x = ag.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TimeoutError, match="deadline expired"):
        anyio.run(lambda: ag.backward((x * 2.0).sum(), deadline=time.monotonic() - 1))
    assert x.grad is None and log == []
    y = ag.tensor(np.ones(3), requires_grad=True)
    (gy,) = ag.grad_sync((y * 3.0).sum(), [y], deadline=time.monotonic() + WAIT)
    np.testing.assert_array_equal(gy.numpy(), np.full(3, 3.0))


@pytest.mark.parametrize("bad", ["soon", True, math.nan])
def test_deadline_must_be_a_time(bad: Any) -> None:
    x = ag.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match="backward_sync\\(\\): deadline"):
        ag.backward_sync((x * 2.0).sum(), deadline=bad)
    with pytest.raises(ValueError, match="set_no_deadline_horizon"):
        engine.set_no_deadline_horizon(-1)
