"""Note [Giving the loop its turn]: a busy worker lets the loop it serves run.

A worker that drops the GIL for moments (a wake-up of the loop, a short
C call) defeats CPython's forced switching: the waiting loop thread never
gets the GIL while work is queued. Each test runs work that does exactly
that, with a ticker coroutine on the loop that counts its wake-ups, and
checks that the loop ran between pieces of work. With the turns disabled
(``Engine._turn_if_due`` a no-op) the ticker is starved: in three runs 1, 3
and 4 of the four tests failed (CPython's forced switch rescues the loop at
times). Under asyncio and Trio; synchronisation is by events only.
"""

from __future__ import annotations

import os
import threading
import time

import anyio
import numpy as np
import pytest

import aiograd as ag
from aiograd.engine import engine as engine_mod

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

BUSY = 2 * engine_mod.TURN_SECONDS  # work per piece: longer than a turn's spacing
SHORT = engine_mod.TURN_SECONDS / 4
JOBS = 64
NODES = 32


def busy(seconds: float) -> None:
    """Hold the GIL running Python for ``seconds``, dropping it for a moment every
    50 us (``os.stat`` releases it around its system call, as NumPy does around
    a ufunc on a mid-sized array)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        moment = time.perf_counter() + 50e-6
        while time.perf_counter() < moment:
            pass
        os.stat(".")


class Ticker:
    """A service's idle coroutine: wakes every millisecond and counts its wake-ups.

    Its sleep is the workload, not a synchronisation: it is due whenever the
    loop gets a turn, so its count shows whether the loop ran.
    """

    def __init__(self) -> None:
        self.ticks = 0
        self.stop = False

    async def run(self) -> None:
        while not self.stop:
            self.ticks += 1
            await anyio.sleep(0.001)


def advances(seen: list[int]) -> int:
    """How many consecutive pairs of ``seen`` show the ticker ran in between."""
    return sum(b > a for a, b in zip(seen, seen[1:]))


async def test_jobs_queued_back_to_back_let_the_loop_run_between_them():
    ticker = Ticker()
    seen: list[int] = []
    release = threading.Event()

    def job() -> None:  # shorter than the switch interval: only its wake-up drops the GIL
        assert release.wait(30)
        seen.append(ticker.ticks)
        end = time.perf_counter() + SHORT
        while time.perf_counter() < end:
            pass

    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as jobs:
            for _ in range(JOBS):
                jobs.start_soon(ag.offload, job)
            await anyio.wait_all_tasks_blocked()  # all 12 queued on the worker
            tg.start_soon(ticker.run)
            release.set()
        ticker.stop = True
    assert len(seen) == JOBS
    # a turn every TURN_SECONDS of work, after every fifth job at least: ~12 turns
    assert advances(seen) >= 6, seen


class Busy(ag.Function):
    """Identity whose backward keeps the worker busy."""

    @staticmethod
    def forward(ctx, x, ticker, seen):
        ctx.ticker, ctx.seen = ticker, seen
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        ctx.seen.append(ctx.ticker.ticks)
        busy(BUSY / 2)
        return grad, None, None


async def test_a_long_backward_lets_the_loop_run_during_it(workers_only):
    ticker = Ticker()
    seen: list[int] = []
    x = ag.tensor(np.ones(3), requires_grad=True)
    y = x
    for _ in range(NODES):
        y = Busy.apply(y, ticker, seen)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        await y.sum().backward()
        ticker.stop = True
    assert len(seen) == NODES
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(3))
    # a turn every other node at least (each is busy for half a turn's spacing): ~16 turns
    assert advances(seen) >= 8, seen
