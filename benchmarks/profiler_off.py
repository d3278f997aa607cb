"""What the profiler costs the chain benchmark when it is off (issue 24: under 1 %).

With no observer installed the engine runs no profiler code per node: the seam
(aiograd/engine/_observe.py) is one module-attribute read and one branch per
slice, plus one read when a pass starts and one when it ends. This script
measures the three factors on the chain of benchmarks/engine_overhead.py and
prints their product as a share of the backward:

- the slices per chain backward (counted by wrapping ``Evaluator.run_slice``);
- the time of one read-and-branch (``timeit``, best of 7 million-loop runs);
- the median ``backward_sync`` time of the chain.

The end-to-end check is ``benchmarks/ab.py --base-without-observer`` (the same
tree with the reads removed); on a noisy 2-core machine its resolution is a few
per cent, far above this share. Run from the repository root::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/profiler_off.py
"""

from __future__ import annotations

import statistics
import sys
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit  # noqa: E402
from engine_overhead import CHAIN_NODES, X0, chain  # noqa: E402

import aiograd  # noqa: E402
from aiograd.engine import _observe, evaluate  # noqa: E402

REPEATS = 15
READS_OUTSIDE_SLICES = 2  # the pass's start and end (engine/drivers.py)


def main() -> None:
    slices = 0
    run_slice = evaluate.Evaluator.run_slice

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal slices
        slices += 1
        return run_slice(self, *args, **kwargs)

    evaluate.Evaluator.run_slice = counting  # type: ignore[method-assign]
    x = aiograd.tensor(X0.copy(), requires_grad=True)
    times, per_pass = [], []
    for _ in range(REPEATS):
        loss = chain(x, aiograd.tanh).sum()
        slices = 0
        t0 = time.perf_counter()
        loss.backward_sync()
        times.append(time.perf_counter() - t0)
        per_pass.append(slices)
    evaluate.Evaluator.run_slice = run_slice  # type: ignore[method-assign]
    read = min(timeit.repeat("obs = _observe.observer\nd = 1.0 if obs is None else -1.0",
                             globals={"_observe": _observe}, number=1_000_000, repeat=7)) / 1e6
    reads = max(per_pass) + READS_OUTSIDE_SLICES
    backward = statistics.median(times)
    emit(bench="profiler_off", impl="aiograd", metric="off_share_of_chain_backward",
         value=round(reads * read / backward * 100, 6), unit="%", seam_reads_per_pass=reads,
         read_and_branch_ns=round(read * 1e9, 2), backward_ms=round(backward * 1e3, 3),
         nodes=CHAIN_NODES, target_met=reads * read / backward < 0.01)


if __name__ == "__main__":
    main()
