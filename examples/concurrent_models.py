"""Train many small models concurrently in one process, one task per model.

Run:  python examples/concurrent_models.py [--backend asyncio|trio] [--models N]

Each model learns its own 1-D function, y = sin(a * x + b), from its own
data. All of them train in one anyio task group on one event loop: whenever
a model awaits its backward pass, the others run. A heartbeat task ticks
throughout, showing the loop stays responsive while gradients are computed.
"""

from __future__ import annotations

import argparse
import time

import anyio
import numpy as np

import aiograd
from aiograd import nn, optim

STEPS = 150


def make_task(seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """A dataset for one model: 128 points of y = sin(a x + b) with small noise."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.5, 2.0), rng.uniform(-1.0, 1.0)
    x = rng.uniform(-2.0, 2.0, size=(128, 1))
    y = np.sin(a * x + b) + 0.01 * rng.standard_normal(x.shape)
    return x.astype(np.float32), y.astype(np.float32), f"sin({a:.2f}x{b:+.2f})"


async def train(index: int, results: dict[int, tuple[str, float, float]]) -> None:
    x, y, label = make_task(seed=index)
    aiograd.manual_seed(index)  # only used while the layers are built (no await in between)
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 1))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.MSELoss()
    xt, yt = aiograd.tensor(x), aiograd.tensor(y)
    first = None
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = loss_fn(model(xt), yt)
        await loss.backward()  # other models run while this one's backward computes
        optimizer.step()
        if first is None:
            first = loss.item()
    with aiograd.no_grad():
        final = loss_fn(model(xt), yt).item()
    results[index] = (label, first, final)


async def main(n_models: int) -> None:
    results: dict[int, tuple[str, float, float]] = {}
    ticks = 0
    done = anyio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.sleep(0.005)

    start = time.perf_counter()
    async with anyio.create_task_group() as outer:
        outer.start_soon(heartbeat)
        async with anyio.create_task_group() as tg:
            for i in range(n_models):
                tg.start_soon(train, i, results)
        done.set()
    elapsed = time.perf_counter() - start

    for i in sorted(results):
        label, first, final = results[i]
        print(f"model {i:2d}  {label:18s}  loss {first:.4f} -> {final:.5f}")
    improved = sum(1 for _, first, final in results.values() if final < 0.1 * first)
    print(f"{len(results)} models trained concurrently in {elapsed:.1f} s "
          f"(heartbeat ticked {ticks} times meanwhile)")
    print(f"models whose loss fell more than 10x: {improved}/{len(results)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--models", type=int, default=8)
    args = parser.parse_args()
    anyio.run(main, args.models, backend=args.backend)
