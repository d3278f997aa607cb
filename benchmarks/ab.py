"""Interleaved A/B of two aiograd source trees on the hot paths.

Answers "did this change make the engine or the ops slower?" on a noisy machine:
each round runs one fresh worker process per tree, in alternating order, and
each worker times, after warm-up, the median of several repeats of:

- ``chain``/``ladder`` (benchmarks/engine_overhead.py's graphs): per node,
  the forward, ``backward_sync`` and ``await backward`` (each timed alone);
- ``mlp``: one training step of benchmarks/mlp_step.py's MLP (forward,
  cross-entropy, ``backward_sync``).

A worker optionally installs a no-op profiler observer (``--observe``), to
price the profiler when on. ``--base-without-observer`` prices it when off
(issue 24: under 1 % on the chain): the base is then a copy of the new tree
whose engine never reads the observer seam (every ``obs = _observe.observer``
in aiograd/engine/ becomes ``obs = None``), so the two trees differ only in
the seam. The report is one JSON line per metric: the median
over rounds of each tree's figure, and ``new/base``, the median of the
per-round ratios (pairs from the same round saw the same machine load), with
their min and max. Usage, from the repository root::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE taskset -c 0 \\
        python benchmarks/ab.py --base /path/to/old/tree --new . --rounds 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPEATS = 9


def _median_time(run: Any, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def worker(observe: bool) -> dict[str, float]:
    """The figures of the aiograd on ``sys.path`` (microseconds)."""
    import anyio
    import numpy as np

    import aiograd
    import aiograd.nn.functional as F

    sys.path.insert(0, str(HERE))
    from engine_overhead import GRAPHS, X0
    from mlp_step import make_data, tensor_forward

    if observe:
        from aiograd.engine import _observe

        class Quiet:
            def task_start(self, task_id: int, t: float) -> None: ...
            def node(self, *args: Any) -> None: ...
            def task_end(self, task_id: int, t: float, error: BaseException | None) -> None: ...

        _observe.set_observer(Quiet())

    figures: dict[str, float] = {}
    for name, (build, nodes) in GRAPHS.items():
        x = aiograd.tensor(X0.copy(), requires_grad=True)

        def forward(build: Any = build, x: aiograd.Tensor = x) -> aiograd.Tensor:
            return build(x, aiograd.tanh).sum()

        def sync_backwards(forward: Any = forward) -> float:
            times = []
            for _ in range(REPEATS):
                loss = forward()
                t0 = time.perf_counter()
                loss.backward_sync()
                times.append(time.perf_counter() - t0)
            return statistics.median(times)

        async def await_backwards(forward: Any = forward) -> float:
            times = []
            for _ in range(REPEATS):
                loss = forward()
                t0 = time.perf_counter()
                await aiograd.backward(loss)
                times.append(time.perf_counter() - t0)
            return statistics.median(times)

        forward().backward_sync()
        figures[f"{name}.forward_per_node"] = _median_time(forward) / nodes * 1e6
        figures[f"{name}.backward_sync_per_node"] = sync_backwards() / nodes * 1e6
        figures[f"{name}.await_backward_per_node"] = anyio.run(await_backwards) / nodes * 1e6

    params_np, x_np, y_np = make_data()
    params = [aiograd.tensor(p.copy(), requires_grad=True) for p in params_np]
    xs, ys = aiograd.tensor(x_np), aiograd.tensor(y_np)

    def mlp_step() -> None:
        for p in params:
            p.grad = None
        tensor_forward(params, xs, ys, F).backward_sync()

    mlp_step()
    figures["mlp.step"] = _median_time(mlp_step, 3 * REPEATS) * 1e6
    assert np.isfinite(list(figures.values())).all()
    return figures


def _run_worker(tree: Path, observe: bool) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    if observe:
        cmd.append("--observe")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


SEAM_READ = "obs = _observe.observer"


def _without_observer(tree: Path, into: Path) -> Path:
    """A copy of ``tree``'s package in ``into`` whose engine never reads the observer."""
    shutil.copytree(tree / "aiograd", into / "aiograd",
                    ignore=shutil.ignore_patterns("__pycache__"))
    reads = 0
    for source in (into / "aiograd" / "engine").glob("*.py"):
        text = source.read_text()
        reads += text.count(SEAM_READ)
        source.write_text(text.replace(SEAM_READ, "obs = None"))
    if not reads:
        raise SystemExit(f"no {SEAM_READ!r} in {tree}/aiograd/engine: the seam moved")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="the tree to compare against")
    parser.add_argument("--base-without-observer", action="store_true",
                        help="compare against a copy of --new without the observer seam")
    parser.add_argument("--new", type=Path, default=Path("."), help="the changed tree")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--observe", choices=("none", "new", "both"), default="none",
                        help="install a no-op profiler observer in the new tree or both")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker("--observe" in sys.argv)))
        return
    if args.base_without_observer:
        args.base = _without_observer(args.new.resolve(), Path(tempfile.mkdtemp()))
    if args.base is None:
        parser.error("--base or --base-without-observer is required")
    trees = {"base": args.base.resolve(), "new": args.new.resolve()}
    observed = {"base": args.observe == "both", "new": args.observe != "none"}
    rounds: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    for r in range(args.rounds):
        order = ("base", "new") if r % 2 == 0 else ("new", "base")
        for side in order:
            rounds[side].append(_run_worker(trees[side], observed[side]))
    for metric in rounds["base"][0]:
        base = [f[metric] for f in rounds["base"]]
        new = [f[metric] for f in rounds["new"]]
        ratios = [n / b for n, b in zip(new, base, strict=True)]
        print(json.dumps({"bench": "ab", "metric": metric, "unit": "us",
                          "base": round(statistics.median(base), 4),
                          "new": round(statistics.median(new), 4),
                          "new/base": round(statistics.median(ratios), 4),
                          "ratio_min": round(min(ratios), 4),
                          "ratio_max": round(max(ratios), 4), "rounds": args.rounds,
                          "observe": args.observe}), flush=True)


if __name__ == "__main__":
    main()
