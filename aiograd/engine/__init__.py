"""The engine that runs backward passes. Public: statistics, shutdown, max depth."""

from __future__ import annotations

from . import drivers as _drivers
from . import engine as _engine
from . import executors as _executors

__all__ = [
    "EngineStats",
    "MAX_DEPTH",
    "get_max_depth",
    "reentrant_depth",
    "set_inline_limits",
    "set_max_depth",
    "set_no_deadline_horizon",
    "set_switch_interval",
    "shutdown",
    "stats",
    "thread_depth",
    "WorkerStats",
]

EngineStats = _engine.EngineStats
WorkerStats = _engine.WorkerStats
MAX_DEPTH = _executors.MAX_DEPTH
set_switch_interval = _executors.set_switch_interval


def stats() -> _engine.EngineStats:
    """A snapshot: queued tasks per worker, running and completed GraphTasks, threads;
    ``per_worker``: GraphTasks waiting and running on each device worker, and the
    queue wait and run time percentiles of its recent finished passes; ``"loop"``:
    the same for the passes run on event-loop threads."""
    return _engine.get_engine().stats()


def shutdown(timeout: float | None = None) -> bool:
    """Stop the workers, waiting at most ``timeout`` seconds (default
    ``AIOGRAD_SHUTDOWN_WAIT_LIMIT``, 10). A later backward starts a fresh engine.
    Returns True if every thread stopped in time."""
    old = _engine.get_engine()
    stopped = old.shutdown(timeout)
    new = _engine._engine = _engine.Engine()
    new.max_depth = old.max_depth
    new.inline_max_nodes = old.inline_max_nodes
    new.inline_max_elements = old.inline_max_elements
    new.no_deadline_horizon = old.no_deadline_horizon
    return stopped


def set_inline_limits(max_nodes: int = _drivers.INLINE_MAX_NODES,
                      max_elements: int = _drivers.INLINE_MAX_ELEMENTS) -> None:
    """Which ``await backward()`` graphs run on the loop thread (Note [Inline small
    graphs] in ``aiograd.engine.drivers``): at most ``max_nodes`` nodes, each with
    gradients of at most ``max_elements`` elements. ``max_nodes=0`` sends every graph
    to the workers; the defaults restore the built-in limits."""
    for name, value in (("max_nodes", max_nodes), ("max_elements", max_elements)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    engine = _engine.get_engine()
    engine.inline_max_nodes = max_nodes
    engine.inline_max_elements = max_elements


def set_no_deadline_horizon(seconds: float = _drivers.NO_DEADLINE_HORIZON) -> None:
    """How long after it arrived a pass without a deadline is due, for ordering it
    among passes with deadlines (Note [Deadlines] in ``aiograd.engine.graph_task``).
    No argument restores the default (1 s)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not 0 <= seconds < 1e6:
        raise ValueError(f"set_no_deadline_horizon(): seconds must be a number in [0, 1e6), "
                         f"got {seconds!r}")
    _engine.get_engine().no_deadline_horizon = float(seconds)


def set_max_depth(depth: int) -> None:
    """Nested sync backward drives per thread before moving to the reentrant pool."""
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"max depth must be a positive int, got {depth!r}")
    _engine.get_engine().max_depth = depth


def get_max_depth() -> int:
    return _engine.get_engine().max_depth


def reentrant_depth() -> int:
    """The depth of the running GraphTask: 0 for an outermost backward, +1 per nesting
    (seed: total_depth); -1 outside backward."""
    from .graph_task import current_graph_task

    gt = current_graph_task.get()
    return -1 if gt is None else gt.depth


def thread_depth() -> int:
    """Nested sync backward passes driven on this thread right now (seed: current_depth).
    Never exceeds ``get_max_depth()``: deeper ones move to the reentrant pool."""
    return _executors._tls.depth
