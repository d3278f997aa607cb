"""The engine: runs GraphTasks on executor threads (seed ``engine.cpp``).

The engine is cut along its threads: each module below has one story of
which thread runs its code, told at its top.

- ``executors.py``: the executor threads (device workers, the reentrant
  pool, a thread blocked in ``backward_sync``) and the loop each runs over
  its ReadyQueue; the GIL switch interval and the loop's turn.
- ``evaluate.py``: one slice of a GraphTask on an executor: the per-node
  pipeline (hooks, the function, validation) and routing (dependencies,
  input buffers, dispatch), fair time slices and deadlines.
- ``drivers.py``: the caller's side: an awaiting coroutine, a small graph
  run inline on the loop, a blocked sync caller; completing and submitting
  a GraphTask, post-processing, cancellation.
- this module: the lifecycle: the process-wide ``Engine`` (which joins the
  three sides and owns the workers, the pool and the live GraphTasks), its
  statistics, shutdown, and a fresh engine after fork.

GraphTask (``graph_task.py``) owns its state and its completion rule (Note
[Completion]); the engine changes them only through its methods.

Thread rules here: ``Engine``'s shared state (``_workers``, ``_live``,
``_background``, ``completed``, ``_stopping``) is read and written under
``_lock``, by any thread; ``stats`` and ``shutdown`` may be called from
any thread that is not an executor of the engine.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import time
import weakref
from collections import deque

from ..devices import Device
from .drivers import (  # noqa: F401  (AsyncDriver: tests count the drivers through it)
    INLINE_MAX_ELEMENTS,
    INLINE_MAX_NODES,
    NO_DEADLINE_HORIZON,
    AsyncDriver,
    Drivers,
    _BackgroundLoop,
)
from .evaluate import SLICE_SECONDS, Evaluator  # noqa: F401  (SLICE_SECONDS: read by tests)
from .executors import (  # noqa: F401  (TURN_SECONDS: read by tests)
    MAX_DEPTH,
    TURN_SECONDS,
    Executors,
    ReentrantPool,
    Worker,
    reset_thread_state,
)
from .graph_task import GraphTask
from .ready_queue import RECENT_PASSES


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
        #: by device name: waiting/running GraphTasks and recent pass percentiles;
        #: "loop": the passes run on event-loop threads (Note [Inline passes take turns])
        self.per_worker = {} if per_worker is None else per_worker

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"EngineStats({fields})"


class Engine(Drivers, Evaluator, Executors):
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
        self.inline_finished: deque[tuple[float, float]] = deque(maxlen=RECENT_PASSES)
        #: Note [Deadlines]: a pass without a deadline is due this long after it arrived
        self.no_deadline_horizon = NO_DEADLINE_HORIZON
        self._stopping = False

    def _background_port(self) -> _BackgroundLoop:
        """The event loop thread for async nodes no loop awaits, started on first use."""
        with self._lock:
            if self._background is None:
                self._background = _BackgroundLoop()
            return self._background

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
        inline = [gt for gt in live if gt.cpu_queue is not None and gt.cpu_queue.yields]
        if inline or self.inline_finished:  # passes run on event loops (drivers.py)
            per_worker["loop"] = WorkerStats(
                sum(gt.started is None for gt in inline),
                sum(gt.started is not None and not gt.finished for gt in inline),
                list(self.inline_finished))
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


# ---- the process-wide engine ----

_engine = Engine()


def get_engine() -> Engine:
    return _engine


def _reset_after_fork() -> None:
    """In a forked child: a fresh engine with no inherited threads or locks."""
    global _engine
    _engine = Engine()
    reset_thread_state()


def _shutdown_at_exit() -> None:
    _engine.shutdown()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(_shutdown_at_exit)
