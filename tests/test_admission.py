"""Top-level async passes are built a few per loop pass (Note [Admitting passes] in
``aiograd/engine/drivers.py``), under asyncio and Trio.

The tests record when each pass is built by wrapping ``autograd._make_task`` and
count loop passes with a ticker coroutine that passes a checkpoint in a loop; they
wait by checkpoints and events, never by sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest

import aiograd as ag
from aiograd import autograd as _autograd
from aiograd.engine import engine as _engine
from aiograd.engine.drivers import ADMIT_PER_PASS

pytestmark = pytest.mark.timeout(60)

CALLERS = 3 * ADMIT_PER_PASS + 2


class Ticks:
    """The loop passes a ticker coroutine has seen, and what happened in which."""

    def __init__(self) -> None:
        self.now = 0
        self.built: list[tuple[int, int]] = []  # (tick, caller) of each pass built
        self.running = True

    async def ticker(self) -> None:
        while self.running:
            await anyio.lowlevel.checkpoint()
            self.now += 1


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ticks]:
    """``ticks.built`` gets (tick, caller) whenever a pass is built, the caller told
    by its loss's grad_fn (``ticks.owners``)."""
    t = Ticks()
    owners: dict[Any, int] = {}
    original = _autograd._make_task

    def make_task(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        t.built.append((t.now, owners.get(tensors.grad_fn, -1)))
        return original(tensors, *args, **kwargs)

    monkeypatch.setattr(_autograd, "_make_task", make_task)
    t.owners = owners  # type: ignore[attr-defined]
    yield t


def _loss(i: int) -> tuple[ag.Tensor, ag.Tensor]:
    x = ag.tensor(np.full(3, float(i + 1)), requires_grad=True)
    return x, (x * x).sum()


@pytest.mark.anyio
async def test_a_herd_of_callers_is_built_a_few_per_loop_pass_in_arrival_order(
        ticks, anyio_backend):
    """CALLERS coroutines call ``await grad()`` in one loop pass: the first
    ADMIT_PER_PASS are built in it, the others a batch per later loop pass, batch
    after batch in the order they called; every result is right. Under asyncio the
    ticker shows the loop passes: at most ADMIT_PER_PASS builds in each, the ticker
    running between them. (Trio runs a batch of ready tasks in a random order, the
    ticker among them, so a task cannot tell its loop passes apart.)"""
    results: dict[int, Any] = {}
    called: list[int] = []
    losses = [_loss(i) for i in range(CALLERS)]
    for i, (_, loss) in enumerate(losses):
        ticks.owners[loss.grad_fn] = i

    async def caller(i: int) -> None:
        x, loss = losses[i]
        called.append(i)
        results[i] = (await ag.grad(loss, [x]))[0]

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticks.ticker)
        await anyio.lowlevel.checkpoint()  # the ticker is running
        async with anyio.create_task_group() as herd:
            for i in range(CALLERS):
                herd.start_soon(caller, i)
        ticks.running = False

    positions = [called.index(who) for _, who in ticks.built]  # in the order built
    assert sorted(positions) == list(range(CALLERS))
    for built, position in enumerate(positions):  # FIFO, up to the order within a batch
        assert abs(built - position) < ADMIT_PER_PASS, positions
    if anyio_backend == "asyncio":
        per_pass: dict[int, int] = {}
        for tick, _ in ticks.built:
            per_pass[tick] = per_pass.get(tick, 0) + 1
        assert max(per_pass.values()) <= ADMIT_PER_PASS, per_pass
        assert len(per_pass) >= -(-CALLERS // ADMIT_PER_PASS), per_pass
        assert positions == list(range(CALLERS))
    for i, (x, _) in enumerate(losses):
        np.testing.assert_array_equal(results[i].data, 2 * x.data)


@pytest.mark.anyio
async def test_a_caller_cancelled_while_waiting_builds_nothing_and_holds_no_one_up(ticks):
    """The last of a herd is cancelled before it is admitted: it builds no pass, the
    others all finish, and the engine has no pass left."""
    losses = [_loss(i) for i in range(CALLERS)]
    for i, (_, loss) in enumerate(losses):
        ticks.owners[loss.grad_fn] = i
    finished: list[int] = []
    asked: list[int] = []
    waiting = anyio.Event()

    async def caller(i: int) -> None:
        x, loss = losses[i]
        asked.append(i)
        await ag.grad(loss, [x])
        finished.append(i)

    async def last(scope: anyio.CancelScope) -> None:
        with scope:
            waiting.set()
            await caller(CALLERS - 1)

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        for i in range(CALLERS - 1):
            tg.start_soon(caller, i)
        while len(asked) < CALLERS - 1:
            await anyio.lowlevel.checkpoint()
        tg.start_soon(last, scope)  # it asks behind the others, most of them still waiting
        await waiting.wait()
        scope.cancel()

    assert sorted(finished) == list(range(CALLERS - 1))
    assert CALLERS - 1 not in [caller for _, caller in ticks.built]
    assert _engine.get_engine().stats().running_graph_tasks == 0


@pytest.mark.anyio
async def test_a_lone_caller_is_built_at_once(ticks):
    """In steady use nobody waits: a single caller is built in its own step."""
    x, loss = _loss(0)
    ticks.owners[loss.grad_fn] = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticks.ticker)
        await anyio.lowlevel.checkpoint()
        asked_at = ticks.now
        await ag.grad(loss, [x])
        ticks.running = False
    assert ticks.built == [(asked_at, 0)]
