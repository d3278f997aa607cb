"""Device-path overhead: backward time per node of the chain graph on a device vs the CPU.

The chain of ``engine_overhead.py`` (2,000 x ``y = y * 1.0001 + 0.0001`` on a
float32[4] leaf: 4,000 op nodes), built once on the CPU and once on ``fake:0``,
the NumPy-backed device of ``tests/fake_backend.py`` (registered through
``aiograd.devices.register_backend``). Its arrays are NumPy underneath and its
streams record nothing costly, so the gap between the two is the per-node
Python overhead of the device path (issue 22, "Where the time goes (a)"): the
worker, stream guards, validation, device lookups and stream-aware accumulation.

Implementations, timed in interleaved rounds (``_common.interleaved``), the
graph rebuilt outside the clock each time:

- ``cpu_backward_sync``:  ``aiograd.backward_sync(y, ones)`` on the CPU (the
  calling thread runs the nodes);
- ``fake_backward_sync``: the same on ``fake:0`` (the fake device's worker runs them);
- ``cpu_await_backward``/``fake_await_backward``: ``await aiograd.backward(y, ones)``
  inside an asyncio loop.

per-node time = backward time / 4,000. The ``ratios`` line gives the median over
rounds of fake/CPU per round (``_common.round_ratio``).

Usage: ``PYTHONPATH=. python benchmarks/device_path.py [--rounds N] [--threads N]``
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from _common import (  # noqa: E402
    configure_threads,
    emit,
    env_line,
    interleaved,
    median,
    perf_counter,
    round_ratio,
)
from engine_overhead import CHAIN_NODES, X0, chain  # noqa: E402

WARMUP = 2
ROUNDS = 15
BUDGET_S = 30.0


def _rounds() -> int:
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--rounds" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--rounds="):
            return int(arg.split("=", 1)[1])
    return ROUNDS


def impls(aiograd, loop):
    """``{name: timed callable}`` for each device and driver."""

    def build(device):
        x = aiograd.tensor(X0.copy(), requires_grad=True, device=device)
        return x, chain(x, None), aiograd.ones(4, device=device)

    def sync(device):
        def run():
            state = build(device)
            gc.collect()
            t0 = perf_counter()
            aiograd.backward_sync(state[1], state[2])
            return {"backward": perf_counter() - t0}
        return run

    def awaited(device):
        async def go():
            state = build(device)
            gc.collect()
            t0 = perf_counter()
            await aiograd.backward(state[1], state[2])
            return {"backward": perf_counter() - t0}
        return lambda: loop.run_until_complete(go())

    return {"cpu_backward_sync": sync("cpu"), "fake_backward_sync": sync("fake:0"),
            "cpu_await_backward": awaited("cpu"), "fake_await_backward": awaited("fake:0")}


def check_same_gradients(aiograd) -> None:
    """Sanity: the chain's gradient is the same on the fake device and the CPU."""
    grads = []
    for device in ("cpu", "fake:0"):
        x = aiograd.tensor(X0.copy(), requires_grad=True, device=device)
        aiograd.backward_sync(chain(x, None), aiograd.ones(4, device=device))
        grads.append(np.asarray(x.grad.to("cpu").numpy()))
    emit(bench="device_path", graph="chain", impl="all", metric="gradients_match",
         value=bool(np.array_equal(grads[0], grads[1])), unit=None)


def main() -> None:
    t_start = perf_counter()
    configure_threads(None)
    env_line("device_path")
    from fake_backend import FakeBackend

    import aiograd
    from aiograd import devices

    devices.register_backend(FakeBackend(count=1, name="fake"))
    check_same_gradients(aiograd)
    loop = asyncio.new_event_loop()
    try:
        t = interleaved(impls(aiograd, loop), warmup=WARMUP, rounds=_rounds(),
                        budget_s=BUDGET_S, collect=False)
    finally:
        loop.close()
    for impl, phases in t.items():
        bwd = phases["backward"]
        emit(bench="device_path", graph="chain", impl=impl, metric="backward_per_node",
             value=round(median(bwd) / CHAIN_NODES * 1e6, 4), unit="us", nodes=CHAIN_NODES,
             backward_ms=round(median(bwd) * 1e3, 3),
             backward_ms_min=round(min(bwd) * 1e3, 3), repeats=len(bwd))
    ratios = {f"{driver}: fake/cpu": round(round_ratio(t[f"fake_{driver}"]["backward"],
                                                        t[f"cpu_{driver}"]["backward"]), 3)
              for driver in ("backward_sync", "await_backward")}
    emit(bench="device_path", impl="ratios", metric="per_node_ratio", value=ratios, unit="x",
         note="median over rounds of the per-round ratio (both timed in the same round)",
         wall_s=round(perf_counter() - t_start, 1))


if __name__ == "__main__":
    main()
