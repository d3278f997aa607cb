"""The engine's lifecycle: shutdown, interpreter exit, fork, and no leaked threads.

DESIGN.md §3: workers stop cleanly at interpreter exit or
``aiograd.engine.shutdown()``, waiting at most ``AIOGRAD_SHUTDOWN_WAIT_LIMIT``
seconds; after ``os.fork()`` the child gets a fresh engine and the parent is
unaffected. Anything that could leave a stuck thread or a forked child behind
runs in a subprocess, so pytest's own process stays clean.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

import aiograd as ag
from aiograd import engine
from aiograd.engine.engine import get_engine

pytestmark = pytest.mark.timeout(60)

TESTS = Path(__file__).parent

#: helpers every script starts with. ``EXIT`` is printed by the last atexit
#: handler (registered before aiograd is imported, so it runs after aiograd's
#: own shutdown): how long that shutdown took and which aiograd threads live on.
PRELUDE = """
import atexit, asyncio, json, os, signal, sys, threading, time, traceback

_exit = {}


def _report_exit():
    if "start" in _exit:
        _exit["took"] = time.monotonic() - _exit["start"]
    _exit["alive"] = sorted(t.name for t in threading.enumerate()
                            if t.name.startswith("aiograd-"))
    print("EXIT " + json.dumps(_exit), flush=True)


atexit.register(_report_exit)

import anyio
import numpy as np
import aiograd as ag
from aiograd import engine
from aiograd.engine.graph_task import current_graph_task


def mark_exit_start():
    # registered last, so it runs first at exit: before aiograd's shutdown
    atexit.register(lambda: _exit.setdefault("start", time.monotonic()))


def square_grad_sync(v):
    x = ag.tensor(np.array([v]), requires_grad=True)
    ag.backward_sync((x * x).sum())
    return x.grad.item()


class Through(ag.Function):
    # the identity as a custom Function: its graph runs on the workers, never inline
    @staticmethod
    def forward(ctx, t):
        return t * 1.0

    @staticmethod
    def backward(ctx, g):
        return g


async def square_grad(v):
    # an 'await backward' on the CPU worker (starts it if needed)
    x = ag.tensor(np.array([v]), requires_grad=True)
    await ag.backward(Through.apply(x * x).sum())
    return x.grad.item()


class Gate:
    # a node whose backward blocks its executor until released
    def __init__(self):
        self.started, self.release = threading.Event(), threading.Event()
        gate = self

        class GateFn(ag.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1.0

            @staticmethod
            def backward(ctx, g):
                gate.graph_task = current_graph_task.get()
                gate.started.set()
                gate.release.wait(600)
                return g * 2.0

        self.fn = GateFn

    def in_flight(self):
        # an 'await backward' in a daemon thread, blocked on the CPU worker;
        # returns (thread, outcome list, leaf); x.grad becomes 30 when it completes
        x = ag.tensor(np.array([1.0, 2.0]), requires_grad=True)
        loss = (self.fn.apply(x * 3.0) * 5.0).sum()
        outcome = []

        def run():
            try:
                anyio.run(ag.backward, loss)
                outcome.append("completed")
            except BaseException as exc:
                outcome.append(repr(exc))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert self.started.wait(30)
        return thread, outcome, x
"""


def run_python(body: str, *, limit: float | None = None, timeout: float = 60,
               ) -> tuple[str, dict[str, Any]]:
    """Run PRELUDE + ``body`` in a fresh interpreter; return its output and EXIT report.

    Fails the test if it does not exit 0 within ``timeout`` seconds.
    """
    env = dict(os.environ)
    env.pop("AIOGRAD_SHUTDOWN_WAIT_LIMIT", None)
    if limit is not None:
        env["AIOGRAD_SHUTDOWN_WAIT_LIMIT"] = str(limit)
    source = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=TESTS)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    reports = [line for line in proc.stdout.splitlines() if line.startswith("EXIT ")]
    assert len(reports) == 1, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr, json.loads(reports[0][len("EXIT "):])


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("aiograd-worker-")]


# ---- aiograd.engine.shutdown() ----


@pytest.mark.timeout(30)
def test_shutdown_stops_every_worker_and_the_next_backward_gets_a_fresh_engine(fake_backend):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    anyio.run(ag.backward, (x.to("fake:0") * 2.0).cpu().sum())  # cpu and fake:0 workers
    old, threads = get_engine(), worker_threads()
    assert {"aiograd-worker-cpu", "aiograd-worker-fake:0"} <= {t.name for t in threads}
    assert engine.shutdown(timeout=10) is True
    assert [t.name for t in threads if t.is_alive()] == []
    fresh = engine.stats()
    assert get_engine() is not old
    assert (fresh.workers, fresh.running_graph_tasks, fresh.completed_graph_tasks) == (0, 0, 0)
    with pytest.raises(RuntimeError, match="has been shut down"):
        old.device_queue(ag.device("cpu"))  # the old engine starts no new worker

    anyio.run(ag.backward, (x.to("fake:0") * 3.0).cpu().sum())
    assert x.grad.numpy().tolist() == [5.0, 5.0]
    assert engine.stats().workers == 2
    assert not set(threads) & set(worker_threads())  # new threads (idents may be reused)


def test_shutdown_keeps_the_max_depth():
    engine.set_max_depth(7)
    try:
        assert engine.shutdown(timeout=10) is True
        assert engine.get_max_depth() == 7
    finally:
        engine.set_max_depth(engine.MAX_DEPTH)


def test_shutdown_of_a_blocked_worker_gives_up_after_the_wait_limit():
    out, _ = run_python("""
        gate = Gate()
        thread, outcome, x = gate.in_flight()
        old = engine.engine.get_engine()
        start = time.monotonic()
        stopped = engine.shutdown()  # AIOGRAD_SHUTDOWN_WAIT_LIMIT=0.5
        took = time.monotonic() - start
        # a fresh engine serves new work while the old worker is still blocked
        assert square_grad_sync(3.0) == 6.0 and asyncio.run(square_grad(4.0)) == 8.0
        gate.release.set()
        old_workers = [t for t in threading.enumerate() if t.name == "aiograd-worker-cpu"]
        print("RESULT " + json.dumps({"stopped": stopped, "took": took,
                                      "old_running": old.stats().running_graph_tasks,
                                      "workers": len(old_workers)}), flush=True)
    """, limit=0.5)
    result = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    assert result["stopped"] is False
    assert 0.4 <= result["took"] < 5.0, result  # the limit, not the default of 10 s
    assert result["old_running"] == 1
    assert result["workers"] == 2  # the blocked old one and the fresh engine's


def test_backward_in_flight_at_shutdown_completes_or_fails_but_never_hangs():
    out, _ = run_python("""
        gate = Gate()
        thread, outcome, x = gate.in_flight()
        (worker,) = [t for t in threading.enumerate() if t.name == "aiograd-worker-cpu"]
        engine.shutdown(timeout=0.2)
        gate.release.set()
        worker.join(30)
        assert not worker.is_alive()
        # No executor holds the task any more: unfinished now means unfinished forever.
        finished = gate.graph_task.finished
        if finished:
            thread.join(30)
        print("RESULT " + json.dumps({"finished": finished, "outcome": outcome,
                                      "grad": None if x.grad is None else x.grad.tolist()}),
              flush=True)
    """)
    result = json.loads(out.split("RESULT ", 1)[1].splitlines()[0])
    assert result["finished"] is True, result
    assert (result["outcome"] == ["completed"] and result["grad"] == [30.0, 30.0]
            or "shut down" in result["outcome"][0]), result


# ---- interpreter exit ----


def test_workers_stop_at_interpreter_exit():
    out, report = run_python("""
        sys.path.insert(0, os.getcwd())
        from fake_backend import FakeBackend
        ag.devices.register_backend(FakeBackend(count=2, name="fake"))
        assert square_grad_sync(2.0) == 4.0
        assert asyncio.run(square_grad(3.0)) == 6.0
        x = ag.tensor([1.0], requires_grad=True)
        trio_loss = (x.to("fake:1") * 5.0).cpu().sum()
        anyio.run(ag.backward, trio_loss, backend="trio")
        assert x.grad.item() == 5.0
        print("WORKERS", engine.stats().workers, flush=True)
        mark_exit_start()
    """)
    assert "WORKERS 2" in out
    assert report["alive"] == []  # every worker joined by aiograd's atexit shutdown
    assert report["took"] < 5.0, report  # idle workers stop at once, far inside the limit


def test_interpreter_exits_within_the_limit_with_a_backward_in_flight():
    _, report = run_python("""
        gate = Gate()
        gate.in_flight()  # its daemon thread is still awaiting when the script ends
        mark_exit_start()
    """, limit=1)
    assert report["alive"] == ["aiograd-worker-cpu"]  # still held by the gate: abandoned
    assert 0.5 <= report["took"] < 8.0, report  # waited for it, but only ~1 s


# ---- fork ----


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_gets_a_fresh_engine_and_the_parent_is_unaffected():
    out, _ = run_python("""
        assert asyncio.run(square_grad(3.0)) == 6.0
        parent_workers = engine.stats().workers
        workers = [t for t in threading.enumerate() if t.name.startswith("aiograd-worker-")]
        assert parent_workers == len(workers) == 1
        # fork while a backward holds the CPU worker (and its queue's lock now and then)
        gate = Gate()
        thread, outcome, x = gate.in_flight()
        pid = os.fork()
        if pid == 0:
            try:
                signal.alarm(30)  # never outlive the test
                before = engine.stats()
                assert (before.workers, before.running_graph_tasks,
                        before.completed_graph_tasks) == (0, 0, 0), before
                assert square_grad_sync(4.0) == 8.0  # runs on this thread: no worker yet
                assert engine.stats().workers == 0
                assert asyncio.run(square_grad(5.0)) == 10.0  # starts the child's worker
                after = engine.stats()
                assert (after.workers, after.running_graph_tasks,
                        after.completed_graph_tasks) == (1, 0, 2), after
                print("CHILD OK", flush=True)
            except BaseException:
                traceback.print_exc()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("CHILD EXIT", os.waitstatus_to_exitcode(status), flush=True)
        gate.release.set()
        thread.join(30)
        assert outcome == ["completed"] and x.grad.tolist() == [30.0, 30.0], outcome
        assert square_grad_sync(6.0) == 12.0
        assert asyncio.run(square_grad(7.0)) == 14.0
        assert engine.stats().workers == parent_workers
        assert [t for t in threading.enumerate()
                if t.name.startswith("aiograd-worker-")] == workers  # the same thread
        assert engine.stats().running_graph_tasks == 0
        print("PARENT OK", flush=True)
    """)
    assert "CHILD OK" in out and "CHILD EXIT 0" in out and "PARENT OK" in out, out


# A parent thread is inside a short critical section of the graph code when
# another thread forks: simulated by holding the lock itself. The child must
# not inherit it locked. Its backward runs in a thread with a bounded wait.
HELD_AT_FORK = {
    # a worker adding into the shared leaf w (AccumulateGrad.apply holds its lock)
    "leaf-accumulate-lock": "ag.get_gradient_edge(w).node.lock",
    # a forward creating the AccumulateGrad of some leaf (grad_accumulator)
    "grad-accumulator-lock": "__import__('aiograd.graph._node').graph._node._accumulator_lock",
}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("held", sorted(HELD_AT_FORK))
def test_forked_child_does_not_inherit_a_held_graph_lock(held):
    out, _ = run_python(f"""
        w = ag.tensor(np.array([1.0, 2.0]), requires_grad=True)
        asyncio.run(ag.backward((w * 1.0).sum()))  # w.grad == [1, 1]
        keep = w * 1.0  # keeps w's AccumulateGrad node (and its lock) alive
        lock = {HELD_AT_FORK[held]}
        held, done = threading.Event(), threading.Event()

        def hold():
            with lock:
                held.set()
                done.wait(30)

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        assert held.wait(30)
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)
            result = []

            def child_backward():
                x = ag.tensor(np.array([3.0]), requires_grad=True)  # a new leaf
                ag.backward_sync((w * x).sum())
                result.append((w.grad.tolist(), x.grad.tolist()))

            t = threading.Thread(target=child_backward, daemon=True)
            t.start()
            t.join(10)
            print("CHILD", "deadlocked" if t.is_alive() else result, flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        done.set()
        holder.join(30)
    """)
    assert "CHILD [([4.0, 4.0], [3.0])]" in out, out


# ---- no thread leak ----


class AsyncScale(ag.Function):
    """``t * 3`` whose backward runs on an event loop (the background one for sync callers)."""

    @staticmethod
    def forward(ctx, t):
        return t * 3.0

    @staticmethod
    async def backward(ctx, g):
        await anyio.lowlevel.checkpoint()
        return g * 3.0


def make_pass(k: int) -> tuple[ag.Tensor, ag.Tensor, float]:
    """A small graph: its leaf, its loss and the leaf's expected gradient."""
    x = ag.tensor(np.array([float(k % 7), 1.0]), requires_grad=True)
    if k % 5 == 0:
        return x, AsyncScale.apply(x * 2.0).sum(), 6.0
    return x, (x * x + x).sum(), 2.0 * (k % 7) + 1.0


def sync_pass(k: int, wrong: list[int]) -> None:
    x, loss, expected = make_pass(k)
    if k % 2:
        (got,) = ag.grad_sync(loss, x)
    else:
        ag.backward_sync(loss)
        got = x.grad
    if got.numpy()[0] != expected:
        wrong.append(k)


async def async_passes(ks: list[int], wrong: list[int]) -> None:
    async def one(k: int) -> None:
        x, loss, expected = make_pass(k)
        if k % 2:
            (got,) = await ag.grad(loss, x)
        else:
            await ag.backward(loss)
            got = x.grad
        if got.numpy()[0] != expected:
            wrong.append(k)

    for start in range(0, len(ks), 25):  # 25 GraphTasks at a time
        async with anyio.create_task_group() as tg:
            for k in ks[start:start + 25]:
                tg.start_soon(one, k)


@pytest.mark.timeout(60)
def test_2000_graph_tasks_leave_no_thread_behind():
    wrong: list[int] = []
    # warm-up: the CPU worker and the background loop for async nodes of sync callers
    for k in range(10):
        sync_pass(k, wrong)
    for backend in ("asyncio", "trio"):
        anyio.run(async_passes, list(range(10)), wrong, backend=backend)
    baseline = set(threading.enumerate())
    before = engine.stats()

    for k in range(600):  # 600 sync on this thread
        sync_pass(k, wrong)
    anyio.run(async_passes, list(range(600, 1000)), wrong, backend="asyncio")  # 400
    anyio.run(async_passes, list(range(1000, 1400)), wrong, backend="trio")  # 400
    threads = [threading.Thread(target=lambda i=i: [sync_pass(k, wrong) for k in
                                                    range(1400 + 75 * i, 1475 + 75 * i)])
               for i in range(8)]  # 600 from short-lived threads
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert wrong == []
    assert not any(t.is_alive() for t in threads)
    now = set(threading.enumerate())
    assert now - baseline == set()  # no thread started by the passes lives on
    # An idle thread of another library's cache (trio's, anyio's) may retire meanwhile;
    # an aiograd thread may not.
    retired = baseline - now
    assert [t.name for t in retired if t.name.startswith("aiograd-")] == []
    assert threading.active_count() == len(baseline) - len(retired)
    after = engine.stats()
    assert after.running_graph_tasks == 0, after
    assert after.completed_graph_tasks - before.completed_graph_tasks == 2000, after
    assert all(n == 0 for n in after.queued.values()), after
    assert (after.workers, after.pool_threads) == (before.workers, before.pool_threads), after
