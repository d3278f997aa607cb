"""Engine overhead: backward time per node on graphs of tiny ops.

Graphs (float32[4] leaf ``x``; the backward is seeded with ones(4), so no
reduction op is needed):

- chain:  ``y = x``; 2,000 x ``y = y * 1.0001 + 0.0001``  -> 4,000 op nodes.
- ladder: 64 branches; branch i is ``b = x * c_i`` followed by 29 ops cycling
  ``* 1.0001``, ``+ 0.0001``, ``tanh``; the branch ends are summed with 63
  ``+``  -> 64 * 30 + 63 = 1,983 op nodes (the branches all meet at ``x``).

per-node time = backward time / op-node count (the same count for every
implementation; AccumulateGrad/root nodes are not counted).

Implementations:

- aiograd, ``aiograd.backward_sync(y, ones)`` (the calling thread runs the nodes)
- aiograd, ``await aiograd.backward(y, ones)`` inside ``asyncio.run`` (nodes run
  on the CPU worker thread; includes the loop round trip)
- PyTorch, ``y.backward(ones)``
- HIPS autograd, two ways:
  * ``hips_fused``: HIPS has no separate backward call in ``grad(f)(x)``; it
    traces the forward and runs the backward in one call. As the benchmark
    brief asks, we time ``grad(lambda x: sum(f(x)))(x)`` and subtract the time
    of the same function on plain NumPy arrays (untraced forward). This
    *over*-states HIPS's backward: tracing (boxing every value) makes its
    forward slower than plain NumPy, and that extra is left in.
  * ``hips_vjp``: ``vjp, _ = autograd.make_vjp(f)(x)`` traces the forward
    (untimed), then ``vjp(ones)`` is timed: the backward pass alone, the
    like-for-like figure.

Every repeat rebuilds the graph outside the clock; only the backward call
is timed (the HIPS fused variant aside). Medians over the repeats.
"""

from __future__ import annotations

import asyncio
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import emit, env_line, median, perf_counter, summary, time_repeats  # noqa: E402

CHAIN_STEPS = 2000
CHAIN_NODES = 2 * CHAIN_STEPS
BRANCHES = 64
OPS_PER_BRANCH = 30
LADDER_NODES = BRANCHES * OPS_PER_BRANCH + (BRANCHES - 1)
WARMUP = 2
REPEATS = 9
BUDGET_S = 4.0  # per (impl, graph); stops early after >= 3 repeats

X0 = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)


def chain(x, tanh):  # noqa: ARG001  (same signature as ladder)
    y = x
    for _ in range(CHAIN_STEPS):
        y = y * 1.0001 + 0.0001
    return y


def ladder(x, tanh):
    ends = []
    for i in range(BRANCHES):
        b = x * (1.0 + 0.001 * i)
        for j in range(OPS_PER_BRANCH - 1):
            k = j % 3
            if k == 0:
                b = b * 1.0001
            elif k == 1:
                b = b + 0.0001
            else:
                b = tanh(b)
        ends.append(b)
    s = ends[0]
    for e in ends[1:]:
        s = s + e
    return s


GRAPHS = {"chain": (chain, CHAIN_NODES), "ladder": (ladder, LADDER_NODES)}
results: dict[tuple[str, str], float] = {}


def report(graph: str, impl: str, bwd: list[float], fwd: list[float] | None, nodes: int,
           **extra) -> None:
    per_node_us = median(bwd) / nodes * 1e6
    results[(graph, impl)] = per_node_us
    emit(bench="engine_overhead", graph=graph, impl=impl, metric="backward_per_node",
         value=round(per_node_us, 4), unit="us", nodes=nodes,
         backward_ms=round(median(bwd) * 1e3, 3),
         backward_ms_min=round(min(bwd) * 1e3, 3), repeats=len(bwd),
         forward_per_node_us=None if fwd is None else round(median(fwd) / nodes * 1e6, 4),
         **extra)


def run_aiograd_sync(aiograd) -> None:
    tanh = lambda t: t.tanh()  # noqa: E731
    for graph, (build, nodes) in GRAPHS.items():
        fwd: list[float] = []

        def setup():
            x = aiograd.tensor(X0.copy(), requires_grad=True)
            t0 = perf_counter()
            y = build(x, tanh)
            fwd.append(perf_counter() - t0)
            return x, y, aiograd.ones(4)

        bwd = time_repeats(setup, lambda s: aiograd.backward_sync(s[1], s[2]),
                           warmup=WARMUP, repeats=REPEATS, budget_s=BUDGET_S)
        report(graph, "aiograd_backward_sync", bwd, fwd[WARMUP:], nodes)


def run_aiograd_async(aiograd) -> None:
    tanh = lambda t: t.tanh()  # noqa: E731

    async def main() -> None:
        for graph, (build, nodes) in GRAPHS.items():
            bwd: list[float] = []
            start = perf_counter()
            for rep in range(WARMUP + REPEATS):
                x = aiograd.tensor(X0.copy(), requires_grad=True)
                y = build(x, tanh)
                g = aiograd.ones(4)
                import gc
                gc.collect()
                t0 = perf_counter()
                await aiograd.backward(y, g)
                dt = perf_counter() - t0
                del x, y
                if rep >= WARMUP:
                    bwd.append(dt)
                    if len(bwd) >= 3 and perf_counter() - start > BUDGET_S:
                        break
            report(graph, "aiograd_await_backward", bwd, None, nodes)

    asyncio.run(main())


def run_torch() -> None:
    import torch

    for graph, (build, nodes) in GRAPHS.items():
        fwd: list[float] = []

        def setup():
            x = torch.tensor(X0.copy(), requires_grad=True)
            t0 = perf_counter()
            y = build(x, torch.tanh)
            fwd.append(perf_counter() - t0)
            return x, y, torch.ones(4)

        bwd = time_repeats(setup, lambda s: s[1].backward(s[2]),
                           warmup=WARMUP, repeats=REPEATS, budget_s=BUDGET_S)
        report(graph, "torch", bwd, fwd[WARMUP:], nodes)


def run_hips() -> None:
    import autograd
    import autograd.numpy as anp

    for graph, (build, nodes) in GRAPHS.items():
        # (1) fused grad(f)(x) minus the plain-NumPy forward of the same function
        g = autograd.grad(lambda x: anp.sum(build(x, anp.tanh)))
        fused = time_repeats(lambda: X0.copy(), g, warmup=WARMUP, repeats=REPEATS,
                             budget_s=BUDGET_S)
        plain = time_repeats(lambda: X0.copy(), lambda x: np.sum(build(x, np.tanh)),
                             warmup=WARMUP, repeats=REPEATS, budget_s=BUDGET_S)
        bwd_est = [max(0.0, f - median(plain)) for f in fused]
        report(graph, "hips_fused", bwd_est, None, nodes,
               note="median(grad(f)(x)) - median(plain numpy f(x)); includes tracing overhead",
               fused_ms=round(median(fused) * 1e3, 3),
               plain_numpy_forward_ms=round(median(plain) * 1e3, 3))

        # (2) make_vjp: traced forward outside the clock, backward alone inside
        fwd: list[float] = []

        def setup():
            t0 = perf_counter()
            vjp, _ = autograd.make_vjp(lambda x: build(x, anp.tanh))(X0.copy())
            fwd.append(perf_counter() - t0)
            return vjp

        ones = np.ones(4, dtype=np.float32)
        bwd = time_repeats(setup, lambda vjp: vjp(ones), warmup=WARMUP, repeats=REPEATS,
                           budget_s=BUDGET_S)
        report(graph, "hips_vjp", bwd, fwd[WARMUP:], nodes,
               note="make_vjp: traced forward untimed; vjp(ones) timed")


def check_same_gradients(aiograd) -> None:
    """Sanity: every implementation computes the same gradient."""
    import autograd
    import autograd.numpy as anp
    import torch

    for graph, (build, _) in GRAPHS.items():
        x = aiograd.tensor(X0.copy(), requires_grad=True)
        aiograd.backward_sync(build(x, lambda t: t.tanh()), aiograd.ones(4))
        xt = torch.tensor(X0.copy(), requires_grad=True)
        build(xt, torch.tanh).backward(torch.ones(4))
        vjp, _ = autograd.make_vjp(lambda v: build(v, anp.tanh))(X0.copy())
        gh = vjp(np.ones(4, dtype=np.float32))
        ok = (np.allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4)
              and np.allclose(gh, xt.grad.numpy(), rtol=1e-4))
        emit(bench="engine_overhead", graph=graph, impl="all", metric="gradients_match",
             value=bool(ok), unit=None)


def main() -> None:
    t_start = perf_counter()
    env_line("engine_overhead")
    import aiograd

    have_tanh = hasattr(aiograd.Tensor, "tanh")
    if not have_tanh:
        emit(bench="engine_overhead", impl="aiograd", metric="missing_op", value="Tensor.tanh",
             unit=None, note="ladder graph cannot be built for aiograd yet")
        GRAPHS.pop("ladder")
    check_same_gradients(aiograd)
    run_aiograd_sync(aiograd)
    run_aiograd_async(aiograd)
    run_torch()
    run_hips()

    ratios = {}
    for graph in GRAPHS:
        t = results[(graph, "torch")]
        for impl in ("aiograd_backward_sync", "aiograd_await_backward"):
            a = results[(graph, impl)]
            ratios[f"{graph}.{impl}/torch"] = round(a / t, 3)
            ratios[f"{graph}.{impl}/hips_vjp"] = round(a / results[(graph, "hips_vjp")], 3)
            ratios[f"{graph}.{impl}/hips_fused"] = round(a / results[(graph, "hips_fused")], 3)
    targets = {
        f"{graph}.{impl}": {
            "le_0.8x_torch": ratios[f"{graph}.{impl}/torch"] <= 0.8,
            "faster_than_hips_vjp": ratios[f"{graph}.{impl}/hips_vjp"] < 1.0,
            "faster_than_hips_fused": ratios[f"{graph}.{impl}/hips_fused"] < 1.0,
        }
        for graph in GRAPHS for impl in ("aiograd_backward_sync", "aiograd_await_backward")
    }
    emit(bench="engine_overhead", impl="ratios", metric="per_node_ratio", value=ratios, unit="x",
         targets_met=targets, wall_s=round(perf_counter() - t_start, 1))


if __name__ == "__main__":
    main()
