"""Distributed RPC and autograd on 2 local processes: aiograd (grpc.aio) vs torch.distributed.rpc.

    PYTHONPATH=. python benchmarks/distributed.py [--rounds N]

Starts 2 aiograd workers (through the launcher), then 2 torch workers where the
installed torch has ``torch.distributed.rpc``; rank 0 of each prints JSON lines:
- ``rpc``: round-trip latency of one RPC (one hop each way) with a small tensor, p50/p99 ms;
- ``throughput``: a 100 MB tensor sent and returned, GB/s counting both directions;
- ``backward``: a 2-stage pipeline (stage 2 on the other worker), forward + distributed
  backward, against the same model forward + backward in one process (ms, median).
Targets (issue 23): p50 <= 1.5 ms; >= 1 GB/s; no hop > 2x PyTorch's.
Timings on a shared machine are noisy: compare medians from interleaved runs.
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

N_SMALL = 10
BIG = 100 * 2**20 // 8
D = 256


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(int(q * len(xs)), len(xs) - 1)]


def _latency(impl: str, times: list[float]) -> None:
    emit(bench="rpc", impl=impl, p50_ms=round(1e3 * _pct(times, 0.5), 3),
         p99_ms=round(1e3 * _pct(times, 0.99), 3), n=len(times))


def identity(x: Any) -> Any:
    return x


def _weights(i: int) -> numpy.ndarray:
    return numpy.random.default_rng(i).standard_normal((D, D)) / D**0.5


# ---- aiograd ----

_aiograd_w: dict[int, Any] = {}


def aiograd_stage2(h: Any) -> Any:
    import aiograd
    if 2 not in _aiograd_w:
        _aiograd_w[2] = aiograd.tensor(_weights(2), requires_grad=True)
    return aiograd.tanh(h @ _aiograd_w[2])


async def _aiograd_main(rounds: int) -> None:
    import aiograd
    from aiograd.distributed import autograd as dist_autograd
    from aiograd.distributed import rpc

    small = aiograd.tensor(numpy.ones(N_SMALL))
    for _ in range(20):
        await rpc.rpc_async("w1", identity, (small,))
    times = []
    for _ in range(rounds * 20):
        t0 = time.perf_counter()
        await rpc.rpc_async("w1", identity, (small,))
        times.append(time.perf_counter() - t0)
    _latency("aiograd", times)

    big = aiograd.tensor(numpy.ones(BIG))
    await rpc.rpc_async("w1", identity, (big,))
    bt = []
    for _ in range(max(rounds // 2, 3)):
        t0 = time.perf_counter()
        await rpc.rpc_async("w1", identity, (big,))
        bt.append(time.perf_counter() - t0)
    emit(bench="throughput", impl="aiograd",
         gb_per_s=round(2 * BIG * 8 / statistics.median(bt) / 1e9, 3))

    x = aiograd.tensor(numpy.random.default_rng(0).standard_normal((64, D)))
    w1 = aiograd.tensor(_weights(1), requires_grad=True)
    w2 = aiograd.tensor(_weights(2), requires_grad=True)

    async def dist() -> None:
        async with dist_autograd.context() as cid:
            out = await rpc.rpc_async("w1", aiograd_stage2, (aiograd.tanh(x @ w1),))
            await dist_autograd.backward(cid, [(out * out).sum()])

    async def local() -> None:
        out = aiograd.tanh(aiograd.tanh(x @ w1) @ w2)
        await aiograd.backward((out * out).sum())

    await _backward("aiograd", dist, local, rounds)


async def _backward(impl: str, dist: Callable[[], Any], local: Callable[[], Any],
                    rounds: int) -> None:
    td, tl = [], []
    for i in range(rounds + 2):
        for f, ts in ((dist, td), (local, tl)):
            t0 = time.perf_counter()
            await f()
            if i >= 2:
                ts.append(time.perf_counter() - t0)
    emit(bench="backward", impl=impl, distributed_ms=round(1e3 * statistics.median(td), 3),
         one_process_ms=round(1e3 * statistics.median(tl), 3))


def aiograd_worker(rounds: int) -> None:
    from aiograd.distributed import rpc
    rank = int(os.environ["RANK"])
    rpc.init_rpc(f"w{rank}")
    if rank == 0:
        asyncio.run(_aiograd_main(rounds))
    rpc.shutdown(graceful=True, timeout=600)


# ---- torch ----

_torch_w: dict[int, Any] = {}


def torch_stage2(h: Any) -> Any:
    import torch
    if 2 not in _torch_w:
        _torch_w[2] = torch.tensor(_weights(2), requires_grad=True)
    return torch.tanh(h @ _torch_w[2])


def torch_worker(rounds: int) -> None:
    import torch
    import torch.distributed.autograd as dist_autograd
    import torch.distributed.rpc as rpc
    rank = int(os.environ["RANK"])
    opts = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}", _transports=["uv"])
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        small = torch.ones(N_SMALL, dtype=torch.float64)
        for _ in range(20):
            rpc.rpc_sync("w1", identity, (small,))
        times = []
        for _ in range(rounds * 20):
            t0 = time.perf_counter()
            rpc.rpc_sync("w1", identity, (small,))
            times.append(time.perf_counter() - t0)
        _latency("torch", times)
        big = torch.ones(BIG, dtype=torch.float64)
        rpc.rpc_sync("w1", identity, (big,))
        bt = []
        for _ in range(max(rounds // 2, 3)):
            t0 = time.perf_counter()
            rpc.rpc_sync("w1", identity, (big,))
            bt.append(time.perf_counter() - t0)
        emit(bench="throughput", impl="torch",
             gb_per_s=round(2 * BIG * 8 / statistics.median(bt) / 1e9, 3))
        x = torch.tensor(numpy.random.default_rng(0).standard_normal((64, D)))
        w1 = torch.tensor(_weights(1), requires_grad=True)
        w2 = torch.tensor(_weights(2), requires_grad=True)

        async def dist() -> None:
            with dist_autograd.context() as cid:
                out = rpc.rpc_sync("w1", torch_stage2, (torch.tanh(x @ w1),))
                dist_autograd.backward(cid, [(out * out).sum()])

        async def local() -> None:
            out = torch.tanh(torch.tanh(x @ w1) @ w2)
            (out * out).sum().backward()

        asyncio.run(_backward("torch", dist, local, rounds))
    rpc.shutdown()


def main() -> int:
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 20
    if "--worker" in args:
        {"aiograd": aiograd_worker, "torch": torch_worker}[args[args.index("--worker") + 1]](rounds)
        return 0
    from aiograd.distributed.launch import launch
    emit(bench="env", loadavg=list(os.getloadavg()), note="shared machine: timings are noisy")
    status = launch(2, [__file__, "--worker", "aiograd", "--rounds", str(rounds)])
    try:
        import torch.distributed.rpc as trpc
        has_torch = trpc.is_available()
    except ImportError:
        has_torch = False
    if has_torch:
        status = status or launch(2, [__file__, "--worker", "torch", "--rounds", str(rounds)])
    else:
        emit(bench="rpc", impl="torch", skipped="torch.distributed.rpc is not available")
    return status


if __name__ == "__main__":
    sys.exit(main())
