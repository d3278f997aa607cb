"""Distributed autograd: contexts, send/recv nodes and the distributed backward.

Follows the seed ``DistEngine::execute`` (dist_engine.cpp) with one change of
protocol. Tensors that require grad and cross an RPC inside a context record
a :class:`SendRpcBackward` on the sender (its output is what travels) and a
:class:`RecvRpcBackward` on the receiver, both keyed by one autograd message
id, in both directions (arguments and return values).

Note [Distributed pass]: as in the seed, each worker runs the part of a
distributed backward it holds as one graph task per context, whose roots are
its send functions (and, on the caller, the local roots), and every node runs
once with its summed gradient, even one that two remote paths reach. aiograd's
engine runs a pass to completion, so that task is kept as a sequence of
*local passes* sharing one state (``_Backward``):

1. Discovery (seed ``computeDependencies``): the caller finds the recv nodes
   reachable from the roots and tells their senders which send functions will
   get a gradient (``pending``); they do the same from those sends, and so on.
   ``discover`` RPCs nest, so when the caller's returns, every worker knows
   its pending sends.
2. A gradient for a send is buffered (``arrived``). A pass then runs from
   everything ready: the roots, the arrived sends, and the frontier. A node a
   still-pending send can reach is a *stop* node: the pass captures its input
   gradient into the frontier and neither runs it nor goes past it
   (``stop_at``). When its last pending send has run, it runs from the
   frontier, once, with the sum. A recv node answers its sender (its summed
   gradient, or None) once no pending send can reach it, so every pending
   send gets exactly one message.

Each ``grad`` RPC returns when the pass it triggers and the messages that pass
sends are done, so ``backward`` returns when the whole distributed backward
is. Nothing waits for a send that never fires: discovery only marks sends
whose recv is reachable, and every reachable recv is answered. A residual
connection around a remote stage (a node reachable both before and after the
remote part) works: the first pass stops at it and the second runs it.
``retain_graph=False`` frees a context's send outputs as they run and forbids
another backward in the context.

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
from typing import Any, overload

from aiograd._ops._record import edges_of, record
from aiograd._tensor import Tensor
from aiograd.devices import CPU
from aiograd.graph._node import GradientEdge, Node

from . import rpc as _rpc
from ._local_engine import local_pass, reachable

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
    __slots__ = ("id", "sends", "grads", "graph_freed", "created", "backwards")

    def __init__(self, context_id: int) -> None:
        self.id = context_id
        self.sends: dict[int, Tensor] = {}
        self.grads: dict[int, tuple[Tensor, Tensor]] = {}
        self.graph_freed = False
        self.created = time.monotonic()
        self.backwards: dict[int, _Backward] = {}  # backward id -> its state here

    @property
    def creator(self) -> int:
        """The rank that opened the context (ids are ``(rank << 48) + counter``)."""
        return self.id >> 48


_lock = threading.Lock()
_contexts: dict[int, _Context] = {}
_released: set[int] = set()  # tombstones: late messages cannot re-create these
_counter = itertools.count()
_message_counter = itertools.count()
_backward_counter = itertools.count()
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


# ---- backward (Note [Distributed pass]) ----

class _Backward:
    """One distributed backward's state on one worker, for one context."""

    __slots__ = ("pending", "arrived", "frontier", "recvs", "roots", "retain_graph", "lock")

    def __init__(self, retain_graph: bool) -> None:
        #: send message ids that will get a gradient and have not run yet
        self.pending: set[int] = set()
        #: gradients arrived for pending sends (None: the receiver had none), not run yet
        self.arrived: dict[int, Tensor | None] = {}
        #: stop-node inputs (node, input_nr) captured by a pass, and their summed gradient
        self.frontier: dict[tuple[Node, int], Tensor] = {}
        #: recv nodes this backward reaches here and has not answered yet: summed gradient
        self.recvs: dict[RecvRpcBackward, Tensor | None] = {}
        #: the root worker's roots until its first pass
        self.roots: list[Tensor] | None = None
        self.retain_graph = retain_graph
        self.lock = asyncio.Lock()

    def done(self) -> bool:
        return not (self.pending or self.arrived or self.frontier or self.recvs or self.roots)


@overload
def _add(old: Tensor | None, g: Tensor) -> Tensor: ...


@overload
def _add(old: Tensor | None, g: Tensor | None) -> Tensor | None: ...


def _add(old: Tensor | None, g: Tensor | None) -> Tensor | None:
    if old is None or g is None:
        return g if old is None else old
    return Tensor._wrap(old.data + g.data)


def _state(ctx: _Context, backward_id: int, retain_graph: bool) -> _Backward:
    bw = ctx.backwards.get(backward_id)
    if bw is None:
        bw = ctx.backwards[backward_id] = _Backward(retain_graph)
    return bw


def _send_output(ctx: _Context, message_id: int) -> Tensor:
    out = ctx.sends.get(message_id)
    if out is None:
        raise RuntimeError(f"autograd context {ctx.id} has no send function for message "
                           f"{message_id} (its graph was freed: pass retain_graph=True)")
    return out


async def _discover(ctx: _Context, bw: _Backward, backward_id: int,
                    starts: list[Tensor]) -> None:
    """Mark the recv nodes reachable from ``starts`` as this backward's, and tell their
    senders which of their send nodes will get a gradient; returns when every worker
    reached has done the same (seed ``computeDependencies`` with send functions as roots)."""
    ask: dict[int, list[int]] = {}
    for node in reachable(starts):
        if isinstance(node, RecvRpcBackward) and node not in bw.recvs:
            bw.recvs[node] = None
            ask.setdefault(node.sender, []).append(node.message_id)
    agent = _rpc._get_agent()
    async with asyncio.TaskGroup() as tg:
        for rank, ids in ask.items():
            tg.create_task(agent.call(rank, "discover",
                                      (ctx.id, backward_id, ids, bw.retain_graph)))


@_rpc.handler("discover")
async def _serve_discover(agent: Any, sender: int, payload: Any) -> None:
    context_id, backward_id, message_ids, retain_graph = payload
    ctx = _lookup(context_id)
    bw = _state(ctx, backward_id, retain_graph)
    fresh = [m for m in message_ids if m not in bw.pending]
    bw.pending.update(fresh)
    await _discover(ctx, bw, backward_id, [_send_output(ctx, m) for m in fresh])


async def _advance(ctx: _Context, bw: _Backward
                   ) -> list[tuple[RecvRpcBackward, Tensor | None]]:
    """Run one local pass from everything now ready: the roots, the sends whose gradient
    arrived, and the frontier nodes no pending send can reach any more. Nodes that a
    pending send can still reach are stop nodes: they wait, so each runs once with its
    summed gradient. Returns the recv gradients that are final, to send back."""
    global _backward_passes
    async with bw.lock:
        _backward_passes += 1
        try:
            ready = list(bw.arrived.items())
            bw.arrived.clear()
            outputs: list[Any] = []
            grads: list[Any] = []
            if bw.roots is not None:
                outputs, grads, bw.roots = list(bw.roots), [None] * len(bw.roots), None
            for m, g in ready:
                bw.pending.discard(m)
                if g is not None:
                    outputs.append(_send_output(ctx, m))
                    grads.append(g)
            blocked = frozenset(reachable([_send_output(ctx, m) for m in bw.pending]))
            for key in [k for k in bw.frontier if k[0] not in blocked]:
                outputs.append(GradientEdge(*key))
                grads.append(bw.frontier.pop(key))
            if outputs:
                leaf_grads, recv_grads, stop_grads = await local_pass(
                    outputs, grads, RecvRpcBackward, blocked)
                for leaf, g in leaf_grads:
                    old = ctx.grads.get(id(leaf))
                    if old is not None:
                        g = Tensor._wrap(old[1].data + g.data)
                    ctx.grads[id(leaf)] = (leaf, g)
                for node, g in recv_grads:
                    bw.recvs[node] = _add(bw.recvs.get(node), g)
                for edge, g in stop_grads:
                    key = (edge.node, edge.output_nr)
                    bw.frontier[key] = _add(bw.frontier.get(key), g)
            if not bw.retain_graph:
                for m, _ in ready:
                    ctx.sends.pop(m, None)
            final = [(r, g) for r, g in bw.recvs.items() if r not in blocked]
            for r, _ in final:
                del bw.recvs[r]
            return final
        finally:
            _backward_passes -= 1


async def _answer(ctx: _Context, backward_id: int,
                  final: list[tuple[RecvRpcBackward, Tensor | None]]) -> None:
    """Send each final recv gradient to its sender; returns when their work is done."""
    agent = _rpc._get_agent()
    try:
        async with asyncio.TaskGroup() as tg:
            for node, g in final:
                tg.create_task(agent.call(node.sender, "grad",
                                          (ctx.id, backward_id, node.message_id, g)))
    except BaseExceptionGroup as eg:  # the first failing gradient message
        raise _first(eg) from None


@_rpc.handler("grad")
async def _serve_grad(agent: Any, sender: int, payload: Any) -> None:
    context_id, backward_id, message_id, grad = payload
    ctx = _lookup(context_id)
    bw = ctx.backwards.get(backward_id)
    if bw is None or message_id not in bw.pending or message_id in bw.arrived:
        raise RuntimeError(f"autograd context {context_id}: unexpected gradient for send "
                           f"message {message_id}")
    bw.arrived[message_id] = grad
    await _answer(ctx, backward_id, await _advance(ctx, bw))
    if bw.done():
        ctx.backwards.pop(backward_id, None)


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
    backward_id = _new_id(_backward_counter)
    bw = _state(ctx, backward_id, retain_graph)
    bw.roots = outputs
    try:
        async with asyncio.timeout(agent.timeout):
            try:
                await _discover(ctx, bw, backward_id, outputs)
            except BaseExceptionGroup as eg:
                raise _first(eg) from None
            await _answer(ctx, backward_id, await _advance(ctx, bw))
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
    ctx.backwards.pop(backward_id, None)
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
