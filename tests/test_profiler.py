"""aiograd.profiler: Chrome trace-event JSON that validates, and a summary consistent with it."""

from __future__ import annotations

import json
from collections import defaultdict

import anyio
import pytest

import aiograd
from aiograd import nn, profiler
from aiograd.engine import _observe

NUMBER = (int, float)


def validate_trace_events(data: dict) -> list[dict]:
    """The trace-event format's rules for the phases we write (X, b/e, C, M)."""
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list)
    for e in data["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"]
        assert e["ph"] in {"X", "b", "e", "C", "M"}, e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
        assert isinstance(e["ts"], NUMBER) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert isinstance(e["dur"], NUMBER) and e["dur"] >= 0, e
            assert e["args"]["queue_wait_us"] >= 0 and isinstance(e["args"]["graph_task"], int)
        if e["ph"] in "be":
            assert isinstance(e["id"], int) and e["cat"], e
        if e["ph"] == "C":
            assert all(isinstance(v, NUMBER) for v in e["args"].values()), e
        if e["ph"] == "M":
            assert e["name"] in {"process_name", "thread_name"} and e["args"]["name"]
    begins = {e["id"]: e["ts"] for e in data["traceEvents"] if e["ph"] == "b"}
    ends = {e["id"]: e["ts"] for e in data["traceEvents"] if e["ph"] == "e"}
    assert begins.keys() == ends.keys() and all(ends[i] >= begins[i] for i in begins)
    return [e for e in data["traceEvents"] if e["ph"] == "X"]


def _model():
    aiograd.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_async_trace_inline_and_worker_passes(tmp_path):
    model = _model()
    path = tmp_path / "bwd.json"
    async with profiler.trace(path, html=True) as t:
        await model(aiograd.randn(2, 8)).sum().backward()  # small: inline on the loop
        await model(aiograd.randn(4096, 8)).sum().backward()  # large: on a worker
    assert _observe.observer is None
    xs = validate_trace_events(json.loads(path.read_text()))
    s = t.summary()
    assert s.passes == 2 and s.inline_passes == 1 and s.worker_passes == 1
    assert s.nodes == len(xs) > 0
    names = {e["name"] for e in xs}
    assert {"AddmmBackward0", "ReluBackward0", "SumBackward0"} <= names
    threads = {e["args"]["name"]: e["tid"] for e in json.loads(path.read_text())["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(n.startswith("aiograd-worker") for n in threads)
    # summary numbers are the events' sums
    busy: dict[int, float] = defaultdict(float)
    for e in xs:
        busy[e["tid"]] += e["dur"]
    for name, tid in threads.items():
        assert s.thread_busy[name] * 1e6 == pytest.approx(busy[tid], abs=1e-3 * len(xs))
    for name, calls, total in s.top_nodes:
        mine = [e["dur"] for e in xs if e["name"] == name]
        assert calls == len(mine) and total * 1e6 == pytest.approx(sum(mine), abs=1e-2)
    text = path.with_suffix(".summary.txt").read_text()
    assert "1 inline, 1 on workers" in text and "AddmmBackward0" in text
    assert "aiograd-worker" in path.with_suffix(".html").read_text()


def test_sync_trace_without_file():
    model = _model()
    with profiler.trace() as t:
        model(aiograd.randn(3, 8)).sum().backward_sync()
    s = t.summary()
    assert s.passes == 1 and s.nodes >= 4 and not s.loop_lag
    assert "loop lag: no samples" in str(s)
    validate_trace_events(t.events())


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_loop_lag_sampled():
    model = _model()
    async with profiler.trace() as t:
        for _ in range(3):
            await model(aiograd.randn(4096, 8)).sum().backward()
        while not t.lag:  # loop turns until the sampler's first callback has run
            await anyio.sleep(profiler.LAG_PERIOD)
    assert t.summary().loop_lag and all(v >= 0 for v in t.summary().loop_lag)
    assert "loop lag: median" in str(t.summary())


def test_trace_refuses_nesting_and_bad_top():
    with profiler.trace():
        with pytest.raises(RuntimeError, match="already active"):
            profiler.trace().__enter__()
    assert _observe.observer is None
    with pytest.raises(ValueError, match="top"):
        profiler.trace(top=0)
