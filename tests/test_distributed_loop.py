"""The RPC agent on the caller's asyncio loop (Note [Agent on your loop]), with real
worker processes on loopback: rank 0 here calls ``init_rpc_async``; ranks 1 and 2
keep their agent on a thread of its own."""
from __future__ import annotations

import asyncio

import numpy
import pytest

pytest.importorskip("grpc")

import dist_funcs as F  # noqa: E402
from dist_cluster import SECRET, spawned  # noqa: E402

import aiograd  # noqa: E402
from aiograd.distributed import autograd as dist_autograd  # noqa: E402
from aiograd.distributed import rpc  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(60)]

#: worker0 -> worker1 -> worker0 (served on the test's loop) -> worker2, nested.
HOPS = [("loop0", "worker0", (4, 5)), ("loop1", "worker1", (5, 5)),
        ("loop2", "worker0", (5, 5)), ("loop3", "worker2", (5, 3))]


def _torch_grads(x: numpy.ndarray) -> dict[str, numpy.ndarray]:
    torch = pytest.importorskip("torch")
    h, ws = torch.tensor(x), {}
    for name, _, shape in HOPS:
        ws[name] = torch.tensor(F.weights(name, shape), requires_grad=True)
        h = torch.tanh(h @ ws[name])
    (h * h).sum().backward()
    return {n: w.grad.numpy() for n, w in ws.items()}


def test_agent_on_the_callers_loop_serves_and_calls_without_a_thread() -> None:
    x = numpy.random.default_rng(7).standard_normal((2, 4))

    async def go(port: int, procs: list) -> dict[str, numpy.ndarray]:
        await rpc.init_rpc_async("worker0", 0, 3, master_addr="127.0.0.1", master_port=port,
                                 secret=SECRET, timeout=20)
        try:
            assert rpc._thread is None
            assert rpc._get_agent().loop is asyncio.get_running_loop()
            grads: dict[str, numpy.ndarray] = {}
            async with dist_autograd.context() as cid:
                h = F.stage(HOPS[0][0], aiograd.tensor(x), HOPS[0][2])
                out = await rpc.rpc_async("worker1", F.chain, (h, HOPS[1:]))
                await dist_autograd.backward(cid, [(out * out).sum()])
                for w in ("worker0", "worker1", "worker2"):
                    grads.update(await rpc.rpc_async(w, F.grads, (cid,)))
            for w in ("worker0", "worker1", "worker2"):
                info = await rpc.rpc_async(w, F.debug_info)
                assert info == {"num_current_backward_passes": 0, "num_autograd_contexts": 0}
            with pytest.raises(RuntimeError, match="running event loop"):
                rpc.rpc_sync("worker1", F.identity, (1,))
            with pytest.raises(RuntimeError, match="running event loop"):
                rpc.shutdown()
            assert rpc._agent is not None  # the refused shutdown left the agent running
        finally:
            await rpc.shutdown_async(graceful=all(p.poll() is None for p in procs), timeout=10)
        assert rpc._agent is None
        return grads

    with spawned(3) as (port, procs):
        grads = asyncio.run(go(port, procs))
    expected = _torch_grads(x)
    assert set(grads) == set(expected)
    for n in expected:
        numpy.testing.assert_allclose(grads[n], expected[n], rtol=1e-10, atol=1e-12)


def test_init_rpc_async_needs_an_asyncio_loop() -> None:
    trio = pytest.importorskip("trio")

    async def go() -> None:
        await rpc.init_rpc_async("worker0", 0, 1, master_addr="127.0.0.1", master_port=1,
                                 secret=SECRET)

    with pytest.raises(RuntimeError, match="asyncio loop"):
        trio.run(go)
    assert rpc._agent is None
