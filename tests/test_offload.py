"""``await aiograd.offload(fn, ...)``: model code on the CPU worker (Note [Offloading]).

Each guarantee of the Note, under asyncio and Trio: the result or the
exception comes back, ``fn`` runs on the CPU worker in the caller's context,
``backward_sync`` works inside it, the loop keeps running meanwhile, jobs
queue behind node tasks, cancellation before the start means it never runs,
cancellation after the start waits for the end, and a job that can never run
fails instead of hanging. Synchronisation is by events only.
"""

from __future__ import annotations

import contextvars
import threading
import traceback
import warnings

import anyio
import numpy as np
import pytest
from probes import passthrough

import aiograd as ag
from aiograd import engine

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

WAIT = 30  # seconds a thread may wait for an event before the test fails
WORKER = "aiograd-worker-cpu"


class Gate:
    """A job that holds the CPU worker until ``release`` is set."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        self.started.set()
        assert self.release.wait(WAIT)
        return "gate"

    async def wait_started(self) -> None:
        await anyio.to_thread.run_sync(self.started.wait, WAIT)


def step(w: ag.Tensor, x: np.ndarray) -> float:
    """A training step: forward and backward_sync, as a service would offload it."""
    loss = ((ag.tensor(x) * w).sum() ** 2)
    ag.backward_sync(loss)
    return loss.item()


async def test_offload_returns_the_result_of_fn_run_on_the_cpu_worker():
    def where(a, b, *, c):
        return threading.current_thread().name, a + b + c

    name, total = await ag.offload(where, 1, 2, c=3)
    assert name == WORKER
    assert total == 6


async def test_backward_sync_inside_an_offloaded_step_gives_the_same_gradient():
    x = np.arange(1.0, 5.0)
    w = ag.tensor(np.full(4, 0.5), requires_grad=True)
    loss = await ag.offload(step, w, x)
    expected = ag.tensor(np.full(4, 0.5), requires_grad=True)
    assert loss == await anyio.to_thread.run_sync(step, expected, x)  # a plain thread
    np.testing.assert_array_equal(w.grad.numpy(), expected.grad.numpy())


async def test_offloaded_forward_can_be_awaited_backward_on_the_loop():
    w = ag.tensor(np.full(3, 2.0), requires_grad=True)
    loss = await ag.offload(lambda: (w * w).sum())
    await loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [4.0, 4.0, 4.0])


async def test_an_exception_in_fn_reaches_the_caller_with_its_traceback():
    def broken():
        raise KeyError("missing weight")

    with pytest.raises(KeyError, match="missing weight") as info:
        await ag.offload(broken)
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "broken" in frames
    assert await ag.offload(lambda: 7) == 7  # the worker serves the next job


async def test_fn_sees_the_callers_contextvars():
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")
    request_id.set("r-42")

    def look():
        return request_id.get(), ag.is_grad_enabled()

    with ag.no_grad():
        assert await ag.offload(look) == ("r-42", False)
    assert await ag.offload(look) == ("r-42", True)


async def test_warnings_raised_in_fn_are_replayed_to_the_caller():
    def warn():
        warnings.warn("learning rate too high", UserWarning, stacklevel=1)
        return 1

    with pytest.warns(UserWarning, match="learning rate too high"):
        assert await ag.offload(warn) == 1


async def test_the_loop_keeps_running_while_a_job_runs():
    loop_ran = threading.Event()
    gate = Gate()

    async def other_coroutine():
        await gate.wait_started()
        loop_ran.set()  # the loop ran this while the job held the worker

    def job():
        gate.started.set()
        return loop_ran.wait(WAIT)

    async with anyio.create_task_group() as tg:
        tg.start_soon(other_coroutine)
        assert await ag.offload(job) is True


async def test_a_job_cancelled_before_it_starts_never_runs():
    gate = Gate()
    ran = threading.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ag.offload, gate)
        await gate.wait_started()  # the worker is busy: the next job stays queued
        with anyio.CancelScope() as scope:
            scope.cancel()
            await ag.offload(ran.set)
        assert scope.cancelled_caught
        gate.release.set()
    assert await ag.offload(lambda: "after") == "after"  # jobs run in order: it was passed
    assert not ran.is_set()


async def test_a_job_cancelled_while_running_is_waited_for():
    gate = Gate()
    finished = threading.Event()

    def job():
        gate()
        finished.set()

    async with anyio.create_task_group() as tg:
        outcome = {}

        async def caller():
            with anyio.CancelScope() as scope:
                outcome["scope"] = scope
                await ag.offload(job)
            outcome["finished_when_cancel_arrived"] = finished.is_set()
            outcome["cancelled"] = scope.cancelled_caught

        tg.start_soon(caller)
        await gate.wait_started()
        outcome["scope"].cancel()
        gate.release.set()
    assert outcome == {"scope": outcome["scope"], "finished_when_cancel_arrived": True,
                       "cancelled": True}


async def test_a_queued_job_waits_behind_node_tasks_queued_after_it(workers_only):
    order = []
    Record = passthrough(lambda: order.append("node"))
    gate = Gate()
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = Record.apply(Record.apply(x)).sum()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ag.offload, gate)
        await gate.wait_started()
        tg.start_soon(ag.offload, order.append, "job")  # queued first ...
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(y.backward)  # ... the backward's root after it
        await anyio.wait_all_tasks_blocked()
        gate.release.set()
    assert order == ["node", "node", "job"]


async def test_64_concurrent_offloaded_steps_accumulate_exactly():
    w = ag.tensor(np.zeros(3), requires_grad=True)
    xs = [np.full(3, float(i)) for i in range(64)]

    def request(x):
        loss = (ag.tensor(x) * w).sum()  # d loss / d w = x
        ag.backward_sync(loss)

    async with anyio.create_task_group() as tg:
        for x in xs:
            tg.start_soon(ag.offload, request, x)
    np.testing.assert_array_equal(w.grad.numpy(), np.sum(xs, axis=0))


# ---- Note [Batched wake-ups] ----


async def test_a_finished_job_reaches_its_caller_while_the_worker_runs_the_next():
    # Under asyncio the first job's wake-up is held for the loop's collector (the
    # worker has the last job queued); the collector must deliver it while the
    # worker is still inside that job, which ends only once it is delivered.
    hold, last = Gate(), Gate()
    delivered = anyio.Event()
    results = []

    async def first():
        results.append(await ag.offload(lambda: "first"))
        delivered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ag.offload, hold)
        await hold.wait_started()
        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()  # queued before the last job (Trio
        tg.start_soon(ag.offload, last)       # starts tasks in no fixed order)
        await anyio.wait_all_tasks_blocked()
        hold.release.set()
        await last.wait_started()
        await delivered.wait()
        last.release.set()
    assert results == ["first"]


def held_wake_ups_while_the_worker_stays_busy(collect_seconds: float) -> tuple[int, list]:
    """Run a held-back job and a last one on a fresh asyncio loop whose collector
    runs every ``collect_seconds``; return how many wake-ups the last job saw held
    and the results."""
    import asyncio

    from aiograd.engine import _bridge

    hold = Gate()
    seen = []

    async def main():
        loop = asyncio.get_running_loop()

        def last():
            seen.append(len(_bridge._collectors[loop]._held))
            return "last"

        first = asyncio.ensure_future(ag.offload(hold))
        await anyio.to_thread.run_sync(hold.started.wait, WAIT)
        jobs = [asyncio.ensure_future(ag.offload(lambda: "second")),
                asyncio.ensure_future(ag.offload(last))]
        await asyncio.sleep(0)  # both are queued behind the held-back job
        hold.release.set()
        return await asyncio.gather(first, *jobs)

    original = _bridge.COLLECT_SECONDS
    _bridge.COLLECT_SECONDS = collect_seconds
    try:
        results = asyncio.run(main())
    finally:
        _bridge.COLLECT_SECONDS = original
    return seen[0], results


def test_wake_ups_held_for_the_collector_are_sent_when_the_worker_goes_idle():
    # The collector would run only in an hour: the held wake-ups of the first two
    # jobs reach their callers because the worker sends them once its queue is empty.
    held, results = held_wake_ups_while_the_worker_stays_busy(collect_seconds=3600)
    assert held == 2
    assert results == ["gate", "second", "last"]


def test_a_collector_that_held_nothing_stops_and_wakes_callers_at_once():
    # Two callers wait on long jobs: once a period ends with nothing held, the timer
    # stops (no wake-ups of the loop for nothing) and a finished job wakes its caller
    # at once, though the worker is busy with the next (held, it would wait an hour).
    import asyncio

    from aiograd.engine import _bridge

    async def main():
        first, second = Gate(), Gate()
        jobs = [asyncio.ensure_future(ag.offload(first)),
                asyncio.ensure_future(ag.offload(second))]
        await anyio.to_thread.run_sync(first.started.wait, WAIT)
        collector = _bridge._collectors[asyncio.get_running_loop()]
        started = collector.running
        collector._collect()  # the period ends: nothing was held
        first.release.set()
        result = await jobs[0]
        second.release.set()
        return started, collector.running, result, await jobs[1]

    original = _bridge.COLLECT_SECONDS
    _bridge.COLLECT_SECONDS = 3600
    try:
        assert asyncio.run(main()) == (True, False, "gate", "gate")
    finally:
        _bridge.COLLECT_SECONDS = original


def test_a_lone_caller_is_woken_at_once_without_a_collector():
    import asyncio

    from aiograd.engine import _bridge

    async def main():
        gate = Gate()
        gate.release.set()
        await ag.offload(gate)
        return _bridge._collectors[asyncio.get_running_loop()].running

    assert asyncio.run(main()) is False


async def test_with_multithreading_disabled_fn_runs_on_the_callers_thread():
    with ag.set_multithreading_enabled(False):
        name = await ag.offload(lambda: threading.current_thread().name)
    assert name == threading.current_thread().name


async def test_a_job_queued_at_shutdown_fails_instead_of_hanging():
    gate = Gate()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ag.offload, gate)
        await gate.wait_started()
        outcome = {}

        async def queued():
            try:
                await ag.offload(lambda: "ran")
            except RuntimeError as exc:
                outcome["error"] = str(exc)

        tg.start_soon(queued)
        await anyio.wait_all_tasks_blocked()
        stopping = threading.Thread(target=engine.shutdown, kwargs={"timeout": WAIT})
        stopping.start()
        gate.release.set()
        await anyio.to_thread.run_sync(stopping.join, WAIT)
    assert "shut down" in outcome["error"]
    assert await ag.offload(lambda: "fresh engine") == "fresh engine"


async def test_offload_rejects_a_non_callable():
    with pytest.raises(TypeError, match="offload\\(\\) expects a callable, got int"):
        await ag.offload(3)
