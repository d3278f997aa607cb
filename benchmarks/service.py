"""An asyncio service: heartbeat latency and request throughput during training requests.

The service runs two kinds of coroutine on one asyncio loop:

- a heartbeat: ``await asyncio.sleep(0.001)`` in a loop; each wake records
  lag = actual wake time - (time before the sleep + 1 ms). Lag is what any
  other coroutine of the service (an HTTP handler, a health check) would
  wait beyond its own schedule;
- 64 request workers that together serve ROUNDS x ROUND_REQUESTS requests per
  implementation. A request is a
  forward + backward of an MLP 64-128-128-10 (ReLU, softmax cross-entropy,
  batch 32, float32) on its own input batch; the weights are shared by all
  requests (their ``.grad`` accumulates, the same for every implementation).
  Each worker yields to the loop (``await asyncio.sleep(0)``) between requests.
  The model is written once, with ``nn.functional`` (``linear``, ``relu``,
  ``cross_entropy``), and run with either library's.

Implementations of a request:

- ``aiograd``: the whole request (forward and ``backward_sync``) in
  ``await aiograd.offload(request)``: it runs on aiograd's CPU worker, the
  loop only hands it over and is woken when it is done (Note [Offloading]);
- ``torch_direct``: forward and ``loss.backward()`` called directly in the
  coroutine (blocks the loop for the whole request);
- ``torch_executor``: the whole request in ``loop.run_in_executor(None, ...)``
  (asyncio's default thread pool);
- ``aiograd_grad``: the forward on the loop, then ``await aiograd.grad(loss,
  params)`` (the pattern a service author writes first). Its graph is small
  (Note [Inline small graphs]), so its nodes run on the loop too, the passes
  taking turns in time slices (Note [Inline passes take turns]);
- ``aiograd_grad_deadline``: the same, with every odd client asking under
  ``anyio.move_on_after(DEADLINE_S)`` (Note [Deadlines]); reported: the
  latency p50/p99/max of those requests and the share that missed;
- ``aiograd_loop_forward`` (diagnostic): the forward on the loop, then
  ``await loss.backward()``. Python code holds the GIL, so the forward
  passes of the 64 ready requests run back to back on the loop and the
  heartbeat waits for all of them: why a service should offload its model
  code.

BLAS/OpenMP/PyTorch intra-op threads are pinned to 1 by default (``--threads N``
to change; ``--threads default`` leaves the libraries' own setting): the
concurrency comes from the requests, and multi-threaded BLAS on these small
products, next to the loop and worker threads on 2 cores, mostly waits for
its own threads to be scheduled.

The implementations take turns: each of ROUNDS rounds serves ROUND_REQUESTS
requests with every implementation (the order rotates), so a slow phase of
the machine (this VM's vCPUs change speed for seconds at a time) hits all of
them alike, as in the other benchmarks' interleaved rounds.

Reported per implementation: throughput (requests over the seconds of all its
rounds), the per-round throughputs, heartbeat lag p50 / p99 / max over all its
rounds, request latency p50 / p99 / max, the spread of requests completed per
client (``per_client_min``/``max``: a starved client completes few), and per
request the loop thread's CPU time, the whole process's CPU time (every thread:
less machine-load dependent than throughput), and the heartbeats it served (a loop
that keeps its heartbeat on time runs more of them per request than one its
requests starve).
An ``idle`` line gives the heartbeat lag of the same loop with nothing else running
(the timer floor). ``settled_lag_p99_ms``/``max``: the lag of the heartbeats that
went to sleep after every client had its first response (a diagnostic: at the start
of a round all 64 clients are ready at once, and with the forward on the loop one
loop pass runs all 64 forwards); ``start_lag_ms``: per round, the largest lag of the
heartbeats that went to sleep before then (that first loop pass), its median and max
over the rounds. A ``numpy_herd`` line gives the floor of that first loop pass,
measured once per round in the same run: the 64 clients' forwards back to back in
plain NumPy (``numpy_functional``: the same model code, no autograd), after the same
10 ms idle a round starts with. Throughput ratios are the median of the per-round ratios
(``_common.round_ratio``); the ratio of the totals is printed too.

``--round-requests N`` sets the requests per round (default ROUND_REQUESTS; see
``round_requests``). ``--scenario issue21`` runs only the implementations of issue
21's targets, in the same rounds: ``torch_executor``, ``aiograd_grad`` (forward on
the loop, then ``await aiograd.grad``) and ``aiograd_grad_deadline``.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import sys
import time
from typing import NamedTuple

import anyio
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    configure_threads,
    emit,
    env_line,
    median,
    mlp_params,
    perf_counter,
    round_ratio,
)

SIZES = (64, 128, 128, 10)
BATCH = 32
CONCURRENCY = 64
ROUNDS = 5
ROUND_REQUESTS = 400
WARMUP_REQUESTS = 64
HEARTBEAT_S = 0.001
IDLE_S = 1.0
BUDGET_S = 3.0  # per implementation and round: stop handing out requests after this
DEADLINE_S = 0.25  # the deadline of the deadline variant's deadline requests
#: ``--scenario issue21``: the implementations of issue 21's targets, same rounds
ISSUE21 = ("torch_executor", "aiograd_grad", "aiograd_grad_deadline")


def scenario_impls() -> tuple[str, ...] | None:
    """The implementations ``--scenario`` selects (None: all of them)."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        value = (argv[i + 1] if arg == "--scenario" and i + 1 < len(argv)
                 else arg.split("=", 1)[1] if arg.startswith("--scenario=") else None)
        if value is None:
            continue
        if value != "issue21":
            raise SystemExit(f"service.py: unknown --scenario {value!r} (known: issue21)")
        return ISSUE21
    return None


def round_requests() -> int:
    """``--round-requests N``: requests per round and implementation (default
    ROUND_REQUESTS). Longer rounds are closer to sustained load: the 64 clients start
    together once per round, and with the forward on the loop that first loop pass
    runs 64 forwards in a row (see ``settled_lag``)."""
    argv = sys.argv[1:]
    if "--round-requests" not in argv:
        return ROUND_REQUESTS
    i = argv.index("--round-requests")
    try:
        n = int(argv[i + 1])
    except (IndexError, ValueError):
        n = 0
    if n <= 0:
        raise SystemExit("service.py: --round-requests needs a positive integer")
    return n


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    params = mlp_params(SIZES, rng)
    xs = [rng.standard_normal((BATCH, SIZES[0])).astype(np.float32) for _ in range(CONCURRENCY)]
    ys = [rng.integers(0, SIZES[-1], BATCH).astype(np.int64) for _ in range(CONCURRENCY)]
    return params, xs, ys


def forward(params, x, y, F):
    """The same code for both libraries: ``F`` is torch's or aiograd's ``nn.functional``."""
    W1, b1, W2, b2, W3, b3 = params
    h = F.relu(F.linear(x, W1, b1))
    h = F.relu(F.linear(h, W2, b2))
    return F.cross_entropy(F.linear(h, W3, b3), y)


class numpy_functional:  # noqa: N801  (stands where a library's nn.functional does)
    """``linear``, ``relu`` and ``cross_entropy`` (mean) in plain NumPy, for ``forward``:
    the model with no autograd at all (``numpy_herd``)."""

    @staticmethod
    def linear(x, w, b):
        out = x @ w.T
        out += b
        return out

    @staticmethod
    def relu(x):
        return np.maximum(x, 0)

    @staticmethod
    def cross_entropy(z, y):
        shifted = z - z.max(axis=1, keepdims=True)
        log_sums = np.log(np.exp(shifted).sum(axis=1))
        return (log_sums - shifted[np.arange(len(y)), y]).mean()


async def numpy_herd(params, xs, ys) -> float:
    """Seconds of the 64 clients' forwards back to back in NumPy, after the 10 ms idle
    that ``serve`` starts a round with: the least the first loop pass of a round costs
    when the forward runs on the loop, whatever the autograd library."""
    await asyncio.sleep(0.01)
    t0 = perf_counter()
    for x, y in zip(xs, ys):
        forward(params, x, y, numpy_functional)
    return perf_counter() - t0


def percentile(sorted_xs: list[float], q: float) -> float:
    if not sorted_xs:
        return float("nan")
    k = min(len(sorted_xs) - 1, max(0, int(round(q / 100 * (len(sorted_xs) - 1)))))
    return sorted_xs[k]


async def heartbeat(lags: list[float], stop: asyncio.Event,
                    slept: list[float] | None = None) -> None:
    """Append each wake's lag to ``lags`` (and when it went to sleep to ``slept``)."""
    while not stop.is_set():
        start = perf_counter()
        await asyncio.sleep(HEARTBEAT_S)
        lags.append(perf_counter() - start - HEARTBEAT_S)
        if slept is not None:
            slept.append(start)


class Served(NamedTuple):
    """One round of one implementation."""

    done: int  # requests served
    seconds: float
    lags: list[float]  # of the heartbeat, in seconds
    settled_lags: list[float]  # of heartbeats that slept after every client had a response
    start_lag: float  # the largest lag of the others (the round's first loop pass), or 0
    loop_cpu: float  # CPU seconds of the loop's thread
    process_cpu: float  # CPU seconds of the whole process (every thread)
    latencies: list[float]  # of every request, in seconds
    per_client: list[int]  # requests served by each of the CONCURRENCY clients
    deadline_latencies: list[float]  # of the requests made under a deadline
    missed: int  # deadline requests that missed it


async def serve(handle, total: int, budget_s: float = 1e9) -> Served:
    """Run ``total`` requests through CONCURRENCY workers with a heartbeat.

    Stops handing out requests after ``budget_s`` seconds (a slow
    implementation then serves fewer).
    """
    lags: list[float] = []
    slept: list[float] = []
    stop = asyncio.Event()
    hb = asyncio.create_task(heartbeat(lags, stop, slept))
    await asyncio.sleep(0.01)  # the heartbeat is running before the first request
    lags.clear()
    slept.clear()
    settled_at = math.inf  # when the last client got its first response
    answered = 0
    counter = iter(range(total))
    done = 0
    t0 = perf_counter()
    cpu0 = time.thread_time()
    process0 = time.process_time()
    deadline = t0 + budget_s

    latencies: list[float] = []
    per_client = [0] * CONCURRENCY
    deadline_latencies: list[float] = []
    missed = 0

    async def worker(slot: int) -> None:
        nonlocal done, missed, settled_at, answered
        for _ in counter:
            if perf_counter() > deadline:
                break
            start = perf_counter()
            outcome = await handle(slot)  # None, or "hit"/"miss" for a deadline request
            latency = perf_counter() - start
            latencies.append(latency)
            if outcome is not None:
                deadline_latencies.append(latency)
                missed += outcome == "miss"
            per_client[slot] += 1
            if per_client[slot] == 1:
                answered += 1
                if answered == CONCURRENCY:
                    settled_at = perf_counter()
            done += 1
            await asyncio.sleep(0)

    await asyncio.gather(*(worker(s) for s in range(CONCURRENCY)))
    elapsed = perf_counter() - t0
    loop_cpu = time.thread_time() - cpu0
    process_cpu = time.process_time() - process0
    stop.set()
    await hb
    settled = [lag for lag, start in zip(lags, slept) if start >= settled_at]
    start_lag = max((lag for lag, start in zip(lags, slept) if start < settled_at), default=0.0)
    return Served(done, elapsed, lags, settled, start_lag, loop_cpu, process_cpu, latencies,
                  per_client, deadline_latencies, missed)


def lag_stats(lags: list[float]) -> dict[str, float]:
    s = sorted(lags)
    return {"lag_p50_ms": round(percentile(s, 50) * 1e3, 3),
            "lag_p99_ms": round(percentile(s, 99) * 1e3, 3),
            "lag_max_ms": round(s[-1] * 1e3, 3) if s else float("nan"),
            "heartbeats": len(s)}


def latency_stats(latencies: list[float], prefix: str = "latency") -> dict[str, float]:
    s = sorted(latencies)
    return {f"{prefix}_p50_ms": round(percentile(s, 50) * 1e3, 3),
            f"{prefix}_p99_ms": round(percentile(s, 99) * 1e3, 3),
            f"{prefix}_max_ms": round(s[-1] * 1e3, 3) if s else float("nan")}


def make_handlers():
    import torch
    import torch.nn.functional as TF

    import aiograd
    import aiograd.nn.functional as AF

    params_np, xs_np, ys_np = make_data()
    a_params = [aiograd.tensor(p.copy(), requires_grad=True) for p in params_np]
    a_xs = [aiograd.tensor(x) for x in xs_np]
    a_ys = [aiograd.tensor(y) for y in ys_np]
    t_params = [torch.tensor(p.copy(), requires_grad=True) for p in params_np]
    t_xs = [torch.tensor(x) for x in xs_np]
    t_ys = [torch.tensor(y) for y in ys_np]

    def aiograd_request(slot: int) -> None:
        aiograd.backward_sync(forward(a_params, a_xs[slot], a_ys[slot], AF))

    async def h_aiograd(slot: int) -> None:
        await aiograd.offload(aiograd_request, slot)

    def torch_request(slot: int) -> None:
        forward(t_params, t_xs[slot], t_ys[slot], TF).backward()

    async def h_torch_direct(slot: int) -> None:
        torch_request(slot)

    async def h_torch_executor(slot: int) -> None:
        await asyncio.get_running_loop().run_in_executor(None, torch_request, slot)

    async def h_aiograd_loop_forward(slot: int) -> None:
        loss = forward(a_params, a_xs[slot], a_ys[slot], AF)
        await loss.backward()

    async def h_aiograd_grad(slot: int) -> None:
        await aiograd.grad(forward(a_params, a_xs[slot], a_ys[slot], AF), a_params)

    async def h_aiograd_grad_deadline(slot: int) -> str | None:
        """Odd clients ask under a deadline (Note [Deadlines]): "hit" or "miss"."""
        if slot % 2 == 0:
            await h_aiograd_grad(slot)
            return None
        with anyio.move_on_after(DEADLINE_S) as scope:
            await h_aiograd_grad(slot)
        return "miss" if scope.cancelled_caught else "hit"

    return {"aiograd": h_aiograd, "torch_direct": h_torch_direct,
            "torch_executor": h_torch_executor,
            "aiograd_grad": h_aiograd_grad,
            "aiograd_grad_deadline": h_aiograd_grad_deadline,
            "aiograd_loop_forward (diagnostic)": h_aiograd_loop_forward}


async def run_all() -> dict[str, dict]:
    results = {}
    # the timer floor: the heartbeat alone
    lags: list[float] = []
    stop = asyncio.Event()
    hb = asyncio.create_task(heartbeat(lags, stop))
    await asyncio.sleep(IDLE_S)
    stop.set()
    await hb
    emit(bench="service", impl="idle", metric="heartbeat_lag", value=lag_stats(lags)["lag_p99_ms"],
         unit="ms (p99)", **lag_stats(lags), note="heartbeat alone: the loop's timer floor")

    handlers = make_handlers()
    only = scenario_impls()
    if only is not None:
        handlers = {name: handlers[name] for name in only}
    for handle in handlers.values():
        await serve(handle, WARMUP_REQUESTS)
    names = list(handlers)
    per_round = round_requests()
    rounds: dict[str, list[Served]] = {name: [] for name in names}
    numpy_data = make_data()
    herds: list[float] = []
    for r in range(ROUNDS):
        gc.collect()
        herds.append(await numpy_herd(*numpy_data))
        for name in names[r % len(names):] + names[:r % len(names)]:
            gc.collect()
            rounds[name].append(await serve(handlers[name], per_round, BUDGET_S))
    herds.sort()
    emit(bench="service", impl="numpy_herd", metric="herd", value=round(median(herds) * 1e3, 3),
         unit="ms (median over rounds)", min_ms=round(herds[0] * 1e3, 3),
         max_ms=round(herds[-1] * 1e3, 3),
         note=f"{CONCURRENCY} NumPy forwards of the model back to back, once per round: the "
              "floor of a round's first loop pass with the forward on the loop (start_lag_ms)")
    for name in names:
        done = sum(rnd.done for rnd in rounds[name])
        elapsed = sum(rnd.seconds for rnd in rounds[name])
        loop_cpu = sum(rnd.loop_cpu for rnd in rounds[name])
        process_cpu = sum(rnd.process_cpu for rnd in rounds[name])
        stats = lag_stats([lag for rnd in rounds[name] for lag in rnd.lags])
        settled = lag_stats([lag for rnd in rounds[name] for lag in rnd.settled_lags])
        start_lags = sorted(rnd.start_lag for rnd in rounds[name])
        per_round = [rnd.done / rnd.seconds for rnd in rounds[name]]
        latency = latency_stats([x for rnd in rounds[name] for x in rnd.latencies])
        clients = [sum(rnd.per_client[c] for rnd in rounds[name]) for c in range(CONCURRENCY)]
        extra = {}
        timed = [x for rnd in rounds[name] for x in rnd.deadline_latencies]
        if timed:
            extra = {**latency_stats(timed, "deadline_latency"),
                     "deadline_miss_rate": round(
                         sum(rnd.missed for rnd in rounds[name]) / len(timed), 4),
                     "deadline_ms": DEADLINE_S * 1e3}
        results[name] = {"throughput": done / elapsed, "per_round": per_round, **stats,
                         **latency}
        emit(bench="service", impl=name, metric="throughput", value=round(done / elapsed, 2),
             unit="requests/s", seconds=round(elapsed, 3), requests=done,
             per_round=[round(t, 1) for t in per_round], concurrency=CONCURRENCY, **stats,
             **latency, per_client_min=min(clients), per_client_max=max(clients), **extra,
             settled_lag_p99_ms=settled["lag_p99_ms"], settled_lag_max_ms=settled["lag_max_ms"],
             start_lag_ms=round(median(start_lags) * 1e3, 3),
             start_lag_max_ms=round(start_lags[-1] * 1e3, 3),
             loop_cpu_us_per_request=round(loop_cpu / done * 1e6, 1),
             process_cpu_us_per_request=round(process_cpu / done * 1e6, 1),
             heartbeats_per_request=round(stats["heartbeats"] / done, 2))
    return results


def main() -> None:
    t_start = perf_counter()
    configure_threads(1)
    env_line("service")
    res = asyncio.run(run_all())
    e = res["torch_executor"]
    pairs = {f"{x}/{y}": (res[x], res[y]) for x, y in (
        ("aiograd", "torch_executor"), ("aiograd", "torch_direct"),
        ("torch_executor", "torch_direct"), ("aiograd_grad", "torch_executor"))
        if x in res and y in res}
    ratios = {k: round(round_ratio(x["per_round"], y["per_round"]), 3)
              for k, (x, y) in pairs.items()}
    targets = {f"{name}_{target}": met for name in ("aiograd", "aiograd_grad") if name in res
               for r in (res[name],) for target, met in (
                   ("lag_p99<=5ms", r["lag_p99_ms"] <= 5.0),
                   ("lag_max<=20ms", r["lag_max_ms"] <= 20.0),
                   ("latency_p99<=torch_executor", r["latency_p99_ms"] <= e["latency_p99_ms"]),
                   ("latency_max<=2x_own_p99", r["latency_max_ms"] <= 2 * r["latency_p99_ms"]),
                   ("throughput>=torch_executor", ratios[f"{name}/torch_executor"] >= 1))}
    emit(bench="service", impl="ratios", metric="throughput_ratio", value=ratios, unit="x",
         ratios_of_totals={k: round(x["throughput"] / y["throughput"], 3)
                           for k, (x, y) in pairs.items()},
         targets_met=targets,
         wall_s=round(perf_counter() - t_start, 1))


if __name__ == "__main__":
    main()
