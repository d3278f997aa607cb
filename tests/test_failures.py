"""Failures: an error in any user code, or in the engine itself, reaches its caller once.

For each kind of user code the engine calls during a backward — a node, a
tensor hook, node pre- and post-hooks, a post-accumulate-grad hook, final
callbacks (sync and async), saved-tensor pack/unpack hooks, an async
backward — the exception reaches the awaiting caller with its own type and
its traceback, exactly once, and the next backward works. When several
nodes fail at once on different executors, only the first error is
raised. When an engine worker thread dies, its GraphTasks fail with a clear
error and a new worker serves the next backward.

Every async test runs under asyncio and Trio (see conftest.py).
Synchronisation is by events and barriers only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np
import pytest
from probes import passthrough

import aiograd as ag
from aiograd import engine
from aiograd.engine import engine as engine_mod
from aiograd.engine.graph_task import GraphTask

pytestmark = pytest.mark.timeout(60)


class UserError(Exception):
    """Raised by the user code under test; never raised by aiograd."""


class Fault:
    """User code that raises a fresh :class:`UserError` each time it is called.

    ``raised`` keeps every exception it raised, so a test can check that the
    caller got exactly that object, and that the code ran only once.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.raised: list[UserError] = []

    def user_code_that_fails(self) -> None:
        exc = UserError(f"failure in {self.where}")
        self.raised.append(exc)
        raise exc

    def __call__(self, *args: Any) -> Any:
        self.user_code_that_fails()


@dataclass
class Case:
    """A graph whose backward runs failing user code."""

    loss: ag.Tensor
    x: ag.Tensor
    fault: Fault
    #: True if the failure happens after x.grad was written
    grad_written: bool = False


def leaf() -> ag.Tensor:
    return ag.tensor([1.0, 2.0], requires_grad=True)


# ---- one builder per kind of user code ----


def in_node() -> Case:
    fault = Fault("a custom Function backward")
    x = leaf()
    return Case((passthrough(fault).apply(x * 2.0) * 3.0).sum(), x, fault)


def in_async_node() -> Case:
    fault = Fault("an async backward")

    class FailsAsync(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        async def backward(ctx, g):
            await anyio.lowlevel.checkpoint()
            fault()

    x = leaf()
    return Case((FailsAsync.apply(x * 2.0) * 3.0).sum(), x, fault)


def in_tensor_hook() -> Case:
    fault = Fault("a tensor hook")
    x = leaf()
    h = x * 2.0
    h.register_hook(fault)
    return Case((h * h).sum(), x, fault)


def in_leaf_tensor_hook() -> Case:
    fault = Fault("a tensor hook on a leaf")
    x = leaf()
    x.register_hook(fault)
    return Case((x * x).sum(), x, fault)


def in_node_prehook() -> Case:
    fault = Fault("a node pre-hook")
    x = leaf()
    h = x * 2.0
    h.grad_fn.register_prehook(fault)
    return Case((h * h).sum(), x, fault)


def in_node_posthook() -> Case:
    fault = Fault("a node post-hook")
    x = leaf()
    h = x * 2.0
    h.grad_fn.register_hook(fault)
    return Case((h * h).sum(), x, fault)


def in_post_accumulate_grad_hook() -> Case:
    fault = Fault("a post-accumulate-grad hook")
    x = leaf()
    x.register_post_accumulate_grad_hook(fault)
    return Case((x * x).sum(), x, fault, grad_written=True)


def in_final_callback() -> Case:
    fault = Fault("a final callback")
    x = leaf()
    h = x * 2.0
    h.register_hook(lambda g: ag.queue_callback(fault))
    return Case((h * h).sum(), x, fault, grad_written=True)


def in_async_final_callback() -> Case:
    fault = Fault("an async final callback")

    async def callback() -> None:
        await anyio.lowlevel.checkpoint()
        fault()

    x = leaf()
    h = x * 2.0
    h.register_hook(lambda g: ag.queue_callback(callback))
    return Case((h * h).sum(), x, fault, grad_written=True)


def in_unpack_hook() -> Case:
    fault = Fault("a saved-tensor unpack hook")
    x = leaf()
    with ag.saved_tensors_hooks(lambda t: t, fault):
        y = x * x  # MulBackward0 saves both inputs
    return Case(y.sum(), x, fault)


KINDS: dict[str, Callable[[], Case]] = {
    "node": in_node,
    "async_node": in_async_node,
    "tensor_hook": in_tensor_hook,
    "leaf_tensor_hook": in_leaf_tensor_hook,
    "node_prehook": in_node_prehook,
    "node_posthook": in_node_posthook,
    "post_accumulate_grad_hook": in_post_accumulate_grad_hook,
    "final_callback": in_final_callback,
    "async_final_callback": in_async_final_callback,
    "unpack_hook": in_unpack_hook,
}


def check_raised_once(case: Case, info: pytest.ExceptionInfo[UserError]) -> None:
    """The caller got the very exception the user code raised, once, with its frame."""
    assert len(case.fault.raised) == 1, case.fault.raised
    assert info.value is case.fault.raised[0]
    assert "user_code_that_fails" in [entry.name for entry in info.traceback]
    if not case.grad_written:
        assert case.x.grad is None


def check_engine_clean() -> None:
    stats = engine.stats()
    assert stats.running_graph_tasks == 0, stats
    assert all(n == 0 for n in stats.queued.values()), stats


async def correct_backward_works() -> None:
    z = leaf()
    await ag.backward((z * z).sum())
    np.testing.assert_allclose(z.grad.numpy(), [2.0, 4.0])
    (g,) = await ag.grad((z * 3.0).sum(), z)
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])


# ---- an error in each kind of user code ----


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(KINDS))
async def test_error_reaches_awaiting_caller_once_with_its_type(kind):
    case = KINDS[kind]()
    with pytest.raises(UserError, match=f"failure in {case.fault.where}") as info:
        await ag.backward(case.loss)
    check_raised_once(case, info)
    check_engine_clean()
    await correct_backward_works()
    check_engine_clean()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["node", "async_node", "tensor_hook", "node_prehook",
                                  "node_posthook", "final_callback", "async_final_callback",
                                  "unpack_hook"])
async def test_error_reaches_grad_caller_once(kind):
    case = KINDS[kind]()
    with pytest.raises(UserError) as info:
        await ag.grad(case.loss, case.x)
    check_raised_once(case, info)
    check_engine_clean()
    await correct_backward_works()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["node", "async_node", "tensor_hook", "final_callback",
                                  "async_final_callback"])
async def test_error_with_multithreading_disabled_reaches_caller_once(kind):
    case = KINDS[kind]()
    with ag.set_multithreading_enabled(False):
        with pytest.raises(UserError) as info:
            await ag.backward(case.loss)
    check_raised_once(case, info)
    check_engine_clean()
    await correct_backward_works()


@pytest.mark.parametrize("kind", list(KINDS))
def test_error_reaches_backward_sync_caller_once(kind):
    case = KINDS[kind]()
    with pytest.raises(UserError) as info:
        ag.backward_sync(case.loss)
    check_raised_once(case, info)
    check_engine_clean()
    z = leaf()
    ag.backward_sync((z * z).sum())
    np.testing.assert_allclose(z.grad.numpy(), [2.0, 4.0])


@pytest.mark.parametrize("kind", ["node", "async_node", "unpack_hook", "final_callback"])
def test_error_reaches_grad_sync_caller_in_a_plain_thread(kind):
    outcome: dict[str, Any] = {}
    case = KINDS[kind]()

    def run() -> None:
        try:
            ag.grad_sync(case.loss, case.x)
        except BaseException as exc:  # noqa: BLE001  (inspected below)
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert outcome["error"] is case.fault.raised[0]
    assert len(case.fault.raised) == 1
    check_engine_clean()


@pytest.mark.anyio
async def test_error_in_pack_hook_reaches_forward_caller_and_hooks_are_popped():
    fault = Fault("a saved-tensor pack hook")
    unpacked: list[Any] = []
    x = leaf()
    with pytest.raises(UserError, match="pack hook") as info:
        with ag.saved_tensors_hooks(fault, unpacked.append):
            x * x
    assert info.value is fault.raised[0] and len(fault.raised) == 1
    assert "user_code_that_fails" in [entry.name for entry in info.traceback]
    y = x * x  # the hooks are gone: nothing is packed or unpacked
    await ag.backward(y.sum())
    assert len(fault.raised) == 1 and unpacked == []
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    check_engine_clean()


@pytest.mark.anyio
async def test_error_in_one_node_does_not_leak_into_a_concurrent_backward():
    case = in_node()
    ok = leaf()
    errors: list[BaseException] = []

    async def failing() -> None:
        try:
            await ag.backward(case.loss)
        except UserError as exc:
            errors.append(exc)

    async def succeeding() -> None:
        y = ok
        for _ in range(50):
            y = y * 1.0
        await ag.backward(y.sum())

    async with anyio.create_task_group() as tg:
        tg.start_soon(failing)
        tg.start_soon(succeeding)
    assert errors == case.fault.raised
    np.testing.assert_allclose(ok.grad.numpy(), [1.0, 1.0])
    check_engine_clean()


# ---- several nodes failing at once: exactly one error, the first ----


class FailRecorder:
    """Wraps ``GraphTask.fail`` to record, in order, every error reported to a task."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        original = GraphTask.fail
        recorder = self

        def fail(gt: GraphTask, exc: BaseException) -> None:
            with recorder._lock:  # the order recorded is the order the task saw
                recorder.errors.append(exc)
                original(gt, exc)

        monkeypatch.setattr(GraphTask, "fail", fail)


def failing_at_barrier(barrier: threading.Barrier | None, fault: Fault) -> type[ag.Function]:
    """A Function whose sync backward waits for the barrier (if any), then raises."""

    class FailsTogether(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            if barrier is not None:
                barrier.wait(20)
            fault()

    return FailsTogether


def test_two_failing_branches_on_one_worker_raise_once():
    faults = [Fault("branch a"), Fault("branch b")]
    fns = [failing_at_barrier(None, f) for f in faults]
    x = leaf()
    loss = (fns[0].apply(x * 2.0) + fns[1].apply(x * 3.0)).sum()
    with pytest.raises(UserError) as info:
        ag.backward_sync(loss)
    raised = faults[0].raised + faults[1].raised
    assert raised == [info.value]  # the second branch never started
    assert x.grad is None


@pytest.mark.anyio
async def test_sync_and_async_nodes_failing_at_once_raise_only_the_first(monkeypatch):
    recorder = FailRecorder(monkeypatch)
    barrier = threading.Barrier(2)
    sync_fault, async_fault = Fault("the sync branch"), Fault("the async branch")
    SyncFails = failing_at_barrier(barrier, sync_fault)

    class AsyncFails(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        async def backward(ctx, g):
            await anyio.to_thread.run_sync(barrier.wait, 20)
            async_fault()

    x = leaf()
    loss = (SyncFails.apply(x * 2.0) + AsyncFails.apply(x * 3.0)).sum()
    with pytest.raises(UserError) as info:
        await ag.backward(loss)
    assert len(sync_fault.raised) == 1 and len(async_fault.raised) == 1  # both ran and raised
    assert set(recorder.errors) == {sync_fault.raised[0], async_fault.raised[0]}
    assert info.value is recorder.errors[0]
    assert x.grad is None
    check_engine_clean()
    await correct_backward_works()


@pytest.mark.anyio
async def test_nodes_failing_at_once_on_two_devices_raise_only_the_first(
        fake_backend, monkeypatch):
    recorder = FailRecorder(monkeypatch)
    barrier = threading.Barrier(2)
    faults = [Fault("fake:0"), Fault("fake:1")]
    x = leaf()
    branches = []
    for i, fault in enumerate(faults):
        fn = failing_at_barrier(barrier, fault)
        branches.append(fn.apply(x.to(f"fake:{i}") * 2.0).cpu())
    with pytest.raises(UserError) as info:
        await ag.backward((branches[0] + branches[1]).sum())
    assert [len(f.raised) for f in faults] == [1, 1]
    assert set(recorder.errors) == {faults[0].raised[0], faults[1].raised[0]}
    assert info.value is recorder.errors[0]
    assert x.grad is None
    check_engine_clean()
    z = ag.tensor([1.0, 2.0], requires_grad=True)
    await ((z.to("fake:0") * 2.0).cpu() + (z.to("fake:1") * 3.0).cpu()).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [5.0, 5.0])


def test_nodes_failing_at_once_on_two_devices_raise_once_from_backward_sync(
        fake_backend, monkeypatch):
    recorder = FailRecorder(monkeypatch)
    barrier = threading.Barrier(2)
    faults = [Fault("fake:1"), Fault("fake:2")]
    x = leaf()
    branches = [failing_at_barrier(barrier, f).apply(x.to(f"fake:{i + 1}")).cpu()
                for i, f in enumerate(faults)]
    with pytest.raises(UserError) as info:
        ag.backward_sync((branches[0] * branches[1]).sum())
    assert [len(f.raised) for f in faults] == [1, 1]
    assert info.value is recorder.errors[0]
    check_engine_clean()


# ---- engine bugs: an internal error, a worker thread that dies ----


class RaiseOnce:
    """Replaces an ``Engine`` method; raises once on a thread named ``thread_name``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, method: str, thread_name: str) -> None:
        self.error = ZeroDivisionError(f"injected engine bug in {method}")
        self.fired = threading.Event()
        original = getattr(engine_mod.Engine, method)
        patch = self

        def replacement(self_: Any, *args: Any, **kwargs: Any) -> Any:
            if (threading.current_thread().name == thread_name
                    and not patch.fired.is_set()):
                patch.fired.set()
                raise patch.error
            return original(self_, *args, **kwargs)

        monkeypatch.setattr(engine_mod.Engine, method, replacement)


def worker_thread(name: str) -> threading.Thread | None:
    for thread in threading.enumerate():
        if thread.name == name:
            return thread
    return None


def aiograd_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("aiograd"))


@pytest.mark.anyio
async def test_internal_error_while_routing_fails_the_task_and_worker_survives(
        workers_only, monkeypatch):
    await correct_backward_works()
    worker = worker_thread("aiograd-worker-cpu")
    bug = RaiseOnce(monkeypatch, "_route", "aiograd-worker-cpu")
    x = leaf()
    with pytest.raises(ZeroDivisionError, match="injected engine bug in _route") as info:
        await ag.backward((x * 2.0 * 3.0).sum())
    assert info.value is bug.error
    assert x.grad is None
    check_engine_clean()
    await correct_backward_works()
    assert worker_thread("aiograd-worker-cpu") is worker  # no thread died


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["run_slice", "_claim_finish"])
async def test_dead_cpu_worker_fails_its_task_and_a_new_worker_serves(
        workers_only, monkeypatch, method):
    await correct_backward_works()
    old = worker_thread("aiograd-worker-cpu")
    assert old is not None
    threads_before = aiograd_threads()
    bug = RaiseOnce(monkeypatch, method, "aiograd-worker-cpu")
    x = leaf()
    with pytest.raises(RuntimeError, match="aiograd worker thread for cpu died") as info:
        await ag.backward((x * 2.0).sum())
    assert info.value.__cause__ is bug.error
    assert "a new worker will be started" in str(info.value)
    await anyio.to_thread.run_sync(old.join, 10)
    assert not old.is_alive()
    check_engine_clean()
    await correct_backward_works()
    new = worker_thread("aiograd-worker-cpu")
    assert new is not None and new is not old
    assert aiograd_threads() == threads_before  # the old worker is gone, one new one
    assert engine.stats().workers >= 1


def test_internal_error_in_backward_sync_fails_the_task_and_caller_survives(monkeypatch):
    """A sync caller runs its CPU nodes itself: an engine bug there fails only its task."""
    bug = RaiseOnce(monkeypatch, "_route", threading.current_thread().name)
    x = leaf()
    with pytest.raises(ZeroDivisionError) as info:
        ag.backward_sync((x * 2.0 * 3.0).sum())
    assert info.value is bug.error
    assert x.grad is None
    check_engine_clean()
    ag.backward_sync((x * 2.0).sum())
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


@pytest.mark.anyio
async def test_dead_device_worker_fails_its_task_and_a_new_worker_serves(
        fake_backend, monkeypatch):
    x = leaf()
    await (x.to("fake:1") * 1.0).cpu().sum().backward()  # the fake:1 worker is running
    old = worker_thread("aiograd-worker-fake:1")
    assert old is not None
    bug = RaiseOnce(monkeypatch, "run_slice", "aiograd-worker-fake:1")
    x = leaf()
    with pytest.raises(RuntimeError, match="aiograd worker thread for fake:1 died") as info:
        await (x.to("fake:1") * 2.0).cpu().sum().backward()
    assert info.value.__cause__ is bug.error
    assert x.grad is None
    await anyio.to_thread.run_sync(old.join, 10)
    check_engine_clean()
    await (x.to("fake:1") * 2.0).cpu().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    new = worker_thread("aiograd-worker-fake:1")
    assert new is not None and new is not old


@pytest.mark.anyio
async def test_dead_worker_fails_every_task_queued_on_it(workers_only, monkeypatch):
    """Tasks whose nodes wait in the dead worker's queue fail too; none hangs."""
    await correct_backward_works()
    started, release = threading.Event(), threading.Event()

    Blocks = passthrough(lambda: (started.set(), release.wait(20)))

    outcomes: list[BaseException | None] = []

    async def run(loss: ag.Tensor) -> None:
        try:
            await ag.backward(loss)
            outcomes.append(None)
        except RuntimeError as exc:
            outcomes.append(exc)

    x = leaf()
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, Blocks.apply(x).sum())
        await anyio.to_thread.run_sync(started.wait, 20)
        # the CPU worker is busy in Blocks: these tasks wait in its queue
        for _ in range(3):
            tg.start_soon(run, (x * 2.0).sum())
        await anyio.wait_all_tasks_blocked()
        RaiseOnce(monkeypatch, "_claim_finish", "aiograd-worker-cpu")
        release.set()
    assert len(outcomes) == 4
    assert all(isinstance(o, RuntimeError) and "worker thread for cpu died" in str(o)
               for o in outcomes), outcomes
    check_engine_clean()
    await correct_backward_works()


@pytest.mark.anyio
async def test_dead_worker_does_not_fail_an_unrelated_graph_task(workers_only, monkeypatch):
    await correct_backward_works()
    started, release = threading.Event(), threading.Event()

    Blocks = passthrough(lambda: (started.set(), release.wait(20)))

    outcome: dict[str, Any] = {}
    unrelated = leaf()

    def run_unrelated() -> None:  # its CPU nodes run on this thread, not the CPU worker
        try:
            ag.backward_sync((Blocks.apply(unrelated) * 3.0).sum())
            outcome["grad"] = unrelated.grad.numpy().tolist()
        except BaseException as exc:  # noqa: BLE001  (inspected below)
            outcome["error"] = exc

    thread = threading.Thread(target=run_unrelated)
    thread.start()
    try:
        await anyio.to_thread.run_sync(started.wait, 20)
        RaiseOnce(monkeypatch, "_claim_finish", "aiograd-worker-cpu")
        with pytest.raises(RuntimeError, match="worker thread for cpu died"):
            await ag.backward((leaf() * 2.0).sum())
    finally:
        release.set()
        await anyio.to_thread.run_sync(thread.join, 20)
    assert outcome == {"grad": [3.0, 3.0]}
