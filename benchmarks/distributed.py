"""Distributed RPC and autograd on 2 local processes: aiograd (grpc.aio) vs torch.distributed.rpc.

    PYTHONPATH=. python benchmarks/distributed.py [--rounds N] [--repeat R]

Starts 2 aiograd workers (through the launcher, so one BLAS thread each: Note
[One BLAS thread per worker]) twice: ``aiograd`` with every agent on a thread of its
own (``init_rpc``), ``aiograd_loop`` with rank 0's agent on rank 0's asyncio loop
(``init_rpc_async``, Note [Agent on your loop]: no thread hand-over per call); then
2 torch workers where the installed torch has ``torch.distributed.rpc``. It does so
R times (default 3), alternating, so that all see the same drift in the machine's
load; rank 0 of each prints JSON lines:
- ``rpc``: round-trip latency of one RPC (one hop each way) with a small tensor, p50/p99 ms;
- ``throughput``: a 100 MB tensor sent and returned, GB/s counting both directions;
- ``backward``: a 2-stage pipeline (stage 2 on the other worker), forward + distributed
  backward, against the same model forward + backward in one process (ms, median).
Targets (issue 23): p50 <= 1.5 ms; >= 1 GB/s; no hop > 2x PyTorch's. A last
``ratios`` line gives, over the R rounds, the median of each figure, the median of
the per-round ratios aiograd / torch (p50 latency, throughput) and the targets met,
for each aiograd mode. A ``grpc_floor`` line gives the p50 of bare grpc.aio calls
between the same two loops (rank 0's, rank 1's agent loop; no aiograd code around
them), in batches alternating with ``aiograd_loop``'s: the part of a hop that is
gRPC's own.
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
    line = json.dumps(fields)
    print(line, flush=True)
    out = os.environ.get("AIOGRAD_BENCH_OUT")
    if out:  # the parent collects the workers' lines for the ratios line
        with open(out, "a") as f:
            f.write(line + "\n")


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

#: The body of a bare gRPC call, about the size of the small-tensor RPC's.
FLOOR_BODY = bytes(320)
_echo_servers: list[Any] = []


async def _start_echo() -> int:
    """Serve bare grpc.aio echo calls on this worker's agent loop; the port."""
    import grpc
    server = grpc.aio.server()
    echo = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("Echo",
                                                                          {"Call": echo})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    _echo_servers.append(server)
    return port


async def _stop_echo() -> None:
    for server in _echo_servers:
        await server.stop(grace=None)
    _echo_servers.clear()


async def _bare_call(to: str) -> tuple[Any, Any]:
    """A channel to an echo server on ``to`` and its bare grpc.aio unary call (no aiograd
    code around it: the floor of a hop), from this loop."""
    import grpc

    from aiograd.distributed import rpc
    port = await rpc.rpc_async(to, _start_echo)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_unary("/Echo/Call")
    for _ in range(20):
        await call(FLOOR_BODY, timeout=10, wait_for_ready=True)
    return channel, call

_aiograd_w: dict[int, Any] = {}


def aiograd_stage2(h: Any) -> Any:
    import aiograd
    if 2 not in _aiograd_w:
        _aiograd_w[2] = aiograd.tensor(_weights(2), requires_grad=True)
    return aiograd.tanh(h @ _aiograd_w[2])


async def _aiograd_main(rounds: int, impl: str) -> None:
    import aiograd
    from aiograd.distributed import autograd as dist_autograd
    from aiograd.distributed import rpc

    small = aiograd.tensor(numpy.ones(N_SMALL))
    for _ in range(20):
        await rpc.rpc_async("w1", identity, (small,))
    channel, bare = await _bare_call("w1") if impl == "aiograd_loop" else (None, None)
    times, floor = [], []
    for _ in range(rounds):  # with the floor, in alternating batches (the same drift)
        for _ in range(20):
            t0 = time.perf_counter()
            await rpc.rpc_async("w1", identity, (small,))
            times.append(time.perf_counter() - t0)
        for _ in range(20 if bare is not None else 0):
            t0 = time.perf_counter()
            await bare(FLOOR_BODY, timeout=10)
            floor.append(time.perf_counter() - t0)
    _latency(impl, times)
    if channel is not None:
        await channel.close()
        await rpc.rpc_async("w1", _stop_echo)
    if floor:
        emit(bench="grpc_floor", impl="grpc.aio", p50_ms=round(1e3 * _pct(floor, 0.5), 3),
             p99_ms=round(1e3 * _pct(floor, 0.99), 3), n=len(floor))

    big = aiograd.tensor(numpy.ones(BIG))
    await rpc.rpc_async("w1", identity, (big,))
    bt = []
    for _ in range(max(rounds // 2, 3)):
        t0 = time.perf_counter()
        await rpc.rpc_async("w1", identity, (big,))
        bt.append(time.perf_counter() - t0)
    emit(bench="throughput", impl=impl,
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

    await _backward(impl, dist, local, rounds)


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
    """Both agents on a thread of their own (``init_rpc``)."""
    from aiograd.distributed import rpc
    rank = int(os.environ["RANK"])
    rpc.init_rpc(f"w{rank}")
    if rank == 0:
        asyncio.run(_aiograd_main(rounds, "aiograd"))
    rpc.shutdown(graceful=True, timeout=600)


def aiograd_loop_worker(rounds: int) -> None:
    """Rank 0's agent on its own asyncio loop (``init_rpc_async``: Note [Agent on your
    loop]); rank 1 as in ``aiograd_worker``."""
    from aiograd.distributed import rpc
    if int(os.environ["RANK"]) != 0:
        aiograd_worker(rounds)
        return

    async def run() -> None:
        await rpc.init_rpc_async("w0")
        try:
            await _aiograd_main(rounds, "aiograd_loop")
        finally:
            await rpc.shutdown_async(graceful=True, timeout=600)
    asyncio.run(run())


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


def _ratios(lines: list[dict[str, Any]], repeat: int) -> None:
    """The ``ratios`` line: medians over the rounds and of the per-round ratios."""
    def series(bench: str, impl: str, key: str) -> list[float]:
        return [ln[key] for ln in lines if ln.get("bench") == bench and ln.get("impl") == impl
                and key in ln]

    modes = ("aiograd", "aiograd_loop")
    med = {f"{impl}_{name}": statistics.median(xs) for impl in (*modes, "torch")
           for name, xs in (("p50_ms", series("rpc", impl, "p50_ms")),
                            ("gb_per_s", series("throughput", impl, "gb_per_s")),
                            ("backward_ms", series("backward", impl, "distributed_ms")),
                            ("one_process_ms", series("backward", impl, "one_process_ms")))
           if xs}
    fields: dict[str, Any] = {k: round(v, 3) for k, v in med.items()}
    floor = series("grpc_floor", "grpc.aio", "p50_ms")
    if floor:
        fields["grpc_floor_p50_ms"] = round(statistics.median(floor), 3)
    t_lat, t_gb = series("rpc", "torch", "p50_ms"), series("throughput", "torch", "gb_per_s")
    targets: dict[str, bool] = {}
    for impl in modes:
        a_lat, a_gb = series("rpc", impl, "p50_ms"), series("throughput", impl, "gb_per_s")
        fields[f"{impl}_p50_ms_all"] = a_lat
        targets[f"{impl}_p50_le_1.5ms"] = med[f"{impl}_p50_ms"] <= 1.5
        targets[f"{impl}_throughput_ge_1GBps"] = med[f"{impl}_gb_per_s"] >= 1.0
        if t_lat and len(t_lat) == len(a_lat):
            ratio = statistics.median(a / t for a, t in zip(a_lat, t_lat))
            fields[f"p50_ratio_{impl}_torch"] = round(ratio, 3)
            fields[f"throughput_ratio_{impl}_torch"] = round(
                statistics.median(a / t for a, t in zip(a_gb, t_gb)), 3)
            targets[f"{impl}_p50_le_2x_torch"] = ratio <= 2.0
    emit(bench="ratios", rounds=repeat, **fields, torch_p50_ms_all=t_lat,
         grpc_floor_p50_ms_all=floor, targets_met=targets, loadavg=list(os.getloadavg()))


def main() -> int:
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 20
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 3
    if "--worker" in args:
        workers = {"aiograd": aiograd_worker, "aiograd_loop": aiograd_loop_worker,
                   "torch": torch_worker}
        workers[args[args.index("--worker") + 1]](rounds)
        return 0
    import tempfile

    from aiograd.distributed.launch import launch
    emit(bench="env", loadavg=list(os.getloadavg()), cpus=os.cpu_count(),
         OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1 (set by the launcher)"),
         note="shared machine: timings are noisy")
    try:
        import torch.distributed.rpc as trpc
        has_torch = trpc.is_available()
    except ImportError:
        has_torch = False
    if not has_torch:
        emit(bench="rpc", impl="torch", skipped="torch.distributed.rpc is not available")
    impls = ["aiograd", "aiograd_loop", "torch"] if has_torch else ["aiograd", "aiograd_loop"]
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as out:
        os.environ["AIOGRAD_BENCH_OUT"] = out.name
        for _ in range(repeat):
            for impl in impls:
                status = launch(2, [__file__, "--worker", impl, "--rounds", str(rounds)])
                if status:
                    return status
        del os.environ["AIOGRAD_BENCH_OUT"]
        _ratios([json.loads(ln) for ln in out], repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
