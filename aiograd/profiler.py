"""A backward timeline: which nodes ran, on which thread, when, and after how long a wait.

``with aiograd.profiler.trace("bwd.json") as t:`` (or ``async with``) records
every node the engine evaluates while the block runs, through the seam
``aiograd.engine._observe`` (its docstring is the contract). On exit it writes
Chrome trace-event JSON (opens in Perfetto or ``chrome://tracing``), a text
summary next to it (``bwd.summary.txt``) and, with ``html=True``, a
self-contained HTML timeline (``bwd.html``).

Per node: the GraphTask id, the node's name, the thread, start and end, and the
queue wait (start minus the time it became ready). Per pass: inline (every node
on the thread that awaited it) or on workers (``aiograd-worker-*`` threads).
Inside a running asyncio or Trio loop, a sampler thread also measures loop lag:
how late a callback posted to the loop runs.

Off (no ``trace`` active), the engine reads one global per slice and nothing
per node. Thread rules: the recorder is called from every engine thread at
once; it appends under one lock and never calls into the engine.
"""

from __future__ import annotations

import html as _html
import json
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .engine import _observe
from .engine._bridge import running_loop_library

__all__ = ["Trace", "Summary", "trace"]

WORKER_PREFIX = "aiograd-worker"
LAG_PERIOD = 0.01  # seconds between loop-lag samples


@dataclass(frozen=True)
class NodeEvent:
    """One node evaluation; times are ``time.perf_counter()`` seconds."""

    task: int
    name: str
    thread: str
    ready: float
    start: float
    end: float


@dataclass
class Summary:
    """What the engine did during a trace (all times in seconds)."""

    passes: int
    inline_passes: int
    worker_passes: int
    nodes: int
    node_time: float
    top_nodes: list[tuple[str, int, float]]  # name, calls, total time
    thread_busy: dict[str, float]
    worker_busy: float
    loop_lag: list[float] = field(default_factory=list)
    wall: float = 0.0

    def __str__(self) -> str:
        lines = [
            f"aiograd profile: {self.passes} backward passes "
            f"({self.inline_passes} inline, {self.worker_passes} on workers), "
            f"{self.nodes} nodes run, {self.node_time * 1e3:.1f} ms in nodes, "
            f"{self.wall:.2f} s traced",
            "top nodes by total time:",
        ]
        lines += [f"  {name:<28} {calls:>7} calls {total * 1e3:>10.2f} ms"
                  for name, calls, total in self.top_nodes]
        lines.append(f"busy time per thread (workers: {self.worker_busy * 1e3:.1f} ms):")
        lines += [f"  {name:<28} {busy * 1e3:>10.2f} ms"
                  for name, busy in sorted(self.thread_busy.items(), key=lambda kv: -kv[1])]
        if self.loop_lag:
            lag = sorted(self.loop_lag)
            lines.append(f"loop lag: median {statistics.median(lag) * 1e3:.2f} ms, "
                         f"max {lag[-1] * 1e3:.2f} ms over {len(lag)} samples")
        else:
            lines.append("loop lag: no samples (no event loop running, or under 10 ms)")
        return "\n".join(lines)


class Trace:
    """The recorder (a ``NodeObserver``) and, after the block, its results."""

    def __init__(self, path: str | Path | None = None, *, top: int = 10,
                 html: bool = False) -> None:
        if top < 1:
            raise ValueError(f"trace(): top must be >= 1, got {top}")
        self.path = None if path is None else Path(path)
        self.top = top
        self.html = html
        self.nodes: list[NodeEvent] = []
        self.tasks: dict[int, list[float]] = {}  # id -> [start, end]
        self.errors: dict[int, str] = {}
        self.lag: list[tuple[float, float]] = []  # (posted at, lag)
        self.t0 = 0.0
        self.t1 = 0.0
        self._lock = threading.Lock()
        self._previous: Any = None
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    # ---- NodeObserver (engine threads) ----

    def task_start(self, task_id: int, t: float) -> None:
        with self._lock:
            self.tasks[task_id] = [t, t]

    def node(self, task_id: int, name: str, thread: str, ready: float, start: float,
             end: float) -> None:
        event = NodeEvent(task_id, name, thread, ready, start, end)
        with self._lock:
            self.nodes.append(event)

    def task_end(self, task_id: int, t: float, error: BaseException | None) -> None:
        with self._lock:
            self.tasks.setdefault(task_id, [t, t])[1] = t
            if error is not None:
                self.errors[task_id] = type(error).__name__

    # ---- context manager ----

    def __enter__(self) -> Trace:
        if isinstance(_observe.observer, Trace):
            raise RuntimeError("aiograd.profiler.trace(): a trace is already active")
        self.t0 = time.perf_counter()
        self._start_lag_sampler()
        self._previous = _observe.set_observer(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _observe.set_observer(self._previous)
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
        self.t1 = time.perf_counter()
        if self.path is not None:
            self.write(self.path)

    async def __aenter__(self) -> Trace:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__(*exc)

    def _start_lag_sampler(self) -> None:
        """Post a callback to the running loop every LAG_PERIOD; record how late it runs."""
        library = running_loop_library()
        post: Callable[..., Any]
        if library == "asyncio":
            import asyncio
            post = asyncio.get_running_loop().call_soon_threadsafe
        elif library == "trio":
            import trio
            post = trio.lowlevel.current_trio_token().run_sync_soon
        else:
            return

        def record(posted: float) -> None:
            with self._lock:
                self.lag.append((posted, time.perf_counter() - posted))

        def sample() -> None:
            while not self._stop.wait(LAG_PERIOD):
                try:
                    post(record, time.perf_counter())
                except RuntimeError:  # the loop closed
                    return

        self._sampler = threading.Thread(target=sample, name="aiograd-profiler-lag",
                                         daemon=True)
        self._sampler.start()

    # ---- results ----

    def summary(self) -> Summary:
        """Aggregate the recorded nodes; consistent with ``events()`` by construction."""
        with self._lock:
            nodes = list(self.nodes)
            task_ids = set(self.tasks) | {n.task for n in nodes}
            lag = [v for _, v in self.lag]
        by_name: dict[str, list[float]] = defaultdict(list)
        busy: dict[str, float] = defaultdict(float)
        on_workers: set[int] = set()
        for n in nodes:
            by_name[n.name].append(n.end - n.start)
            busy[n.thread] += n.end - n.start
            if n.thread.startswith(WORKER_PREFIX):
                on_workers.add(n.task)
        top = sorted(((name, len(d), sum(d)) for name, d in by_name.items()),
                     key=lambda row: -row[2])[:self.top]
        worker_passes = len(on_workers & task_ids)
        return Summary(
            passes=len(task_ids),
            inline_passes=len(task_ids) - worker_passes,
            worker_passes=worker_passes,
            nodes=len(nodes),
            node_time=sum(busy.values()),
            top_nodes=top,
            thread_busy=dict(busy),
            worker_busy=sum(v for k, v in busy.items() if k.startswith(WORKER_PREFIX)),
            loop_lag=lag,
            wall=(self.t1 or time.perf_counter()) - self.t0,
        )

    def events(self) -> dict[str, Any]:
        """The trace in Chrome's trace-event format (``ts``/``dur`` in microseconds)."""
        with self._lock:
            nodes = list(self.nodes)
            tasks = dict(self.tasks)
            lag = list(self.lag)
        pid = 1
        tids: dict[str, int] = {}

        def us(t: float) -> float:
            return round((t - self.t0) * 1e6, 3)

        out: list[dict[str, Any]] = []
        for n in nodes:
            tid = tids.setdefault(n.thread, len(tids) + 1)
            out.append({"name": n.name, "cat": "node", "ph": "X", "ts": us(n.start),
                        "dur": round((n.end - n.start) * 1e6, 3), "pid": pid, "tid": tid,
                        "args": {"graph_task": n.task,
                                 "queue_wait_us": round((n.start - n.ready) * 1e6, 3)}})
        for task_id, (start, end) in sorted(tasks.items()):
            common = {"name": f"GraphTask {task_id}", "cat": "graph_task", "id": task_id,
                      "pid": pid, "tid": 0}
            out.append({**common, "ph": "b", "ts": us(start)})
            out.append({**common, "ph": "e", "ts": us(end),
                        "args": {"error": self.errors.get(task_id)}})
        for posted, value in lag:
            out.append({"name": "loop lag", "cat": "loop", "ph": "C", "ts": us(posted),
                        "pid": pid, "tid": 0, "args": {"ms": round(value * 1e3, 4)}})
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "ts": 0,
                 "args": {"name": "aiograd backward"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "ts": 0,
                  "args": {"name": thread}} for thread, tid in tids.items()]
        return {"traceEvents": meta + out, "displayTimeUnit": "ms"}

    def write(self, path: str | Path) -> None:
        """Write the JSON trace to ``path``, the summary to ``<stem>.summary.txt``
        and, if ``html`` was asked for, a timeline viewer to ``<stem>.html``."""
        path = Path(path)
        data = self.events()
        path.write_text(json.dumps(data))
        path.with_suffix(".summary.txt").write_text(str(self.summary()) + "\n")
        if self.html:
            path.with_suffix(".html").write_text(timeline_html(data))


def trace(path: str | Path | None = None, *, top: int = 10, html: bool = False) -> Trace:
    """Record the backward passes run inside the block (``with`` or ``async with``).

    ``path``: where to write the Chrome trace JSON on exit (None: write nothing;
    read ``.summary()``/``.events()``). ``top``: rows of the top-nodes table.
    ``html``: also write a self-contained timeline page next to the JSON.
    """
    return Trace(path, top=top, html=html)


def timeline_html(data: dict[str, Any]) -> str:
    """A self-contained HTML page drawing the ``X`` events of ``data`` as lanes per thread."""
    payload = json.dumps(data).replace("</", "<\\/")
    return _TIMELINE.replace("__DATA__", payload).replace(
        "__TITLE__", _html.escape("aiograd backward timeline"))


_TIMELINE = """<!doctype html>
<html><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body{font:13px sans-serif;margin:12px;background:#fff;color:#222}
#tip{position:fixed;background:#ffe;border:1px solid #999;padding:3px 6px;display:none}
</style></head><body>
<h3>__TITLE__</h3><div id="info"></div><canvas id="c"></canvas><div id="tip"></div>
<script>
const data = __DATA__;
const ev = data.traceEvents;
const names = {}; ev.filter(e => e.ph === "M" && e.name === "thread_name")
  .forEach(e => names[e.tid] = e.args.name);
const xs = ev.filter(e => e.ph === "X");
const tids = [...new Set(xs.map(e => e.tid))].sort((a, b) => a - b);
const end = Math.max(1, ...xs.map(e => e.ts + e.dur));
const W = Math.max(900, window.innerWidth - 40), LABEL = 170, LANE = 34, TOP = 24;
const c = document.getElementById("c");
c.width = W; c.height = TOP + LANE * tids.length + 10;
const g = c.getContext("2d");
const hue = s => [...s].reduce((h, ch) => (h * 31 + ch.charCodeAt(0)) % 360, 7);
const x = t => LABEL + (W - LABEL - 10) * t / end;
g.font = "12px sans-serif";
for (let i = 0; i <= 10; i++) {
  const t = end * i / 10; g.fillStyle = "#888";
  g.fillText((t / 1000).toFixed(2) + " ms", x(t) - 20, 14);
  g.fillStyle = "#eee"; g.fillRect(x(t), TOP - 4, 1, c.height);
}
tids.forEach((tid, i) => {
  g.fillStyle = "#222"; g.fillText(names[tid] || ("thread " + tid), 4, TOP + i * LANE + 20);
});
const boxes = [];
for (const e of xs) {
  const i = tids.indexOf(e.tid), x0 = x(e.ts), w = Math.max(1, x(e.ts + e.dur) - x0);
  const y = TOP + i * LANE + 4;
  g.fillStyle = `hsl(${hue(e.name)},60%,60%)`; g.fillRect(x0, y, w, LANE - 8);
  if (w > 60) { g.fillStyle = "#000"; g.fillText(e.name, x0 + 2, y + 17, w - 4); }
  boxes.push([x0, y, w, LANE - 8, e]);
}
document.getElementById("info").textContent =
  `${xs.length} nodes on ${tids.length} threads, ${(end / 1000).toFixed(2)} ms`;
const tip = document.getElementById("tip");
c.onmousemove = m => {
  const r = c.getBoundingClientRect(), px = m.clientX - r.left, py = m.clientY - r.top;
  const b = boxes.find(([bx, by, bw, bh]) =>
    px >= bx && px <= bx + bw && py >= by && py <= by + bh);
  if (!b) { tip.style.display = "none"; return; }
  const e = b[4];
  tip.textContent = `${e.name}  task ${e.args.graph_task}  ${e.dur.toFixed(1)} us` +
    `  wait ${e.args.queue_wait_us.toFixed(1)} us`;
  tip.style.left = (m.clientX + 12) + "px"; tip.style.top = (m.clientY + 12) + "px";
  tip.style.display = "block";
};
</script></body></html>
"""
