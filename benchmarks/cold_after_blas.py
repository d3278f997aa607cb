"""Diagnostic: how much slower Python runs right after a large BLAS product.

Why the MLP step's Python bookkeeping costs more than the engine benchmarks
suggest: between the products of a real model, interpreter state (code,
function and dict objects) has been pushed out of the core's caches by the
BLAS kernel, so the first pass through any Python code pays for reloading it.

Measured: 40 distinct trivial Python functions called once, (a) with nothing
before, (b) right after the MLP step's largest product, (128, 784) @ (784, 512),
(c) right after a copy of as many bytes; and then the same 40 calls again
after the product (the second pass: caches warm again). Also one aiograd
``backward_sync`` of a tiny graph, hot and right after the product: the
engine's fixed cost per backward in the two settings. Medians of many
repeats, one JSON line per figure.
"""

from __future__ import annotations

import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import configure_threads, emit, env_line, perf_counter  # noqa: E402

REPEATS = 300
N_FUNCTIONS = 40


def make_functions(n: int) -> list:
    namespace: dict = {}
    exec("\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(n)), namespace)
    return [namespace[f"f{i}"] for i in range(n)]


def median_us(before, after, repeats: int = REPEATS) -> float:
    """Median time of ``after()`` run right after ``before()``, in µs."""
    times = []
    for _ in range(repeats):
        before()
        t0 = perf_counter()
        after()
        times.append(perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    configure_threads(1)
    env_line("cold_after_blas")
    import aiograd

    functions = make_functions(N_FUNCTIONS)

    def calls() -> None:
        for f in functions:
            f(1)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    w = rng.standard_normal((512, 784)).astype(np.float32)
    src = np.ones(x.size + w.size, np.float32)
    dst = np.empty_like(src)

    def product() -> None:
        x @ w.T

    def copy() -> None:
        np.copyto(dst, src)

    def nothing() -> None:
        pass

    def twice_after_product() -> None:
        product()
        calls()

    leaf = aiograd.tensor(np.ones(4, np.float32), requires_grad=True)
    loss = (leaf * 2.0).sum()
    aiograd.set_multithreading_enabled(False)

    def backward() -> None:
        aiograd.backward_sync(loss, retain_graph=True)

    figures = {
        "calls_hot": median_us(nothing, calls),
        "calls_after_product": median_us(product, calls, REPEATS // 3),
        "calls_after_copy": median_us(copy, calls),
        "calls_second_pass_after_product": median_us(twice_after_product, calls, REPEATS // 3),
        "backward_sync_hot": median_us(nothing, backward),
        "backward_sync_after_product": median_us(product, backward, REPEATS // 3),
    }
    for name, value in figures.items():
        emit(bench="cold_after_blas", impl="python", metric=name, value=round(value, 1),
             unit="us", functions=N_FUNCTIONS if name.startswith("calls") else None)
    emit(bench="cold_after_blas", impl="ratios", metric="slowdown_after_product",
         value={"calls": round(figures["calls_after_product"] / figures["calls_hot"], 2),
                "backward_sync": round(figures["backward_sync_after_product"]
                                       / figures["backward_sync_hot"], 2)},
         unit="x")


if __name__ == "__main__":
    main()
