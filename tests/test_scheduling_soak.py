"""Soak of the scheduler: 64 passes in flight for a while, every one finishes in time.

64 clients share the CPU worker (every graph holds a custom Function, so
nothing runs inline on the loop), each looping over a mix: an MLP's
``backward``, a chain, a backward that raises, a pass cancelled while queued
or running, and ``grad(retain_graph=True)`` twice over one graph. Under
Note [Fair scheduling] no pass waits behind later ones, so every pass must
finish within ``BOUND`` seconds, however long the load lasts (before the
rank, some passes waited until the load ended). Afterwards threads,
GraphTasks, tensors and nodes are back where they started.

``test_scheduling_soak_short`` runs in the normal suite; the 60 s soak is
marked ``slow``.
"""

from __future__ import annotations

import threading
import time

import anyio
import numpy as np
import pytest
from test_soak import census, engine_threads

import aiograd as ag
from aiograd import engine

CLIENTS = 64
#: seconds any pass may take, from its call to its return (a 2-core shared machine)
BOUND = 20.0


class Scale(ag.Function):
    """``t * 2`` as a custom Function (never inline on the loop)."""

    @staticmethod
    def forward(ctx, t):
        return t * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


class Raise(ag.Function):
    @staticmethod
    def forward(ctx, t):
        return t * 1.0

    @staticmethod
    def backward(ctx, g):
        raise ArithmeticError("soak: raised in backward")


class Load:
    def __init__(self, seconds: float) -> None:
        self.until = time.perf_counter() + seconds
        self.latencies: list[float] = []
        self.wrong: list[str] = []
        self.counts = {"mlp": 0, "chain": 0, "raising": 0, "cancel": 0, "grad": 0}

    async def client(self, c: int) -> None:
        rng = np.random.default_rng(c)
        w1 = ag.tensor(rng.standard_normal((8, 16)), requires_grad=True)
        w2 = ag.tensor(rng.standard_normal((16, 4)), requires_grad=True)
        i = 0
        while time.perf_counter() < self.until:
            kind = ("mlp", "chain", "raising", "cancel", "grad")[(c + i) % 5]
            i += 1
            x = ag.tensor(rng.standard_normal((4, 8)))
            start = time.perf_counter()
            await getattr(self, kind)(x, w1, w2)
            self.latencies.append(time.perf_counter() - start)
            self.counts[kind] += 1

    def scale(self, t: ag.Tensor) -> ag.Tensor:
        """``t * 2``, as a custom Function: the passes run on the workers."""
        return Scale.apply(t)

    async def mlp(self, x, w1, w2) -> None:
        w1.grad = w2.grad = None
        await ag.backward(self.scale((x @ w1).relu() @ w2).sum())
        if w1.grad is None or w2.grad is None:
            self.wrong.append("mlp: no .grad")

    async def chain(self, x, w1, w2) -> None:
        leaf = ag.tensor(np.ones(3), requires_grad=True)
        y = leaf
        for _ in range(20):
            y = self.scale(y) * 0.5
        await ag.backward(y.sum())
        if not np.array_equal(leaf.grad.numpy(), np.ones(3)):
            self.wrong.append("chain: wrong gradient")

    async def raising(self, x, w1, w2) -> None:
        try:
            await ag.backward(Raise.apply(x @ w1).sum())
        except ArithmeticError:
            return
        self.wrong.append("raise: no error")

    async def cancel(self, x, w1, w2) -> None:
        with anyio.CancelScope() as scope:
            loss = self.scale((x @ w1).relu() @ w2).sum()
            scope.cancel()  # takes effect at the pass's first checkpoint (or turn)
            await ag.backward(loss)
        if not scope.cancelled_caught:
            self.wrong.append("cancel: not cancelled")

    async def grad(self, x, w1, w2) -> None:
        loss = self.scale((x @ w1).relu() @ w2).sum()
        (first,) = await ag.grad(loss, [w1], retain_graph=True)
        (second,) = await ag.grad(loss, [w1])
        if not np.array_equal(first.numpy(), second.numpy()):
            self.wrong.append("grad: retained graph gave another gradient")


async def run_load(seconds: float) -> Load:
    load = Load(seconds)
    async with anyio.create_task_group() as tg:
        for c in range(CLIENTS):
            tg.start_soon(load.client, c)
    return load


def soak(seconds: float, anyio_backend: str) -> None:
    anyio.run(run_load, 0.2, backend=anyio_backend)  # warm-up
    threads = set(threading.enumerate())
    objects = census()
    load = anyio.run(run_load, seconds, backend=anyio_backend)
    assert load.wrong == []
    assert all(n > 0 for n in load.counts.values()), load.counts
    assert max(load.latencies) <= BOUND, f"slowest pass took {max(load.latencies):.1f} s"
    assert engine_threads(set(threading.enumerate())) == engine_threads(threads)
    stats = engine.stats()
    assert stats.running_graph_tasks == 0, stats
    assert all(w.waiting == 0 and w.running == 0 for w in stats.per_worker.values()), stats
    assert census() == objects


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_scheduling_soak_short(backend: str) -> None:
    soak(2.0, backend)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_scheduling_soak_60_seconds(backend: str) -> None:
    soak(60.0, backend)
