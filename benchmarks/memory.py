"""Peak memory of one deep-MLP training step (forward + backward, no optimizer).

Model: 10 Linear layers, float32, batch 256: nine 1024->1024 layers with ReLU
and a last 1024->10 layer, softmax cross-entropy (mean). ``y = x @ W.T + b``.
Weights (~37.8 MB) and the input exist before the step and are not counted;
the step's peak *above* that baseline is reported. It includes the parameter
gradients the step leaves behind (~37.8 MB, the same for every
implementation; reported as ``retained``) plus activations and temporaries.

Two measurement methods:

1. tracemalloc (the key figure): NumPy reports every array buffer to
   tracemalloc, so ``tracemalloc.get_traced_memory()`` peak minus the
   baseline is the step's peak of Python objects + array data. Used for
   - ``numpy_floor``: hand-written forward/backward that saves only what it
     needs (the ReLU outputs, in place) and frees each saved activation as the
     backward passes its layer: the floor;
   - ``aiograd_backward_sync`` and ``aiograd_await_backward``.
   tracemalloc cannot see PyTorch's allocations (its CPU allocator does not
   report to it), so PyTorch gets no tracemalloc figure.
2. peak RSS (all three, PyTorch included): each implementation runs in a
   fresh child process with ``MALLOC_MMAP_THRESHOLD_=65536`` (every large
   buffer is its own mmap, returned to the OS when freed, so RSS follows the
   live bytes), the kernel's high-water mark is reset
   (``echo 5 > /proc/self/clear_refs``) just before the step, and
   ``VmHWM - VmRSS(before)`` is the step's peak. Coarser (page granularity,
   allocator caches, transparent huge pages) but comparable across
   implementations.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import configure_threads, emit, env_line, mlp_params, perf_counter  # noqa: E402

WIDTH = 1024
LAYERS = 10
CLASSES = 10
BATCH = 256
MB = 1024 * 1024


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    params = mlp_params([WIDTH] * LAYERS + [CLASSES], rng)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    return params, x, y


# ---- the NumPy floor ----

def numpy_step(params, x, y):
    """Forward + backward, freeing each saved activation once its layer's backward ran."""
    n = len(params) // 2
    acts = [x]  # acts[i] is the input of layer i
    for i in range(n - 1):
        h = acts[-1] @ params[2 * i].T
        h += params[2 * i + 1]
        np.maximum(h, 0, out=h)
        acts.append(h)
    del h  # only acts may hold the activations
    z = acts[-1] @ params[-2].T
    z += params[-1]
    z -= z.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    dz = z  # softmax, turned into the gradient in place
    dz[np.arange(len(y)), y] -= 1.0
    dz *= np.float32(1.0 / len(y))
    del z
    grads = [None] * len(params)
    for i in range(n - 1, -1, -1):
        a = acts.pop()
        grads[2 * i] = dz.T @ a
        grads[2 * i + 1] = dz.sum(axis=0)
        if i > 0:
            da = dz @ params[2 * i]
            da *= a > 0
            dz = da
        del a
    return grads


# ---- aiograd / torch ----

def tensor_step_forward(params, x, y, F):
    n = len(params) // 2
    h = x
    for i in range(n - 1):
        h = (h @ params[2 * i].transpose(0, 1) + params[2 * i + 1]).relu()
    z = h @ params[-2].transpose(0, 1) + params[-1]
    return F.cross_entropy(z, y)


def make_impl(name: str):
    """Return (run_step, reset) for implementation ``name``; data lives in the closure."""
    params_np, x_np, y_np = make_data()
    if name == "numpy_floor":
        state = {}

        def run():
            state["grads"] = numpy_step(params_np, x_np, y_np)

        def reset():
            state.clear()

        return run, reset
    if name.startswith("aiograd"):
        import aiograd
        import aiograd.nn.functional as F

        params = [aiograd.tensor(p, requires_grad=True) for p in params_np]
        x, y = aiograd.tensor(x_np), aiograd.tensor(y_np)
        if name == "aiograd_backward_sync":
            def run():
                aiograd.backward_sync(tensor_step_forward(params, x, y, F))
        else:
            loop = asyncio.new_event_loop()

            async def go():
                await aiograd.backward(tensor_step_forward(params, x, y, F))

            def run():
                loop.run_until_complete(go())

        def reset():
            for p in params:
                p.grad = None

        return run, reset
    if name == "torch":
        import torch
        import torch.nn.functional as F

        params = [torch.tensor(p, requires_grad=True) for p in params_np]
        x, y = torch.tensor(x_np), torch.tensor(y_np)

        def run():
            tensor_step_forward(params, x, y, F).backward()

        def reset():
            for p in params:
                p.grad = None

        return run, reset
    raise ValueError(name)


def measure_tracemalloc(name: str) -> dict:
    run, reset = make_impl(name)
    run()  # warm-up: engine threads, lazy imports, caches
    reset()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        t0 = perf_counter()
        run()
        dt = perf_counter() - t0
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    reset()
    return {"peak": peak - base, "retained": current - base, "seconds_under_tracemalloc": dt}


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def child_rss(name: str, threads: str) -> None:
    """In a fresh process: peak RSS of one step above the pre-step RSS."""
    configure_threads(None if threads == "default" else int(threads))
    run, reset = make_impl(name)
    run()
    reset()
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = _status("VmRSS")
    run()
    peak = _status("VmHWM")
    after = _status("VmRSS")
    print(json.dumps({"peak": peak - base, "retained": after - base}))


def measure_rss(name: str, threads: int | None) -> dict | str:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-rss", name,
                              "default" if threads is None else str(threads)],
                             env=env, capture_output=True, text=True, timeout=40, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError) as exc:
        return f"n/a ({type(exc).__name__}: {getattr(exc, 'stderr', '') or exc})"[:300]


def main() -> None:
    t_start = perf_counter()
    # the peak does not depend on the thread count; 1 avoids BLAS stalls on busy machines
    threads = configure_threads(1)
    env_line("memory")
    params_np, _, _ = make_data()
    weights = sum(p.nbytes for p in params_np)
    emit(bench="memory", impl="all", metric="model", value=round(weights / MB, 3), unit="MB",
         note="parameter bytes (not counted in peaks); the gradients left after the step "
              "are this size", layers=LAYERS, width=WIDTH, batch=BATCH)

    tm = {}
    for name in ("numpy_floor", "aiograd_backward_sync", "aiograd_await_backward"):
        r = tm[name] = measure_tracemalloc(name)
        emit(bench="memory", impl=name, metric="peak_tracemalloc",
             value=round(r["peak"] / MB, 3), unit="MB",
             retained_MB=round(r["retained"] / MB, 3),
             transient_MB=round((r["peak"] - r["retained"]) / MB, 3))
    emit(bench="memory", impl="torch", metric="peak_tracemalloc", value="n/a", unit="MB",
         note="PyTorch's CPU allocator does not report to tracemalloc; see peak_rss")

    rss = {}
    for name in ("numpy_floor", "aiograd_backward_sync", "torch"):
        r = rss[name] = measure_rss(name, threads)
        if isinstance(r, str):
            emit(bench="memory", impl=name, metric="peak_rss", value="n/a", unit="MB", reason=r)
        else:
            emit(bench="memory", impl=name, metric="peak_rss", value=round(r["peak"] / MB, 3),
                 unit="MB", retained_MB=round(r["retained"] / MB, 3),
                 method="fresh process, MALLOC_MMAP_THRESHOLD_=65536, VmHWM - VmRSS")

    floor = tm["numpy_floor"]["peak"]
    ratios = {
        "aiograd_backward_sync/numpy_floor (tracemalloc)":
            round(tm["aiograd_backward_sync"]["peak"] / floor, 3),
        "aiograd_await_backward/numpy_floor (tracemalloc)":
            round(tm["aiograd_await_backward"]["peak"] / floor, 3),
        "aiograd_backward_sync/numpy_floor (transient only, tracemalloc)":
            round((tm["aiograd_backward_sync"]["peak"] - tm["aiograd_backward_sync"]["retained"])
                  / max(1, floor - tm["numpy_floor"]["retained"]), 3),
    }
    if all(isinstance(rss[k], dict) for k in rss):
        f = rss["numpy_floor"]["peak"]
        ratios["aiograd_backward_sync/numpy_floor (rss)"] = round(
            rss["aiograd_backward_sync"]["peak"] / f, 3)
        ratios["torch/numpy_floor (rss)"] = round(rss["torch"]["peak"] / f, 3)
        ratios["aiograd_backward_sync/torch (rss)"] = round(
            rss["aiograd_backward_sync"]["peak"] / rss["torch"]["peak"], 3)
    emit(bench="memory", impl="ratios", metric="peak_ratio", value=ratios, unit="x",
         targets_met={"aiograd<=1.15x_floor": ratios[
             "aiograd_backward_sync/numpy_floor (tracemalloc)"] <= 1.15},
         wall_s=round(perf_counter() - t_start, 1))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child-rss":
        child_rss(sys.argv[2], sys.argv[3])
    else:
        main()
