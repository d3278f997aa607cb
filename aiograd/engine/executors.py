"""Executor threads: the device workers, the reentrant pool, and their loop.

An *executor* is a thread that pops node tasks from its own ReadyQueue
and runs them (slices of GraphTasks: ``evaluate.py``) and offloaded jobs:

- one long-lived *device worker* per device (``cpu``, each CUDA device, each
  device of a registered backend), shared by every GraphTask in the process;
- a thread blocked in ``backward_sync``: it runs the CPU nodes of its own
  GraphTask itself (seed: the caller's ``local_ready_queue``), and, if it is a
  worker, any other task of its queue while it waits;
- a thread of the reentrant pool, for sync reentrant backward past
  ``max_depth`` (See Note [Reentrant backward]).

Thread rules: everything here runs on an executor thread, except
``device_queue`` (any thread: it starts a worker under the engine's lock)
and ``ReentrantPool.run``/``shutdown`` (the thread handing over a job, the
one stopping the engine). ``_tls`` is per thread: each executor reads and
writes only its own. An executor reaches an event loop only through
``_bridge`` (batched wake-ups, the loop's turn) and a GraphTask only through
its methods and lock. A worker that dies of an engine bug fails the tasks
it held (``_worker_exited``); one that is shut down fails the tasks left on
its queue (``_fail_stranded``), so no caller waits forever.

Note [Giving the loop its turn]
    Forced switching fails when the worker itself drops the GIL for a
    moment: NumPy does around every ufunc on a mid-sized array, and a
    worker waking a loop does when it writes to the loop's wake-up pipe. The
    waiting loop thread is signalled, but before it is scheduled the worker
    has taken the GIL back; each such switch restarts the waiter's switch
    interval, so it never asks for a forced one. A worker serving requests
    back to back then keeps the loop off the GIL until its queue is empty
    (measured: 64 queued 0.7 ms jobs, heartbeat lag 47 ms, in plain asyncio
    with ``run_in_executor`` too). So an executor thread that has run for
    ``TURN_SECONDS`` without going idle checks whether the loop it serves is
    starved, and if so waits for it, without the GIL (at most
    ``TURN_TIMEOUT``), until the loop has run a probe (a callback that
    releases a lock, ``LoopSignal.probe``). An asyncio selector loop is
    checked without waking it (``Backlog``): it is starved if its first due
    timer is more than ``TURN_SECONDS`` late, or if the head of its ready
    queue, or that timer, or its ready I/O, was already due at the previous
    check; a loop that got the GIL in between (during a NumPy call, say) has
    run them, and one that is idle has nothing due.
    Sending every loop a probe at every check instead woke the loop for
    nothing about once every 2 ms: on the service benchmark that cost 9 %
    of the throughput (interleaved A/B rounds). Other loops (Trio, uvloop)
    cannot be read from outside: each check sends a probe, and one that has
    not run by the next check means starved. Checks
    run between tasks and at the end of a time slice. The loop it serves is
    the one of the offload job it runs or last ran, or of the GraphTask whose
    slice it runs if a coroutine awaits that task; going idle forgets it.


Note [Reentrant backward]
    A backward function that calls ``backward_sync``/``grad_sync`` on an
    executor thread drives the nested GraphTask on that same thread: its CPU
    nodes go to this thread's queue, and while waiting the thread runs
    whatever its queue holds (seed ``thread_main``). The nested task's depth
    is its parent's + 1, and deeper tasks run first. Past ``max_depth``
    nested drives on one thread, the nested task goes to a thread of the
    reentrant pool instead, so the stack never overflows. An ``async def``
    backward that awaits ``grad()`` is simply a nested await: its GraphTask
    runs on the workers while the outer one keeps its place.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..devices import CPU, Device
from ._bridge import LoopSignal, send_held
from .graph_task import GraphTask
from .ready_queue import SHUTDOWN_KEY, ReadyQueue

if TYPE_CHECKING:
    import weakref

MAX_DEPTH = 60
SWITCH_INTERVAL = 0.001
TURN_SECONDS = 0.002
TURN_TIMEOUT = 0.02
_perf_counter = time.perf_counter


def _set_switch_interval() -> None:
    """When the first worker starts: apply ``AIOGRAD_SWITCH_INTERVAL`` if the user set it
    (Note [Time slices] in ``evaluate.py``); without it the interpreter's setting is left alone."""
    value = os.environ.get("AIOGRAD_SWITCH_INTERVAL")
    if value:
        set_switch_interval(float(value))


_interpreter_interval: float | None = None  # the interval before set_switch_interval


def set_switch_interval(seconds: float | None) -> None:
    """Opt in to a shorter GIL switch interval for the whole process (Note [Time slices]).

    ``seconds`` > 0 sets ``sys.setswitchinterval(seconds)``; None (or 0) restores
    the interval the interpreter had before the first call. docs/async.md gives
    the measured trade-off.
    """
    global _interpreter_interval
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not 0 <= seconds <= 1):
        raise ValueError(f"set_switch_interval(): seconds must be None or a number in [0, 1], "
                         f"got {seconds!r}")
    if not seconds:
        if _interpreter_interval is not None:
            sys.setswitchinterval(_interpreter_interval)
            _interpreter_interval = None
        return
    if _interpreter_interval is None:
        _interpreter_interval = sys.getswitchinterval()
    sys.setswitchinterval(seconds)


class _ExecutorState(threading.local):
    """Per-thread executor state. ``queue`` is None on threads that are not executors."""

    queue: ReadyQueue | None = None
    #: nested sync drives on this thread (seed: current_depth)
    depth: int = 0
    #: True on device workers and pool threads (not on user threads)
    engine_thread: bool = False
    #: on the worker of a device other than the CPU: that device, current on this
    #: thread for its whole life (Note [Device fast paths] in ``evaluate.py``); else None
    home: Device | None = None
    #: warnings raised by nodes on this thread go to this list when set
    warnings: list[Any] | None = None
    #: the GraphTask whose slice this thread is running (for a dying worker)
    running: GraphTask | None = None
    #: the loop this thread works for, and when it last had a turn (Note [Giving the
    #: loop its turn]); None on threads that serve no loop
    served: LoopSignal | None = None
    turn_start: float = 0.0
    #: what watching that loop showed at ``turn_start`` (``LoopSignal.watch_turn``)
    turn_seen: Any = None


_tls = _ExecutorState()


def reset_thread_state() -> None:
    """In a forked child: this thread (the only one) is no executor any more. In place:
    the other engine modules hold ``_tls`` itself."""
    _tls.__dict__.clear()


def has_queued_work() -> bool:
    """True on an executor thread whose queue holds more tasks."""
    queue = _tls.queue
    return queue is not None and len(queue) > 0


class Worker:
    """A device worker: one thread, one ReadyQueue, lives until shutdown."""

    def __init__(self, engine: Executors, device: Device) -> None:
        self.engine = engine
        self.device = device
        self.queue = ReadyQueue(str(device))
        self.thread = threading.Thread(
            target=self._main, name=f"aiograd-worker-{device}", daemon=True
        )

    def _main(self) -> None:
        _tls.queue = self.queue
        _tls.engine_thread = True
        error: BaseException | None = None
        try:
            if self.device is CPU:
                self.engine.run_queue(self.queue, None)
            else:
                with self.device.backend.device_guard(self.device.index):
                    _tls.home = self.device
                    self.engine.run_queue(self.queue, None)
        except BaseException as exc:  # noqa: BLE001  (a bug in the engine itself)
            error = exc
        finally:
            self.engine._worker_exited(self, error)


class ReentrantPool:
    """Threads for nested sync backward past ``max_depth`` (seed ``ThreadPoolShared``).

    Grows only when every thread is busy. Threads exit at shutdown.
    Invariant (under ``_cond``): ``idle`` == threads waiting for a job.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._jobs: deque[Callable[[], None] | None] = deque()
        self.threads: list[threading.Thread] = []
        self.idle = 0

    def run(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            if self.idle > len(self._jobs) - 1:
                self._cond.notify()
                return
            thread = threading.Thread(target=self._main, name="aiograd-reentrant", daemon=True)
            self.threads.append(thread)
        thread.start()

    def _main(self) -> None:
        _tls.engine_thread = True
        while True:
            with self._cond:
                self.idle += 1
                while not self._jobs:
                    self._cond.wait()
                self.idle -= 1
                job = self._jobs.popleft()
            if job is None:
                return
            job()

    def shutdown(self, deadline: float) -> None:
        with self._cond:
            for _ in self.threads:
                self._jobs.append(None)
            self._cond.notify_all()
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.threads = [t for t in self.threads if t.is_alive()]


class Executors:
    """The engine's executor side (a mixin of ``Engine``, whose ``_lock``, ``_workers``,
    ``_live`` and ``_stopping`` it uses): starting workers, the loop every executor
    runs over its queue, and what a worker that stops leaves behind."""

    # Engine's state this side uses (set by Engine.__init__; thread rules in engine.py).
    _lock: threading.Lock
    _workers: dict[Device, Worker]
    _live: weakref.WeakSet[GraphTask]
    _stopping: bool

    # The evaluator side's methods this side calls (evaluate.py), for the type checker
    # only (at run time, Engine finds the real ones through its bases).
    if TYPE_CHECKING:
        def run_slice(self, queue: ReadyQueue | None, gt: GraphTask, heap: list[Any]) -> bool: ...
        def _claim_finish(self, gt: GraphTask) -> Callable[[], None] | None: ...
        def _signal_if_done(self, gt: GraphTask) -> None: ...

    def device_queue(self, device: Device) -> ReadyQueue:
        """The queue of ``device``'s worker, starting the worker on first use."""
        worker = self._workers.get(device)
        if worker is None:
            with self._lock:
                if self._stopping:
                    raise RuntimeError("the aiograd engine has been shut down")
                worker = self._workers.get(device)
                if worker is None:
                    if not self._workers:
                        _set_switch_interval()
                    worker = Worker(self, device)
                    self._workers[device] = worker
                    worker.thread.start()
        return worker.queue

    def _worker_exited(self, worker: Worker, error: BaseException | None) -> None:
        worker.queue.close()  # a push from now on raises: its task fails, it cannot hang
        with self._lock:
            if self._workers.get(worker.device) is worker:
                del self._workers[worker.device]
        if error is None:
            return
        # The worker died of an engine bug: fail every task it held; the next
        # task for its device starts a new worker.
        message = RuntimeError(
            f"aiograd worker thread for {worker.device} died: {error!r}; its graph tasks "
            "failed and a new worker will be started"
        )
        message.__cause__ = error
        # Affected: tasks queued on it, the one it was running, and every task whose
        # CPU nodes go to its queue (they would wait on it forever).
        with self._lock:
            live = set(self._live)
        affected = {gt for gt in live if gt.cpu_queue is worker.queue}
        for task in worker.queue.drain():
            if task[3] is not None:
                affected.add(task[2])
            elif task[4] is not None:
                task[4].fail(message)
        if _tls.running is not None:
            affected.add(_tls.running)
        for gt in affected:
            gt.fail(message)
            self._signal_if_done(gt)

    def _fail_stranded(self, queue: ReadyQueue) -> None:
        """A worker stops: fail the tasks left on its queue, so no caller waits forever."""
        error = RuntimeError(
            "the aiograd engine was shut down while this backward was running; "
            "its remaining nodes will not run"
        )
        for task in queue.drain():
            gt = task[2]
            if task[3] is None:
                if task[4] is not None:
                    task[4].fail(error)
                continue
            gt.retire()
            gt.fail(error)
            self._signal_if_done(gt)

    def run_queue(self, queue: ReadyQueue, until: GraphTask | None) -> None:
        """Pop and run tasks of ``queue`` until shutdown, or until ``until`` finishes."""
        pop = queue.pop
        turn_if_due = self._turn_if_due
        deferred_shutdown = False
        deferred_jobs: list[Any] = []
        try:
            while until is None or not until.finished:
                if not len(queue):  # going idle: the loop gets the GIL meanwhile
                    send_held()  # Note [Batched wake-ups]
                    _tls.served = _tls.turn_seen = None
                    task = pop()
                    _tls.turn_start = _perf_counter()
                else:
                    turn_if_due()
                    task = pop()
                if task[0] == SHUTDOWN_KEY:
                    if until is None:
                        self._fail_stranded(queue)
                        return
                    deferred_shutdown = True  # finish the nested drive first
                    continue
                if task[3] is None:  # a wake-up, or a job (Note [Offloading])
                    if task[4] is not None:
                        if until is None:
                            task[4]()
                        else:  # jobs never run inside a nested drive
                            deferred_jobs.append(task)
                    continue
                heap = [task]
                del task  # the heap owns it now: Note [Stealing gradients]
                self._run_heap(queue, heap[0][2], heap, until)
        finally:
            if deferred_jobs:
                _requeue_jobs(queue, deferred_jobs)
        if deferred_shutdown:
            queue.shutdown()  # for the worker's own loop, below this nested drive

    @staticmethod
    def _turn_if_due() -> None:
        """Every ``TURN_SECONDS``: if the loop this thread serves is starved, wait
        until it has had a turn (Note [Giving the loop its turn])."""
        served = _tls.served
        if served is None or _perf_counter() - _tls.turn_start <= TURN_SECONDS:
            return
        _tls.turn_seen = served.watch_turn(_tls.turn_seen, TURN_SECONDS, TURN_TIMEOUT)
        _tls.turn_start = _perf_counter()

    def _run_heap(self, queue: ReadyQueue, gt: GraphTask, heap: list[Any],
                  until: GraphTask | None) -> None:
        """Run a slice of ``gt`` from ``heap``; wake its driver if it finished.

        The task driven by this very loop (``until``) is not woken: the loop
        condition sees it finished.
        """
        _tls.running = gt
        self.run_slice(queue, gt, heap)
        waker = self._claim_finish(gt)
        _tls.running = None
        if waker is not None and gt is not until:
            del gt  # hold nothing of a finished task: its caller may be checking
            waker()
            del waker  # nor its driver and loop


def _requeue_jobs(queue: ReadyQueue, jobs: list[Any]) -> None:
    """Put offloaded jobs back on ``queue``; fail them if it is closed (its worker is gone)."""
    try:
        queue.push_many(jobs)
    except RuntimeError as exc:
        for task in jobs:
            task[4].fail(exc)


def replay_warnings(messages: list[Any]) -> None:
    """Issue, on the caller's thread, the warnings captured on an executor thread."""
    for message in messages:
        warnings.warn_explicit(message.message, message.category, message.filename,
                               message.lineno, source=message.source)


def _route_worker_warnings() -> None:
    """Route warnings raised inside a slice to their GraphTask (replayed by its caller).

    Note [Warnings of a job]
        A warning a node raises on a worker belongs to the pass, whose caller
        may be on another thread and under its own filters. The engine
        installs (when a pass starts and its wrapper is not the current hook)
        a wrapper around the public ``warnings.showwarning`` hook, which
        Python documents as replaceable: on a thread inside a slice (``_tls.warnings``, a
        thread-local list: the running pass's) it appends the warning there,
        and anywhere else it calls the hook it wrapped. Thread-safe: the
        hook is assigned under ``_install_lock`` only when it is not the
        wrapper already, and never swapped per job (swapping per job, as
        ``catch_warnings`` does, races between
        threads); which list a warning goes to depends only on the thread
        raising it, and list appends are atomic. The caller replays the
        list on its own thread when the pass finishes (``replay_warnings``).
        Inside a ``warnings.catch_warnings()`` block (which swaps the hook
        process-wide for its duration) or after the user installed a hook
        of their own, worker warnings go to that hook directly, as the
        warnings of any other thread do.
    """
    with _install_lock:
        previous = warnings.showwarning
        if getattr(previous, "_aiograd_routes_jobs", False):
            return

        def showwarning(message: Any, category: type[Warning], filename: str, lineno: int,
                        file: Any = None, line: str | None = None) -> None:
            sink = _tls.warnings
            if sink is not None:
                sink.append(warnings.WarningMessage(message, category, filename, lineno,
                                                    file, line))
            else:
                previous(message, category, filename, lineno, file, line)

        showwarning._aiograd_routes_jobs = True  # type: ignore[attr-defined]
        warnings.showwarning = showwarning


_install_lock = threading.Lock()

