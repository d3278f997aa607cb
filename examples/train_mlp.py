"""Train a small MLP on a synthetic 10-class dataset with ``await loss.backward()``.

Run:  python examples/train_mlp.py

The data are thirty Gaussian clusters in 16 dimensions, three per class,
made with NumPy. The training loop is an ordinary PyTorch-style loop inside
``asyncio.run`` (Adam, gradient clipping, a cosine learning-rate schedule);
the only async step is the backward pass.

Where backward runs: a mini-batch graph is small, so the engine runs it
inline on the event loop's thread (a thread hop would cost more than the
work). Once per epoch the script also measures the full-batch gradient norm;
that graph is large, so it runs on aiograd's CPU worker thread while the
loop stays free. ``aiograd.profiler.trace`` records both kinds, and the
script prints what the engine did at the end.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
from tqdm import tqdm

import aiograd
from aiograd import nn, optim

N_CLASSES = 10
N_FEATURES = 16
CLUSTERS_PER_CLASS = 3
SPREAD = 1.0  # distance scale of the cluster centers; noise is 1 per dimension
EPOCHS = 20
BATCH = 64


def make_dataset(n: int, rng: np.random.Generator,
                 centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points near the centers; each class owns CLUSTERS_PER_CLASS of them.

    Several clusters per class make the classes non-convex: a linear model
    cannot separate them, a hidden layer can.
    """
    cluster = rng.integers(0, len(centers), size=n)
    x = centers[cluster] + rng.standard_normal((n, N_FEATURES))
    return x.astype(np.float32), cluster % N_CLASSES


async def full_batch_grad_norm(model: nn.Module, loss_fn: nn.Module, x: np.ndarray,
                               y: np.ndarray) -> float:
    """The gradient norm of the loss over the whole training set (a large graph:
    its backward runs on the CPU worker); leaves the parameters' grads zeroed."""
    model.zero_grad()
    await loss_fn(model(aiograd.tensor(x)), y).backward()
    norm = float(np.sqrt(sum(float((p.grad * p.grad).sum()) for p in model.parameters())))
    model.zero_grad()
    return norm


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    with aiograd.no_grad():
        logits = model(aiograd.tensor(x))
    return float((logits.numpy().argmax(axis=1) == y).mean())


async def main() -> None:
    rng = np.random.default_rng(0)
    aiograd.manual_seed(0)
    centers = rng.standard_normal((N_CLASSES * CLUSTERS_PER_CLASS, N_FEATURES)) * SPREAD
    x_train, y_train = make_dataset(3000, rng, centers)
    x_test, y_test = make_dataset(1000, rng, centers)

    model = nn.Sequential(
        nn.Linear(N_FEATURES, 64),
        nn.ReLU(),
        nn.Linear(64, 64),
        nn.ReLU(),
        nn.Linear(64, N_CLASSES),
    )
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    schedule = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    print(model)

    start = time.perf_counter()
    steps = EPOCHS * -(-len(x_train) // BATCH)
    async with aiograd.profiler.trace() as trace:
        with tqdm(total=steps, unit="step", leave=False) as progress:
            for epoch in range(1, EPOCHS + 1):
                order = rng.permutation(len(x_train))
                total = 0.0
                for i in range(0, len(order), BATCH):
                    batch = order[i:i + BATCH]
                    optimizer.zero_grad()
                    loss = loss_fn(model(aiograd.tensor(x_train[batch])),
                                   aiograd.tensor(y_train[batch]))
                    await loss.backward()  # small graph: inline on the loop
                    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                    optimizer.step()
                    total += loss.item() * len(batch)
                    progress.update()
                schedule.step()
                norm = await full_batch_grad_norm(model, loss_fn, x_train, y_train)  # worker
                progress.set_postfix(loss=f"{total / len(order):.3f}", grad_norm=f"{norm:.3f}")
                if epoch == 1 or epoch % 4 == 0:
                    progress.write(f"epoch {epoch:2d}  loss {total / len(order):.4f}  "
                                   f"train acc {accuracy(model, x_train, y_train):.3f}  "
                                   f"full-batch grad norm {norm:.3f}")
    elapsed = time.perf_counter() - start
    print(f"trained in {elapsed:.1f} s")
    print(f"final test accuracy: {accuracy(model, x_test, y_test):.3f}")
    report(trace.summary())


def report(s: aiograd.profiler.Summary) -> None:
    """What the engine did, from the profiler's summary."""
    lag = sorted(s.loop_lag)
    print("what the engine did:")
    print(f"  backward passes: {s.passes} ({s.inline_passes} inline on the event loop, "
          f"{s.worker_passes} on worker threads)")
    print(f"  nodes run: {s.nodes}, {s.node_time * 1e3:.0f} ms in nodes")
    print(f"  worker busy time: {s.worker_busy * 1e3:.0f} ms")
    if lag:
        print(f"  loop lag: median {lag[len(lag) // 2] * 1e3:.2f} ms, "
              f"max {lag[-1] * 1e3:.2f} ms ({len(lag)} samples)")
    print("  top nodes: " + ", ".join(f"{name} {total * 1e3:.0f} ms"
                                      for name, _, total in s.top_nodes[:4]))


if __name__ == "__main__":
    asyncio.run(main())
