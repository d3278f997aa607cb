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
from typing import Any, Callable

perf_counter = time.perf_counter


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


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
         cpus=os.cpu_count(), machine=platform.machine(), threadpools=pools,
         OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE"),
         OPENBLAS_L2_SIZE=os.environ.get("OPENBLAS_L2_SIZE"))


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def summary(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def time_repeats(setup: Callable[[], Any], timed: Callable[[Any], Any], *, warmup: int,
                 repeats: int, budget_s: float | None = None) -> list[float]:
    """Time ``timed(setup())`` ``repeats`` times after ``warmup`` untimed runs.

    Only ``timed`` is inside the clock. A full collection runs before each
    repeat (outside the clock) so garbage from the previous repeat is not
    charged to this one; the collector itself stays enabled. Stops early
    (after at least 3 repeats) if ``budget_s`` of wall time is spent.
    """
    for _ in range(warmup):
        timed(setup())
    times: list[float] = []
    start = perf_counter()
    for _ in range(repeats):
        state = setup()
        gc.collect()
        t0 = perf_counter()
        timed(state)
        times.append(perf_counter() - t0)
        del state
        if budget_s is not None and len(times) >= 3 and perf_counter() - start > budget_s:
            break
    return times
