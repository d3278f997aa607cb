"""Engine observability: ``aiograd.engine.stats()`` per worker, and the observer seam
(``aiograd/engine/_observe.py``) a profiler records nodes through."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import anyio
import numpy as np
import pytest
from anyio import wait_all_tasks_blocked
from test_scheduling import GatedWorker, chain

import aiograd as ag
from aiograd import engine
from aiograd.engine import _observe
from aiograd.engine.ready_queue import RECENT_PASSES

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """A thread-safe observer that keeps every call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.starts: dict[int, float] = {}
        self.ends: dict[int, tuple[float, BaseException | None]] = {}
        self.nodes: list[tuple[int, str, str, float, float, float]] = []

    def task_start(self, task_id: int, t: float) -> None:
        with self.lock:
            self.starts[task_id] = t

    def node(self, task_id: int, name: str, thread: str, ready: float, start: float,
             end: float) -> None:
        with self.lock:
            self.nodes.append((task_id, name, thread, ready, start, end))

    def task_end(self, task_id: int, t: float, error: BaseException | None) -> None:
        with self.lock:
            self.ends[task_id] = (t, error)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    old = _observe.set_observer(rec)
    try:
        yield rec
    finally:
        _observe.set_observer(old)


def mlp_loss() -> tuple[ag.Tensor, list[str]]:
    """A small MLP's loss and the names of the nodes its backward runs."""
    rng = np.random.default_rng(0)
    x = ag.tensor(rng.standard_normal((4, 3)))
    w1 = ag.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    w2 = ag.tensor(rng.standard_normal((5, 2)), requires_grad=True)
    loss = ((x @ w1).relu() @ w2).sum()
    names, seen, stack = [], {loss.grad_fn}, [loss.grad_fn]
    while stack:
        node = stack.pop()
        names.append(node.name())
        for edge in node.next_edges:
            if edge is not None and edge[0] not in seen:
                seen.add(edge[0])
                stack.append(edge[0])
    return loss, names


def check_task(rec: Recorder, names: list[str]) -> None:
    (task_id,) = rec.starts
    assert rec.ends[task_id][1] is None
    assert sorted(n[1] for n in rec.nodes) == sorted(names)
    begin, finish = rec.starts[task_id], rec.ends[task_id][0]
    for tid, _, thread, ready, start, end in rec.nodes:
        assert tid == task_id and thread
        assert begin <= ready <= start <= end <= finish


@pytest.mark.anyio
async def test_a_recording_observer_sees_every_node_of_an_async_backward(
        recorder: Recorder, workers_only: None) -> None:
    loss, names = mlp_loss()
    await ag.backward(loss)
    check_task(recorder, names)
    assert {n[2] for n in recorder.nodes} == {"aiograd-worker-cpu"}


def test_a_recording_observer_sees_every_node_of_a_sync_backward(recorder: Recorder) -> None:
    loss, names = mlp_loss()
    ag.backward_sync(loss)
    check_task(recorder, names)


def test_an_observed_error_reaches_task_end(recorder: Recorder) -> None:
    class Boom(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    x = ag.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match="boom"):
        ag.backward_sync(Boom.apply(x).sum())
    ((_, error),) = recorder.ends.values()
    assert isinstance(error, ValueError)


@pytest.mark.anyio
async def test_stats_report_waiting_running_and_recent_percentiles() -> None:
    before = engine.stats().per_worker.get("cpu")
    gate = GatedWorker()
    async with anyio.create_task_group() as tg:
        await gate.close(tg)
        for i in range(3):
            tg.start_soon(ag.backward, chain(f"P{i}", 2, gate.log))
        await wait_all_tasks_blocked()
        queued = time.perf_counter()  # all three are in the queue by now
        cpu = engine.stats().per_worker["cpu"]
        assert cpu.waiting == 3 and cpu.running == 1  # the gate runs, 3 passes wait
        opened = time.perf_counter()
        gate.open()
    cpu = engine.stats().per_worker["cpu"]
    assert cpu.waiting == 0 and cpu.running == 0
    assert cpu.passes >= min(4 + (before.passes if before else 0), RECENT_PASSES)
    assert set(cpu.queue_wait) == set(cpu.run_time) == {"p50", "p90", "p99", "max"}
    # the three gated passes waited at least from when all were queued to the gate's opening
    assert cpu.queue_wait["max"] >= opened - queued
    assert 0 < cpu.run_time["p50"] <= cpu.run_time["max"]
    assert "WorkerStats(waiting=0" in repr(cpu)
