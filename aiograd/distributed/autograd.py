"""Distributed autograd: contexts, send/recv nodes and the distributed backward.

Follows the seed ``DistEngine::execute`` (dist_engine.cpp) with one change of
protocol. Tensors that require grad and cross an RPC inside a context record
a :class:`SendRpcBackward` on the sender (its output is what travels) and a
:class:`RecvRpcBackward` on the receiver, both keyed by one autograd message
id, in both directions (arguments and return values).

Note [Distributed pass]: a worker runs a *local pass* from some outputs (the
roots on the caller; a send node's output when a gradient message arrives).
The pass captures the gradients reaching leaves (accumulated into the
context, never ``.grad``) and recv nodes; each recv gradient is sent to its
sender, whose own pass runs before that RPC answers. So a pass returns only
when every RPC it started has, and ``backward`` returns only when the whole
distributed backward is done: no dependency counting across workers, no
node that can wait forever (PyTorch's FAST-mode hang on an unreachable send
function cannot happen, since nothing waits for a send that never fires).
Passes retain the graph (several messages may cross one subgraph; gradients
add up by linearity); ``retain_graph=False`` frees the context's send
outputs after the pass and forbids another backward in the context.

A failure anywhere fails the caller's ``backward`` with "Error on Node N: ..."
as soon as the failing RPC returns (a dead peer's connection fails at once; a
hung one is caught by the heartbeats of ``rpc``), and the caller tells every
worker to release the context. Contexts whose creator is lost, or that
outlive ``context_ttl`` on a worker that did not create them, are released
by the agent's monitor (Note [Heartbeats]).
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from aiograd._ops._record import edges_of, record
from aiograd._tensor import Tensor
from aiograd.devices import CPU
from aiograd.graph._node import Node

from . import rpc as _rpc
from ._local_engine import local_backward

__all__ = ["context", "backward", "get_gradients", "SendRpcBackward", "RecvRpcBackward",
           "_debug_info"]

_current: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "aiograd_dist_autograd_context", default=None)


class SendRpcBackward(Node):
    """Identity on the sender: the gradient of the sent tensor arrives here by RPC."""

    __slots__ = ()

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return (grads[0],)


class RecvRpcBackward(Node):
    """Grad_fn of a received tensor; its gradient goes back to ``sender``'s send node
    ``message_id`` (Note [Distributed pass])."""

    __slots__ = ("sender", "message_id", "context_id")

    def __init__(self, sender: int, message_id: int, context_id: int) -> None:
        super().__init__(())
        self.sender = sender
        self.message_id = message_id
        self.context_id = context_id

    def apply(self, grads: list[Any], create_graph: bool) -> Any:
        return ()


class _Context:
    __slots__ = ("id", "sends", "grads", "graph_freed", "created")

    def __init__(self, context_id: int) -> None:
        self.id = context_id
        self.sends: dict[int, Tensor] = {}
        self.grads: dict[int, tuple[Tensor, Tensor]] = {}
        self.graph_freed = False
        self.created = time.monotonic()

    @property
    def creator(self) -> int:
        """The rank that opened the context (ids are ``(rank << 48) + counter``)."""
        return self.id >> 48


_lock = threading.Lock()
_contexts: dict[int, _Context] = {}
_released: set[int] = set()  # tombstones: late messages cannot re-create these
_counter = itertools.count()
_message_counter = itertools.count()
_backward_passes = 0


def _rank() -> int:
    return _rpc._get_agent().rank


def _new_id(counter: Iterator[int]) -> int:
    return (_rank() << 48) + next(counter)


def _lookup(context_id: int, create: bool = False) -> _Context:
    with _lock:
        ctx = _contexts.get(context_id)
        if ctx is None:
            if context_id in _released or not create:
                raise RuntimeError(f"Could not find autograd context with id: {context_id}")
            ctx = _contexts[context_id] = _Context(context_id)
        return ctx


def _release_local(context_id: int) -> None:
    with _lock:
        _contexts.pop(context_id, None)
        _released.add(context_id)


def _release_created_by(rank: int) -> None:
    """Release the contexts ``rank`` created: it is lost (Note [Heartbeats] in ``rpc``)."""
    with _lock:
        orphans = [c for c in _contexts.values() if c.creator == rank]
    for ctx in orphans:
        _release_local(ctx.id)


def _expire_contexts(ttl: float) -> None:
    """Release the contexts other workers created more than ``ttl`` seconds ago (their
    creator may have forgotten them: a release that never arrived)."""
    me, cutoff = _rank(), time.monotonic() - ttl
    with _lock:
        old = [c for c in _contexts.values() if c.creator != me and c.created < cutoff]
    for ctx in old:
        _release_local(ctx.id)


def _current_context_id() -> int | None:
    return _current.get()


# ---- hooks the RPC agent calls while (un)pickling a message ----

def _on_send_tensor(to: int, context_id: int | None) -> Callable[[Tensor], int | None] | None:
    if context_id is None:
        return None

    def on_tensor(t: Tensor) -> int | None:
        edges = edges_of(t)
        if edges is None:
            return None
        message_id = _new_id(_message_counter)
        _lookup(context_id, create=True).sends[message_id] = record(
            SendRpcBackward(edges), t.data, t.device)
        return message_id
    return on_tensor


def _on_recv_tensor(sender: int, context_id: int | None) -> Callable[[Any, Any], Tensor] | None:
    if context_id is None:
        return None
    _lookup(context_id, create=True)

    def on_tensor(array: Any, message_id: Any) -> Tensor:
        if message_id is None:
            return Tensor._wrap(array)
        return record(RecvRpcBackward(sender, message_id, context_id), array, CPU)
    return on_tensor


@contextlib.contextmanager
def _serving_context(context_id: int | None) -> Iterator[None]:
    """The caller's context around a served call (it exists on the callee even if empty)."""
    if context_id is not None:
        _lookup(context_id, create=True)
    token = _current.set(context_id)
    try:
        yield
    finally:
        _current.reset(token)


# ---- contexts ----

class context:
    """``async with context() as context_id`` (or a plain ``with``): a distributed
    autograd context, released on every worker on exit."""

    def __init__(self) -> None:
        self._id: int | None = None
        self._token: contextvars.Token[int | None] | None = None

    def _enter(self) -> int:
        if _current.get() is not None:
            raise RuntimeError("Already have an autograd context id for this thread.")
        self._id = _new_id(_counter)
        _lookup(self._id, create=True)
        self._token = _current.set(self._id)
        return self._id

    def _exit(self) -> Any:
        assert self._id is not None and self._token is not None
        _current.reset(self._token)
        _release_local(self._id)
        return _release_everywhere(self._id)

    async def __aenter__(self) -> int:
        return self._enter()

    async def __aexit__(self, *exc: object) -> None:
        await _rpc._on_agent(self._exit())

    def __enter__(self) -> int:
        return self._enter()

    def __exit__(self, *exc: object) -> None:
        release = self._exit()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            _rpc._submit(release).result()
        else:  # sync code on a loop: do not block it
            _rpc._submit(release)


_RELEASE_TIMEOUT = 5.0


async def _release_everywhere(context_id: int) -> None:
    """Tell every other worker to drop ``context_id`` (dead peers are skipped)."""
    agent = _rpc._get_agent()
    calls = [agent.call(r, "release", context_id, timeout=_RELEASE_TIMEOUT)
             for r in agent.workers if r != agent.rank]
    await asyncio.gather(*calls, return_exceptions=True)


@_rpc.handler("release")
async def _serve_release(agent: Any, sender: int, context_id: int) -> None:
    _release_local(context_id)


# ---- backward ----

async def _run_pass(ctx: _Context, outputs: list[Tensor], grads: list[Any] | None,
                    retain_graph: bool) -> None:
    """One local pass and the gradient messages it sends (Note [Distributed pass])."""
    leaf_grads, recv_grads = await local_backward(outputs, grads, RecvRpcBackward)
    for leaf, g in leaf_grads:
        old = ctx.grads.get(id(leaf))
        ctx.grads[id(leaf)] = (leaf, g if old is None else Tensor._wrap(old[1].data + g.data))
    if not recv_grads:
        return
    agent = _rpc._get_agent()
    async with asyncio.TaskGroup() as tg:
        for node, g in recv_grads:
            assert isinstance(node, RecvRpcBackward)
            tg.create_task(agent.call(node.sender, "grad",
                                      (ctx.id, node.message_id, g, retain_graph)))


@_rpc.handler("grad")
async def _serve_grad(agent: Any, sender: int, payload: Any) -> None:
    context_id, message_id, grad, retain_graph = payload
    ctx = _lookup(context_id)
    out = ctx.sends.get(message_id)
    if out is None:
        raise RuntimeError(f"autograd context {context_id} has no send function for message "
                           f"{message_id} (its graph was freed: pass retain_graph=True)")
    await _guarded_pass(ctx, [out], [grad], retain_graph)
    if not retain_graph:
        ctx.sends.pop(message_id, None)


async def _guarded_pass(ctx: _Context, outputs: list[Tensor], grads: list[Any] | None,
                        retain_graph: bool) -> None:
    global _backward_passes
    _backward_passes += 1
    try:
        await _run_pass(ctx, outputs, grads, retain_graph)
    except BaseExceptionGroup as eg:  # the first failing gradient message
        raise _first(eg) from None
    finally:
        _backward_passes -= 1


def _first(eg: BaseExceptionGroup) -> BaseException:
    e: BaseException = eg
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return e


def _check_roots(roots: Any) -> list[Tensor]:
    if isinstance(roots, Tensor):
        roots = [roots]
    if not isinstance(roots, (list, tuple)) or not roots:
        raise TypeError("backward: roots must be a non-empty list of Tensors")
    for i, r in enumerate(roots):
        if not isinstance(r, Tensor):
            raise TypeError(f"backward: root {i} is a {type(r).__name__}, not a Tensor")
        if not r.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have "
                               f"a grad_fn (root {i})")
        if r.data.size != 1:
            raise RuntimeError(f"backward: root {i} is not a scalar (it has {r.data.size} "
                               "elements); distributed backward needs scalar roots")
    return list(roots)


async def backward(context_id: int, roots: Any, retain_graph: bool = False) -> None:
    """Run the distributed backward from the scalar ``roots`` in ``context_id``.

    Gradients of every worker's leaves go to that worker's context
    (:func:`get_gradients`). Fails within the call deadline with
    "Error on Node N: ..." when any worker fails or dies; the context is then
    released on every worker. Cancelling the caller cancels the remote parts.
    """
    if not isinstance(retain_graph, bool):
        raise TypeError(f"backward: retain_graph must be a bool, got {type(retain_graph).__name__}")
    outputs = _check_roots(roots)
    ctx = _lookup(context_id)
    if ctx.graph_freed:
        raise RuntimeError("Trying to backward through the graph a second time (or directly "
                           "access saved tensors after they have already been freed). Specify "
                           "retain_graph=True if you need to backward through the graph a "
                           "second time.")
    await _rpc._on_agent(_root_backward(ctx, outputs, retain_graph))


async def _root_backward(ctx: _Context, outputs: list[Tensor], retain_graph: bool) -> None:
    agent = _rpc._get_agent()
    try:
        async with asyncio.timeout(agent.timeout):
            await _guarded_pass(ctx, outputs, None, retain_graph)
    except _rpc.RemoteError:
        await _fail(ctx)
        raise
    except TimeoutError:
        await _fail(ctx)
        raise RuntimeError(f"Error on Node {agent.rank}: distributed backward timed out after "
                           f"{agent.timeout} s") from None
    except Exception as e:
        await _fail(ctx)
        raise RuntimeError(f"Error on Node {agent.rank}: {type(e).__name__}: {e}") from e
    if not retain_graph:
        ctx.graph_freed = True


async def _fail(ctx: _Context) -> None:
    _release_local(ctx.id)
    await _release_everywhere(ctx.id)


def get_gradients(context_id: int) -> dict[Tensor, Tensor]:
    """The gradients accumulated on this worker in ``context_id``: leaf -> grad."""
    ctx = _lookup(context_id)
    return {t: g for t, g in ctx.grads.values()}


def _debug_info() -> dict[str, int]:
    with _lock:
        return {"num_current_backward_passes": _backward_passes,
                "num_autograd_contexts": len(_contexts)}
