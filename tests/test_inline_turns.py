"""Passes run on the event loop take turns (Note [Inline passes take turns] in
``aiograd/engine/drivers.py``), under asyncio and Trio.

The tests shorten the time slice to nothing (``evaluate.SLICE_SECONDS``), so
every turn runs exactly one node, and record the passes' slices by wrapping
the engine's ``run_slice``. They wait by loop checkpoints and events, never by
sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import numpy as np
import pytest
import test_scheduling_soak as soak_mod

import aiograd as ag
from aiograd.engine import engine as _engine
from aiograd.engine import evaluate
from aiograd.engine.drivers import inline_turns

pytestmark = pytest.mark.timeout(60)


def leaf(values: Any) -> ag.Tensor:
    return ag.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def chain(x: ag.Tensor, ops: int) -> ag.Tensor:
    for _ in range(ops):
        x = x * 1.5
    return x.sum()


@pytest.fixture
def one_node_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every slice ends after its first node (its time is up at once)."""
    monkeypatch.setattr(evaluate, "SLICE_SECONDS", -1.0)


@pytest.fixture
def slices(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[ag.Tensor, str], None]]:
    """``name(loss, tag)`` tags a pass by its root; ``log`` (the fixture's attribute)
    gets the tag of each slice the engine runs, and ``tick`` marks a loop pass."""
    engine = _engine.get_engine()
    tags: dict[Any, str] = {}
    log: list[str] = []
    original = type(engine).run_slice

    def run_slice(self: Any, queue: Any, gt: Any, heap: list[Any]) -> bool:
        log.append(tags.get(gt.root_node, "?"))
        return original(self, queue, gt, heap)

    monkeypatch.setattr(type(engine), "run_slice", run_slice)

    def name(loss: ag.Tensor, tag: str) -> None:
        tags[loss.grad_fn] = tag

    name.log = log  # type: ignore[attr-defined]
    yield name


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await anyio.lowlevel.checkpoint()


@pytest.mark.anyio
async def test_the_loop_runs_its_other_work_between_turns(one_node_slices, slices):
    """With 16 passes of 5 op nodes each in flight, the loop runs at most two slices
    between two passes of a probe coroutine (one handed on, one started at once)."""
    log = slices.log
    done = anyio.Event()
    grads = []

    async def probe() -> None:
        while not done.is_set():
            log.append("tick")
            await anyio.lowlevel.checkpoint()

    async def request(i: int) -> None:
        x = leaf([1.0, 2.0])
        loss = chain(x, 4)
        slices(loss, f"p{i}")
        await ag.backward(loss)
        grads.append(x.grad.numpy())

    async with anyio.create_task_group() as tg:
        tg.start_soon(probe)
        async with anyio.create_task_group() as requests:
            for i in range(16):
                requests.start_soon(request, i)
        done.set()
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    chain(tx, 4).backward()
    for g in grads:
        np.testing.assert_allclose(g, tx.grad.numpy())
    assert len(grads) == 16
    runs = "".join("|" if entry == "tick" else "s" for entry in log).split("|")
    # one slice per op node (the leaf's gradient is added by the last: Note [Direct
    # accumulation])
    assert sum(map(len, runs)) == 16 * 5
    assert max(map(len, runs)) <= 2, runs


@pytest.mark.anyio
async def test_turns_go_earliest_deadline_first_then_in_arrival_order(one_node_slices, slices):
    """X runs; A, then B, then C (with the earliest deadline) arrive: C's nodes run
    next, then X's and A's and B's in arrival order (Note [Fair scheduling])."""
    finished: list[str] = []
    started = 0

    async def run(tag: str, ops: int, deadline: float | None = None) -> None:
        nonlocal started
        x = leaf([1.0, 2.0])
        loss = chain(x, ops)
        slices(loss, tag)
        started += 1
        await ag.backward(loss, deadline=deadline)
        finished.append(tag)

    engine = _engine.get_engine()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "X", 12)
        await until(lambda: slices.log.count("X") >= 1)
        tg.start_soon(run, "A", 3)
        await until(lambda: started == 2 and engine.stats().running_graph_tasks >= 2)
        tg.start_soon(run, "B", 3)
        await until(lambda: started == 3 and engine.stats().running_graph_tasks >= 3)
        tg.start_soon(run, "C", 3, time.monotonic() + 0.5)
    assert finished == ["C", "X", "A", "B"]
    log = slices.log
    first_c = log.index("C")
    assert "A" not in log[:first_c] and "B" not in log[:first_c]
    assert log[first_c:first_c + 4] == ["C"] * 4  # C keeps the turn until it is done


@pytest.mark.anyio
async def test_a_pass_cancelled_while_waiting_for_its_turn(one_node_slices, slices):
    """A cancelled waiter leaves the turns; the others go on, and the turn is free after."""
    outcome: dict[str, str] = {}

    async def run(tag: str, ops: int) -> None:
        x = leaf([1.0, 2.0])
        loss = chain(x, ops)
        slices(loss, tag)
        await ag.backward(loss)
        outcome[tag] = "done"

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "X", 8)
        await until(lambda: slices.log.count("X") >= 1)
        scope = anyio.CancelScope()

        async def cancelled() -> None:
            with scope:
                await run("A", 3)
            outcome.setdefault("A", "cancelled")

        tg.start_soon(run, "B", 3)
        tg.start_soon(cancelled)
        await until(lambda: _engine.get_engine().stats().running_graph_tasks >= 3)
        scope.cancel()
    assert outcome == {"X": "done", "B": "done", "A": "cancelled"}
    assert "A" not in slices.log
    turns = inline_turns()
    await until(lambda: turns.holder is None)  # freed on the loop's next pass
    assert all(entry[2] is None for entry in turns._waiting)
    # the turn was not lost: a new pass runs at once
    x = leaf([1.0, 2.0])
    await ag.backward(chain(x, 2))
    np.testing.assert_allclose(x.grad.numpy(), [2.25, 2.25])


@pytest.mark.anyio
async def test_graphs_large_in_all_but_small_per_node_run_on_the_loop(loop_wakes):
    """The element limit is per node (a slice can overrun its time by one node):
    two 20,000-element branches run inline; one 40,000-element node does not."""
    torch = pytest.importorskip("torch")
    values = np.linspace(-1.0, 1.0, 20_000)
    x = leaf(values)
    await ag.backward((x * 2.0).sum() + (x.tanh() * 3.0).sum())
    tx = torch.tensor(values, requires_grad=True)
    ((tx * 2.0).sum() + (tx.tanh() * 3.0).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    assert loop_wakes == []
    big = leaf(np.ones(40_000))
    await ag.backward((big * 2.0).sum())
    np.testing.assert_allclose(big.grad.numpy(), np.full(40_000, 2.0))
    assert loop_wakes == [1]


@pytest.mark.anyio
async def test_an_inline_pass_expired_by_its_scope_ends_as_the_scope_says(monkeypatch):
    """The engine's clock finds the pass due before the scope's own deadline fires
    (the two clocks differ by microseconds): the pass starts no node, and the caller
    still sees only what the scope does (``move_on_after`` moves on), no TimeoutError."""
    from aiograd.engine import drivers

    monkeypatch.setattr(drivers, "_scope_due", lambda gt: drivers._perf_counter())
    x = leaf([1.0, 2.0])
    with anyio.move_on_after(0.2) as scope:
        await ag.backward(chain(x, 3))
    assert scope.cancelled_caught
    assert x.grad is None


@pytest.mark.anyio
async def test_stats_report_the_passes_run_on_the_loop(one_node_slices, slices):
    """``stats().per_worker["loop"]``: X runs, A waits for its first turn; then both
    are among the recent finished passes."""
    engine = _engine.get_engine()
    before = engine.stats().per_worker.get("loop")
    seen: list[Any] = []

    async def run(tag: str, ops: int) -> None:
        x = leaf([1.0, 2.0])  # alive: a dead leaf's graph goes to the workers
        loss = chain(x, ops)
        slices(loss, tag)
        await ag.backward(loss)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "X", 8)
        await until(lambda: slices.log.count("X") >= 1)
        tg.start_soon(run, "A", 2)
        await until(lambda: engine.stats().running_graph_tasks >= 2)
        seen.append(engine.stats().per_worker["loop"])
    assert (seen[0].waiting, seen[0].running) == (1, 1)
    loop = engine.stats().per_worker["loop"]
    assert (loop.waiting, loop.running) == (0, 0)
    assert loop.passes == min((before.passes if before else 0) + 2, 1024)
    assert set(loop.queue_wait) == set(loop.run_time) == {"p50", "p90", "p99", "max"}
    assert 0 < loop.run_time["max"]


class InlineLoad(soak_mod.Load):
    """The scheduling soak's mix with graphs small enough to run on the loop (no custom
    Function): every pass takes turns there (and ``raising`` expires instead)."""

    def scale(self, t: ag.Tensor) -> ag.Tensor:
        return t * 2.0

    async def raising(self, x, w1, w2) -> None:
        try:
            await ag.backward(((x @ w1).relu() @ w2).sum(), deadline=time.monotonic() - 1.0)
        except TimeoutError:
            return
        self.wrong.append("expired: no TimeoutError")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_inline_soak_short(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """64 clients' passes all on the loop for 3 s: each finishes within the soak's
    bound; threads, GraphTasks, tensors, nodes and the turns come back to where they were."""
    monkeypatch.setattr(soak_mod, "Load", InlineLoad)
    engine = _engine.get_engine()
    before = engine.stats().per_worker.get("loop")
    soak_mod.soak(3.0, backend)
    loop = engine.stats().per_worker["loop"]
    assert loop.passes > (before.passes if before else 0) or loop.passes == 1024
