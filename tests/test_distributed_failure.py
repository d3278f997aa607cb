"""A worker SIGKILLed mid-backward: the caller fails in bounded time naming the node,
survivors clean up the context and serve new ones (issue 23)."""
from __future__ import annotations

import asyncio
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
