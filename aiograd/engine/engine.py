"""The engine: runs GraphTasks on executor threads (seed ``engine.cpp``).

Executors are threads that pop node tasks from their own ReadyQueue:

- one long-lived *device worker* per device (``cpu``, each CUDA device, each
  device of a registered backend), shared by every GraphTask in the process;
- a thread blocked in ``backward_sync``: it runs the CPU nodes of its own
  GraphTask itself (seed: the caller's ``local_ready_queue``), and, if it is a
  worker, any other task of its queue while it waits;
- a thread of the reentrant pool, for sync reentrant backward past
  ``max_depth`` (See Note [Reentrant backward]).

An ``await backward()`` runs its CPU nodes on the CPU worker, not on the
event-loop thread (small graphs of built-in ops excepted: Note [Inline small
graphs]). The awaiting coroutine (the *driver*) sleeps
until the task finishes, runs ``async def`` backward functions and async
final callbacks on its loop, and is woken through the loop bridge::

    event loop (driver)              CPU worker                 cuda:0 worker
    -------------------              ----------                 -------------
    submit root ------------------>  prepare (dependencies)
    await driver.signal              slice: run ready nodes
                                     of this task, lock-free
                                     local heap  ------------>  node on cuda:0
                                                 <------------  its CPU child
                                     last node: finished = True
    <----- LoopSignal.set()
    final callbacks, leaf streams,
    re-raise error or return grads

Note [Time slices]
    A worker runs the ready nodes of one GraphTask from a private heap,
    without locking its queue, for at most ``SLICE_SECONDS``; then, if
    what waits first on its queue outranks the task (Note [Fair scheduling]
    in ``graph_task.py``), it puts the rest back there, where the deeper or
    earlier-due task comes first (otherwise it goes on). Before each node it
    checks the task's due time too (Note [Deadlines]).
    So per-node work takes no queue lock and no loop round-trip.
    The event loop gets the GIL back through CPython's forced switching: a
    thread that waits for the GIL longer than the switch interval makes the
    holder hand it over. A voluntary release (``time.sleep(0)``) does not
    hand it over reliably and, on a busy machine, gives the CPU away to other
    processes. The switch interval (the interpreter's 5 ms by default)
    bounds how long a worker running Python code keeps a waiting loop off
    the GIL, unless the worker drops the GIL for moments (Note [Giving the
    loop its turn]). The interval is process-wide, so the engine leaves it
    alone unless the user opts in: ``aiograd.engine.set_switch_interval``
    or ``AIOGRAD_SWITCH_INTERVAL`` (seconds, applied when the first worker
    starts); 1 ms (``SWITCH_INTERVAL``) is the value the service benchmark
    was tuned with (docs/async.md gives the trade-off).

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

Note [Inline small graphs]
    Handing a GraphTask to a worker costs two thread wake-ups (worker, then
    loop): on a loaded machine more than the whole backward of a small
    graph. So an ``await backward()`` of a small graph runs on the loop thread
    in one short slice, like any other bit of CPU work a coroutine does:
    at most ``INLINE_MAX_NODES`` nodes, all on the CPU, with gradients of at
    most ``INLINE_MAX_ELEMENTS`` elements in all, and only aiograd's own
    backward formulas: no custom Function, no hook, no saved-tensor hooks,
    nothing that could block or take long. Everything else goes to the
    workers.

Note [Direct accumulation]
    A leaf's AccumulateGrad sorts before every other node of its task (its
    sequence number is the largest), so when it becomes ready it would be
    popped next. When nothing runs around it (no hook on the node or the
    leaf, no ``inputs=``/``grad()`` captures, no ``create_graph``, a CPU
    gradient, no other gradient waiting in a buffer for it) and this thread
    is the task's CPU executor (where the node would run), ``_route`` adds
    the gradient into ``.grad`` right there instead, in edge order, without
    a heap push and pop and the per-node steps: the same order and result,
    less work per parameter. A gradient nobody else references still
    becomes ``.grad`` without a copy (``_ROUTED_REFS``, Note [Stealing
    gradients]).

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

import atexit
import contextvars
import functools
import heapq
import inspect
import math
import os
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import numpy

from ..devices import CPU, Device
from ..grad_mode import _anomaly, _grad_enabled
from ..graph._node import AccumulateGrad, GraphRoot, Node
from . import _observe
from . import hooks as _hooks
from ._bridge import LoopSignal, running_loop_library, send_held
from .graph_task import GraphTask, checkpoint_valid, current_graph_task
from .input_buffer import accumulate, node_stream, stash_current_streams, sync_leaf_streams
from .ready_queue import SHUTDOWN_KEY, ReadyQueue, _ticket
from .validate import plain_cpu_grads, validate_outputs

MAX_DEPTH = 60
SLICE_SECONDS = 0.002
SWITCH_INTERVAL = 0.001
TURN_SECONDS = 0.002
TURN_TIMEOUT = 0.02
INLINE_MAX_NODES = 64
INLINE_MAX_ELEMENTS = 1 << 15
NO_DEADLINE_HORIZON = 1.0

multithreading_enabled: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiograd_multithreading_enabled", default=True
)

_ndarray = numpy.ndarray
# References to a gradient only the engine holds while ``_accumulate_leaves``
# adds it (Note [Direct accumulation]): the slot of the node's outputs, the
# ``leaves`` entry, the loop's local, accumulate's argument and getrefcount's.
_ROUTED_REFS = 5
_heappop = heapq.heappop
_heappush = heapq.heappush
_perf_counter = time.perf_counter


def _set_switch_interval() -> None:
    """When the first worker starts: apply ``AIOGRAD_SWITCH_INTERVAL`` if the user set it
    (Note [Time slices]); without it the interpreter's setting is left alone."""
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


def has_queued_work() -> bool:
    """True on an executor thread whose queue holds more tasks."""
    queue = _tls.queue
    return queue is not None and len(queue) > 0


def _percentiles(values: list[float]) -> dict[str, float]:
    """p50, p90, p99 and max of ``values`` (nearest rank), in seconds; {} if none."""
    if not values:
        return {}
    values = sorted(values)
    last = len(values) - 1
    return {f"p{q}": values[min(last, math.ceil(q / 100 * len(values)) - 1)]
            for q in (50, 90, 99)} | {"max": values[last]}


class WorkerStats:
    """One device worker in an ``EngineStats`` snapshot (for metrics exporters).

    ``waiting``: GraphTasks with nodes queued on it; ``running``: GraphTasks
    whose CPU nodes it runs that started and have not finished; ``queue_wait``
    and ``run_time``: percentiles (``p50``, ``p90``, ``p99``, ``max``, seconds)
    over the ``passes`` most recent finished passes whose CPU nodes it ran
    (at most ``RECENT_PASSES``): from submission to the first node, and the
    time spent running their slices.
    """

    __slots__ = ("waiting", "running", "passes", "queue_wait", "run_time")

    def __init__(self, waiting: int, running: int, finished: list[tuple[float, float]]) -> None:
        self.waiting = waiting
        self.running = running
        self.passes = len(finished)
        self.queue_wait = _percentiles([wait for wait, _ in finished])
        self.run_time = _percentiles([run for _, run in finished])

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"WorkerStats({fields})"


class EngineStats:
    """A snapshot of the engine, for tests and monitoring."""

    __slots__ = ("queued", "running_graph_tasks", "completed_graph_tasks", "workers",
                 "pool_threads", "pool_idle", "per_worker")

    def __init__(self, queued: dict[str, int], running: int, completed: int, workers: int,
                 pool_threads: int, pool_idle: int,
                 per_worker: dict[str, WorkerStats] | None = None) -> None:
        #: tasks waiting in each worker's queue, by device name
        self.queued = queued
        #: GraphTasks started and not yet finished
        self.running_graph_tasks = running
        #: GraphTasks finished (successfully or not) since the engine started
        self.completed_graph_tasks = completed
        #: live device worker threads
        self.workers = workers
        #: threads in the reentrant pool, and how many of them are idle
        self.pool_threads = pool_threads
        self.pool_idle = pool_idle
        #: by device name: waiting/running GraphTasks and recent pass percentiles
        self.per_worker = {} if per_worker is None else per_worker

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"EngineStats({fields})"


class Worker:
    """A device worker: one thread, one ReadyQueue, lives until shutdown."""

    def __init__(self, engine: Engine, device: Device) -> None:
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


class AsyncDriver:
    """The awaiting side of a GraphTask: sleeps on an event, runs async jobs.

    ``submit`` may be called from any thread; jobs (async callables) run in
    a task group on the driver's loop. A job submitted by a nested sync
    GraphTask (an ``async def`` backward inside a ``backward_sync``) runs
    here too: the driver is the ``port`` of every task it started.
    """

    def __init__(self) -> None:
        self.inbox: deque[Callable[[], Any]] = deque()
        self.signal = LoopSignal()
        #: thread-safe: wakes ``serve``
        self.wake = self.signal.set

    def finished(self) -> None:
        """The GraphTask's waker (thread-safe). Note [Batched wake-ups]."""
        self.signal.set(batch=has_queued_work())

    def submit(self, job: Callable[[], Any]) -> None:
        self.inbox.append(job)
        self.wake()

    async def serve(self, gt: GraphTask) -> None:
        """Run submitted jobs until ``gt`` is finished (Note [Completion]).

        The task group for the jobs is opened only when the first one arrives:
        most backward passes have no async node and just sleep until woken.
        """
        while not self.inbox:
            if gt.finished:
                return
            await self._sleep()
        async with anyio.create_task_group() as tg:
            while True:
                while self.inbox:
                    tg.start_soon(self.inbox.popleft())
                if gt.finished:
                    break
                await self._sleep()

    async def _sleep(self) -> None:
        await self.signal.wait()
        self.signal.clear()


class _InlinePort:
    """Collects async jobs of a GraphTask driven inline (multithreading disabled)."""

    def __init__(self) -> None:
        self.jobs: deque[Callable[[], Any]] = deque()

    def submit(self, job: Callable[[], Any]) -> None:
        self.jobs.append(job)


class _BackgroundLoop:
    """An event loop thread for async nodes of tasks that no loop awaits."""

    def __init__(self) -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever,
                                       name="aiograd-async", daemon=True)
        self.thread.start()

    def submit(self, job: Callable[[], Any]) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(job(), self.loop)

    def stop(self, timeout: float) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)


class Engine:
    """Owns the device workers, the reentrant pool and the running GraphTasks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[Device, Worker] = {}
        self._pool = ReentrantPool()
        self._background: _BackgroundLoop | None = None
        self._live: weakref.WeakSet[GraphTask] = weakref.WeakSet()
        self.completed = 0
        self.max_depth = MAX_DEPTH
        self.inline_max_nodes = INLINE_MAX_NODES
        self.inline_max_elements = INLINE_MAX_ELEMENTS
        #: Note [Deadlines]: a pass without a deadline is due this long after it arrived
        self.no_deadline_horizon = NO_DEADLINE_HORIZON
        self._stopping = False

    # ---- executors ----

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
            self._fail(gt, message)
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
            with gt.lock:
                gt.outstanding -= 1
            self._fail(gt, error)
            self._signal_if_done(gt)

    def _background_port(self) -> _BackgroundLoop:
        with self._lock:
            if self._background is None:
                self._background = _BackgroundLoop()
            return self._background

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

    # ---- running nodes ----

    def run_slice(self, queue: ReadyQueue | None, gt: GraphTask, heap: list[Any]) -> bool:
        """Run ready nodes of ``gt`` from ``heap`` for one time slice (Note [Time slices]).

        Returns True if the slice ran out of time with work left (then on the queue).
        """
        with gt.lock:
            if gt.stopped:
                gt.outstanding -= len(heap)
                heap.clear()
                stopped = True
            else:
                gt.active += 1
                stopped = False
        if stopped:
            return False
        start = _perf_counter()
        if gt.started is None:
            gt.started = start
        previous = _tls.warnings
        _tls.warnings = gt.warnings
        if type(gt.port) is AsyncDriver:  # a coroutine awaits gt: its loop is served
            _tls.served = gt.port.signal
        expired = False
        try:
            expired = gt.context.copy().run(self._drain, queue, gt, heap)
        except BaseException as exc:  # noqa: BLE001  (an engine bug: fail the task, not the thread)
            self._fail(gt, exc)
        finally:
            _tls.warnings = previous
            gt.run_time += _perf_counter() - start
            with gt.lock:
                gt.active -= 1
                if heap:
                    gt.outstanding -= len(heap)
                    heap.clear()
        return expired

    def _drain(self, queue: ReadyQueue | None, gt: GraphTask, heap: list[Any]) -> bool:
        """Evaluate ready nodes of ``gt`` (seed ``evaluate_function``/``call_function``).

        The per-node path: hooks (only if any), the function on its forward
        stream (only if it has one), validation, routing. Returns True if the
        slice ran out of time with work left (pushed back on ``queue``).
        """
        if gt.dependencies is None:
            gt.prepare()
        due = gt.due  # Note [Deadlines]
        limit = due if queue is None else min(due, _perf_counter() + SLICE_SECONDS)
        # One global read per slice: with no observer the check below costs nothing
        # more per node; with one, it runs before every node (Note in _observe.py).
        obs = _observe.observer
        deadline = limit if obs is None else -math.inf
        last: tuple[Node, float, float] | None = None  # observed: (node, ready, start)
        create_graph = gt.create_graph
        release = not gt.keep_graph
        check_nan = gt.check_nan
        instrumented = gt.exec_info is not None
        after = self._after_outputs
        route = self._route
        follow: tuple[Node, list[Any]] | None = None
        try:
            while heap or follow is not None:
                if gt.stopped:
                    if follow is not None:
                        with gt.lock:
                            gt.outstanding -= 1
                    return False
                if _perf_counter() > deadline:  # the slice ended, the pass expired, observed
                    now = _perf_counter()
                    if last is not None:
                        _report_node(obs, gt, last, now)
                        last = None
                    upcoming = heap[0][3] if follow is None else follow[0]
                    if now >= due:
                        gt.fail(gt.expired_error(upcoming))
                        continue
                    if now > limit:
                        assert queue is not None
                        head = queue.head_key()
                        if head is not None and head < (heap[0][0] if follow is None else
                                                        gt.key_base - upcoming.sequence_nr):
                            if follow is not None:  # outranked: back to the queue
                                heap.append((gt.key_base - upcoming.sequence_nr, next(_ticket),
                                             gt, upcoming, follow[1]))
                                follow = None
                            del upcoming
                            queue.push_many(heap)
                            heap.clear()
                            return True
                        self._turn_if_due()  # nothing waiting outranks this pass: go on
                        limit = min(due, _perf_counter() + SLICE_SECONDS)
                        if obs is None:
                            deadline = limit
                    if obs is not None:
                        last = (upcoming, gt.ready_at.pop(upcoming, gt.arrival), _perf_counter())
                    del upcoming
                if follow is None:
                    task = _heappop(heap)
                    node = task[3]
                    inputs = task[4]
                    del task
                else:
                    node, inputs = follow
                    follow = None
                try:
                    if instrumented:
                        inputs = self._instrument(gt, node, inputs)
                    if inputs is None:  # only captured, not run
                        outputs = None
                    else:
                        meta = node.input_metadata
                        if meta and meta[0].stream is not None:
                            outputs = self._evaluate_on_stream(gt, node, inputs)
                        else:
                            if (node._tensor_pre_hooks or node._retains_grad_hooks
                                    or node._pre_hooks
                                    or (type(node) is AccumulateGrad and node.has_tensor_hooks())):
                                inputs = _hooks.call_pre_hooks(node, inputs)
                            if inputs and inputs[0] is None and _without_grads(node, inputs):
                                outputs = (None,) * len(node.next_edges)
                            else:
                                outputs = node.apply(inputs, create_graph)
                            if release:
                                node.release_variables()
                            if not plain_cpu_grads(node.next_edges, outputs):
                                outputs = validate_outputs(node, outputs)
                            if node._post_hooks or check_nan:
                                outputs = after(gt, node, inputs, outputs)
                except BaseException as exc:  # noqa: BLE001  (user code: goes to the caller)
                    with gt.lock:
                        gt.outstanding -= 1
                    self._fail(gt, exc, node)
                    return False
                inputs = None  # Note [Stealing gradients]: hold no extra references
                follow = route(gt, node, outputs, queue, heap)
                outputs = None
        finally:
            if last is not None:
                _report_node(obs, gt, last, _perf_counter())
        return False

    def _evaluate_on_stream(self, gt: GraphTask, node: Node, inputs: list[Any]) -> Any:
        """Hooks, the function and validation with the node's forward stream current.

        See Note [Streaming backwards]: all of a node's work is queued on the
        stream its forward used (seed: the stream guard in ``evaluate_function``).
        """
        meta = node.input_metadata[0]
        with meta.device.backend.stream_guard(meta.stream):
            if (node._tensor_pre_hooks or node._retains_grad_hooks or node._pre_hooks
                    or (type(node) is AccumulateGrad and node.has_tensor_hooks())):
                inputs = _hooks.call_pre_hooks(node, inputs)
            if inputs and inputs[0] is None and _without_grads(node, inputs):
                outputs = (None,) * len(node.next_edges)
            else:
                outputs = node.apply(inputs, gt.create_graph)
            return self._finish_outputs(gt, node, inputs, outputs)

    def _finish_outputs(self, gt: GraphTask, node: Node, inputs: list[Any], outputs: Any) -> Any:
        """After ``node.apply`` (off the per-node path of ``_drain``, which inlines
        this): release saved tensors, validate ``outputs``, post-hooks, NaN check."""
        if not gt.keep_graph:
            node.release_variables()
        if not plain_cpu_grads(node.next_edges, outputs):
            outputs = validate_outputs(node, outputs)
        return self._after_outputs(gt, node, inputs, outputs)

    def _after_outputs(self, gt: GraphTask, node: Node, inputs: list[Any], outputs: Any) -> Any:
        """Post-hooks (their results validated) and the anomaly NaN check.

        With ``grad(inputs)``/``backward(inputs=)``, the hooks see None for the
        gradients of edges the task prunes, as PyTorch's (which does not compute them).
        """
        if node._post_hooks:
            exec_info = gt.exec_info
            if exec_info is not None:
                outputs = [None if edge is None or edge[0] not in exec_info else grad
                           for edge, grad in zip(node.next_edges, outputs)]
            outputs = validate_outputs(node, _hooks.call_post_hooks(node, outputs, inputs))
        if gt.check_nan:
            _hooks.check_nan(node, outputs)
        return outputs

    def _instrument(self, gt: GraphTask, node: Node, inputs: list[Any]) -> list[Any] | None:
        """Captures for ``grad()`` inputs; None if the node itself must not run."""
        needed = gt.exec_info.get(node)  # type: ignore[union-attr]
        if not needed:
            inputs = _hooks.call_tensor_pre_hooks(node, inputs)
        captures = gt.captures.get(node)
        if captures:
            with gt.lock:
                for input_nr, index in captures:
                    gt.captured[index] = inputs[input_nr]
            self._record_leaf_stream(gt, node)
        return inputs if needed else None

    def _record_leaf_stream(self, gt: GraphTask, node: Node) -> None:
        meta = node.input_metadata
        if meta and meta[0].stream is not None:
            with gt.lock:
                gt.leaf_streams.add((meta[0].stream, meta[0].device))

    def _route(self, gt: GraphTask, node: Node, outputs: Any, queue: ReadyQueue | None,
               heap: list[Any] | None) -> tuple[Node, list[Any]] | None:
        """Deliver ``outputs`` along ``node``'s edges; dispatch nodes that became ready.

        Ready CPU nodes for this executor go on its private ``heap`` (no queue
        lock); others are pushed to their device's queue (Note [Time slices]).
        If exactly one node became ready, it is for this executor and it comes
        before everything on the heap, it is returned instead: the caller runs
        it next, in the same order, without a heap push and pop (a chain, or
        each branch of a ladder, then never touches the heap).
        """
        edges = node.next_edges
        if outputs is None or not edges:
            if outputs is not None:
                self._record_leaf_stream(gt, node)  # a leaf: AccumulateGrad
            with gt.lock:
                gt.outstanding -= 1
            return None
        exec_info = gt.exec_info
        ready = None  # the first node made ready; ``more``: the others
        more = None
        leaves = None  # (AccumulateGrad, leaf, gradient) to accumulate right here
        with gt.lock:
            deps = gt.dependencies
            not_ready = gt.not_ready
            became_ready = 0
            i = -1
            for edge in edges:
                i += 1
                if edge is None:
                    continue
                nxt, pos = edge
                count = deps.get(nxt)  # type: ignore[union-attr]
                if count == 1:
                    del deps[nxt]  # type: ignore[union-attr]
                    buffer = not_ready.pop(nxt, None)
                    if (type(nxt) is AccumulateGrad and buffer is None and exec_info is None
                            and queue is gt.cpu_queue  # a CPU node: this is its executor
                            and gt.direct):  # Note [Direct accumulation]
                        leaf = _plain_leaf(nxt, outputs[i])
                        if leaf is not None:
                            if leaves is None:
                                leaves = [(nxt, leaf, outputs[i])]
                            else:
                                leaves.append((nxt, leaf, outputs[i]))
                            continue
                elif count is None:
                    raise RuntimeError(f"dependency not found for {nxt.name()}")
                else:
                    deps[nxt] = count - 1  # type: ignore[index]
                    buffer = not_ready.get(nxt)
                if buffer is None:
                    if exec_info is not None and nxt not in exec_info:
                        continue
                    buffer = [None] * len(nxt.input_metadata)
                    if count != 1:
                        not_ready[nxt] = buffer
                grad = outputs[i]
                if type(grad) is _ndarray:  # a CPU gradient: no stream to sync
                    old = buffer[pos]
                    buffer[pos] = grad if old is None else old + grad
                elif grad is not None:  # See Note [Streaming backwards]
                    accumulate(buffer, pos, grad, nxt, node_stream(node))
                if count == 1:
                    became_ready += 1
                    if ready is None:
                        ready = (nxt, buffer)
                    elif more is None:
                        more = [(nxt, buffer)]
                    else:
                        more.append((nxt, buffer))
            gt.outstanding += became_ready - 1
        if leaves is not None and not gt.stopped:
            self._accumulate_leaves(gt, leaves)
        if ready is None:
            return None
        if more is None and heap is not None and queue is gt.cpu_queue:
            nxt = ready[0]
            meta = nxt.input_metadata
            if (not nxt.is_async and (not meta or meta[0].device is CPU or gt.single_thread)
                    and (not heap or gt.key_base - nxt.sequence_nr < heap[0][0])):
                return ready  # it would be popped next anyway
        self._dispatch(gt, ready, queue, heap)
        if more is not None:
            for task in more:
                self._dispatch(gt, task, queue, heap)
        return None

    def _accumulate_leaves(self, gt: GraphTask, leaves: list[Any]) -> None:
        """Run AccumulateGrad nodes that became ready with nothing to call around them
        (Note [Direct accumulation]), in edge order, as the queue would have."""
        for acc, leaf, grad in leaves:
            try:
                acc.accumulate(leaf, grad, False, _ROUTED_REFS)
            except BaseException as exc:  # noqa: BLE001  (goes to the caller)
                self._fail(gt, exc, acc)
                return

    def _dispatch(self, gt: GraphTask, task: tuple[Node, list[Any]], queue: ReadyQueue | None,
                  heap: list[Any] | None) -> None:
        """Send a ready node to its executor: this one's ``heap``, a queue, or the loop."""
        nxt, buffer = task
        if nxt.is_async:
            gt.port.submit(functools.partial(self._run_async_node, gt, nxt, buffer))
            return
        key = gt.key_base - nxt.sequence_nr
        meta = nxt.input_metadata
        if not meta or meta[0].device is CPU or gt.single_thread:
            target = gt.cpu_queue
        else:
            target = self.device_queue(meta[0].device)
        if target is queue and heap is not None:
            _heappush(heap, (key, next(_ticket), gt, nxt, buffer))
        else:
            target.push(key, gt, nxt, buffer)

    async def _run_async_node(self, gt: GraphTask, node: Node, inputs: list[Any]) -> None:
        """Run an ``async def`` backward on the loop, then route its outputs."""
        with gt.lock:
            if gt.stopped:
                gt.outstanding -= 1
                stopped = True
            else:
                gt.active += 1
                stopped = False
        if stopped:
            self._signal_if_done(gt)
            return
        for var, value in gt.context.items():
            var.set(value)
        try:
            if gt.dependencies is None:  # an async root
                gt.prepare()
            if gt.exec_info is not None:
                inputs = self._instrument(gt, node, inputs)
            if inputs is None:
                outputs = None
            else:
                if (node._tensor_pre_hooks or node._retains_grad_hooks or node._pre_hooks):
                    inputs = _hooks.call_pre_hooks(node, inputs)
                outputs = await node.apply_async(inputs, gt.create_graph)
                outputs = self._finish_outputs(gt, node, inputs, outputs)
        except BaseException as exc:
            with gt.lock:
                gt.outstanding -= 1
            if not isinstance(exc, anyio.get_cancelled_exc_class()):
                self._fail(gt, exc, node)
                return
            gt.cancel()
            raise
        else:
            try:
                self._route(gt, node, outputs, None, None)
            except BaseException as exc:  # noqa: BLE001  (an engine bug: fail the task)
                self._fail(gt, exc)
        finally:
            with gt.lock:
                gt.active -= 1
            self._signal_if_done(gt)

    # ---- completion and errors ----

    def _fail(self, gt: GraphTask, exc: BaseException, node: Node | None = None) -> None:
        if node is not None and node.anomaly_trace and gt.error is None:
            exc.add_note(f"Traceback of forward call that caused the error (node "
                         f"{node.name()}):\n{node.anomaly_trace}")
        gt.fail(exc)

    def _claim_finish(self, gt: GraphTask) -> Callable[[], None] | None:
        """If ``gt`` is finished (Note [Completion]), mark it so, once, and return
        its waker for the caller to call (after dropping its own references)."""
        with gt.lock:
            if gt.finished or not gt.done_locked():
                return None
            gt.finished = True
        return gt.waker

    def _signal_if_done(self, gt: GraphTask) -> None:
        waker = self._claim_finish(gt)
        if waker is not None:
            waker()

    def _cancel_tree(self, gt: GraphTask) -> None:
        """Cancel ``gt`` and every live GraphTask nested in it; drop their queued tasks."""
        tasks = [gt]
        with self._lock:
            live = list(self._live)
        for other in live:
            parent = other.parent
            while parent is not None:
                if parent is gt:
                    tasks.append(other)
                    break
                parent = parent.parent
        queues = [w.queue for w in list(self._workers.values())]
        for task in tasks:
            task.cancel()
            for q in {*queues, task.cpu_queue}:
                if q is not None:
                    dropped = q.discard(task)
                    if dropped:
                        with task.lock:
                            task.outstanding -= dropped
            self._signal_if_done(task)

    # ---- drivers ----

    def _start(self, gt: GraphTask, cpu_queue: ReadyQueue, context: contextvars.Context,
               scope_due: float = math.inf) -> None:
        now = _perf_counter()
        gt.schedule(now, scope_due, self.no_deadline_horizon)
        obs = _observe.observer
        # An observed pass runs every node through the pipeline, leaves too.
        gt.direct = not gt.create_graph and obs is None
        if obs is not None:
            obs.task_start(gt.id, now)
        if not getattr(warnings.showwarning, "_aiograd_routes_jobs", False):
            _route_worker_warnings()  # again if a catch_warnings() block swapped it out
        gt.cpu_queue = cpu_queue
        gt.check_nan = context.run(_enter_task_context, gt)
        gt.context = context
        gt.outstanding = 1
        stash_current_streams(gt)
        with self._lock:
            self._live.add(gt)

    def _submit_root(self, gt: GraphTask, queue: ReadyQueue, heap: list[Any] | None) -> None:
        """Queue the root task: the single root node, or a GraphRoot over several roots."""
        root = gt.root_node
        inputs = gt.root_inputs
        gt.root_inputs = []
        if root.is_async:
            gt.port.submit(functools.partial(self._run_async_node, gt, root, inputs))
            return
        key = gt.key_base - root.sequence_nr
        meta = root.input_metadata
        if meta and meta[0].device is not CPU and not gt.single_thread:
            queue = self.device_queue(meta[0].device)
        elif heap is not None:
            _heappush(heap, (key, next(_ticket), gt, root, inputs))
            return
        else:
            queue = gt.cpu_queue
        queue.push(key, gt, root, inputs)

    async def run_async(self, gt: GraphTask, context: contextvars.Context) -> None:
        """Drive ``gt`` from a coroutine; returns when all nodes ran or raises."""
        if not context.run(multithreading_enabled.get) or _fits_inline(
                gt.root_node, self.inline_max_nodes, self.inline_max_elements):
            await self._run_inline(gt, context)
            return
        driver = AsyncDriver()
        gt.port = driver
        gt.waker = driver.finished
        self._start(gt, self.device_queue(CPU), context, _scope_due(gt))
        self._submit_root(gt, None, None)
        try:
            await driver.serve(gt)
            if gt.due_by_scope and isinstance(gt.error, TimeoutError) and gt.due <= _perf_counter():
                # Expired by its cancel scope's deadline (Note [Deadlines]): end as the
                # scope says; the scope cancels this wait at once, its deadline has passed.
                gt.error = None
                await anyio.sleep_forever()
        except BaseException:
            self._cancel_tree(gt)
            with anyio.CancelScope(shield=True):
                await driver.serve(gt)
            self._finish(gt)
            raise
        await self._finalize_async(gt)

    async def _run_inline(self, gt: GraphTask, context: contextvars.Context) -> None:
        """Multithreading disabled: every node runs on this (loop) thread, in order."""
        port = _InlinePort()
        gt.port = port
        gt.single_thread = True
        queue = ReadyQueue("inline")
        self._start(gt, queue, context, _scope_due(gt))
        heap: list[Any] = []
        self._submit_root(gt, queue, heap)
        try:
            while not gt.finished:
                if gt.due_by_scope and isinstance(gt.error, TimeoutError) \
                        and gt.due <= _perf_counter():
                    gt.error = None  # expired: end as the scope says (Note [Deadlines])
                    await anyio.sleep_forever()
                if heap:
                    self.run_slice(queue, gt, heap)
                    self._claim_finish(gt)
                elif len(queue):
                    heap.append(queue.pop())
                elif port.jobs:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(port.jobs.popleft())
                else:  # pragma: no cover - would be an engine bug
                    raise RuntimeError("aiograd: inline graph task stalled")
                await anyio.lowlevel.checkpoint()
        except BaseException:
            self._cancel_tree(gt)
            heap.clear()
            self._finish(gt)
            raise
        await self._finalize_async(gt)

    def run_sync(self, gt: GraphTask, context: contextvars.Context) -> None:
        """Drive ``gt`` from a blocking call (see Note [Reentrant backward])."""
        if not _tls.engine_thread and running_loop_library() is not None:
            raise RuntimeError(
                "backward_sync()/grad_sync() would block the running event loop; "
                "use 'await aiograd.backward(...)' / 'await aiograd.grad(...)' instead"
            )
        if _tls.depth >= self.max_depth:
            done = threading.Event()
            outcome: list[BaseException] = []

            def job() -> None:
                _tls.depth = 0
                try:
                    self.run_sync(gt, context)
                except BaseException as exc:  # noqa: BLE001  (handed to the waiting thread)
                    outcome.append(exc)
                finally:
                    _tls.queue = None
                    done.set()

            self._pool.run(job)
            done.wait()
            if outcome:
                raise outcome[0]
            return
        queue = _tls.queue
        if queue is None:
            queue = _tls.queue = ReadyQueue(threading.current_thread().name)
        gt.single_thread = not context.run(multithreading_enabled.get)
        parent = gt.parent
        gt.port = parent.port if parent is not None and parent.port is not None else None
        gt.waker = queue.wake
        self._start(gt, queue, context)
        if gt.port is None:
            gt.port = _LazyBackgroundPort(self)
        heap: list[Any] = []
        self._submit_root(gt, queue, heap)
        _tls.depth += 1
        try:
            if heap:  # a CPU root: its first slice runs right away, without queueing it
                self._run_heap(queue, gt, heap, gt)
            self.run_queue(queue, gt)
        except BaseException:
            self._cancel_tree(gt)
            self.run_queue(queue, gt)
            self._finish(gt)
            raise
        finally:
            _tls.depth -= 1
        self._finalize_sync(gt)

    # ---- after the nodes: callbacks, streams, result (seed exec_post_processing) ----

    def _post_processing(self, gt: GraphTask) -> Iterator[Any]:
        """After the nodes (seed ``exec_post_processing``): checks, leaf streams, then the
        final callbacks in order (they may queue more). Yields each awaitable a callback
        returns, for the driver to wait on; stops at the first error (kept on ``gt``)."""
        if gt.error is None and not gt.cancelled and gt.not_ready:
            gt.fail(RuntimeError("could not compute gradients for some functions"))
        if gt.error is None:
            sync_leaf_streams(gt)  # before the callbacks: they may read the gradients
        while gt.error is None and gt.final_callbacks:
            with gt.lock:
                callback = gt.final_callbacks.pop(0)
            try:
                result = gt.context.copy().run(callback)
            except BaseException as exc:  # noqa: BLE001  (raised by _raise_or_return)
                gt.fail(exc)
                return
            if inspect.isawaitable(result):
                yield result

    def _finalize_sync(self, gt: GraphTask) -> None:
        try:
            for awaitable in self._post_processing(gt):
                try:
                    _run_coroutine_blocking(self, gt, awaitable)
                except BaseException as exc:  # noqa: BLE001  (raised by _raise_or_return)
                    gt.fail(exc)
        finally:
            self._finish(gt)
        self._raise_or_return(gt)

    async def _finalize_async(self, gt: GraphTask) -> None:
        try:
            for awaitable in self._post_processing(gt):
                try:
                    await _await_in_context(gt, awaitable)
                except anyio.get_cancelled_exc_class():
                    raise
                except BaseException as exc:  # noqa: BLE001  (raised by _raise_or_return)
                    gt.fail(exc)
        finally:
            self._finish(gt)
        self._raise_or_return(gt)

    def _finish(self, gt: GraphTask) -> None:
        """Release the task's buffers and state; count it as completed."""
        gt.not_ready = {}
        gt.dependencies = {}
        gt.final_callbacks = []
        gt.root_node = None  # type: ignore[assignment]
        gt.roots = []
        gt.context = None
        gt.waker = None
        with self._lock:
            if gt in self._live:
                self._live.discard(gt)
                self.completed += 1
        if gt.started is not None:  # statistics of a pass that ran on an executor
            gt.cpu_queue.finished.append((gt.started - gt.arrival, gt.run_time))
        obs = _observe.observer
        if obs is not None:
            obs.task_end(gt.id, _perf_counter(), gt.error)
        replay_warnings(gt.warnings)
        gt.warnings = []

    def _raise_or_return(self, gt: GraphTask) -> None:
        error = gt.error
        if error is not None:
            gt.error = None  # do not keep the traceback (and its frames) alive via gt
            raise error

    # ---- lifecycle and statistics ----

    def stats(self) -> EngineStats:
        with self._lock:
            workers = list(self._workers.values())
            live = list(self._live)
        running = len(live)
        per_worker = {
            str(w.device): WorkerStats(
                w.queue.waiting(),
                sum(gt.cpu_queue is w.queue and gt.started is not None and not gt.finished
                    for gt in live),
                list(w.queue.finished))
            for w in workers}
        return EngineStats(
            queued={str(w.device): len(w.queue) for w in workers},
            running=running,
            completed=self.completed,
            workers=sum(w.thread.is_alive() for w in workers),
            pool_threads=len(self._pool.threads),
            pool_idle=self._pool.idle,
            per_worker=per_worker,
        )

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop every worker; wait at most ``timeout`` seconds. True if all stopped."""
        if timeout is None:
            timeout = float(os.environ.get("AIOGRAD_SHUTDOWN_WAIT_LIMIT", "10"))
        deadline = time.monotonic() + timeout
        with self._lock:
            self._stopping = True
            workers = list(self._workers.values())
        for worker in workers:
            worker.queue.shutdown()
        for worker in workers:
            worker.thread.join(max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(deadline)
        if self._background is not None:
            self._background.stop(max(0.0, deadline - time.monotonic()))
        return not any(w.thread.is_alive() for w in workers) and not self._pool.threads


class _LazyBackgroundPort:
    """The port of a sync task with no awaiting ancestor: the background loop."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def submit(self, job: Callable[[], Any]) -> None:
        self.engine._background_port().submit(job)


def _report_node(obs: Any, gt: GraphTask, last: tuple[Node, float, float], end: float) -> None:
    """Tell the observer a node ran (Note in ``_observe.py``); stamp the nodes it made
    ready. ``end`` is after its outputs were routed."""
    node, ready, start = last
    deps = gt.dependencies
    if deps is not None:
        for edge in node.next_edges:
            if edge is not None and edge[0] not in deps and edge[0] not in gt.ready_at:
                gt.ready_at[edge[0]] = end
    obs.node(gt.id, node.name(), threading.current_thread().name, ready, start, end)


def _without_grads(node: Node, inputs: list[Any]) -> bool:
    """True if ``node`` is not to be called: a built-in formula, and every gradient it
    received is None (see ``Node.runs_without_grads``)."""
    return not node.runs_without_grads and all(grad is None for grad in inputs)


def _plain_leaf(acc: AccumulateGrad, grad: Any) -> Any:
    """The leaf ``acc`` may add ``grad`` into directly (Note [Direct accumulation]), or None."""
    if (type(grad) is not _ndarray or acc._pre_hooks or acc._post_hooks
            or acc._tensor_pre_hooks or acc._retains_grad_hooks):
        return None
    leaf = acc._variable()
    if leaf is None or leaf._hooks or leaf._post_acc_hooks:
        return None
    return leaf


def _requeue_jobs(queue: ReadyQueue, jobs: list[Any]) -> None:
    """Put offloaded jobs back on ``queue``; fail them if it is closed (its worker is gone)."""
    try:
        queue.push_many(jobs)
    except RuntimeError as exc:
        for task in jobs:
            task[4].fail(exc)


def _fits_inline(root: Node, max_nodes: int, max_elements: int) -> bool:
    """True if the graph below ``root`` may run on the loop (Note [Inline small graphs])."""
    if max_nodes <= 0:
        return False
    seen = {root}
    stack = [root]
    elements = 0
    while stack:
        node = stack.pop()
        kind = type(node)
        safe = _INLINE_SAFE_TYPES.get(kind)
        if safe is None:
            safe = _INLINE_SAFE_TYPES[kind] = (
                kind.__module__.startswith("aiograd._ops.") or kind in (AccumulateGrad, GraphRoot)
            )
        if not safe or node._pre_hooks or node._post_hooks or node._tensor_pre_hooks \
                or node._retains_grad_hooks or node._metadata:
            return False
        if kind is AccumulateGrad:
            var = node.variable
            if var is None or var._hooks or var._post_acc_hooks:
                return False
        for meta in node.input_metadata:
            if meta.device is not CPU:
                return False
            elements += math.prod(meta.shape)
        if elements > max_elements:
            return False
        for edge in node.next_edges:
            if edge is not None and edge[0] not in seen:
                if len(seen) >= max_nodes:
                    return False
                seen.add(edge[0])
                stack.append(edge[0])
    return True


_INLINE_SAFE_TYPES: dict[type, bool] = {}


def _scope_due(gt: GraphTask) -> float:
    """The deadline of the caller's cancel scopes on the ``perf_counter`` clock, or inf
    (Note [Deadlines]). anyio's clock may be offset (Trio's is): only the time left
    counts. A nested pass is due with its parent (asking the scopes of a deeply
    nested await costs a walk of them all)."""
    if gt.parent is not None:
        return gt.parent.due
    deadline = anyio.current_effective_deadline()
    if deadline == math.inf:
        return deadline
    return _perf_counter() + (deadline - anyio.current_time())


def _enter_task_context(gt: GraphTask) -> bool:
    """Set, inside the task's context, what its nodes see. Returns True if anomaly
    mode checks gradients for NaN there."""
    parent_valid = checkpoint_valid.get()
    current_graph_task.set(gt)
    _grad_enabled.set(gt.create_graph)
    checkpoint_valid.set(parent_valid and gt.outputs is None)
    return _anomaly.get() == (True, True)


async def _await_in_context(gt: GraphTask, awaitable: Any) -> None:
    """Await an async final callback in a child task that sees the task's context.

    Its exception is re-raised as is (not wrapped in an exception group).
    """
    errors: list[BaseException] = []

    async def run() -> None:
        for var, value in gt.context.items():
            var.set(value)
        try:
            await awaitable
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # noqa: BLE001  (re-raised below, unwrapped)
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
    if errors:
        raise errors[0]


def _run_coroutine_blocking(engine: Engine, gt: GraphTask, awaitable: Any) -> None:
    """Run an async final callback of a sync task on its port and wait for it."""
    done = threading.Event()
    errors: list[BaseException] = []

    async def job() -> None:
        try:
            for var, value in gt.context.items():
                var.set(value)
            await awaitable
        except BaseException as exc:  # noqa: BLE001  (handed to the waiting thread)
            errors.append(exc)
        finally:
            done.set()

    port = gt.port if gt.port is not None else engine._background_port()
    port.submit(job)
    done.wait()
    if errors:
        raise errors[0]


# ---- the process-wide engine ----

_engine = Engine()


def get_engine() -> Engine:
    return _engine


def _reset_after_fork() -> None:
    """In a forked child: a fresh engine with no inherited threads or locks."""
    global _engine, _tls
    _engine = Engine()
    _tls = _ExecutorState()


def _shutdown_at_exit() -> None:
    _engine.shutdown()


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


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(_shutdown_at_exit)
