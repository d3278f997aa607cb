"""A worker SIGKILLed mid-backward: the caller fails in bounded time naming the node,
survivors clean up the context and serve new ones (issue 23)."""
from __future__ import annotations

import asyncio
import contextvars
import os
import signal
import time

import numpy
import pytest

pytest.importorskip("grpc")

import dist_funcs as F  # noqa: E402
from dist_cluster import cluster  # noqa: E402

import aiograd  # noqa: E402
from aiograd.distributed import autograd as dist_autograd  # noqa: E402
from aiograd.distributed import rpc  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(60)]


def test_worker_killed_mid_backward() -> None:
    F.STARTED.clear()
    with cluster(3, timeout=30.0) as procs:
        async def go() -> None:
            x = aiograd.tensor(numpy.ones(3), requires_grad=True)
            async with dist_autograd.context() as cid:
                # worker0 -> worker1 -> worker2 (hangs in backward) -> back
                y = await rpc.rpc_async("worker1", F.forward_to, ("worker2", x))
                z = await rpc.rpc_async("worker2", F.hang, (y, "worker0"))
                task = asyncio.ensure_future(dist_autograd.backward(cid, [z.sum()]))
                assert await asyncio.to_thread(F.STARTED.wait, 20)
                os.kill(procs[1].pid, signal.SIGKILL)  # worker2
                start = time.monotonic()
                with pytest.raises(RuntimeError, match=r"Error on Node 2: UNAVAILABLE"):
                    await task
                assert time.monotonic() - start < 10  # well under the 30 s RPC timeout
                # the failure released the context everywhere, even before the block exits
                assert dist_autograd._debug_info()["num_autograd_contexts"] == 0
                with pytest.raises(RuntimeError, match="Could not find autograd context"):
                    dist_autograd.get_gradients(cid)
            info = await rpc.rpc_async("worker1", F.debug_info)
            assert info == {"num_current_backward_passes": 0, "num_autograd_contexts": 0}
            # the survivors serve a new context
            async with dist_autograd.context() as cid:
                y = await rpc.rpc_async("worker1", F.scale, (x, 3.0))
                await dist_autograd.backward(cid, [y.sum()])
                numpy.testing.assert_array_equal(dist_autograd.get_gradients(cid)[x].data,
                                                 numpy.full(3, 3.0))
            assert (await rpc.rpc_async("worker1", F.debug_info))["num_autograd_contexts"] == 0
            assert dist_autograd._debug_info()["num_autograd_contexts"] == 0

        asyncio.run(go())
        procs[1].wait(5)


async def _eventually(probe, want, within: float = 10.0):
    """Poll the coroutine function ``probe`` until it returns ``want`` (a deadline, no
    fixed sleep: the monitor ticks every heartbeat_timeout / 4)."""
    deadline = time.monotonic() + within
    while (got := await probe()) != want:
        assert time.monotonic() < deadline, f"still {got!r} after {within} s, want {want!r}"
        await asyncio.sleep(0.05)


def _kill(proc) -> None:
    proc.kill()
    proc.wait(10)


def test_hung_worker_fails_the_backward_by_heartbeat() -> None:
    """A stopped worker keeps its connection open, so only the heartbeat can tell: the
    caller fails naming it, long before the 30 s RPC timeout, and contexts are clean."""
    F.STARTED.clear()
    with cluster(3, timeout=30.0, heartbeat_timeout=2.0) as procs:
        async def go() -> None:
            x = aiograd.tensor(numpy.ones(3), requires_grad=True)
            async with dist_autograd.context() as cid:
                y = await rpc.rpc_async("worker1", F.forward_to, ("worker2", x))
                z = await rpc.rpc_async("worker2", F.hang, (y, "worker0"))
                task = asyncio.ensure_future(dist_autograd.backward(cid, [z.sum()]))
                assert await asyncio.to_thread(F.STARTED.wait, 20)
                os.kill(procs[1].pid, signal.SIGSTOP)  # worker2 goes silent
                start = time.monotonic()
                with pytest.raises(RuntimeError,
                                   match=r"Error on Node 2: DEADLINE_EXCEEDED.*heartbeat to "
                                         r"worker2 failed within 2.0 s"):
                    await task
                assert time.monotonic() - start < 10  # the heartbeat, not the 30 s deadline
                assert dist_autograd._debug_info()["num_autograd_contexts"] == 0
                # calls to the lost worker now fail at once
                start = time.monotonic()
                with pytest.raises(RuntimeError, match="Error on Node 2: .*heartbeat"):
                    await rpc.rpc_async("worker2", F.pid)
                assert time.monotonic() - start < 1
            info = await rpc.rpc_async("worker1", F.debug_info)
            assert info == {"num_current_backward_passes": 0, "num_autograd_contexts": 0}
            async with dist_autograd.context() as cid:  # the survivors serve new contexts
                y = await rpc.rpc_async("worker1", F.scale, (x, 3.0))
                await dist_autograd.backward(cid, [y.sum()])
                numpy.testing.assert_array_equal(dist_autograd.get_gradients(cid)[x].data,
                                                 numpy.full(3, 3.0))

        try:
            asyncio.run(go())
        finally:
            _kill(procs[1])


def test_contexts_of_a_dead_creator_are_released() -> None:
    """worker1 opens a context that reaches worker2, then dies: worker2 releases it."""
    F.HELD.clear()
    with cluster(3, timeout=30.0, heartbeat_timeout=2.0) as procs:
        async def go() -> None:
            x = aiograd.tensor(numpy.ones(3), requires_grad=True)
            holder = asyncio.ensure_future(
                rpc.rpc_async("worker1", F.hold_context, ("worker2", x)))
            assert await asyncio.to_thread(F.HELD.wait, 20)

            async def contexts_on_worker2() -> int:
                return (await rpc.rpc_async("worker2", F.debug_info))["num_autograd_contexts"]

            assert await contexts_on_worker2() == 1
            _kill(procs[0])  # worker1
            with pytest.raises(RuntimeError, match="Error on Node 1: UNAVAILABLE"):
                await holder
            await _eventually(contexts_on_worker2, 0)

        asyncio.run(go())


def test_contexts_outliving_their_ttl_are_released() -> None:
    """A context another worker created is released after context_ttl; the creator's own
    context stays, and a backward through the expired part fails with a clear error."""
    with cluster(2, timeout=30.0, heartbeat_timeout=2.0, context_ttl=1.0):
        async def go() -> None:
            x = aiograd.tensor(numpy.ones(3), requires_grad=True)

            async def contexts_on_worker1() -> int:
                # outside the context: a call inside it would carry (and re-create) it
                info = await asyncio.create_task(rpc.rpc_async("worker1", F.debug_info),
                                                 context=contextvars.Context())
                return info["num_autograd_contexts"]

            async with dist_autograd.context() as cid:
                y = await rpc.rpc_async("worker1", F.scale, (x, 2.0))
                assert await contexts_on_worker1() == 1
                await _eventually(contexts_on_worker1, 0)
                assert dist_autograd._debug_info()["num_autograd_contexts"] == 1
                with pytest.raises(RuntimeError, match="Error on Node 1: .*Could not find "
                                                       "autograd context"):
                    await dist_autograd.backward(cid, [y.sum()])

        asyncio.run(go())
