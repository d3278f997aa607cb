"""Peak memory of a deep-MLP training step with and without activation checkpointing.

A 16-layer MLP, 1024 wide, batch 256, float32: forward + backward + SGD step, with
the .grad buffers already allocated (zero_grad(set_to_none=False)), so the peak shows
what the activations cost. Peak traced memory (tracemalloc: NumPy reports its
buffers) above the step's start, for
- no checkpointing,
- aiograd.checkpoint(use_reentrant=True) over blocks of 4 layers,
- aiograd.checkpoint(use_reentrant=False) over the same blocks,
Gradients of the three are checked to agree.
Prints one JSON line per result and a final ratios line.

Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/checkpoint_memory.py
"""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
from _common import emit, env_line

import aiograd as ag
from aiograd import nn, optim

WIDTH, DEPTH, BATCH, BLOCK = 1024, 16, 256, 4


def build_model(seed: int) -> nn.Sequential:
    ag.manual_seed(seed)
    layers: list[nn.Module] = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers)


def forward(model: nn.Sequential, x: ag.Tensor, mode: str) -> ag.Tensor:
    mods = list(model.children())
    per_block = 2 * BLOCK
    h = x
    for start in range(0, len(mods), per_block):
        chunk = nn.Sequential(*mods[start:start + per_block])
        if mode == "none":
            h = chunk(h)
        else:
            h = ag.checkpoint(chunk, h, use_reentrant=(mode == "reentrant"))
    return h


def step(model: nn.Sequential, opt: optim.SGD, x: ag.Tensor, mode: str) -> int:
    """One training step; returns the peak traced bytes above the step's start."""
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        opt.zero_grad(set_to_none=False)  # .grad buffers stay: measure activations
        loss = (forward(model, x, mode) ** 2).mean()
        ag.backward_sync(loss)
        opt.step()
        del loss
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - start


def main() -> None:
    env_line("checkpoint_memory")
    rng = np.random.default_rng(0)
    x = ag.tensor(rng.standard_normal((BATCH, WIDTH)).astype("float32"), requires_grad=True)
    peaks = {}
    grads = {}
    for mode in ("none", "reentrant", "non_reentrant"):
        model = build_model(1)
        opt = optim.SGD(model.parameters(), lr=0.0)  # lr 0: parameters stay comparable
        step(model, opt, x, mode)  # warm-up: .grad buffers exist from now on
        peaks[mode] = step(model, opt, x, mode)
        grads[mode] = next(iter(model.parameters())).grad.numpy().copy()
        emit(bench="checkpoint_memory", impl=f"aiograd/{mode}", metric="peak_step_memory",
             value=round(peaks[mode] / 2**20, 1), unit="MiB",
             config=f"{DEPTH}x{WIDTH}, batch {BATCH}, blocks of {BLOCK}")
    for mode in ("reentrant", "non_reentrant"):
        np.testing.assert_allclose(grads[mode], grads["none"], rtol=1e-4, atol=1e-6)
    emit(bench="checkpoint_memory", ratios={
        f"{mode}/none": round(peaks[mode] / peaks["none"], 3)
        for mode in ("reentrant", "non_reentrant")
    }, gradients_equal=True)


if __name__ == "__main__":
    main()
