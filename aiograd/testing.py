"""Helpers for testing code built on aiograd.

- ``assert_grads_close(params, reference)``: the ``.grad`` of each parameter
  against a reference (another model, PyTorch tensors, arrays).
- ``check_gradients(fn, *inputs)`` / ``await check_gradients_async(...)``:
  ``aiograd.gradcheck`` at float64 copies of the inputs, raising
  ``AssertionError``; the async form runs it on a worker thread, so it works
  inside a running event loop.
- ``no_engine_leaks()``: a context manager failing with ``EngineLeakError``
  if the block leaves GraphTasks running, tasks queued, final callbacks
  pending or threads running that it started.

The pytest plugin (``aiograd.pytest_plugin``, registered through the
``pytest11`` entry point) exposes ``no_engine_leaks`` as the fixture
``aiograd_no_leaks``; ``pytest --aiograd-leak-check`` applies it to every test.
This module never imports pytest or torch.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy

from ._tensor import Tensor
from .gradcheck import GradcheckError, gradcheck

__all__ = [
    "EngineLeakError",
    "assert_grads_close",
    "check_gradients",
    "check_gradients_async",
    "no_engine_leaks",
]

# Engine threads that live as long as the engine, started once (per device) on demand.
PERSISTENT_THREADS = ("aiograd-worker-", "aiograd-reentrant", "aiograd-async")


class EngineLeakError(AssertionError):
    """A test left engine state behind (see ``no_engine_leaks``)."""


def _named(obj: Any, what: str) -> list[tuple[str, Any]]:
    """(name, item) pairs of a module (``named_parameters``), a mapping or a sequence."""
    if hasattr(obj, "named_parameters"):
        return list(obj.named_parameters())
    if isinstance(obj, Mapping):
        return list(obj.items())
    if isinstance(obj, Iterable) and not isinstance(obj, (str, bytes, Tensor)):
        return [(str(i), item) for i, item in enumerate(obj)]
    raise TypeError(f"assert_grads_close(): {what} must be a module, a mapping or a sequence "
                    f"of tensors, got {type(obj).__name__}")


def _grad_array(item: Any, side: str, name: str) -> numpy.ndarray:
    """The gradient an item stands for: a tensor that requires grad stands for its
    ``.grad``; anything else (a gradient tensor, an array) for its value."""
    grad = item.grad if getattr(item, "requires_grad", False) else item
    if grad is None:
        raise AssertionError(
            f"assert_grads_close(): {side} {name!r} has no gradient (.grad is None)")
    if isinstance(grad, Tensor):
        return numpy.asarray(grad.detach().numpy())
    if hasattr(grad, "detach") and hasattr(grad, "cpu"):  # a PyTorch tensor, without importing it
        return numpy.asarray(grad.detach().cpu().numpy())
    return numpy.asarray(grad)


def assert_grads_close(params: Any, reference: Any, *, rtol: float = 1e-5,
                       atol: float = 1e-6) -> None:
    """Assert every parameter's ``.grad`` is close to the reference gradient.

    ``params``: a module, a mapping name -> tensor, or a sequence of tensors.
    ``reference``: the same shape of container, holding tensors with a ``.grad``
    (an aiograd or PyTorch model, its parameters) or the gradients themselves
    (arrays, tensors that do not require grad). Pairs are matched by name
    (mappings, modules) or position.
    """
    ours = _named(params, "params")
    theirs = _named(reference, "reference")
    if len(ours) != len(theirs):
        raise AssertionError(f"assert_grads_close(): {len(ours)} parameters but "
                             f"{len(theirs)} reference gradients")
    by_name = dict(theirs)
    positional = not all(name in by_name for name, _ in ours)
    for i, (name, param) in enumerate(ours):
        ref = theirs[i][1] if positional else by_name[name]
        got = _grad_array(param, "parameter", name)
        want = _grad_array(ref, "reference", name)
        if got.shape != want.shape:
            raise AssertionError(f"assert_grads_close(): {name!r}: gradient shape {got.shape} "
                                 f"!= reference shape {want.shape}")
        if not numpy.allclose(got, want, rtol=rtol, atol=atol):
            err = numpy.abs(got.astype(numpy.float64) - want.astype(numpy.float64))
            raise AssertionError(f"assert_grads_close(): {name!r}: max abs difference "
                                 f"{err.max():.3g} (rtol={rtol}, atol={atol})")


def _float64_copies(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(x.detach().to(dtype=numpy.float64).requires_grad_(x.requires_grad)
                 if isinstance(x, Tensor) and x.is_floating_point() else x for x in inputs)


def check_gradients(fn: Callable[..., Any], *inputs: Any, eps: float = 1e-6,
                    atol: float = 1e-5, rtol: float = 1e-3) -> None:
    """``aiograd.gradcheck`` of ``fn`` at float64 copies of ``inputs``.

    Raises ``AssertionError`` (naming the failing input) instead of returning False.
    Blocks: inside a running event loop use ``await check_gradients_async(...)``.
    """
    try:
        gradcheck(fn, _float64_copies(inputs), eps=eps, atol=atol, rtol=rtol)
    except GradcheckError as exc:
        raise AssertionError(f"check_gradients(): {exc}") from None


async def check_gradients_async(fn: Callable[..., Any], *inputs: Any, eps: float = 1e-6,
                                atol: float = 1e-5, rtol: float = 1e-3) -> None:
    """``check_gradients`` on a worker thread, awaitable under asyncio or Trio."""
    import anyio.to_thread

    await anyio.to_thread.run_sync(
        functools.partial(check_gradients, fn, *inputs, eps=eps, atol=atol, rtol=rtol))


def _engine_state() -> tuple[int, int, int]:
    """(GraphTasks running, tasks queued on workers, final callbacks pending)."""
    from .engine.engine import get_engine

    engine = get_engine()
    stats = engine.stats()
    with engine._lock:
        pending = sum(len(gt.final_callbacks) for gt in engine._live)
    return stats.running_graph_tasks, sum(stats.queued.values()), pending


def _extra_threads(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate()
                  if t not in before and t.is_alive() and not t.name.startswith(PERSISTENT_THREADS))


@contextmanager
def no_engine_leaks(*, timeout: float = 2.0) -> Iterator[None]:
    """Fail (``EngineLeakError``) if the block leaves engine state behind.

    Checked on exit, after waiting up to ``timeout`` seconds for work to drain:
    GraphTasks still running, tasks still queued on device workers, final
    callbacks pending, and threads started in the block that are still alive
    (the engine's persistent threads, started once on demand, are allowed).
    """
    if timeout < 0:
        raise ValueError(f"no_engine_leaks(): timeout must be >= 0, got {timeout}")
    before_state = _engine_state()
    before_threads = set(threading.enumerate())
    yield
    deadline = time.monotonic() + timeout
    drained = threading.Event()
    while True:
        state = _engine_state()
        extra = _extra_threads(before_threads)
        leaked = (state[0] > before_state[0] or state[1] > before_state[1]
                  or state[2] > before_state[2] or extra)
        if not leaked or time.monotonic() >= deadline:
            break
        drained.wait(0.01)  # work finishing on other threads; nothing to wait on here
    if leaked:
        problems = []
        if state[0] > before_state[0]:
            problems.append(f"{state[0] - before_state[0]} GraphTask(s) still running")
        if state[1] > before_state[1]:
            problems.append(f"{state[1] - before_state[1]} task(s) still queued on workers")
        if state[2] > before_state[2]:
            problems.append(f"{state[2] - before_state[2]} final callback(s) pending")
        if extra:
            problems.append(f"threads started and still running: {', '.join(extra)}")
        raise EngineLeakError("aiograd engine state leaked: " + "; ".join(problems))
