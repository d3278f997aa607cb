"""Note [Forgotten await]: a backward that is never awaited must not lose a step silently.

``loss.backward()`` is PyTorch's most common habit. In aiograd ``backward``
and ``grad`` are async, so inside a running loop the call alone only makes a
coroutine; Python warns once ("never awaited") and the step trains nothing.
So:

- with no loop running on the calling thread, ``backward``/``grad`` run the
  pass to completion there and return an already-finished awaitable (see
  ``Finished``): scripts written the PyTorch way just work;
- inside a running loop, the coroutine is *tracked* from its creation until
  its body starts (awaited, or run by a task). ``check_awaited()``, called by
  ``Optimizer.step``/``zero_grad`` and ``Module.zero_grad``, raises a
  RuntimeError naming the file and line of the oldest call that was never
  started, and forgets (closes) them all.

A coroutine that was closed before its body ran because its task was
cancelled first is not a mistake; it is dropped without an error. The next
``backward``/``grad`` checks too, but only for coroutines nobody else holds
(``check_dropped``): a task group may hold several backward coroutines that
are handed to tasks but not started yet, which is fine until a step; a
coroutine only this table refers to can never be awaited, so it is already
a mistake, reported before the next pass (through the same graph or another)
runs.

Thread rules: the tracked calls live in a per-thread table (the thread whose
loop made them); a coroutine's body removes its own entry from the table it
was registered in, whichever thread runs it. Entries are removed with
``dict.pop``, atomic under the GIL.
"""

from __future__ import annotations

import inspect
import itertools
import sys
import threading
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

from ._warn import user_frame

T = TypeVar("T")


class _Tracked(threading.local):
    def __init__(self) -> None:
        # Invariant: every entry is a coroutine whose body has not started yet,
        # with the "what at file:line" of the call that made it.
        self.calls: dict[int, tuple[Coroutine[Any, Any, Any], str]] = {}


_tracked = _Tracked()
_tokens = itertools.count()


def track(make: Any, what: str, *args: Any) -> Any:
    """``make(started, *args)``'s coroutine, tracked until its body calls ``started()``,
    with the user's line: the innermost frame outside aiograd."""
    frame = user_frame()[0]
    calls = _tracked.calls
    if calls:
        check_dropped()
    token = next(_tokens)

    def started() -> None:
        calls.pop(token, None)

    coro = make(started, *args)
    where = "?" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"
    calls[token] = (coro, f"{what} called at {where}")
    return coro


# The references to a tracked coroutine that only check_dropped's loop holds:
# the tuple in the table, the loop variable and getrefcount's argument.
_ONLY_TRACKED = 3


def check_dropped() -> None:
    """Raise if a tracked backward/grad of this thread was dropped: not started, and
    referenced by nothing but the table (so nothing can await it any more).

    Called before each new tracked call; see Note [Forgotten await].
    """
    calls = _tracked.calls
    for coro, _where in list(calls.values()):
        if (sys.getrefcount(coro) <= _ONLY_TRACKED
                and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED):
            check_awaited()  # reports it (and any other never-started call) and forgets them


def check_awaited() -> None:
    """Raise if a tracked backward/grad of this thread was never awaited.

    See Note [Forgotten await].
    """
    calls = _tracked.calls
    if not calls:
        return
    forgotten = []
    for coro, where in list(calls.values()):
        state = inspect.getcoroutinestate(coro)
        if state == inspect.CORO_CREATED:
            forgotten.append(where)
            coro.close()  # no second, vaguer "never awaited" warning from Python
        # CORO_CLOSED: its task was cancelled before it started, not a mistake
    calls.clear()
    if forgotten:
        more = f" (and {len(forgotten) - 1} more)" if len(forgotten) > 1 else ""
        raise RuntimeError(
            f"{forgotten[0]}{more} was never awaited, so it computed no gradients. Inside async "
            "code write 'await loss.backward()' (or 'await aiograd.grad(...)'); in a script "
            "with no event loop running, 'loss.backward()' runs to completion by itself."
        )


class _Done(Coroutine[Any, Any, Any]):
    """An already-finished coroutine: ``await`` (or ``asyncio.run``, or a task) gives
    ``result()`` at once, without suspending. Not a native coroutine, so Python
    never warns that it was not awaited: not awaiting it loses nothing."""

    __slots__ = ()

    def result(self) -> Any:
        raise NotImplementedError

    def send(self, value: Any) -> Any:
        raise StopIteration(self.result())

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        raise typ if val is None else val

    def close(self) -> None:
        pass

    def __await__(self) -> Generator[Any, None, Any]:
        yield from ()  # a generator that yields nothing: awaiting it does not suspend
        return self.result()


class Finished(_Done, Generic[T]):
    """What ``backward`` returns when no loop runs on the calling thread: the pass is done."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def result(self) -> T:
        return self.value

    def __repr__(self) -> str:
        return f"<finished aiograd backward: {self.value!r}>"


class FinishedGrads(tuple[Any, ...], _Done):
    """``grad()``'s result when no loop runs: the gradients as a tuple, also awaitable."""

    __slots__ = ()

    def result(self) -> tuple[Any, ...]:
        return tuple(self)
