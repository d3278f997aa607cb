"""Helpers shared by the benchmark scripts (timing, JSON lines, environment line).

Each script prints one JSON object per line: first an ``env`` line (BLAS
library, kernel and thread counts as seen by threadpoolctl), then one line per
result, then a final ``ratios`` line comparing implementations measured in
the same run.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

perf_counter = time.perf_counter


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


_limiter: Any = None


def configure_threads(default: int | None) -> int | None:
    """Apply ``--threads N`` from the command line (else ``default``; None = leave as is).

    Limits every BLAS/OpenMP pool threadpoolctl finds (NumPy's OpenBLAS,
    PyTorch's OpenMP) and PyTorch's intra-op threads to N. NumPy and PyTorch
    are imported first: threadpoolctl only sees libraries already loaded.
    """
    global _limiter
    n = default
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            n = None if argv[i + 1] in ("default", "none") else int(argv[i + 1])
        elif arg.startswith("--threads="):
            v = arg.split("=", 1)[1]
            n = None if v in ("default", "none") else int(v)
    if n is None:
        return None
    import numpy  # noqa: F401
    import threadpoolctl

    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:  # pragma: no cover
        pass
    _limiter = threadpoolctl.threadpool_limits(limits=n)
    return n


def env_line(bench: str) -> None:
    """Print the BLAS/OpenMP libraries, their kernels and thread counts."""
    import numpy
    import threadpoolctl

    try:  # importing torch registers its OpenMP runtime with threadpoolctl
        import torch

        torch_info = {"version": torch.__version__, "num_threads": torch.get_num_threads(),
                      "num_interop_threads": torch.get_num_interop_threads()}
    except ImportError:  # pragma: no cover
        torch_info = None
    pools = [
        {k: info.get(k) for k in ("user_api", "internal_api", "prefix", "version",
                                 "architecture", "num_threads", "threading_layer")}
        for info in threadpoolctl.threadpool_info()
    ]
    emit(bench=bench, impl="env", metric="environment", value=None, unit=None,
         python=sys.version.split()[0], numpy=numpy.__version__, torch=torch_info,
         cpus=os.cpu_count(), pinned_to=sorted(os.sched_getaffinity(0)),
         machine=platform.machine(), threadpools=pools,
         OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE"),
         OPENBLAS_L2_SIZE=os.environ.get("OPENBLAS_L2_SIZE"), loadavg=loadavg())


def mlp_params(sizes: list[int] | tuple[int, ...], rng: Any) -> list[Any]:
    """``[W1, b1, W2, b2, ...]`` for layers ``sizes[i] -> sizes[i + 1]``, float32,
    W of shape (out, in), both ~ U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's Linear init)."""
    import numpy

    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / numpy.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(numpy.float32))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(numpy.float32))
    return params


def median(xs: list[float]) -> float:
    return statistics.median(xs)


Timings = dict[str, dict[str, list[float]]]


def round_ratio(xs: list[float], ys: list[float]) -> float:
    """Median over rounds of ``xs[r] / ys[r]``: two implementations timed in the same
    round of :func:`interleaved` share the machine's load of that moment, so their
    ratio moves less than the ratio of their separate medians."""
    return median([x / max(y, 1e-12) for x, y in zip(xs, ys)])


def interleaved(impls: dict[str, Callable[[], dict[str, float]]], *, warmup: int, rounds: int,
                budget_s: float | None = None, collect: bool = True) -> Timings:
    """Round-robin timing: each round runs every implementation once.

    Each callable times itself and returns ``{phase: seconds}`` (e.g.
    ``{"total": ..., "forward": ..., "backward": ...}``). Interleaving keeps
    the comparison fair when the machine's load drifts during the run.
    With ``collect`` a full garbage collection runs (untimed) before each
    call; pass False when the callables collect right before their clock.
    Returns ``{impl: {phase: [seconds per round]}}``.
    """
    for _ in range(warmup):
        for fn in impls.values():
            fn()
    out: dict[str, dict[str, list[float]]] = {name: {} for name in impls}
    start = perf_counter()
    for r in range(rounds):
        for name, fn in impls.items():
            if collect:
                gc.collect()
            for phase, secs in fn().items():
                out[name].setdefault(phase, []).append(secs)
        if budget_s is not None and r >= 4 and perf_counter() - start > budget_s:
            break
    return out


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return None
