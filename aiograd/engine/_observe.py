"""The seam between the engine and ``aiograd.profiler``: who observes the nodes a pass runs.

Off by default: ``observer`` is None, and the engine reads it once per slice
(not per node) into a local, so an engine with no observer pays one global
read per slice and nothing per node.

When set, the engine calls the observer on the thread that did the work, with
``time.perf_counter()`` timestamps in seconds:

- ``task_start(task_id, t)`` when a GraphTask is submitted;
- ``node(task_id, name, thread, ready, start, end)`` after each node ran:
  ``ready`` is when its inputs were complete (it became runnable), ``start``
  and ``end`` bracket its evaluation (hooks included);
- ``task_end(task_id, t, error)`` when the GraphTask finished, ``error`` the
  exception it failed with or None.

Thread rules: an observer is called from worker threads, the loop thread and
reentrant-pool threads at once, so it must be thread-safe; it must not raise
and must not call into the engine. Swapping it (``set_observer``) is a single
global assignment (atomic under the GIL); a slice that already read the old
one finishes with it.
"""

from __future__ import annotations

from typing import Protocol


class NodeObserver(Protocol):
    def task_start(self, task_id: int, t: float) -> None: ...

    def node(self, task_id: int, name: str, thread: str, ready: float, start: float,
             end: float) -> None: ...

    def task_end(self, task_id: int, t: float, error: BaseException | None) -> None: ...


observer: NodeObserver | None = None


def set_observer(new: NodeObserver | None) -> NodeObserver | None:
    """Install ``new`` (None turns observation off); returns the one it replaced."""
    global observer
    old, observer = observer, new
    return old
