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
is timed (the HIPS fused variant aside). Repeats are interleaved round-robin
over the implementations (fair under drifting machine load); medians. A
ratio is the median over rounds of the two implementations' ratio in that
round (``_common.round_ratio``).
"""

from __future__ import annotations

import asyncio
import gc
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
    perf_counter,
    round_ratio,
)

CHAIN_STEPS = 2000
CHAIN_NODES = 2 * CHAIN_STEPS
BRANCHES = 64
OPS_PER_BRANCH = 30
LADDER_NODES = BRANCHES * OPS_PER_BRANCH + (BRANCHES - 1)
WARMUP = 2
REPEATS = 25
BUDGET_S = 18.0  # per graph, all impls; stops early after >= 5 rounds

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
results: dict[tuple[str, str], float] = {}  # median per-node us
results_min: dict[tuple[str, str], float] = {}  # best-repeat per-node us
per_round: dict[tuple[str, str], list[float]] = {}  # backward seconds, round by round


def report(graph: str, impl: str, bwd: list[float], fwd: list[float] | None, nodes: int,
           **extra) -> None:
    per_node_us = median(bwd) / nodes * 1e6
    per_round[(graph, impl)] = bwd
    results[(graph, impl)] = per_node_us
    results_min[(graph, impl)] = min(bwd) / nodes * 1e6
    emit(bench="engine_overhead", graph=graph, impl=impl, metric="backward_per_node",
         value=round(per_node_us, 4), unit="us", nodes=nodes,
         backward_ms=round(median(bwd) * 1e3, 3),
         backward_ms_min=round(min(bwd) * 1e3, 3), repeats=len(bwd),
         forward_per_node_us=None if fwd is None else round(median(fwd) / nodes * 1e6, 4),
         **extra)


def _timed(build_fwd, backward):
    """Build the graph (forward timed separately), collect garbage, time the backward."""
    t0 = perf_counter()
    state = build_fwd()
    t1 = perf_counter()
    gc.collect()
    t2 = perf_counter()
    backward(state)
    t3 = perf_counter()
    del state
    return {"forward": t1 - t0, "backward": t3 - t2}


def impls_for(graph: str, aiograd, loop):
    import autograd
    import autograd.numpy as anp
    import torch

    build, _ = GRAPHS[graph]
    a_tanh = lambda t: t.tanh()  # noqa: E731

    def aiograd_sync():
        def fwd():
            x = aiograd.tensor(X0.copy(), requires_grad=True)
            return x, build(x, a_tanh), aiograd.ones(4)
        return _timed(fwd, lambda s: aiograd.backward_sync(s[1], s[2]))

    def aiograd_async():
        async def go():
            t0 = perf_counter()
            x = aiograd.tensor(X0.copy(), requires_grad=True)
            y = build(x, a_tanh)
            g = aiograd.ones(4)
            t1 = perf_counter()
            gc.collect()
            t2 = perf_counter()
            await aiograd.backward(y, g)
            t3 = perf_counter()
            return {"forward": t1 - t0, "backward": t3 - t2}
        return loop.run_until_complete(go())

    def torch_():
        def fwd():
            x = torch.tensor(X0.copy(), requires_grad=True)
            return x, build(x, torch.tanh), torch.ones(4)
        return _timed(fwd, lambda s: s[1].backward(s[2]))

    ones = np.ones(4, dtype=np.float32)

    def hips_vjp():
        def fwd():
            vjp, _ = autograd.make_vjp(lambda x: build(x, anp.tanh))(X0.copy())
            return vjp
        return _timed(fwd, lambda vjp: vjp(ones))

    g = autograd.grad(lambda x: anp.sum(build(x, anp.tanh)))

    def hips_grad_total():
        x = X0.copy()
        t0 = perf_counter()
        g(x)
        return {"total": perf_counter() - t0}

    def numpy_forward():
        x = X0.copy()
        t0 = perf_counter()
        np.sum(build(x, np.tanh))
        return {"total": perf_counter() - t0}

    return {"aiograd_backward_sync": aiograd_sync, "aiograd_await_backward": aiograd_async,
            "torch": torch_, "hips_vjp": hips_vjp, "hips_grad_total": hips_grad_total,
            "numpy_forward": numpy_forward}


def run_graph(graph: str, aiograd, loop) -> None:
    nodes = GRAPHS[graph][1]
    t = interleaved(impls_for(graph, aiograd, loop), warmup=WARMUP, rounds=REPEATS,
                    budget_s=BUDGET_S, collect=False)
    for impl in ("aiograd_backward_sync", "aiograd_await_backward", "torch"):
        report(graph, impl, t[impl]["backward"], t[impl]["forward"], nodes)
    report(graph, "hips_vjp", t["hips_vjp"]["backward"], t["hips_vjp"]["forward"], nodes,
           note="make_vjp: traced forward untimed; vjp(ones) timed")
    fused = t["hips_grad_total"]["total"]
    plain = median(t["numpy_forward"]["total"])
    report(graph, "hips_fused", [max(0.0, f - plain) for f in fused], None, nodes,
           note="grad(f)(x) minus median plain-numpy f(x); tracing overhead stays in",
           fused_ms=round(median(fused) * 1e3, 3), plain_numpy_forward_ms=round(plain * 1e3, 3))


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
        vjp, _ = autograd.make_vjp(lambda v, f=build: f(v, anp.tanh))(X0.copy())
        gh = vjp(np.ones(4, dtype=np.float32))
        ok = (np.allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4)
              and np.allclose(gh, xt.grad.numpy(), rtol=1e-4))
        emit(bench="engine_overhead", graph=graph, impl="all", metric="gradients_match",
             value=bool(ok), unit=None)


def main() -> None:
    t_start = perf_counter()
    configure_threads(None)
    env_line("engine_overhead")
    import aiograd

    have_tanh = hasattr(aiograd.Tensor, "tanh")
    if not have_tanh:
        emit(bench="engine_overhead", impl="aiograd", metric="missing_op", value="Tensor.tanh",
             unit=None, note="ladder graph cannot be built for aiograd yet")
        GRAPHS.pop("ladder")
    check_same_gradients(aiograd)
    loop = asyncio.new_event_loop()
    try:
        for graph in GRAPHS:
            run_graph(graph, aiograd, loop)
    finally:
        loop.close()

    ratios, ratios_of_medians, ratios_min = {}, {}, {}
    for graph in GRAPHS:
        for impl in ("aiograd_backward_sync", "aiograd_await_backward"):
            for peer in ("torch", "hips_vjp", "hips_fused"):
                key = f"{graph}.{impl}/{peer}"
                ratios[key] = round(round_ratio(per_round[(graph, impl)],
                                                per_round[(graph, peer)]), 3)
                ratios_of_medians[key] = round(results[(graph, impl)]
                                               / results[(graph, peer)], 3)
                ratios_min[key] = round(results_min[(graph, impl)]
                                        / max(results_min[(graph, peer)], 1e-12), 3)
    targets = {
        f"{graph}.{impl}": {
            "le_0.8x_torch": ratios[f"{graph}.{impl}/torch"] <= 0.8,
            "faster_than_hips_vjp": ratios[f"{graph}.{impl}/hips_vjp"] < 1.0,
            "faster_than_hips_fused": ratios[f"{graph}.{impl}/hips_fused"] < 1.0,
        }
        for graph in GRAPHS for impl in ("aiograd_backward_sync", "aiograd_await_backward")
    }
    emit(bench="engine_overhead", impl="ratios", metric="per_node_ratio", value=ratios, unit="x",
         ratios_of_medians=ratios_of_medians, ratios_of_best_repeats=ratios_min,
         targets_met=targets,
         note="value: median over rounds of the per-round ratio (both timed in the same "
              "round); ratios_of_medians: of the per-implementation medians; "
              "ratios_of_best_repeats: of minima",
         wall_s=round(perf_counter() - t_start, 1))


if __name__ == "__main__":
    main()
