"""Interleaved A/B of two aiograd source trees on the hot paths.

Answers "did this change make the engine or the ops slower?" on a noisy machine
(this VM's vCPUs change speed for seconds at a time): one long-lived worker
process per tree, pinned with the controller to one core, serves one sample at a
time (the fastest of a few repeats, tens of milliseconds), and the controller asks
the two alternately, metric by metric, round after round. Each pair of samples
is milliseconds apart, so a slow phase of the machine hits both; the figure is
the median of the per-pair ratios. The metrics, after warm-up:

- ``chain``/``ladder`` (benchmarks/engine_overhead.py's graphs): per node,
  the forward, ``backward_sync`` and ``await backward`` (each timed alone);
- ``mlp``: one training step of benchmarks/mlp_step.py's MLP (forward,
  cross-entropy, ``backward_sync``);
- ``service.request``: one request of benchmarks/service.py, alone: the
  forward of its MLP, then ``await aiograd.grad(loss, params)``.

A worker optionally installs a no-op profiler observer (``--observe``), to
price the profiler when on. ``--base-without-observer`` prices it when off
(issue 24: under 1 % on the chain): the base is then a copy of the new tree
whose engine never reads the observer seam (every ``obs = _observe.observer``
in aiograd/engine/ becomes ``obs = None``), so the two trees differ only in
the seam. The report is one JSON line per metric: the median
of each tree's samples, and ``new/base``, the median of the per-pair ratios,
with their quartiles, min and max. Usage, from the repository root::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE taskset -c 0 \\
        python benchmarks/ab.py --base /path/to/old/tree --new . --rounds 60
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPEATS = 9


def _fastest(run: Any, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def samplers(observe: bool) -> dict[str, Callable[[], float]]:
    """One sampler per metric of the aiograd on ``sys.path``: each call returns one
    figure in microseconds (the fastest of a few repeats: the least disturbed)."""
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

    found: dict[str, Callable[[], float]] = {}
    for name, (build, nodes) in GRAPHS.items():
        x = aiograd.tensor(X0.copy(), requires_grad=True)

        def forward(build: Any = build, x: aiograd.Tensor = x) -> aiograd.Tensor:
            return build(x, aiograd.tanh).sum()

        def sync_backwards(forward: Any = forward, nodes: int = nodes) -> float:
            times = []
            for _ in range(REPEATS):
                loss = forward()
                t0 = time.perf_counter()
                loss.backward_sync()
                times.append(time.perf_counter() - t0)
            return min(times) / nodes * 1e6

        async def await_backwards(forward: Any = forward) -> float:
            times = []
            for _ in range(REPEATS):
                loss = forward()
                t0 = time.perf_counter()
                await aiograd.backward(loss)
                times.append(time.perf_counter() - t0)
            return min(times)

        def forwards(forward: Any = forward, nodes: int = nodes) -> float:
            return _fastest(forward) / nodes * 1e6

        def awaits(run: Any = await_backwards, nodes: int = nodes) -> float:
            return float(anyio.run(run)) / nodes * 1e6

        forward().backward_sync()
        found[f"{name}.forward_per_node"] = forwards
        found[f"{name}.backward_sync_per_node"] = sync_backwards
        found[f"{name}.await_backward_per_node"] = awaits

    params_np, x_np, y_np = make_data()
    params = [aiograd.tensor(p.copy(), requires_grad=True) for p in params_np]
    xs, ys = aiograd.tensor(x_np), aiograd.tensor(y_np)

    def mlp_step() -> None:
        for p in params:
            p.grad = None
        tensor_forward(params, xs, ys, F).backward_sync()

    mlp_step()
    found["mlp.step"] = lambda: _fastest(mlp_step) * 1e6

    from service import forward as service_forward
    from service import make_data as service_data

    s_params_np, s_xs, s_ys = service_data()
    s_params = [aiograd.tensor(p.copy(), requires_grad=True) for p in s_params_np]
    s_x, s_y = aiograd.tensor(s_xs[0]), aiograd.tensor(s_ys[0])

    async def requests() -> float:
        times = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            await aiograd.grad(service_forward(s_params, s_x, s_y, F), s_params)
            times.append(time.perf_counter() - t0)
        return min(times)

    found["service.request"] = lambda: float(anyio.run(requests)) * 1e6
    for sample in found.values():  # warm-up, and a check that every figure is a number
        assert np.isfinite(sample())
    return found


def serve(observe: bool) -> None:
    """The worker: prints its metric names (a JSON line), then answers each metric name
    read from stdin with one sample of it, until stdin closes."""
    found = samplers(observe)
    print(json.dumps(list(found)), flush=True)
    for line in sys.stdin:
        print(repr(found[line.strip()]()), flush=True)


class Worker:
    """A worker process serving samples of one tree's metrics."""

    def __init__(self, tree: Path, observe: bool) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker"]
        if observe:
            cmd.append("--observe")
        self.process = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.metrics: list[str] = json.loads(self._line())

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"an A/B worker exited with {self.process.wait()}")
        return line

    def sample(self, metric: str) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(metric + "\n")
        self.process.stdin.flush()
        return float(self._line())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


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
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--observe", choices=("none", "new", "both"), default="none",
                        help="install a no-op profiler observer in the new tree or both")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        serve("--observe" in sys.argv)
        return
    if args.base_without_observer:
        args.base = _without_observer(args.new.resolve(), Path(tempfile.mkdtemp()))
    if args.base is None:
        parser.error("--base or --base-without-observer is required")
    workers = {"base": Worker(args.base.resolve(), args.observe == "both"),
               "new": Worker(args.new.resolve(), args.observe != "none")}
    metrics = workers["base"].metrics
    if workers["new"].metrics != metrics:
        raise SystemExit("the two trees' workers measure different metrics")
    samples: dict[str, dict[str, list[float]]] = {
        side: {m: [] for m in metrics} for side in workers}
    for r in range(args.rounds):
        for metric in metrics:
            for side in (("base", "new") if r % 2 == 0 else ("new", "base")):
                samples[side][metric].append(workers[side].sample(metric))
    for worker_ in workers.values():
        worker_.close()
    for metric in metrics:
        base, new = samples["base"][metric], samples["new"][metric]
        ratios = sorted(n / b for n, b in zip(new, base, strict=True))
        quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        print(json.dumps({"bench": "ab", "metric": metric, "unit": "us",
                          "base": round(statistics.median(base), 4),
                          "new": round(statistics.median(new), 4),
                          "new/base": round(statistics.median(ratios), 4),
                          "ratio_q1": round(quartiles[0], 4),
                          "ratio_q3": round(quartiles[2], 4),
                          "ratio_min": round(ratios[0], 4),
                          "ratio_max": round(ratios[-1], 4), "rounds": args.rounds,
                          "observe": args.observe}), flush=True)

if __name__ == "__main__":
    main()
