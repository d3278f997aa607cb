"""Reentrant backward: nested backward inside backward functions (Note [Reentrant backward])."""

from __future__ import annotations

import threading

import anyio
import pytest

import aiograd as ag
from aiograd import engine

pytestmark = pytest.mark.timeout(120)

DEPTHS = [1, 10, 59, 60, 61, 200, 1000]


def leaf(v=1.0):
    return ag.tensor([v], dtype="float64", requires_grad=True)


class SyncNest(ag.Function):
    """backward runs ``grad_sync`` through another SyncNest, ``level`` times deep."""

    log: list[tuple[int, int]] = []

    @staticmethod
    def forward(ctx, x, level):
        ctx.level = level
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        SyncNest.log.append((engine.reentrant_depth(), engine.thread_depth()))
        if ctx.level > 0:
            with ag.enable_grad():
                inner_x = leaf(3.0)
                (inner_g,) = ag.grad_sync(SyncNest.apply(inner_x, ctx.level - 1), inner_x)
            assert inner_g.item() == 2.0
        return g * 2.0, None


class AsyncNest(ag.Function):
    log: list[int] = []

    @staticmethod
    def forward(ctx, x, level):
        ctx.level = level
        return x * 2.0

    @staticmethod
    async def backward(ctx, g):
        AsyncNest.log.append(engine.reentrant_depth())
        if ctx.level > 0:
            with ag.enable_grad():
                inner_x = leaf(3.0)
                (inner_g,) = await ag.grad(AsyncNest.apply(inner_x, ctx.level - 1), inner_x)
            assert inner_g.item() == 2.0
        return g * 2.0, None


@pytest.mark.parametrize("depth", DEPTHS)
def test_sync_reentrant_backward_at_depth(depth):
    SyncNest.log = []
    x = leaf()
    ag.backward_sync(SyncNest.apply(x, depth))
    assert x.grad.item() == 2.0
    assert [d for d, _ in SyncNest.log] == list(range(depth + 1))
    assert max(t for _, t in SyncNest.log) <= engine.get_max_depth()


@pytest.mark.anyio
@pytest.mark.parametrize("depth", DEPTHS)
async def test_async_reentrant_backward_at_depth(depth):
    AsyncNest.log = []
    x = leaf()
    await ag.backward(AsyncNest.apply(x, depth))
    assert x.grad.item() == 2.0
    assert AsyncNest.log == list(range(depth + 1))


@pytest.mark.anyio
async def test_sync_reentrant_inside_await_backward():
    SyncNest.log = []
    x = leaf()
    await ag.backward(SyncNest.apply(x, 70))
    assert x.grad.item() == 2.0
    assert len(SyncNest.log) == 71


class Mixed(ag.Function):
    """async backward -> grad() through a sync backward -> grad_sync() through an async one."""

    seen: list[str] = []

    @staticmethod
    def forward(ctx, x, kinds):
        ctx.kinds = kinds
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        Mixed.seen.append("sync")
        if ctx.kinds:
            with ag.enable_grad():
                inner = leaf()
                (ig,) = ag.grad_sync(_mixed(inner, ctx.kinds), inner)
            assert ig.item() == 2.0
        return g * 2.0, None


class MixedAsync(ag.Function):
    @staticmethod
    def forward(ctx, x, kinds):
        ctx.kinds = kinds
        return x * 2.0

    @staticmethod
    async def backward(ctx, g):
        await anyio.lowlevel.checkpoint()
        Mixed.seen.append("async")
        if ctx.kinds:
            with ag.enable_grad():
                inner = leaf()
                (ig,) = await ag.grad(_mixed(inner, ctx.kinds), inner)
            assert ig.item() == 2.0
        return g * 2.0, None


def _mixed(x, kinds):
    head, rest = kinds[0], kinds[1:]
    return (MixedAsync if head == "async" else Mixed).apply(x, rest)


@pytest.mark.anyio
async def test_mixed_async_sync_async_nesting():
    Mixed.seen = []
    x = leaf()
    await ag.backward(_mixed(x, ("async", "sync", "async")))
    assert Mixed.seen == ["async", "sync", "async"]
    assert x.grad.item() == 2.0


def test_async_backward_inside_backward_sync_runs_without_a_caller_loop():
    Mixed.seen = []
    x = leaf()
    ag.backward_sync(_mixed(x, ("sync", "async")))
    assert Mixed.seen == ["sync", "async"]


@pytest.mark.anyio
async def test_concurrent_reentrant_backward_passes():
    results = []

    async def one(i):
        x = leaf(float(i))
        await ag.backward(SyncNest.apply(x, 5) * float(i + 1))
        results.append((i, x.grad.item()))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    assert sorted(results) == [(i, 2.0 * (i + 1)) for i in range(8)]


class RaiseAt(ag.Function):
    @staticmethod
    def forward(ctx, x, level):
        ctx.level = level
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        if ctx.level == 0:
            raise LookupError("deep failure")
        with ag.enable_grad():
            inner = leaf()
            ag.grad_sync(RaiseAt.apply(inner, ctx.level - 1), inner)
        return g, None


def test_exception_at_depth_100_reaches_the_caller_with_its_type():
    with pytest.raises(LookupError, match="deep failure"):
        ag.backward_sync(RaiseAt.apply(leaf(), 100))
    x = leaf()
    ag.backward_sync(x * 3.0)  # the engine still serves
    assert x.grad.item() == 3.0


def test_final_callbacks_of_nested_backward_belong_to_it():
    order = []

    class Outer(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            ag.queue_callback(lambda: order.append("outer-callback"))
            with ag.enable_grad():
                inner = leaf()
                ag.grad_sync(Inner.apply(inner), inner)
            order.append("inner-returned")
            return g

    class Inner(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            ag.queue_callback(lambda: order.append("inner-callback"))
            return g

    ag.backward_sync(Outer.apply(leaf()))
    assert order == ["inner-callback", "inner-returned", "outer-callback"]


def test_checkpoint_is_invalid_inside_grad_with_inputs():
    seen = []

    class Probe(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            seen.append(ag.is_checkpoint_valid())
            return g

    x = leaf()
    ag.backward_sync(Probe.apply(x))
    ag.grad_sync(Probe.apply(x), x)
    assert seen == [True, False]


def aiograd_threads() -> int:
    return sum(t.name.startswith("aiograd") for t in threading.enumerate())


def test_no_thread_leak_after_deep_reentrancy():
    ag.backward_sync(SyncNest.apply(leaf(), 200))
    before = aiograd_threads()
    for _ in range(3):
        ag.backward_sync(SyncNest.apply(leaf(), 200))
    stats = engine.stats()
    assert aiograd_threads() == before
    assert stats.pool_idle == stats.pool_threads


def test_pool_grows_only_when_all_threads_are_busy():
    ag.backward_sync(SyncNest.apply(leaf(), 130))
    first = engine.stats().pool_threads
    ag.backward_sync(SyncNest.apply(leaf(), 130))
    assert engine.stats().pool_threads == first
    assert first >= 2


def test_max_depth_is_configurable():
    old = engine.get_max_depth()
    engine.set_max_depth(5)
    try:
        SyncNest.log = []
        ag.backward_sync(SyncNest.apply(leaf(), 12))
        assert max(t for _, t in SyncNest.log) <= 5
    finally:
        engine.set_max_depth(old)
    with pytest.raises(ValueError):
        engine.set_max_depth(0)
