"""The workloads of issue 22 against PyTorch in the same process, float32.

On CUDA (needs CuPy and a torch built for CUDA; skipped cleanly otherwise):

- ``chain``: 2,000 tiny ops ``y = y * 1.0001 + 0.0001`` on float32[4], backward; time per node;
- ``mlp``: MLP 784-512-512-10, batch 128, forward + backward;
- ``mlp4096``: MLP of 4 layers of 4096, batch 4096, forward + backward;
- ``cnn``: conv3x3 32, max pool 2, conv3x3 64, max pool 2, linear; 32x32 inputs, batch 128,
  forward + backward (padding 1, ReLU after each conv, cross entropy);
- ``service``: an asyncio service, 64 clients, a 64-128-128-10 MLP at batch 32, one
  forward + backward per request (PyTorch through ``run_in_executor``); requests/s and p99.

Always, on the CPU: ``cnn_cpu``, the CNN against PyTorch CPU (issue 22's target: <= 2.0x).

Each line is JSON (see _common.py); the last line holds the ratios aiograd / PyTorch
(for the service: PyTorch's throughput / aiograd's, so lower is better everywhere).
Usage: ``PYTHONPATH=. python benchmarks/gpu.py [--rounds N] [--threads N] [--cpu-only]``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy
from _common import (
    configure_threads,
    emit,
    env_line,
    interleaved,
    median,
    perf_counter,
    round_ratio,
)

import aiograd
import aiograd.nn.functional as F


def _arg(name: str, default: int) -> int:
    argv = sys.argv[1:]
    return int(argv[argv.index(name) + 1]) if name in argv else default


def _cuda_available() -> str | None:
    """None when the CUDA part can run, else why not."""
    try:
        import cupy
        import torch
    except ImportError as exc:
        return f"missing {exc.name}"
    if not torch.cuda.is_available():
        return "torch has no CUDA"
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CuPy raises its own runtime errors
        return f"CuPy sees no device: {exc}"
    return None


class _Lib:
    """aiograd or torch behind one interface: tensors, backward and a device sync."""

    def __init__(self, name: str, device: str) -> None:
        self.name, self.device = name, device
        if name == "torch":
            import torch

            self.mod, self.F = torch, torch.nn.functional
        else:
            self.mod, self.F = aiograd, F

    def tensor(self, a: numpy.ndarray, grad: bool = False) -> Any:
        t = self.mod.tensor(a, device=self.device)
        return t.requires_grad_() if grad else t

    def backward(self, loss: Any) -> None:
        if self.name == "torch":
            loss.backward()
        else:
            aiograd.backward_sync(loss)

    def sync(self) -> None:
        if self.device == "cpu":
            return
        if self.name == "torch":
            self.mod.cuda.synchronize()
        else:
            import cupy

            cupy.cuda.Device().synchronize()


def _timed(lib: _Lib, step: Callable[[], None]) -> Callable[[], dict[str, float]]:
    def run() -> dict[str, float]:
        lib.sync()
        start = perf_counter()
        step()
        lib.sync()
        return {"total": perf_counter() - start}
    return run


def _mlp_step(lib: _Lib, sizes: list[int], batch: int) -> Callable[[], None]:
    rng = numpy.random.default_rng(0)
    params = [lib.tensor((rng.standard_normal((o, i)) / numpy.sqrt(i)).astype(numpy.float32),
                         True) for i, o in zip(sizes[:-1], sizes[1:])]
    biases = [lib.tensor(numpy.zeros(o, numpy.float32), True) for o in sizes[1:]]
    x = lib.tensor(rng.standard_normal((batch, sizes[0])).astype(numpy.float32))
    y = lib.tensor(rng.integers(0, sizes[-1], batch))

    def step() -> None:
        h = x
        for k, (w, b) in enumerate(zip(params, biases)):
            h = lib.F.linear(h, w, b)
            if k < len(params) - 1:
                h = lib.F.relu(h)
        for p in params + biases:
            p.grad = None
        lib.backward(lib.F.cross_entropy(h, y))
    return step


def _cnn_step(lib: _Lib) -> Callable[[], None]:
    rng = numpy.random.default_rng(0)
    shapes = [(32, 3, 3, 3), (32,), (64, 32, 3, 3), (64,), (10, 64 * 8 * 8), (10,)]
    params = [lib.tensor((rng.standard_normal(s) * 0.05).astype(numpy.float32), True)
              for s in shapes]
    x = lib.tensor(rng.standard_normal((128, 3, 32, 32)).astype(numpy.float32))
    y = lib.tensor(rng.integers(0, 10, 128))
    fn = lib.F

    def step() -> None:
        h = fn.max_pool2d(fn.relu(fn.conv2d(x, params[0], params[1], padding=1)), 2)
        h = fn.max_pool2d(fn.relu(fn.conv2d(h, params[2], params[3], padding=1)), 2)
        out = fn.linear(h.reshape(128, 64 * 8 * 8), params[4], params[5])
        for p in params:
            p.grad = None
        lib.backward(fn.cross_entropy(out, y))
    return step


def _chain_step(lib: _Lib, length: int = 2000) -> Callable[[], None]:
    x = lib.tensor(numpy.ones(4, numpy.float32), True)

    def step() -> None:
        y = x
        for _ in range(length):
            y = y * 1.0001 + 0.0001
        x.grad = None
        lib.backward(y.sum())
    return step


def _compare(bench: str, impls: dict[str, Callable[[], dict[str, float]]], rounds: int,
             per: float = 1.0, unit: str = "ms") -> float:
    """Interleaved rounds; emits both medians and returns the aiograd / torch ratio."""
    times = interleaved(impls, warmup=2, rounds=rounds)
    scale = 1e3 if unit == "ms" else 1e6
    for name, phases in times.items():
        emit(bench=bench, impl=name, metric="median", value=median(phases["total"]) * scale / per,
             unit=unit)
    return round_ratio(times["aiograd"]["total"], times["torch"]["total"])


def _service(lib: _Lib, mode: str, clients: int = 64,
             requests: int = 20) -> tuple[float, float]:
    """(requests per second, p99 latency in seconds) of ``clients`` concurrent clients,
    each request one forward + backward of a 64-128-128-10 MLP at batch 32. ``mode``:
    ``executor`` (the whole step in ``run_in_executor``: PyTorch's), ``split`` (forward
    on the loop, ``await aiograd.backward``) or ``offload`` (the whole step through
    ``await aiograd.offload``: one thread per request, issue 22 item 5)."""
    step = _mlp_step(lib, [64, 128, 128, 10], 32)
    forward = _mlp_forward(lib)
    latencies: list[float] = []

    async def request() -> None:
        if mode == "executor":
            await asyncio.get_running_loop().run_in_executor(None, step)
        elif mode == "offload":
            await aiograd.offload(step)
        else:
            await aiograd.backward(forward())
        lib.sync()

    async def client() -> None:
        for _ in range(requests):
            start = perf_counter()
            await request()
            latencies.append(perf_counter() - start)

    async def run_clients() -> float:
        start = perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return perf_counter() - start

    elapsed = asyncio.run(run_clients())
    latencies.sort()
    return clients * requests / elapsed, latencies[int(0.99 * (len(latencies) - 1))]


def _mlp_forward(lib: _Lib) -> Callable[[], Any]:
    """The loss of the service's MLP (for the ``split`` mode)."""
    rng = numpy.random.default_rng(0)
    sizes = [64, 128, 128, 10]
    ws = [lib.tensor((rng.standard_normal((o, i)) / numpy.sqrt(i)).astype(numpy.float32), True)
          for i, o in zip(sizes[:-1], sizes[1:])]
    x = lib.tensor(rng.standard_normal((32, 64)).astype(numpy.float32))
    y = lib.tensor(rng.integers(0, 10, 32))

    def forward() -> Any:
        h = x
        for k, w in enumerate(ws):
            h = lib.F.linear(h, w)
            h = lib.F.relu(h) if k < len(ws) - 1 else h
        return lib.F.cross_entropy(h, y)
    return forward


def main() -> None:
    configure_threads(None)
    env_line("gpu")
    rounds = _arg("--rounds", 10)
    ratios: dict[str, Any] = {}
    cpu = {name: _Lib(name, "cpu") for name in ("aiograd", "torch")}
    ratios["cnn_cpu"] = _compare("cnn_cpu", {n: _timed(lib, _cnn_step(lib))
                                            for n, lib in cpu.items()}, rounds)
    why = "--cpu-only given" if "--cpu-only" in sys.argv else _cuda_available()
    if why is not None:
        emit(bench="gpu", impl="skipped", metric="cuda", value=None, unit=None, reason=why)
        emit(bench="gpu", impl="ratios", metric="aiograd/torch", value=ratios, unit="x")
        return
    gpu = {name: _Lib(name, "cuda") for name in ("aiograd", "torch")}
    ratios["chain"] = _compare("chain", {n: _timed(lib, _chain_step(lib))
                                         for n, lib in gpu.items()}, rounds, 2 * 2000, "us")
    ratios["mlp"] = _compare("mlp", {n: _timed(lib, _mlp_step(lib, [784, 512, 512, 10], 128))
                                     for n, lib in gpu.items()}, rounds)
    ratios["mlp4096"] = _compare(
        "mlp4096", {n: _timed(lib, _mlp_step(lib, [4096] * 5, 4096)) for n, lib in gpu.items()},
        rounds)
    ratios["cnn"] = _compare("cnn", {n: _timed(lib, _cnn_step(lib)) for n, lib in gpu.items()},
                             rounds)
    served = {"torch": _service(gpu["torch"], "executor"),
              "aiograd_split": _service(gpu["aiograd"], "split"),
              "aiograd_offload": _service(gpu["aiograd"], "offload")}
    for name, (rate, p99) in served.items():
        emit(bench="service", impl=name, metric="throughput", value=rate, unit="req/s",
             p99_ms=p99 * 1e3)
    for name in ("aiograd_split", "aiograd_offload"):
        ratios[f"service_throughput_{name}"] = served["torch"][0] / served[name][0]
        ratios[f"service_p99_{name}"] = served[name][1] / served["torch"][1]
    emit(bench="gpu", impl="ratios", metric="aiograd/torch", value=ratios, unit="x",
         at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


if __name__ == "__main__":
    main()
