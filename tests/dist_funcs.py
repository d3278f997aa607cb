"""Functions the distributed tests run on worker processes (importable by name there).

Models are deterministic (seeded NumPy) so each worker can build its own stage and the
test process can rebuild the whole model in one process, or in torch, to compare.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy

import aiograd
from aiograd.distributed import autograd as dist_autograd
from aiograd.distributed import rpc

_params: dict[str, aiograd.Tensor] = {}


def weights(name: str, shape: tuple[int, ...]) -> numpy.ndarray:
    seed = sum(map(ord, name))
    return numpy.random.default_rng(seed).standard_normal(shape)


def param(name: str, shape: tuple[int, ...]) -> aiograd.Tensor:
    """This worker's parameter ``name`` (made once, from ``weights``)."""
    if name not in _params:
        _params[name] = aiograd.tensor(weights(name, shape), requires_grad=True)
    return _params[name]


def stage(name: str, x: aiograd.Tensor, shape: tuple[int, int]) -> aiograd.Tensor:
    """tanh(x @ W_name): one pipeline stage, with its weight living on this worker."""
    return aiograd.tanh(x @ param(name, shape))


async def chain(x: aiograd.Tensor, hops: list[tuple[str, str, tuple[int, int]]]) -> Any:
    """Run the first stage here, then pass the rest on to the next worker (nested RPCs)."""
    name, _, shape = hops[0]
    y = stage(name, x, shape)
    if len(hops) == 1:
        return y
    return await rpc.rpc_async(hops[1][1], chain, (y, hops[1:]))


def get_param(name: str, shape: tuple[int, ...]) -> aiograd.Tensor:
    return param(name, shape)


def param_rref(name: str, shape: tuple[int, ...]) -> rpc.RRef:
    return rpc.RRef.local(param(name, shape))


def param_value(name: str) -> numpy.ndarray:
    return _params[name].data.copy()


async def ps_trainer(ps: str, x: aiograd.Tensor, name: str, shape: tuple[int, int]) -> Any:
    """A trainer step on this worker against parameter server ``ps``: sum(tanh(x @ W))."""
    w = await rpc.rpc_async(ps, get_param, (name, shape))
    return aiograd.tanh(x @ w).sum()


def grads(context_id: int) -> dict[str, numpy.ndarray]:
    """This worker's context gradients, by parameter name."""
    got = dist_autograd.get_gradients(context_id)
    return {n: got[p].data.copy() for n, p in _params.items() if p in got}


def dot_grads(context_id: int) -> list[Any]:
    """Whether any parameter's ``.grad`` was written (it never should be)."""
    return [n for n, p in _params.items() if p.grad is not None]


def debug_info() -> dict[str, int]:
    return dist_autograd._debug_info()


def identity(x: Any) -> Any:
    return x


async def forward_to(to: str, x: Any) -> Any:
    return await rpc.rpc_async(to, identity, (x,))


def scale(x: aiograd.Tensor, k: float) -> aiograd.Tensor:
    return x * k


def pid() -> int:
    return os.getpid()


class _Boom(aiograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        raise ValueError("boom in backward")


def boom(x: aiograd.Tensor) -> aiograd.Tensor:
    return _Boom.apply(x)




class _Hang(aiograd.Function):
    """Backward tells ``notify`` (a worker name) it started, then never finishes."""

    @staticmethod
    def forward(ctx: Any, x: Any, notify: str) -> Any:
        ctx.notify = notify
        return x * 1.0

    @staticmethod
    async def backward(ctx: Any, grad: Any) -> Any:
        await rpc.rpc_async(ctx.notify, backward_started, ())
        await asyncio.Event().wait()
        return grad, None


def hang(x: aiograd.Tensor, notify: str) -> aiograd.Tensor:
    return _Hang.apply(x, notify)


#: Set on the test process when a worker's backward reaches ``_Hang``.
STARTED = __import__("threading").Event()


def backward_started() -> None:
    STARTED.set()


#: How many times ``counted``'s backward ran on this worker, by tag.
BACKWARD_CALLS: dict[str, int] = {}


class _Counted(aiograd.Function):
    """Identity whose backward counts its runs (and so shows it runs once, summed)."""

    @staticmethod
    def forward(ctx: Any, x: Any, tag: str) -> Any:
        ctx.tag = tag
        return x * 1.0

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        BACKWARD_CALLS[ctx.tag] = BACKWARD_CALLS.get(ctx.tag, 0) + 1
        return grad, None


def backward_calls(tag: str) -> int:
    return BACKWARD_CALLS.get(tag, 0)


async def fan_out(x: aiograd.Tensor, to: str, tag: str) -> Any:
    """u = counted(x) here, sent to ``to`` twice: two remote paths meet at u's node."""
    u = _Counted.apply(x, tag)
    a = await rpc.rpc_async(to, scale, (u, 2.0))
    b = await rpc.rpc_async(to, scale, (u, 3.0))
    return a + b


async def skip_over(x: aiograd.Tensor, to: str, tag: str) -> Any:
    """A residual connection around a stage on ``to``: u * stage(u), u = counted(x)."""
    u = _Counted.apply(x, tag)
    y = await rpc.rpc_async(to, scale, (u, 2.0))
    return u * y


#: Set on the test process when a worker holds a context open (``hold_context``).
HELD = __import__("threading").Event()


def context_held() -> None:
    HELD.set()


async def hold_context(to: str, x: aiograd.Tensor) -> None:
    """Open a context here, send ``x`` to ``to`` in it (the context now exists there too),
    tell worker0, then keep the context open forever."""
    async with dist_autograd.context():
        await rpc.rpc_async(to, scale, (x, 2.0))
        await rpc.rpc_async("worker0", context_held, ())
        await asyncio.Event().wait()


def touch(path: str) -> None:
    open(path, "w").close()
