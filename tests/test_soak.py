"""Soak: many backward passes, with failures and cancellations, leave nothing behind.

20,000 backward passes (half under asyncio, half under Trio) of mixed graph
sizes, some through ``grad()``, some with async nodes, hooks and final
callbacks (and some without any, small enough to run inline on the loop),
with errors and cancellations sprinkled in, run 16 at a time. Afterwards the
engine must be back where it started: no new thread, no live GraphTask, as
many live tensors and nodes as before, and the memory allocated by the last
passes (traced: tracemalloc makes them ~3x slower) freed. And a
100,000-node chain runs backward and is freed by reference counting alone,
without recursion.
"""

from __future__ import annotations

import gc
import threading
import tracemalloc
import weakref
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

import aiograd as ag
from aiograd import engine
from aiograd.engine.graph_task import GraphTask, current_graph_task

PASSES = 20_000
BATCH = 16
BACKENDS = ("asyncio", "trio")
#: passes per backend run with tracemalloc on (it makes them ~3x slower)
TRACED = 600
#: memory allocated by the traced passes and still alive afterwards (bytes)
MEMORY_TOLERANCE = 128 * 1024
SCALE = 1.01


class HookError(Exception):
    pass


class AsyncScale(ag.Function):
    """``t * SCALE`` whose backward runs on the loop."""

    @staticmethod
    def forward(ctx, t):
        return t * SCALE

    @staticmethod
    async def backward(ctx, g):
        await anyio.lowlevel.checkpoint()
        return g * SCALE


@dataclass
class Soak:
    """Outcomes of the passes, and the GraphTasks seen by their hooks (weakly)."""

    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    callbacks: int = 0
    #: passes that must be cancelled (they cancel themselves from a hook)
    must_cancel: int = 0
    #: passes that may be cancelled (a zero timeout may lose the race to a tiny graph)
    may_cancel: int = 0
    must_fail: int = 0
    wrong: list[str] = field(default_factory=list)
    graph_tasks: weakref.WeakSet[GraphTask] = field(default_factory=weakref.WeakSet)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def capture(self, grad: Any) -> None:
        """A tensor hook: remember the running GraphTask (weakly)."""
        gt = current_graph_task.get()
        with self.lock:
            self.graph_tasks.add(gt)


async def one_pass(soak: Soak, i: int) -> None:
    """Backward pass number ``i``: its shape and its fate follow from ``i``."""
    size = 200 if i % 500 == 0 else 1 + (i * 7) % 12
    x = ag.tensor([1.0], requires_grad=True)
    y = x
    for k in range(size):
        y = AsyncScale.apply(y) if (i % 11 == 0 and k == size // 2) else y * SCALE
    if i % 3:  # a third of the passes have no hook: small ones run inline on the loop
        y.register_hook(soak.capture)
    if i % 13 == 0:
        def final() -> None:
            with soak.lock:
                soak.callbacks += 1

        async def final_async() -> None:
            await anyio.lowlevel.checkpoint()
            final()

        y.register_hook(lambda g: ag.queue_callback(final_async if i % 26 == 0 else final))

    fails = i % 97 == 0
    cancel = "" if fails or i % 89 else ("self", "fail_after", "move_on_after")[(i // 89) % 3]
    scope = anyio.CancelScope()
    manager: Any = scope
    if fails:
        soak.must_fail += 1

        def raise_in_hook(g: Any) -> None:
            raise HookError(f"pass {i}")

        y.register_hook(raise_in_hook)
    elif cancel == "self":
        soak.must_cancel += 1
        token = anyio.lowlevel.current_token()

        def cancel_from_hook(g: Any) -> None:  # on a worker thread, or on the loop
            if threading.current_thread().name.startswith("aiograd-worker"):
                anyio.from_thread.run_sync(scope.cancel, token=token)
            else:
                scope.cancel()

        y.register_hook(cancel_from_hook)
    elif cancel:
        soak.may_cancel += 1
        manager = anyio.fail_after(0) if cancel == "fail_after" else anyio.move_on_after(0)
    timed_out = False
    try:
        with manager as scope:
            if i % 5 == 0:
                (g,) = await ag.grad(y, x)
            else:
                await ag.backward(y)
                g = x.grad
            soak.completed += 1
            if abs(g.item() - SCALE ** size) > 1e-4 * SCALE ** size:
                soak.wrong.append(f"pass {i}: {g.item()} != {SCALE} ** {size}")
    except HookError as exc:
        soak.failed += 1
        if str(exc) != f"pass {i}":
            soak.wrong.append(f"pass {i} got the error of {exc}")
    except TimeoutError:
        timed_out = True
    if timed_out or scope.cancelled_caught:
        soak.cancelled += 1


async def soak_run(soak: Soak, start: int, count: int) -> None:
    for first in range(start, start + count, BATCH):
        async with anyio.create_task_group() as tg:
            for i in range(first, min(first + BATCH, start + count)):
                tg.start_soon(one_pass, soak, i)


def traced_memory() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def engine_threads(threads: set[threading.Thread]) -> set[threading.Thread]:
    return {t for t in threads if t.name.startswith("aiograd")}


def census() -> dict[str, int]:
    """Live tensors, nodes and GraphTasks (after a full collection)."""
    gc.collect()
    counts: dict[str, int] = {"Tensor": 0, "Node": 0, "GraphTask": 0}
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance: it would ask lazy modules for __class__
        if issubclass(kind, ag.Tensor):
            counts["Tensor"] += 1
        elif issubclass(kind, ag.graph.Node):
            counts["Node"] += 1
        elif kind is GraphTask:
            counts["GraphTask"] += 1
    return counts


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_soak_of_20000_backward_passes_leaves_nothing_behind():
    for backend in BACKENDS:  # warm-up: the worker, caches, trio's and anyio's state
        anyio.run(soak_run, Soak(), 0, 300, backend=backend)
    threads = set(threading.enumerate())
    objects = census()
    soak = Soak()
    half = PASSES // len(BACKENDS)
    untraced = half - TRACED
    for n, backend in enumerate(BACKENDS):
        anyio.run(soak_run, soak, 1 + n * half, untraced, backend=backend)
    tracemalloc.start()
    try:
        baseline = traced_memory()
        for n, backend in enumerate(BACKENDS):
            anyio.run(soak_run, soak, 1 + n * half + untraced, TRACED, backend=backend)
        leaked = traced_memory() - baseline
    finally:
        tracemalloc.stop()
    assert soak.wrong == []
    assert soak.failed == soak.must_fail
    assert soak.must_cancel <= soak.cancelled <= soak.must_cancel + soak.may_cancel
    assert soak.completed + soak.failed + soak.cancelled == PASSES
    assert soak.callbacks > 0
    # No new thread; helper threads of earlier tests (anyio's, trio's) may have retired.
    assert set(threading.enumerate()) <= threads
    assert engine_threads(set(threading.enumerate())) == engine_threads(threads)
    stats = engine.stats()
    assert stats.running_graph_tasks == 0, stats
    assert all(n == 0 for n in stats.queued.values()), stats
    assert len(soak.graph_tasks) == 0
    assert census() == objects
    assert leaked < MEMORY_TOLERANCE, f"{leaked} bytes allocated by the soak are still alive"


# ---- a 100,000-node chain ----


def chain(x: ag.Tensor, length: int) -> tuple[ag.Tensor, weakref.ref]:
    """``x * 1.0`` repeated ``length`` times, and a weakref to the first node."""
    y = x * 1.0
    first = weakref.ref(y.grad_fn)
    for _ in range(length - 1):
        y = y * 1.0
    return y, first


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.anyio
async def test_100000_node_chain_runs_backward_and_is_freed_by_refcount(no_cyclic_gc):
    x = ag.tensor([1.0], dtype="float32", requires_grad=True)
    loss, first = chain(x, 100_000)
    await ag.backward(loss)
    assert x.grad.item() == 1.0
    assert first() is not None  # the loss holds the graph
    del loss
    assert first() is None  # freed at once, without the cyclic collector
    assert engine.stats().running_graph_tasks == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_100000_node_chain_is_freed_without_backward(no_cyclic_gc):
    x = ag.tensor([1.0], dtype="float32", requires_grad=True)
    loss, first = chain(x, 100_000)
    del loss
    assert first() is None


# ---- what the engine keeps after a backward ----


def test_finished_event_loop_is_not_kept_alive_by_the_engine():
    import asyncio

    loops: list[weakref.ref] = []

    async def main() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        await ag.backward(ag.tensor([1.0], requires_grad=True) * 2.0)

    anyio.run(main, backend="asyncio")
    gc.collect()
    assert loops[0]() is None
