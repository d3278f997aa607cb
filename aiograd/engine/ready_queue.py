"""ReadyQueue: the priority queue of node tasks of one executor thread.

Order (seed ``CompareNodeTaskTime``): shutdown first, then wake-ups, then
node tasks (the deeper reentrant depth, then the GraphTask's rank, then the
higher ``sequence_nr``: See Note [Fair scheduling] in ``graph_task.py``),
then offloaded jobs (See Note [Offloading] in ``offload.py``). A single int
key encodes that order, smallest first, and a counter breaks ties in FIFO
order. Wake-ups and jobs have no node: a job carries its callable where a
node task carries its inputs.

Thread safety: ``push`` is called from any thread (workers hand tasks to each
other, the loop hands results of async nodes back); ``pop`` only by the
owning executor thread. Both hold ``_lock``. An owner with nothing to pop
sleeps on ``_wakeup``, a lock held while it is awake, which the first push
after it fell asleep releases (``threading.Condition`` would do the same
in Python code on every push and pop).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from typing import Any

_ticket = itertools.count()

#: finished passes each queue keeps for ``aiograd.engine.stats()``
RECENT_PASSES = 1024
SHUTDOWN_KEY = -(1 << 200)
WAKE_KEY = -(1 << 199)
JOB_KEY = 1  # node keys are <= 0
# Key layout, all node keys in (WAKE_KEY, 0]: bits 170.. the depth, bits 64..159 the
# rank (less than 2**96), bits 0..63 the sequence number (less than 2**64).
_DEPTH_SHIFT = 170
_RANK_SHIFT = 64
_RANK_LIMIT = 1 << 96


def task_key(depth: int, sequence_nr: int, rank: int = 0) -> int:
    """Smaller runs first: deeper reentrant depth, then the smaller ``rank`` (of
    the GraphTask), then the higher ``sequence_nr``."""
    if not 0 <= rank < _RANK_LIMIT:
        raise ValueError(f"task_key(): rank must be in [0, 2**96), got {rank}")
    return (rank << _RANK_SHIFT) - (_RANK_LIMIT << _RANK_SHIFT) - (depth << _DEPTH_SHIFT) \
        - sequence_nr


class ReadyQueue:
    """Tasks are tuples ``(key, ticket, graph_task, node, inputs)``."""

    __slots__ = ("_heap", "_lock", "_wakeup", "_sleeping", "owner", "closed", "finished",
                 "yields")

    def __init__(self, owner: str) -> None:
        self._heap: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()
        # Invariant (under _lock): _wakeup is held unless the owner may take it
        #            right away; _sleeping means the owner is (about to be) blocked on it.
        self._wakeup = threading.Lock()
        self._wakeup.acquire()
        self._sleeping = False
        #: a name for statistics and debugging
        self.owner = owner
        #: set (under the lock) when the owning worker is gone: pushing then raises
        self.closed = False
        #: (queue wait, run time) of the latest passes finished whose CPU executor
        #: this is (appended by their driver; deque appends are atomic)
        self.finished: deque[tuple[float, float]] = deque(maxlen=RECENT_PASSES)
        #: a slice from this queue ends at its time limit whatever waits here (the
        #: queue of a pass run on an event loop: Note [Inline passes take turns])
        self.yields = False

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"the aiograd worker for {self.owner} has stopped")

    def _wake_owner(self) -> None:
        """With ``_lock`` held, after a push: let a sleeping owner go."""
        if self._sleeping:
            self._sleeping = False
            if self._wakeup.locked():  # free already if a wait was cut short by an exception
                self._wakeup.release()

    def push(self, key: int, graph_task: Any, node: Any, inputs: Any) -> None:
        with self._lock:
            self._check_open()
            heapq.heappush(self._heap, (key, next(_ticket), graph_task, node, inputs))
            self._wake_owner()

    def push_many(self, tasks: list[tuple[Any, ...]]) -> None:
        """Push tasks already in the tuple form (leftovers of a time slice)."""
        with self._lock:
            self._check_open()
            for task in tasks:
                heapq.heappush(self._heap, task)
            self._wake_owner()

    def wake(self, graph_task: Any = None) -> None:
        """Wake the owner to re-check the task it drives (seed: a task with no fn)."""
        self.push(WAKE_KEY, graph_task, None, None)

    def push_job(self, job: Any) -> None:
        """Queue a callable to run on the owning worker after its node tasks."""
        self.push(JOB_KEY, None, None, job)

    def shutdown(self) -> None:
        self.push(SHUTDOWN_KEY, None, None, None)

    def pop(self) -> tuple[Any, ...]:
        """The first task; blocks (without the GIL) while there is none."""
        while True:
            with self._lock:
                if self._heap:
                    return heapq.heappop(self._heap)
                self._sleeping = True
            self._wakeup.acquire()

    def close(self) -> None:
        with self._lock:
            self.closed = True

    def drain(self) -> list[tuple[Any, ...]]:
        """Remove and return every queued task (at shutdown)."""
        with self._lock:
            tasks, self._heap = self._heap, []
            return tasks

    def discard(self, graph_task: Any) -> int:
        """Drop the queued tasks of a stopped ``graph_task``; return how many."""
        with self._lock:
            kept = [t for t in self._heap if t[2] is not graph_task or t[3] is None]
            dropped = len(self._heap) - len(kept)
            if dropped:
                heapq.heapify(kept)
                self._heap = kept
            return dropped

    def head_key(self) -> int | None:
        """The key of the first task, or None; read without the lock (a hint only)."""
        try:
            key: int = self._heap[0][0]
        except IndexError:
            return None
        return key

    def waiting(self) -> int:
        """How many distinct GraphTasks have node tasks queued here."""
        with self._lock:
            return len({id(t[2]) for t in self._heap if t[3] is not None})

    def __len__(self) -> int:
        return len(self._heap)
