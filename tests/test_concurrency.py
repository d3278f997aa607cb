"""Many GraphTasks at once: coroutines, event loops in threads, and plain threads.

Every GraphTask shares the same device workers (DESIGN.md §1). These tests run
many of them at the same time, from every kind of caller, into shared leaves,
and check that every result is exact and every gradient contribution lands in
the shared ``.grad`` exactly once. Values are small integers in float64, so
every sum is exact whatever order the workers add in.

Also: the engine's statistics while a GraphTask is blocked, and the event loop
is neither blocked by a long backward nor woken once per node.

Synchronisation is by events, barriers and ``wait_all_tasks_blocked`` only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import numpy as np
import pytest
from anyio import wait_all_tasks_blocked

import aiograd as ag
from aiograd import engine
from aiograd.engine import engine as engine_mod
from aiograd.engine._bridge import LoopSignal

pytestmark = pytest.mark.timeout(60)

#: seconds a thread of a test may wait for the others before the test fails
WAIT = 30


def f64(values: Any, requires_grad: bool = False) -> ag.Tensor:
    return ag.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


class Through(ag.Function):
    """The identity as a custom Function: a graph holding it always runs on the
    workers, never inline on the loop thread (Note [Inline small graphs])."""

    @staticmethod
    def forward(ctx, t):
        return t * 1.0

    @staticmethod
    def backward(ctx, g):
        return g


class Shared:
    """Two leaves shared by every pass; pass ``k`` has its own leaf ``x_k``.

    Pass ``k``: ``loss = sum((x_k * w) ** 2) + sum(b * k)`` with
    ``x_k = [k, k+1, k+2, k+3]``, so ``x_k.grad == 2 x_k w**2`` and it adds
    ``2 x_k**2 w`` to ``w.grad`` and ``k`` to each element of ``b.grad``.
    Every ``grad_every``-th pass uses ``grad()`` (checked, not accumulated).
    Odd passes go through ``Through``, so they run on the workers; the engine
    may run even ones, small and CPU-only, inline on the caller's thread: both
    kinds add into the same leaves at the same time.

    ``accumulated`` and ``wrong`` are appended to from many threads
    (``list.append`` is atomic under the GIL).
    """

    W = np.array([1.0, 2.0, 3.0, 4.0])

    def __init__(self, grad_every: int = 0, devices: list[str] | None = None) -> None:
        self.w = f64(self.W, requires_grad=True)
        self.b = f64([0.5, 0.25, 2.0, 8.0], requires_grad=True)
        self.grad_every = grad_every
        #: if given, pass k computes ``x_k * w`` on ``devices[k % len(devices)]``
        self.devices = devices
        #: k of every pass that accumulated into w and b
        self.accumulated: list[int] = []
        #: descriptions of wrong results
        self.wrong: list[str] = []

    def graph(self, k: int) -> tuple[ag.Tensor, ag.Tensor]:
        x = f64(np.arange(k, k + 4), requires_grad=True)
        if self.devices:
            dev = self.devices[k % len(self.devices)]
            h = (x.to(dev) * self.w.to(dev)).cpu()
        else:
            h = x * self.w
        if k % 2:
            h = Through.apply(h)
        return x, (h * h).sum() + (self.b * float(k)).sum()

    def uses_grad(self, k: int) -> bool:
        return self.grad_every > 0 and k % self.grad_every == 0

    def check(self, k: int, what: str, got: Any, expected: np.ndarray) -> None:
        got = None if got is None else np.asarray(got.numpy())
        if got is None or got.dtype != np.float64 or not np.array_equal(got, expected):
            self.wrong.append(f"pass {k}: {what} = {got!r}, expected {expected!r}")

    def check_x(self, k: int, got: Any) -> None:
        self.check(k, "x.grad", got, 2 * np.arange(k, k + 4.0) * self.W**2)

    def check_grads(self, k: int, grads: tuple[Any, ...]) -> None:
        gx, gw, gb = grads
        self.check_x(k, gx)
        self.check(k, "dloss/dw", gw, 2 * np.arange(k, k + 4.0) ** 2 * self.W)
        self.check(k, "dloss/db", gb, np.full(4, float(k)))

    def sync_pass(self, k: int) -> None:
        x, loss = self.graph(k)
        if self.uses_grad(k):
            self.check_grads(k, ag.grad_sync(loss, [x, self.w, self.b]))
        else:
            ag.backward_sync(loss)
            self.check_x(k, x.grad)
            self.accumulated.append(k)

    async def async_pass(self, k: int, start: anyio.Event | None = None) -> None:
        x, loss = self.graph(k)
        if start is not None:
            await start.wait()
        if self.uses_grad(k):
            self.check_grads(k, await ag.grad(loss, [x, self.w, self.b]))
        else:
            await ag.backward(loss)
            self.check_x(k, x.grad)
            self.accumulated.append(k)

    async def async_batch(self, ks: list[int]) -> None:
        """All passes of ``ks`` at once in this loop, started together."""
        start = anyio.Event()
        async with anyio.create_task_group() as tg:
            for k in ks:
                tg.start_soon(self.async_pass, k, start)
            await wait_all_tasks_blocked()
            start.set()

    def assert_exact(self, passes: int) -> None:
        assert self.wrong == []
        ks = sorted(self.accumulated)
        assert len(ks) == len(set(ks)) == passes
        x = np.array([np.arange(k, k + 4) for k in ks], dtype=np.int64)  # exact: integers
        w_grad = (2 * x**2 * self.W.astype(np.int64)).sum(axis=0)
        np.testing.assert_array_equal(self.w.grad.numpy(), w_grad.astype(np.float64))
        np.testing.assert_array_equal(self.b.grad.numpy(), np.full(4, float(sum(ks))))


def run_threads(targets: list[Callable[[], None]], barrier: threading.Barrier | None = None,
                ) -> list[BaseException]:
    """Run each target in its own thread (started together); return their errors."""
    barrier = barrier or threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def main(target: Callable[[], None]) -> None:
        try:
            barrier.wait(WAIT)
            target()
        except BaseException as exc:  # noqa: BLE001  (reported by the test)
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(t,), name=f"caller-{i}")
               for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not any(t.is_alive() for t in threads), "a caller thread did not finish"
    return errors


def in_loop(shared: Shared, ks: list[int], backend: str) -> Callable[[], None]:
    """A thread target: its own event loop running the passes ``ks`` at once."""
    return lambda: anyio.run(shared.async_batch, ks, backend=backend)


def sync_passes(shared: Shared, ks: list[int]) -> Callable[[], None]:
    """A thread target: ``backward_sync`` passes ``ks``, one after the other."""

    def run() -> None:
        for k in ks:
            shared.sync_pass(k)

    return run


class Wakes:
    """Counts AsyncDrivers (GraphTasks awaited on the workers) and their loop wake-ups."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.drivers = 0
        self.wakes = 0
        driver = engine_mod.AsyncDriver
        init, fire = driver.__init__, LoopSignal._fire

        def counting_init(this: engine_mod.AsyncDriver) -> None:
            self.drivers += 1  # on the loop thread
            init(this)

        def counting_fire(this: LoopSignal) -> None:
            self.wakes += 1  # on the loop thread: _fire is what a worker's set() schedules
            fire(this)

        monkeypatch.setattr(driver, "__init__", counting_init)
        monkeypatch.setattr(LoopSignal, "_fire", counting_fire)


@pytest.fixture
def wakes(monkeypatch: pytest.MonkeyPatch) -> Wakes:
    return Wakes(monkeypatch)


# ---- many GraphTasks from every kind of caller ----


@pytest.mark.timeout(30)
@pytest.mark.anyio
async def test_64_coroutines_in_one_loop_share_leaves_exactly(wakes):
    before = engine.stats()
    shared = Shared()
    await shared.async_batch(list(range(1, 65)))
    shared.assert_exact(64)
    after = engine.stats()
    assert after.running_graph_tasks == 0
    assert after.completed_graph_tasks - before.completed_graph_tasks == 64
    assert wakes.drivers >= 32  # at least the passes through Through ran on the workers
    assert wakes.wakes == wakes.drivers  # each woken once, when its task finished


@pytest.mark.timeout(30)
def test_event_loops_in_four_threads_share_the_workers():
    shared = Shared(grad_every=5)
    backends = ["asyncio", "trio", "asyncio", "trio"]
    ks = [list(range(1 + 16 * i, 17 + 16 * i)) for i in range(4)]
    errors = run_threads([in_loop(shared, k, b) for k, b in zip(ks, backends)])
    assert errors == []
    shared.assert_exact(64 - 64 // 5)
    assert engine.stats().running_graph_tasks == 0


@pytest.mark.timeout(30)
def test_backward_sync_from_8_threads_into_one_leaf_is_exact():
    shared = Shared()
    errors = run_threads([sync_passes(shared, list(range(1 + 50 * i, 51 + 50 * i)))
                          for i in range(8)])
    assert errors == []
    shared.assert_exact(400)
    assert engine.stats().running_graph_tasks == 0


@pytest.mark.timeout(40)
def test_backward_sync_from_8_threads_into_a_large_leaf_loses_no_update():
    # NumPy releases the GIL while adding large arrays, so two unserialised
    # accumulations into one .grad would lose element updates here.
    big = f64(np.zeros(1 << 18), requires_grad=True)

    def passes(i: int) -> Callable[[], None]:
        def run() -> None:
            for k in range(1 + 50 * i, 51 + 50 * i):
                ag.backward_sync((big * float(k)).sum())

        return run

    errors = run_threads([passes(i) for i in range(8)])
    assert errors == []
    wrong = np.flatnonzero(big.grad.numpy() != sum(range(1, 401)))
    assert wrong.size == 0, f"{wrong.size} elements lost an update, e.g. index {wrong[0]}"


@pytest.mark.timeout(40)
@pytest.mark.anyio
@pytest.mark.parametrize("on_devices", [False, True], ids=["cpu", "fake-devices"])
async def test_coroutines_loops_and_sync_threads_at_once(on_devices, request):
    if on_devices:
        request.getfixturevalue("fake_backend")
    before = engine.stats()
    shared = Shared(grad_every=7, devices=["fake:0", "fake:1", "fake:2"] if on_devices else None)
    targets = [
        sync_passes(shared, list(range(1, 26))),
        sync_passes(shared, list(range(26, 51))),
        in_loop(shared, list(range(51, 67)), "asyncio"),
        in_loop(shared, list(range(67, 83)), "trio"),
    ]
    barrier = threading.Barrier(len(targets) + 1)  # + this loop
    errors: list[BaseException] = []

    def callers() -> None:
        errors.extend(run_threads(targets, barrier))

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, callers)
        await anyio.to_thread.run_sync(barrier.wait, WAIT)
        await shared.async_batch(list(range(83, 99)))
    assert errors == []
    shared.assert_exact(98 - 98 // 7)
    after = engine.stats()
    assert after.running_graph_tasks == 0
    assert after.completed_graph_tasks - before.completed_graph_tasks == 98


# ---- statistics ----


class Gate:
    """A node whose backward blocks its executor until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.threads: list[str] = []
        gate = self

        class GateFn(ag.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                gate.threads.append(threading.current_thread().name)
                gate.started.set()
                gate.release.wait(WAIT)
                return g * 2.0

        self.fn = GateFn

    def graph(self) -> tuple[ag.Tensor, ag.Tensor]:
        x = f64([1.0, 2.0], requires_grad=True)
        return x, (self.fn.apply(x * 3.0) * 5.0).sum()


@pytest.mark.timeout(30)
@pytest.mark.anyio
async def test_stats_count_blocked_and_queued_graph_tasks():
    before = engine.stats()
    assert before.running_graph_tasks == 0
    on_worker, on_thread = Gate(), Gate()
    x, loss = on_worker.graph()
    y, sync_loss = on_thread.graph()
    others = [f64([float(i)], requires_grad=True) for i in range(3)]
    sync_caller = threading.Thread(target=ag.backward_sync, args=(sync_loss,))
    async with anyio.create_task_group() as tg:
        try:
            tg.start_soon(ag.backward, loss)
            await anyio.to_thread.run_sync(on_worker.started.wait, WAIT)  # CPU worker held
            sync_caller.start()
            await anyio.to_thread.run_sync(on_thread.started.wait, WAIT)
            for other in others:
                tg.start_soon(ag.backward, Through.apply(other * other).sum())
            await wait_all_tasks_blocked()
            during = engine.stats()
        finally:  # even on failure: the task group waits for the gated nodes
            on_worker.release.set()
            on_thread.release.set()
    await anyio.to_thread.run_sync(sync_caller.join, WAIT)
    assert during.running_graph_tasks == before.running_graph_tasks + 5, during  # 2 blocked
    assert during.queued["cpu"] == 3, during  # + 3 whose roots wait for the CPU worker
    assert during.completed_graph_tasks == before.completed_graph_tasks, during
    after = engine.stats()
    assert after.running_graph_tasks == 0, after
    assert after.queued["cpu"] == 0, after
    assert after.completed_graph_tasks - before.completed_graph_tasks == 5, after
    assert on_worker.threads == ["aiograd-worker-cpu"]
    assert on_thread.threads == [sync_caller.name]  # backward_sync runs its CPU nodes itself
    np.testing.assert_array_equal(x.grad.numpy(), [30.0, 30.0])
    np.testing.assert_array_equal(y.grad.numpy(), [30.0, 30.0])
    assert [o.grad.item() for o in others] == [0.0, 2.0, 4.0]


# ---- the event loop during a backward ----

CHAIN = 50_000
PROBE_EVERY = 1_000


@pytest.fixture(scope="module")
def long_chain() -> tuple[ag.Tensor, ag.Tensor, list[Any]]:
    """``x * 1.0001`` repeated CHAIN times (built once: the forward is slow), and
    every PROBE_EVERY-th node along it."""
    x = f64([1.0, 2.0], requires_grad=True)
    y = x
    for _ in range(CHAIN):
        y = y * 1.0001
    nodes = []
    node = y.grad_fn
    for i in range(CHAIN):
        if i % PROBE_EVERY == 0:
            nodes.append(node)
        node = node.next_functions[0][0]
    return x, y, nodes


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_heartbeat_keeps_ticking_during_a_long_backward(long_chain):
    x, y, probed = long_chain
    ticks = 0
    seen_by_nodes: list[int] = []  # the tick count each probed node saw when it ran
    handles = [n.register_prehook(lambda grads: seen_by_nodes.append(ticks)) for n in probed]

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.001)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            await wait_all_tasks_blocked()
            started, first_tick = anyio.current_time(), ticks
            (g,) = await ag.grad(y, x, ag.ones(2, dtype="float64"), retain_graph=True)
            elapsed, during = anyio.current_time() - started, ticks - first_tick
            tg.cancel_scope.cancel()
    finally:
        for handle in handles:
            handle.remove()
    np.testing.assert_allclose(g.numpy(), [1.0001**CHAIN] * 2, rtol=1e-9)
    assert len(seen_by_nodes) == len(probed)
    # The loop ran while the chain was half done, again and again: it was never
    # blocked for the whole backward (no wall-clock threshold involved).
    assert during >= 5, f"{during} heartbeats in {elapsed:.3f} s of backward"
    assert len(set(seen_by_nodes)) >= 5, (
        f"the heartbeat advanced only {len(set(seen_by_nodes))} times across "
        f"{len(probed)} probes along the chain ({elapsed:.3f} s)"
    )


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_multi_device_chain_wakes_the_loop_once(fake_backend, wakes):
    """5,000 nodes hopping cpu -> fake:0 -> cpu -> fake:1 -> ... reach the loop once."""
    before = engine.stats().completed_graph_tasks
    x = f64([1.0, -3.0], requires_grad=True)
    y = x
    devices = ["fake:0", "cpu", "fake:1", "cpu"]
    hops = 0
    for i in range(5_000):
        if i % 250 == 249:
            y = y.to(devices[hops % len(devices)])
            hops += 1
        else:
            y = y * (2.0 if i % 2 else 0.5)  # powers of two: the gradient stays exact
    assert str(y.device) == "cpu" and hops == 20
    scale = 2.0 ** sum(1 if i % 2 else -1 for i in range(5_000) if i % 250 != 249)
    await ag.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), [scale, scale])
    assert engine.stats().completed_graph_tasks - before == 1
    assert (wakes.drivers, wakes.wakes) == (1, 1)
