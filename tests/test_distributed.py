"""Distributed autograd with real worker processes on loopback (issue 23).

One 3-worker cluster for the module: this test process is rank 0 ("worker0"),
two subprocesses are worker1 and worker2. Failure tests that kill a worker
live in test_distributed_failure.py with their own cluster.
"""
from __future__ import annotations

import asyncio
import os
import pickle
import time

import numpy
import pytest

pytest.importorskip("grpc")

import dist_funcs as F  # noqa: E402
from dist_cluster import cluster  # noqa: E402

import aiograd  # noqa: E402
from aiograd.distributed import autograd as dist_autograd  # noqa: E402
from aiograd.distributed import rpc  # noqa: E402
from aiograd.distributed.optim import DistributedOptimizer  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(60)]

D_IN, D_H, D_OUT = 4, 5, 3


@pytest.fixture(scope="module", autouse=True)
def three_workers():
    with cluster(3) as procs:
        yield procs


def run(coro):
    return asyncio.run(coro)


def _x(seed: int = 0) -> numpy.ndarray:
    return numpy.random.default_rng(100 + seed).standard_normal((2, D_IN))


async def _remote_grads(context_id: int) -> dict[str, numpy.ndarray]:
    out: dict[str, numpy.ndarray] = {}
    for w in ("worker0", "worker1", "worker2"):
        out.update(await rpc.rpc_async(w, F.grads, (context_id,)))
    return out


async def _assert_clean() -> None:
    for w in ("worker0", "worker1", "worker2"):
        info = await rpc.rpc_async(w, F.debug_info)
        assert info == {"num_current_backward_passes": 0, "num_autograd_contexts": 0}, (w, info)
        assert await rpc.rpc_async(w, F.dot_grads, (0,)) == []


def _torch_pipeline(x: numpy.ndarray, hops: list) -> dict[str, numpy.ndarray]:
    torch = pytest.importorskip("torch")
    h = torch.tensor(x)
    ws = {}
    for name, _, shape in hops:
        ws[name] = torch.tensor(F.weights(name, shape), requires_grad=True)
        h = torch.tanh(h @ ws[name])
    (h * h).sum().backward()
    return {n: w.grad.numpy() for n, w in ws.items()}


@pytest.mark.parametrize("workers", [["worker1"], ["worker1", "worker2"]])
def test_pipeline_matches_one_process(workers: list[str]) -> None:
    """The driver's stage, then one stage per worker (nested: each calls the next)."""
    shapes = [(D_IN, D_H)] + [(D_H, D_H)] * (len(workers) - 1) + [(D_H, D_OUT)]
    names = [f"pipe{len(workers)}_{i}" for i in range(len(workers) + 1)]
    owners = ["worker0", *workers]
    hops = list(zip(names, owners, shapes))

    async def go() -> dict[str, numpy.ndarray]:
        x = aiograd.tensor(_x())
        async with dist_autograd.context() as cid:
            h = F.stage(names[0], x, shapes[0])
            out = await rpc.rpc_async(workers[0], F.chain, (h, hops[1:]))
            await dist_autograd.backward(cid, [(out * out).sum()])
            grads = await _remote_grads(cid)
        await _assert_clean()
        return grads

    grads = run(go())
    expected = _torch_pipeline(_x(), hops)
    assert set(grads) == set(expected)
    for n in expected:
        numpy.testing.assert_allclose(grads[n], expected[n], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("trainer", ["worker0", "worker2"])
def test_parameter_server_matches_one_process(trainer: str) -> None:
    """worker1 holds W; the trainer (this process, or worker2 called from here) fetches it."""
    torch = pytest.importorskip("torch")
    name, shape = f"ps_{trainer}", (D_IN, D_OUT)

    async def go() -> dict[str, numpy.ndarray]:
        x = aiograd.tensor(_x(1))
        async with dist_autograd.context() as cid:
            if trainer == "worker0":
                loss = await F.ps_trainer("worker1", x, name, shape)
            else:
                loss = await rpc.rpc_async("worker2", F.ps_trainer, ("worker1", x, name, shape))
            await dist_autograd.backward(cid, [loss])
            grads = await rpc.rpc_async("worker1", F.grads, (cid,))
        await _assert_clean()
        return grads

    grads = run(go())
    w = torch.tensor(F.weights(name, shape), requires_grad=True)
    torch.tanh(torch.tensor(_x(1)) @ w).sum().backward()
    numpy.testing.assert_allclose(grads[name], w.grad.numpy(), rtol=1e-10)


def test_only_gradient_path_is_send_recv() -> None:
    """x goes worker0 -> worker1 -> worker2 and back untouched; its gradient only
    crosses send/recv pairs; leaf gradients land in this process's context."""
    async def go() -> None:
        x = aiograd.tensor(_x(2), requires_grad=True)
        async with dist_autograd.context() as cid:
            y = await rpc.rpc_async("worker1", F.forward_to, ("worker2", x))
            await dist_autograd.backward(cid, [(y * 3.0).sum()])
            g = dist_autograd.get_gradients(cid)
            assert list(g) == [x]
            numpy.testing.assert_array_equal(g[x].data, numpy.full(x.shape, 3.0))
            assert x.grad is None
        await _assert_clean()
    run(go())


@pytest.mark.parametrize("shape", ["fan_out", "skip_over"])
def test_a_node_on_two_remote_paths_runs_once(shape: str) -> None:
    """On worker1, u = counted(x) reaches the loss by two paths through worker2 (two
    sends of u; or u and a remote stage of u, a residual connection). As in
    torch.distributed.autograd, whose one GraphTask per context and worker has the send
    functions as roots, u's node runs once, with the summed gradient: the send whose
    gradient comes first waits for the other at u instead of running it twice."""
    torch = pytest.importorskip("torch")
    tag = f"once_{shape}"

    async def go() -> tuple[numpy.ndarray, int]:
        x = aiograd.tensor(_x(9), requires_grad=True)
        async with dist_autograd.context() as cid:
            out = await rpc.rpc_async("worker1", getattr(F, shape), (x, "worker2", tag))
            await dist_autograd.backward(cid, [(out * out).sum()])
            got = dist_autograd.get_gradients(cid)[x].data
        await _assert_clean()
        return got, await rpc.rpc_async("worker1", F.backward_calls, (tag,))

    got, calls = run(go())
    assert calls == 1
    x = torch.tensor(_x(9), requires_grad=True)
    u = x * 1.0
    out = 2.0 * u + 3.0 * u if shape == "fan_out" else u * (2.0 * u)
    (out * out).sum().backward()
    numpy.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-12)


def test_no_pairs_when_nothing_requires_grad_but_context_exists() -> None:
    async def go() -> None:
        async with dist_autograd.context() as cid:
            y = await rpc.rpc_async("worker1", F.scale, (aiograd.tensor([1.0, 2.0]), 2.0))
            assert y.grad_fn is None
            info = await rpc.rpc_async("worker1", F.debug_info)
            assert info["num_autograd_contexts"] == 1
            assert cid >> 48 == 0  # ids carry the creating worker
        await _assert_clean()
    run(go())


def test_concurrent_contexts_never_mix() -> None:
    async def one(k: float) -> numpy.ndarray:
        x = aiograd.tensor(_x(3), requires_grad=True)
        async with dist_autograd.context() as cid:
            y = await rpc.rpc_async("worker1", F.scale, (x, k))
            z = await rpc.rpc_async("worker2", F.scale, (y, k))
            await dist_autograd.backward(cid, [z.sum()])
            return dist_autograd.get_gradients(cid)[x].data

    async def go() -> list[numpy.ndarray]:
        out = await asyncio.gather(*(one(float(k)) for k in range(1, 9)))
        await _assert_clean()
        return out

    for k, g in zip(range(1, 9), run(go())):
        numpy.testing.assert_array_equal(g, numpy.full((2, D_IN), float(k * k)))


def test_retain_graph_semantics() -> None:
    async def go() -> None:
        x = aiograd.tensor(_x(4), requires_grad=True)
        async with dist_autograd.context() as cid:
            y = await rpc.rpc_async("worker1", F.scale, (x, 2.0))
            loss = (y * x).sum()  # d/dx = 4x
            await dist_autograd.backward(cid, [loss], retain_graph=True)
            await dist_autograd.backward(cid, [loss], retain_graph=True)
            numpy.testing.assert_allclose(dist_autograd.get_gradients(cid)[x].data, 8 * x.data)
            await dist_autograd.backward(cid, [loss])
            numpy.testing.assert_allclose(dist_autograd.get_gradients(cid)[x].data, 12 * x.data)
            with pytest.raises(RuntimeError, match="retain_graph=True"):
                await dist_autograd.backward(cid, [loss])
        await _assert_clean()
    run(go())


def test_error_on_node_after_two_hops_and_cleanup() -> None:
    async def go() -> None:
        x = aiograd.tensor(_x(5), requires_grad=True)
        async with dist_autograd.context() as cid:
            y = await rpc.rpc_async("worker1", F.forward_to, ("worker2", x))
            z = await rpc.rpc_async("worker2", F.boom, (y,))
            start = time.monotonic()
            with pytest.raises(RuntimeError, match="Error on Node 2: .*boom in backward"):
                await dist_autograd.backward(cid, [z.sum()])
            assert time.monotonic() - start < 5
        await _assert_clean()
    run(go())


def test_bad_arguments() -> None:
    async def go() -> None:
        async with dist_autograd.context() as cid:
            with pytest.raises(RuntimeError, match="does not require grad"):
                await dist_autograd.backward(cid, [aiograd.tensor(1.0)])
            with pytest.raises(RuntimeError, match="scalar"):
                await dist_autograd.backward(cid, [aiograd.tensor([1.0, 2.0], requires_grad=True)])
        with pytest.raises(RuntimeError, match="Could not find autograd context"):
            await dist_autograd.backward(cid, [aiograd.tensor(1.0, requires_grad=True)])
        with pytest.raises(RuntimeError, match="Error on Node 1: .*ZeroDivisionError"):
            await rpc.rpc_async("worker1", divmod, (1, 0))
        with pytest.raises(ValueError, match="unknown worker"):
            await rpc.rpc_async("nobody", F.pid)
        with pytest.raises(TypeError, match="args must be a tuple"):
            await rpc.rpc_async("worker1", F.pid, [1])
        with pytest.raises(RuntimeError, match="running event loop"):
            rpc.rpc_sync("worker1", F.pid)
    run(go())
    assert rpc.rpc_sync("worker1", F.identity, (7,)) == 7


def test_rpc_timeout_is_a_deadline() -> None:
    async def go() -> None:
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="Error on Node 1: DEADLINE_EXCEEDED"):
            await rpc.rpc_async("worker1", asyncio.sleep, (30,), timeout=0.3)
        assert time.monotonic() - start < 5
    run(go())


def test_cancelling_the_caller_cancels_the_remote_backward() -> None:
    F.STARTED.clear()

    async def go() -> None:
        x = aiograd.tensor(_x(6), requires_grad=True)
        async with dist_autograd.context() as cid:
            y = await rpc.rpc_async("worker2", F.hang, (x, "worker0"))
            task = asyncio.ensure_future(dist_autograd.backward(cid, [y.sum()]))
            assert await asyncio.to_thread(F.STARTED.wait, 20)
            info = await rpc.rpc_async("worker2", F.debug_info)
            assert info["num_current_backward_passes"] == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        for _ in range(200):  # the remote handler is cancelled with the call
            if (await rpc.rpc_async("worker2", F.debug_info))["num_current_backward_passes"] == 0:
                break
            await asyncio.sleep(0.01)
        await _assert_clean()
    run(go())


def test_wrong_secret_is_rejected_before_unpickling(tmp_path) -> None:
    import grpc

    from aiograd.distributed import _auth

    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (F.touch, (str(marker),))

    body = pickle.dumps(Evil())
    address = rpc._get_agent().addresses[1]
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary("/aiograd.Rpc/Call")
        nonce = _auth.new_nonce()
        forged = _auth.sign(b"wrong", "/aiograd.Rpc/Call", _auth.body_tag(b"wrong", nonce, [body]),
                            nonce)
        for md in [(), ((_auth.AUTH_KEY, forged),)]:
            with pytest.raises(grpc.RpcError) as e:
                call(body, timeout=5, metadata=md)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert not marker.exists()


def test_bulk_lane_body_is_authenticated() -> None:
    """A large body travels on the bulk lane; bytes there that do not match the MAC in
    the signed token (tampered, or pushed by anyone) are rejected before unpickling."""
    import grpc

    from aiograd.distributed import _auth

    agent = rpc._get_agent()
    vouched, forged = b"x" * (rpc.CHUNK + 1), b"y" * (rpc.CHUNK + 1)

    async def go() -> grpc.StatusCode:  # on the agent's loop, which owns its channels
        nonce = _auth.new_nonce()
        token = _auth.sign(agent.secret, "/aiograd.Rpc/Call",
                           _auth.body_tag(agent.secret, nonce, [vouched]), nonce)
        transfer = os.urandom(16)
        await agent.bulk.send(agent.bulk_addresses[1], transfer, [forged], len(forged),
                              _auth.new_nonce())
        md = ((_auth.AUTH_KEY, token), (_auth.FROM_KEY, "0"), (rpc.BULK_KEY, transfer.hex()))
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await agent.calls[1](b"", timeout=5, metadata=md)
        return e.value.code()

    assert rpc._submit(go()).result(30) == grpc.StatusCode.UNAUTHENTICATED


def test_100mb_tensor_round_trip() -> None:
    big = numpy.random.default_rng(0).standard_normal(100 * 2**20 // 8)

    async def go() -> None:
        t = aiograd.tensor(big)
        back = await rpc.rpc_async("worker1", F.identity, (t,))
        numpy.testing.assert_array_equal(back.data, big)
    run(go())


def test_distributed_optimizer_matches_local_sgd() -> None:
    torch = pytest.importorskip("torch")
    shape = (D_IN, D_OUT)

    async def go() -> numpy.ndarray:
        rref = await rpc.rpc_async("worker1", F.param_rref, ("opt_w", shape))
        unused = await rpc.rpc_async("worker2", F.param_rref, ("opt_unused", shape))
        opt = await DistributedOptimizer.create(aiograd.optim.SGD, [rref, unused], lr=0.1)
        x = aiograd.tensor(_x(7))
        async with dist_autograd.context() as cid:
            loss = await F.ps_trainer("worker1", x, "opt_w", shape)
            await dist_autograd.backward(cid, [loss])
            await opt.step(cid)
        assert (numpy.array_equal(await rpc.rpc_async("worker2", F.param_value, ("opt_unused",)),
                                  F.weights("opt_unused", shape)))
        return await rpc.rpc_async("worker1", F.param_value, ("opt_w",))

    got = run(go())
    w = torch.tensor(F.weights("opt_w", shape), requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    torch.tanh(torch.tensor(_x(7)) @ w).sum().backward()
    opt.step()
    numpy.testing.assert_allclose(got, w.detach().numpy(), rtol=1e-10)


def test_works_from_trio() -> None:
    trio = pytest.importorskip("trio")

    async def go() -> numpy.ndarray:
        x = aiograd.tensor(_x(8), requires_grad=True)
        async with dist_autograd.context() as cid:
            y = await rpc.rpc_async("worker1", F.scale, (x, 5.0))
            await dist_autograd.backward(cid, [y.sum()])
            return dist_autograd.get_gradients(cid)[x].data

    numpy.testing.assert_array_equal(trio.run(go), numpy.full((2, D_IN), 5.0))
