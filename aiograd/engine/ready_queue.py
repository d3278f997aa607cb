"""ReadyQueue: the priority queue of node tasks of one executor thread.

Order (seed ``CompareNodeTaskTime``): shutdown first, then wake-ups, then
node tasks (the deeper reentrant depth, then the higher ``sequence_nr``),
then offloaded jobs (See Note [Offloading] in ``offload.py``). A single int
key encodes that order, smallest first, and a counter breaks ties in FIFO
order. Wake-ups and jobs have no node: a job carries its callable where a
node task carries its inputs.

Thread safety: ``push`` is called from any thread (workers hand tasks to each
other, the loop hands results of async nodes back); ``pop`` only by the
owning executor thread. Both hold ``_cond``'s lock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import Any

_ticket = itertools.count()

SHUTDOWN_KEY = -(1 << 200)
WAKE_KEY = -(1 << 199)
JOB_KEY = 1  # node keys are <= 0
_DEPTH_SHIFT = 64


def task_key(depth: int, sequence_nr: int) -> int:
    """Smaller runs first: deeper reentrant depth, then higher sequence_nr."""
    return -((depth << _DEPTH_SHIFT) + sequence_nr)


class ReadyQueue:
    """Tasks are tuples ``(key, ticket, graph_task, node, inputs)``."""

    __slots__ = ("_heap", "_cond", "owner", "closed")

    def __init__(self, owner: str) -> None:
        self._heap: list[tuple[Any, ...]] = []
        self._cond = threading.Condition(threading.Lock())
        #: a name for statistics and debugging
        self.owner = owner
        #: set (under the lock) when the owning worker is gone: pushing then raises
        self.closed = False

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"the aiograd worker for {self.owner} has stopped")

    def push(self, key: int, graph_task: Any, node: Any, inputs: Any) -> None:
        with self._cond:
            self._check_open()
            heapq.heappush(self._heap, (key, next(_ticket), graph_task, node, inputs))
            self._cond.notify()

    def push_many(self, tasks: list[tuple[Any, ...]]) -> None:
        """Push tasks already in the tuple form (leftovers of a time slice)."""
        with self._cond:
            self._check_open()
            for task in tasks:
                heapq.heappush(self._heap, task)
            self._cond.notify()

    def wake(self, graph_task: Any = None) -> None:
        """Wake the owner to re-check the task it drives (seed: a task with no fn)."""
        self.push(WAKE_KEY, graph_task, None, None)

    def push_job(self, job: Any) -> None:
        """Queue a callable to run on the owning worker after its node tasks."""
        self.push(JOB_KEY, None, None, job)

    def shutdown(self) -> None:
        self.push(SHUTDOWN_KEY, None, None, None)

    def pop(self) -> tuple[Any, ...]:
        with self._cond:
            while not self._heap:
                self._cond.wait()
            return heapq.heappop(self._heap)

    def close(self) -> None:
        with self._cond:
            self.closed = True

    def drain(self) -> list[tuple[Any, ...]]:
        """Remove and return every queued task (at shutdown)."""
        with self._cond:
            tasks, self._heap = self._heap, []
            return tasks

    def discard(self, graph_task: Any) -> int:
        """Drop the queued tasks of a stopped ``graph_task``; return how many."""
        with self._cond:
            kept = [t for t in self._heap if t[2] is not graph_task or t[3] is None]
            dropped = len(self._heap) - len(kept)
            if dropped:
                heapq.heapify(kept)
                self._heap = kept
            return dropped

    def __len__(self) -> int:
        return len(self._heap)
