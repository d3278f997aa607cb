"""RPC between worker processes on gRPC's asyncio API (DESIGN.md §6, §6a).

Note [One RPC thread]: grpc.aio servers and channels belong to the asyncio
loop that made them (and grpc.aio does not run under Trio), so each process
runs one agent on a dedicated thread with its own loop. Public coroutines
submit work to that loop and await it from whatever loop the caller runs on;
cancelling the caller cancels the agent-side task, which cancels the gRPC call,
which cancels the handler on the peer.

Note [Agent on your loop]: that hand-over costs two thread wake-ups per call
(there and back), 0.15–0.5 ms of a 1–2 ms round trip on a 2-core VM. An asyncio
program can instead ``await init_rpc_async(...)``: the agent then lives on the
caller's loop, its coroutines run there directly (``_on_agent``), and so do
the handlers serving other workers. The price is the loop's: a caller that
blocks its loop (a long forward) delays what this worker serves, as it
delays any other coroutine. ``await shutdown_async()`` stops it before the
loop ends. Blocking calls (``rpc_sync``, ``shutdown``) still work from other
threads, through ``_submit``.

Every worker is server and client: one long-lived channel per peer, one
generic unary method, identity serializers, explicit message limits, a
deadline on every call and the shared-secret check of ``_auth`` in front of
every handler. Bodies above ``CHUNK`` bytes (requests and replies) travel on
the bulk lane beside gRPC (Note [Bulk lane] in ``_bulk``); the gRPC message
then carries the transfer id, and the body's MAC in the signed token.

Note [Heartbeats]: a dead peer's connection fails at once, but a peer that
hangs (a stopped process, a wedged loop, a cut network) keeps its TCP
connection and would let calls wait for their whole deadline. So each agent
pings every peer every ``heartbeat_timeout / 4`` seconds, each ping bounded
by ``heartbeat_timeout``. A failed ping marks the peer lost: its in-flight
calls are cancelled and fail with "Error on Node N: ...", new calls to it
fail at once, and the contexts it created are released here (``autograd``).
A later ping that succeeds marks it live again. The same tick expires
contexts created by other workers that are older than ``context_ttl``.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import hmac
import itertools
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NamedTuple

import grpc

from . import _auth, _bulk, _wire

__all__ = ["init_rpc", "init_rpc_async", "rpc_async", "rpc_sync", "remote", "RRef", "shutdown",
           "shutdown_async",
           "get_worker_info", "WorkerInfo", "RemoteError", "DEFAULT_RPC_TIMEOUT"]

DEFAULT_RPC_TIMEOUT = 60.0
DEFAULT_HEARTBEAT_TIMEOUT = 10.0
#: Lifetime of a context created by another worker (Note [Heartbeats]).
DEFAULT_CONTEXT_TTL = 3600.0
_SERVICE = "/aiograd.Rpc/"
CTX_KEY = "x-aiograd-context"
_UNARY = _SERVICE + "Call"
BULK_KEY = "x-aiograd-bulk"
#: Bodies above this many bytes travel on the bulk lane.
CHUNK = 4 << 20
#: First byte of a reply: the body follows / the body is on the bulk lane.
_INLINE, _BULK = b"\x00", b"\x01"
_MAX_MSG = 64 << 20
_OPTIONS = [
    ("grpc.max_send_message_length", _MAX_MSG),
    ("grpc.max_receive_message_length", _MAX_MSG),
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]
_SERVER_OPTIONS = _OPTIONS + [("grpc.http2.min_ping_interval_without_data_ms", 5_000)]

#: Remaining seconds of the handler being served (Python does not propagate deadlines).
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "aiograd_rpc_deadline", default=None)


class RemoteError(RuntimeError):
    """A failure on another worker: ``"Error on Node N: <original message>"``."""

    def __init__(self, node: int, message: str) -> None:
        super().__init__(f"Error on Node {node}: {message}")
        self.node = node
        self.original = message


class WorkerInfo:
    __slots__ = ("name", "id")

    def __init__(self, name: str, id: int) -> None:  # noqa: A002
        self.name = name
        self.id = id

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, name={self.name})"


#: Request kind -> coroutine function(agent, from_rank, payload) serving it.
_HANDLERS: dict[str, Callable[[Any, int, Any], Awaitable[Any]]] = {}


def handler(kind: str) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    def register(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        _HANDLERS[kind] = fn
        return fn
    return register


def _autograd() -> Any:
    from . import autograd
    return autograd


class _Agent:
    """The per-process RPC state; all its coroutines run on its own loop."""

    def __init__(self, name: str, rank: int, world_size: int, secret: bytes,
                 timeout: float, heartbeat_timeout: float, context_ttl: float) -> None:
        self.name = name
        self.rank = rank
        self.world_size = world_size
        self.secret = secret
        self.timeout = timeout
        self.heartbeat_timeout = heartbeat_timeout
        self.context_ttl = context_ttl
        self.lost: dict[int, str] = {}  # peer rank -> why (Note [Heartbeats])
        self.inflight: dict[int, set[Any]] = {}  # peer rank -> its gRPC calls in flight
        self.monitor: asyncio.Task[None] | None = None
        self.workers: dict[int, WorkerInfo] = {}
        self.addresses: dict[int, str] = {}
        self.bulk = _bulk.BulkLane(keep=timeout, secret=secret)
        self.bulk_addresses: dict[int, tuple[str, int]] = {}
        self.channels: dict[int, grpc.aio.Channel] = {}
        self.calls: dict[int, Any] = {}  # peer rank -> its unary gRPC method
        self.objects: dict[int, Any] = {}  # RRef values owned here
        self.object_ids = itertools.count(1)
        self.joined: dict[int, tuple[str, str, tuple[str, int]]] = {}
        self.all_joined = asyncio.Event()
        self.shutdown_arrived: set[int] = set()
        self.all_shutdown = asyncio.Event()
        self.server: grpc.aio.Server | None = None
        self.loop = asyncio.get_running_loop()
        self.stopped = asyncio.Event()

    # ---- server ----

    async def start_server(self, host: str, port: int) -> int:
        verifier = _auth.Verifier(self.secret)
        server = grpc.aio.server(interceptors=[_auth.AuthInterceptor(verifier)],
                                 options=_SERVER_OPTIONS)
        ident = lambda b: b  # noqa: E731
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("aiograd.Rpc", {
            "Call": grpc.unary_unary_rpc_method_handler(self._serve_unary, ident, ident),
        })])
        bound = int(server.add_insecure_port(f"{host}:{port}"))
        if bound == 0:
            raise RuntimeError(f"init_rpc: could not bind {host}:{port}")
        await server.start()
        self.server = server
        return bound

    async def _serve_unary(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        md = context.invocation_metadata()
        sender = int(_auth.metadata_value(md, _auth.FROM_KEY) or -1)
        remaining = context.time_remaining()
        nonce, tag = _auth.token_parts(_auth.metadata_value(md, _auth.AUTH_KEY) or "")
        transfer = _auth.metadata_value(md, BULK_KEY)
        body: bytes | memoryview = request
        if transfer is None:
            vouched = hmac.compare_digest(_auth.body_tag(self.secret, nonce, [body]), tag)
        else:
            try:
                arrival = await self.bulk.take(bytes.fromhex(transfer), remaining)
            except TimeoutError:
                await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                    "rpc: the body never arrived on the bulk lane")
            body, vouched = arrival.body, self.bulk.vouched(arrival, nonce, tag)
        if not vouched:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "rpc: body does not match")
        raw_ctx = _auth.metadata_value(md, CTX_KEY)
        context_id = None if raw_ctx is None else int(raw_ctx)
        _deadline.set(None if remaining is None else time.monotonic() + remaining)
        bufs = await self._serve(body, sender, context_id)
        size = sum(len(b) for b in bufs)
        if size <= CHUNK or sender not in self.bulk_addresses:
            return b"".join([_INLINE, *bufs])
        transfer_id, nonce, tag = await self._ship(sender, bufs, size, self.budget(None))
        return _BULK + transfer_id + nonce.encode() + tag.encode()

    async def _ship(self, to: int, bufs: list[bytes | memoryview], size: int,
                    timeout: float) -> tuple[bytes, str, str]:
        """Send a body on the bulk lane to ``to``: its transfer id, nonce and MAC tag."""
        transfer, nonce = os.urandom(16), _auth.new_nonce()
        try:
            async with asyncio.timeout(timeout):
                tag = await self.bulk.send(self.bulk_addresses[to], transfer, bufs, size, nonce)
        except TimeoutError:
            raise RemoteError(to, "DEADLINE_EXCEEDED: bulk lane transfer") from None
        except OSError as e:
            raise RemoteError(to, f"UNAVAILABLE: bulk lane: {e}") from None
        return transfer, nonce, tag

    async def _serve(self, body: bytes | memoryview, sender: int,
                     context_id: int | None) -> list[bytes | memoryview]:
        """Run the verified request ``body``; the reply's buffers."""
        result: tuple[Any, ...]
        try:
            kind, payload = _wire.loads(body, _autograd()._on_recv_tensor(sender, context_id))
            with _autograd()._serving_context(context_id):
                result = ("ok", await _HANDLERS[kind](self, sender, payload))
        except RemoteError as e:
            result = ("err", e.node, e.original)
        except Exception as e:  # noqa: BLE001 - sent back to the caller with this node's rank
            result = ("err", self.rank, f"{type(e).__name__}: {e}")
        try:
            return _wire.dumps(result, _autograd()._on_send_tensor(sender, context_id))
        except Exception as e:  # noqa: BLE001 - an unpicklable result
            return _wire.dumps(("err", self.rank, f"{type(e).__name__}: {e}"))

    # ---- client ----

    def connect(self, rank: int, address: str) -> None:
        channel = grpc.aio.insecure_channel(address, options=_OPTIONS)
        ident = lambda b: b  # noqa: E731
        self.channels[rank] = channel
        self.calls[rank] = channel.unary_unary(_UNARY, request_serializer=ident,
                                               response_deserializer=ident)

    def budget(self, timeout: float | None) -> float:
        """The deadline of a call: ``timeout`` (or the default) capped by the served one."""
        t = self.timeout if timeout is None else timeout
        outer = _deadline.get()
        if outer is not None:
            t = min(t, max(outer - time.monotonic(), 0.001))
        return t

    async def call(self, to: int, kind: str, payload: Any, timeout: float | None = None,
                   wait_for_ready: bool = False, context_id: int | None = None) -> Any:
        """Send ``(kind, payload)`` to rank ``to`` and return the handler's result.

        With ``context_id``, tensors requiring grad record send/recv pairs both ways.
        """
        if to not in self.calls:
            raise ValueError(f"rpc: unknown worker rank {to}")
        if to in self.lost and kind != "ping":
            raise RemoteError(to, self.lost[to])
        bufs = _wire.dumps((kind, payload), _autograd()._on_send_tensor(to, context_id))
        extra = () if context_id is None else ((CTX_KEY, str(context_id)),)
        size = sum(len(b) for b in bufs)
        t = self.budget(timeout)
        try:
            if size <= CHUNK:
                body, nonce = b"".join(bufs), _auth.new_nonce()
                tag = _auth.body_tag(self.secret, nonce, [body])
            else:
                transfer, nonce, tag = await self._ship(to, bufs, size, t)
                body, extra = b"", (*extra, (BULK_KEY, transfer.hex()))
            md = ((_auth.AUTH_KEY, _auth.sign(self.secret, _UNARY, tag, nonce)),
                  (_auth.FROM_KEY, str(self.rank)), *extra)
            reply = await self._tracked(to, self.calls[to](body, timeout=t, metadata=md,
                                                           wait_for_ready=wait_for_ready))
            payload = await self._reply_body(to, reply, t)
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as e:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from e
            if to in self.lost:  # cancelled by the heartbeat monitor
                raise RemoteError(to, self.lost[to]) from None
            if isinstance(e, asyncio.CancelledError):
                raise
            raise RemoteError(to, f"{e.code().name}: {e.details()}") from None
        status, *rest = _wire.loads(payload, _autograd()._on_recv_tensor(to, context_id))
        if status == "err":
            raise RemoteError(*rest)
        return rest[0]

    async def _tracked(self, to: int, rpc_call: Any) -> bytes:
        """Await a gRPC call, cancellable by the heartbeat monitor while in flight."""
        calls = self.inflight.setdefault(to, set())
        calls.add(rpc_call)
        try:
            return await rpc_call
        finally:
            calls.discard(rpc_call)

    async def _reply_body(self, to: int, reply: bytes, timeout: float) -> bytes | memoryview:
        """The body of a reply: inline, or fetched from the bulk lane and checked."""
        if reply[:1] == _INLINE:
            return memoryview(reply)[1:]
        transfer, nonce, tag = reply[1:17], reply[17:49].decode(), reply[49:81].decode()
        try:
            arrival = await self.bulk.take(transfer, timeout)
        except TimeoutError:
            raise RemoteError(to, "DEADLINE_EXCEEDED: the reply never arrived on the bulk "
                                  "lane") from None
        if not self.bulk.vouched(arrival, nonce, tag):
            raise RemoteError(to, "UNAUTHENTICATED: reply body does not match")
        return arrival.body

    # ---- heartbeats (Note [Heartbeats]) ----

    def start_monitor(self) -> None:
        self.monitor = asyncio.ensure_future(self._monitor())

    async def _monitor(self) -> None:
        while True:
            await asyncio.gather(*(self._ping(r) for r in self.calls if r != self.rank))
            _autograd()._expire_contexts(self.context_ttl)
            await asyncio.sleep(self.heartbeat_timeout / 4)

    async def _ping(self, to: int) -> None:
        try:
            await self.call(to, "ping", None, timeout=self.heartbeat_timeout)
        except RemoteError as e:
            self.peer_lost(to, f"{e.original} (heartbeat to {self.workers[to].name} failed "
                               f"within {self.heartbeat_timeout} s: the worker died or hangs)")
        else:
            self.lost.pop(to, None)

    def peer_lost(self, to: int, why: str) -> None:
        """Fail the calls in flight to ``to`` and release the contexts it created."""
        if to in self.lost:
            return
        self.lost[to] = why
        for rpc_call in self.inflight.get(to, ()):
            rpc_call.cancel()
        _autograd()._release_created_by(to)

    async def close(self) -> None:
        if self.monitor is not None:
            self.monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.monitor
        await self.bulk.close()
        for ch in self.channels.values():
            await ch.close()
        if self.server is not None:
            await self.server.stop(grace=0.5)
        self.stopped.set()


# ---- built-in handlers ----

@handler("join")
async def _join(agent: _Agent, sender: int, payload: Any) -> Any:
    rank, name, address, bulk = payload
    agent.joined[rank] = (name, address, bulk)
    if len(agent.joined) == agent.world_size:
        agent.all_joined.set()
    await agent.all_joined.wait()
    return dict(agent.joined)


@handler("call")
async def _call(agent: _Agent, sender: int, payload: Any) -> Any:
    fn, args, kwargs = payload
    result = fn(*args, **kwargs)
    if asyncio.iscoroutine(result):
        result = await result
    return result


@handler("remote")
async def _remote(agent: _Agent, sender: int, payload: Any) -> Any:
    return RRef.local(await _call(agent, sender, payload))._id


@handler("ping")
async def _serve_ping(agent: _Agent, sender: int, payload: Any) -> None:
    return None


@handler("fetch")
async def _fetch(agent: _Agent, sender: int, payload: Any) -> Any:
    return agent.objects[payload]


@handler("shutdown")
async def _shutdown_barrier(agent: _Agent, sender: int, payload: Any) -> Any:
    agent.shutdown_arrived.add(payload)
    if len(agent.shutdown_arrived) == agent.world_size:
        agent.all_shutdown.set()
    await agent.all_shutdown.wait()
    return True


# ---- the process-wide agent and its thread ----

_agent: _Agent | None = None
_thread: threading.Thread | None = None


def _get_agent() -> _Agent:
    if _agent is None:
        raise RuntimeError("RPC has not been initialized. "
                           "Call aiograd.distributed.rpc.init_rpc first.")
    return _agent


def _submit(coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    return asyncio.run_coroutine_threadsafe(coro, _get_agent().loop)


async def _await(fut: concurrent.futures.Future[Any]) -> Any:
    """Await an agent-loop future from the caller's loop; cancellation crosses over."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        import anyio.to_thread  # Trio and other anyio backends
        try:
            return await anyio.to_thread.run_sync(fut.result, abandon_on_cancel=True)
        finally:
            fut.cancel()
    return await asyncio.wrap_future(fut)


async def _on_agent(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` on the agent loop: directly when already there (a served function
    calling on: keeps the served deadline), else through the bridge."""
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if here is _get_agent().loop:
        return await coro
    return await _await(_submit(coro))


def _refuse_running_loop(what: str, coro: Coroutine[Any, Any, Any] | None = None) -> None:
    """Raise if an asyncio loop runs on this thread, closing ``coro`` (it will not run)."""
    if asyncio._get_running_loop() is None:
        return
    if coro is not None:
        coro.close()
    raise RuntimeError(f"{what} cannot be called from a running event loop; "
                       f"await the async version instead")


def _run_sync(coro: Coroutine[Any, Any, Any], what: str) -> Any:
    _refuse_running_loop(what, coro)
    return _submit(coro).result()


def _env(name: str, value: Any, cast: Callable[[str], Any]) -> Any:
    if value is not None:
        return value
    raw = os.environ.get(name)
    if raw is None:
        raise ValueError(f"init_rpc: pass {name.lower()}= or set the {name} environment variable")
    return cast(raw)


class _Config(NamedTuple):
    """The checked arguments of :func:`init_rpc`."""

    name: str
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    secret: bytes
    timeout: float
    host: str
    heartbeat_timeout: float
    context_ttl: float


def _config(name: str, rank: int | None, world_size: int | None, master_addr: str | None,
            master_port: int | None, secret: str | bytes | None, timeout: float,
            bind_addr: str | None, heartbeat_timeout: float, context_ttl: float) -> _Config:
    if _agent is not None:
        raise RuntimeError("init_rpc: RPC is already initialized")
    if not isinstance(name, str) or not name:
        raise ValueError("init_rpc: name must be a non-empty string")
    rank = _env("RANK", rank, int)
    world_size = _env("WORLD_SIZE", world_size, int)
    master_addr = _env("MASTER_ADDR", master_addr, str)
    master_port = _env("MASTER_PORT", master_port, int)
    if secret is None:
        secret = os.environ.get("AIOGRAD_RPC_SECRET")
    if not secret:
        raise ValueError("init_rpc: a shared secret is required: pass secret= or set "
                         "AIOGRAD_RPC_SECRET (the same on every worker)")
    if not (0 <= rank < world_size):
        raise ValueError(f"init_rpc: rank must be in [0, {world_size}), got {rank}")
    for arg, value in (("timeout", timeout), ("heartbeat_timeout", heartbeat_timeout),
                       ("context_ttl", context_ttl)):
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"init_rpc: {arg} must be a positive number, got {value!r}")
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    host = bind_addr or os.environ.get("AIOGRAD_RPC_BIND_ADDR", "127.0.0.1")
    return _Config(name, rank, world_size, master_addr, master_port, key, float(timeout),
                   host, float(heartbeat_timeout), float(context_ttl))


async def _start_agent(cfg: _Config) -> _Agent:
    """Make this process's agent on the running loop, serve and rendezvous."""
    global _agent
    # Published before serving: peers may call in (and handlers use it) as soon as
    # rank 0 has answered the rendezvous, before init_rpc returns.
    agent = _agent = _Agent(cfg.name, cfg.rank, cfg.world_size, cfg.secret, cfg.timeout,
                            cfg.heartbeat_timeout, cfg.context_ttl)
    try:
        await _rendezvous(agent, cfg.host, cfg.master_addr, cfg.master_port)
    except BaseException:
        _agent = None
        await agent.close()
        raise
    agent.start_monitor()
    return agent


def init_rpc(name: str, rank: int | None = None, world_size: int | None = None, *,
             master_addr: str | None = None, master_port: int | None = None,
             secret: str | bytes | None = None, timeout: float = DEFAULT_RPC_TIMEOUT,
             bind_addr: str | None = None,
             heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
             context_ttl: float = DEFAULT_CONTEXT_TTL) -> None:
    """Start this process's RPC agent and rendezvous with the others through rank 0.

    Missing arguments come from ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
    ``MASTER_PORT`` and ``AIOGRAD_RPC_SECRET``. Rank 0 serves on
    ``master_addr:master_port``; the others bind ``bind_addr`` (default
    ``AIOGRAD_RPC_BIND_ADDR`` or 127.0.0.1, loopback) on a free port and
    publish it at rendezvous. ``timeout`` is the default deadline of every call
    and bounds the rendezvous. A peer that misses a heartbeat for
    ``heartbeat_timeout`` seconds is lost: calls to it fail and the contexts it
    created are released here; contexts created by other workers are released
    after ``context_ttl`` seconds (Note [Heartbeats]). The agent runs on a
    thread of its own (Note [One RPC thread]); see :func:`init_rpc_async`.
    """
    global _thread
    cfg = _config(name, rank, world_size, master_addr, master_port, secret, timeout,
                  bind_addr, heartbeat_timeout, context_ttl)
    started: concurrent.futures.Future[_Agent] = concurrent.futures.Future()

    def run() -> None:
        async def main() -> None:
            try:
                agent = await _start_agent(cfg)
            except BaseException as e:
                started.set_exception(e)
                return
            started.set_result(agent)
            await agent.stopped.wait()
        asyncio.run(main())

    _thread = threading.Thread(target=run, name=f"aiograd-rpc-{cfg.rank}", daemon=True)
    _thread.start()
    started.result()


async def init_rpc_async(name: str, rank: int | None = None, world_size: int | None = None,
                         *, master_addr: str | None = None, master_port: int | None = None,
                         secret: str | bytes | None = None,
                         timeout: float = DEFAULT_RPC_TIMEOUT, bind_addr: str | None = None,
                         heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT,
                         context_ttl: float = DEFAULT_CONTEXT_TTL) -> None:
    """:func:`init_rpc` with the agent on the running asyncio loop, not on a thread of
    its own (Note [Agent on your loop]): calls from this loop skip the hand-over to
    the agent's thread. Stop it with :func:`shutdown_async` before the loop ends."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("init_rpc_async needs a running asyncio loop (grpc.aio runs on "
                           "asyncio only); elsewhere, call init_rpc") from None
    await _start_agent(_config(name, rank, world_size, master_addr, master_port, secret,
                               timeout, bind_addr, heartbeat_timeout, context_ttl))


async def _rendezvous(agent: _Agent, host: str, master_addr: str, master_port: int) -> None:
    master = f"{master_addr}:{master_port}"
    if agent.rank == 0:
        bind = host if host != "127.0.0.1" else master_addr
        await agent.start_server(bind, master_port)
        address, advertised = master, master_addr
    else:
        bind = host
        port = await agent.start_server(host, 0)
        advertised = _advertised(host)
        address = f"{advertised}:{port}"
    bulk = (advertised, await agent.bulk.start(bind))
    agent.connect(0, master)
    table = await agent.call(0, "join", (agent.rank, agent.name, address, bulk),
                             timeout=agent.timeout, wait_for_ready=True)
    for r, (n, addr, bulk_addr) in table.items():
        agent.workers[r] = WorkerInfo(n, r)
        agent.addresses[r] = addr
        agent.bulk_addresses[r] = tuple(bulk_addr)
        if r != 0:
            agent.connect(r, addr)


def _advertised(host: str) -> str:
    if host in ("0.0.0.0", "::", "[::]"):
        return socket.gethostbyname(socket.gethostname())
    return host


def get_worker_info(worker_name: str | None = None) -> WorkerInfo:
    agent = _get_agent()
    if worker_name is None:
        return agent.workers[agent.rank]
    return agent.workers[_rank_of(worker_name)]


def _rank_of(to: Any) -> int:
    agent = _get_agent()
    if isinstance(to, WorkerInfo):
        return to.id
    if isinstance(to, int) and not isinstance(to, bool):
        if to in agent.workers:
            return to
    elif isinstance(to, str):
        for r, w in agent.workers.items():
            if w.name == to:
                return r
    raise ValueError(f"rpc: unknown worker {to!r}")


def _check_call(fn: Any, args: Any, kwargs: Any, what: str) -> dict[str, Any]:
    if not callable(fn):
        raise TypeError(f"{what}: fn must be callable, got {type(fn).__name__}")
    if not isinstance(args, tuple):
        raise TypeError(f"{what}: args must be a tuple, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"{what}: kwargs must be a dict, got {type(kwargs).__name__}")
    return kwargs or {}


async def rpc_async(to: Any, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                    kwargs: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
    """Run ``fn(*args, **kwargs)`` on worker ``to`` (name, rank or WorkerInfo); its result.

    Inside a distributed autograd context, tensors that require grad record
    send/recv pairs both ways. Fails with "Error on Node N: ..." on a remote
    error, or when ``to`` is unreachable, within ``timeout`` seconds.
    """
    kwargs = _check_call(fn, args, kwargs, "rpc_async")
    agent = _get_agent()
    rank = _rank_of(to)
    return await _on_agent(agent.call(rank, "call", (fn, args, kwargs), timeout,
                                      context_id=_autograd()._current_context_id()))


def rpc_sync(to: Any, fn: Callable[..., Any], args: tuple[Any, ...] = (),
             kwargs: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
    """Blocking :func:`rpc_async` (refuses to run inside an event loop)."""
    kwargs = _check_call(fn, args, kwargs, "rpc_sync")
    agent = _get_agent()
    return _run_sync(agent.call(_rank_of(to), "call", (fn, args, kwargs), timeout,
                                context_id=_autograd()._current_context_id()), "rpc_sync")


class RRef:
    """A reference to a value owned by one worker (made by :func:`remote`)."""

    def __init__(self, owner: int, object_id: int) -> None:
        self._owner = owner
        self._id = object_id

    @classmethod
    def local(cls, value: Any) -> RRef:
        """An RRef to ``value``, owned by this worker."""
        agent = _get_agent()
        oid = next(agent.object_ids)
        agent.objects[oid] = value
        return cls(agent.rank, oid)

    def owner(self) -> WorkerInfo:
        return _get_agent().workers[self._owner]

    def is_owner(self) -> bool:
        return self._owner == _get_agent().rank

    def local_value(self) -> Any:
        if not self.is_owner():
            raise RuntimeError("RRef.local_value: this worker is not the owner")
        return _get_agent().objects[self._id]

    async def to_here_async(self, timeout: float | None = None) -> Any:
        if self.is_owner():
            return self.local_value()
        agent = _get_agent()
        return await _on_agent(agent.call(self._owner, "fetch", self._id, timeout))

    def to_here(self, timeout: float | None = None) -> Any:
        if self.is_owner():
            return self.local_value()
        agent = _get_agent()
        return _run_sync(agent.call(self._owner, "fetch", self._id, timeout), "RRef.to_here")

    def __repr__(self) -> str:
        return f"RRef(owner={self._owner}, id={self._id})"


async def remote(to: Any, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                 kwargs: dict[str, Any] | None = None, timeout: float | None = None) -> RRef:
    """Run ``fn`` on ``to`` and keep its result there; an :class:`RRef` to it."""
    kwargs = _check_call(fn, args, kwargs, "remote")
    agent = _get_agent()
    rank = _rank_of(to)
    oid = await _on_agent(agent.call(rank, "remote", (fn, args, kwargs), timeout,
                                     context_id=_autograd()._current_context_id()))
    return RRef(rank, oid)


async def _stop(agent: _Agent, graceful: bool, timeout: float | None) -> None:
    try:
        if graceful:
            await agent.call(0, "shutdown", agent.rank, timeout)
            if agent.rank == 0:
                await asyncio.sleep(0)  # let the barrier replies go out
    finally:
        await agent.close()


def shutdown(graceful: bool = True, timeout: float | None = None) -> None:
    """Stop the agent. ``graceful`` first waits (bounded by ``timeout``) for every worker
    to reach shutdown, so no peer loses a server it still needs."""
    global _agent, _thread
    agent = _get_agent()
    _refuse_running_loop("shutdown")
    try:
        _submit(_stop(agent, graceful, timeout)).result()
    finally:
        if _thread is not None:
            _thread.join(timeout=5)
        _agent = None
        _thread = None


async def shutdown_async(graceful: bool = True, timeout: float | None = None) -> None:
    """:func:`shutdown` from a coroutine (either kind of agent)."""
    global _agent, _thread
    agent = _get_agent()
    try:
        await _on_agent(_stop(agent, graceful, timeout))
    finally:
        if _thread is not None:
            await _await_thread_end(_thread)
        _agent = None
        _thread = None


async def _await_thread_end(thread: threading.Thread) -> None:
    """Join the agent's thread without blocking the caller's loop (it ends at once: its
    loop has stopped)."""
    import anyio.to_thread
    await anyio.to_thread.run_sync(thread.join, 5)
