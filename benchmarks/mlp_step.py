"""One MLP training step (forward + backward, no optimizer), float32.

MLP 784-512-512-10, ReLU, softmax cross-entropy (mean over the batch),
batch 128, ``y = x @ W.T + b`` layout (W is (out, in), PyTorch's).
The input does not require grad; gradients are taken for the six parameters.

Implementations (same initial weights, same batch):

- ``numpy``: hand-written forward and backward: in-place bias add and ReLU,
  fused softmax-cross-entropy gradient ``(softmax(z) - onehot) / B``, weight
  gradients ``dZ.T @ A``, no gradient for the input. The efficient-NumPy floor.
- ``aiograd_backward_sync``: the same model written with tensors
  (``x @ W.transpose(0, 1) + b``, ``.relu()``, ``nn.functional.cross_entropy``),
  ``aiograd.backward_sync(loss)``.
- ``aiograd_await_backward``: the same, ``await aiograd.backward(loss)`` in an
  asyncio loop (nodes run on the CPU worker thread).
- ``aiograd_nn``: ``nn.Sequential(Linear, ReLU, ...)`` + ``nn.functional.cross_entropy``,
  ``backward_sync`` (module overhead on top of the functional version).
- ``torch``: the same tensor code as ``aiograd_backward_sync`` (``x @ W.transpose(0, 1) + b``,
  ``.relu()``, ``F.cross_entropy``), ``loss.backward()``.

Parameter ``.grad`` is reset to None before every step (outside the clock),
so each step writes fresh gradients as the NumPy version does. Rounds are
interleaved over the implementations; medians are reported, and each ratio is
the median over rounds of the two implementations' ratio in that round.
"""

from __future__ import annotations

import asyncio
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    configure_threads,
    emit,
    env_line,
    interleaved,
    median,
    mlp_params,
    perf_counter,
    round_ratio,
)

SIZES = (784, 512, 512, 10)
BATCH = 128
WARMUP = 5
ROUNDS = 40
BUDGET_S = 35.0


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    params = mlp_params(SIZES, rng)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    return params, x, y


# ---- hand-written NumPy ----

def numpy_forward(params, x, y):
    W1, b1, W2, b2, W3, b3 = params
    a1 = x @ W1.T
    a1 += b1
    np.maximum(a1, 0, out=a1)
    a2 = a1 @ W2.T
    a2 += b2
    np.maximum(a2, 0, out=a2)
    z = a2 @ W3.T
    z += b3
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = float(np.mean(np.log(s[:, 0]) - z[rows, y]))
    return loss, (a1, a2, e, s, rows)


def numpy_backward(params, x, y, saved):
    W1, b1, W2, b2, W3, b3 = params
    a1, a2, e, s, rows = saved
    dz = e
    dz /= s
    dz[rows, y] -= 1.0
    dz *= np.float32(1.0 / len(y))
    dW3 = dz.T @ a2
    db3 = dz.sum(axis=0)
    da2 = dz @ W3
    da2 *= a2 > 0
    dW2 = da2.T @ a1
    db2 = da2.sum(axis=0)
    da1 = da2 @ W2
    da1 *= a1 > 0
    dW1 = da1.T @ x
    db1 = da1.sum(axis=0)
    return [dW1, db1, dW2, db2, dW3, db3]


# ---- aiograd / torch models ----

def tensor_forward(params, x, y, F):
    W1, b1, W2, b2, W3, b3 = params
    h = (x @ W1.transpose(0, 1) + b1).relu()
    h = (h @ W2.transpose(0, 1) + b2).relu()
    z = h @ W3.transpose(0, 1) + b3
    return F.cross_entropy(z, y)


def build_impls(loop):
    import torch
    import torch.nn.functional as TF

    import aiograd
    import aiograd.nn as ann
    import aiograd.nn.functional as AF

    params_np, x_np, y_np = make_data()
    a_params = [aiograd.tensor(p.copy(), requires_grad=True) for p in params_np]
    a_x, a_y = aiograd.tensor(x_np), aiograd.tensor(y_np)
    t_params = [torch.tensor(p.copy(), requires_grad=True) for p in params_np]
    t_x, t_y = torch.tensor(x_np), torch.tensor(y_np)

    mods = []
    for i in range(3):
        lin = ann.Linear(SIZES[i], SIZES[i + 1])
        lin.weight.data[...] = params_np[2 * i]
        lin.bias.data[...] = params_np[2 * i + 1]
        mods.append(lin)
        if i < 2:
            mods.append(ann.ReLU())
    model = ann.Sequential(*mods)
    n_params = list(model.parameters())

    def phases(t0: float, t1: float, t2: float) -> dict[str, float]:
        return {"total": t2 - t0, "forward": t1 - t0, "backward": t2 - t1}

    def timed_step(params, forward, backward):
        """One step: ``.grad`` reset outside the clock, then forward and backward timed."""
        for p in params:
            p.grad = None
        t0 = perf_counter()
        loss = forward()
        t1 = perf_counter()
        backward(loss)
        return phases(t0, t1, perf_counter())

    def step_numpy():
        t0 = perf_counter()
        loss, saved = numpy_forward(params_np, x_np, y_np)
        t1 = perf_counter()
        grads = numpy_backward(params_np, x_np, y_np, saved)
        t2 = perf_counter()
        del grads, saved
        return phases(t0, t1, t2)

    def step_aiograd_sync():
        return timed_step(a_params, lambda: tensor_forward(a_params, a_x, a_y, AF),
                          aiograd.backward_sync)

    def step_aiograd_async():
        async def go():
            for p in a_params:
                p.grad = None
            t0 = perf_counter()
            loss = tensor_forward(a_params, a_x, a_y, AF)
            t1 = perf_counter()
            await aiograd.backward(loss)
            return phases(t0, t1, perf_counter())
        return loop.run_until_complete(go())

    def step_aiograd_nn():
        return timed_step(n_params, lambda: AF.cross_entropy(model(a_x), a_y),
                          aiograd.backward_sync)

    def step_torch():
        return timed_step(t_params, lambda: tensor_forward(t_params, t_x, t_y, TF),
                          lambda loss: loss.backward())

    # sanity: same loss and gradients everywhere
    loss_np, saved = numpy_forward(params_np, x_np, y_np)
    g_np = numpy_backward(params_np, x_np, y_np, saved)
    step_aiograd_sync()
    step_torch()
    step_aiograd_nn()
    g_a = [p.grad.numpy() for p in a_params]
    g_t = [p.grad.numpy() for p in t_params]
    g_n = [p.grad.numpy() for p in n_params]
    ok = all(np.allclose(a, b, rtol=1e-3, atol=1e-5) and np.allclose(c, b, rtol=1e-3, atol=1e-5)
             and np.allclose(n, b, rtol=1e-3, atol=1e-5)
             for a, b, c, n in zip(g_a, g_np, g_t, g_n))
    loss_a = float(tensor_forward(a_params, a_x, a_y, AF).item())
    emit(bench="mlp_step", impl="all", metric="gradients_match", value=bool(ok), unit=None,
         loss_numpy=loss_np, loss_aiograd=loss_a,
         grad_dtypes=sorted({str(g.dtype) for g in g_a}))

    return {"numpy": step_numpy, "aiograd_backward_sync": step_aiograd_sync,
            "aiograd_await_backward": step_aiograd_async, "aiograd_nn": step_aiograd_nn,
            "torch": step_torch}


def main() -> None:
    t_start = perf_counter()
    configure_threads(None)
    env_line("mlp_step")
    loop = asyncio.new_event_loop()
    try:
        impls = build_impls(loop)
        t = interleaved(impls, warmup=WARMUP, rounds=ROUNDS, budget_s=BUDGET_S)
    finally:
        loop.close()
    med = {}
    for impl, phases in t.items():
        med[impl] = median(phases["total"])
        emit(bench="mlp_step", impl=impl, metric="step_time", value=round(med[impl] * 1e3, 4),
             unit="ms", min_ms=round(min(phases["total"]) * 1e3, 4),
             forward_ms=round(median(phases["forward"]) * 1e3, 4),
             backward_ms=round(median(phases["backward"]) * 1e3, 4),
             rounds=len(phases["total"]), sizes=list(SIZES), batch=BATCH, dtype="float32")
    pairs = [(i, p) for i in ("aiograd_backward_sync", "aiograd_await_backward", "aiograd_nn")
             for p in ("numpy", "torch")] + [("torch", "numpy")]
    ratios = {f"{i}/{p}": round(round_ratio(t[i]["total"], t[p]["total"]), 3) for i, p in pairs}
    ratios_of_medians = {f"{i}/{p}": round(med[i] / med[p], 3) for i, p in pairs}
    best = {impl: min(ph["total"]) for impl, ph in t.items()}
    ratios_best = {f"{i}/numpy": round(best[i] / best["numpy"], 3)
                   for i in ("aiograd_backward_sync", "aiograd_await_backward", "aiograd_nn",
                             "torch")}
    emit(bench="mlp_step", impl="ratios", metric="step_time_ratio", value=ratios, unit="x",
         ratios_of_medians=ratios_of_medians, ratios_of_best_rounds=ratios_best,
         note="value: median over rounds of the per-round ratio (both timed in the same "
              "round)",
         targets_met={"aiograd_backward_sync<=1.10x_numpy":
                      ratios["aiograd_backward_sync/numpy"] <= 1.10,
                      "aiograd_await_backward<=1.10x_numpy":
                      ratios["aiograd_await_backward/numpy"] <= 1.10},
         wall_s=round(perf_counter() - t_start, 1))


if __name__ == "__main__":
    main()
