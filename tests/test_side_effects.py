"""No process-wide side effect without consent (issue 26, item 5, engine parts).

- warnings raised on workers are captured per pass through the public
  ``warnings.showwarning`` hook (Note [Warnings of a job]), never by replacing
  the private ``warnings._showwarnmsg``;
- ``sys.setswitchinterval`` is left alone unless the user opts in;
- asyncio loop internals are read by ``Backlog.of`` only, with a fallback to
  the public API (a probe) for loops whose internals it cannot read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from test_bridge import in_thread, stopped_loop

from aiograd import engine
from aiograd.engine import _bridge

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, sys, threading, warnings
before = {"showwarnmsg": warnings._showwarnmsg, "interval": sys.getswitchinterval()}
shown = []
warnings.showwarning = lambda m, c, f, l, file=None, line=None: shown.append(
    [str(m), threading.current_thread().name])
import anyio, numpy as np
import aiograd as ag

class Warns(ag.Function):
    @staticmethod
    def forward(ctx, t):
        return t * 1.0

    @staticmethod
    def backward(ctx, g):
        warnings.warn("careful in backward", RuntimeWarning)
        return g

x = ag.tensor(np.ones(2), requires_grad=True)
anyio.run(ag.backward, Warns.apply(x).sum())
print(json.dumps({
    "showwarnmsg_kept": warnings._showwarnmsg is before["showwarnmsg"],
    "interval_before": before["interval"],
    "interval_after": sys.getswitchinterval(),
    "shown": shown,
    "workers": ag.engine.stats().workers,
}))
"""


def run_script(**env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "AIOGRAD_SWITCH_INTERVAL"}
    environ.update(PYTHONPATH=str(ROOT), **env)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True,
                          text=True, timeout=50, env=environ)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_worker_warning_reaches_the_callers_hook_without_private_patches() -> None:
    out = run_script()
    assert out["workers"] == 1  # the backward ran on the CPU worker
    assert out["showwarnmsg_kept"]
    # replayed once, on the caller's thread, through the hook the user installed
    assert out["shown"] == [["careful in backward", "MainThread"]]
    assert out["interval_after"] == out["interval_before"]


def test_the_switch_interval_is_set_only_on_request() -> None:
    out = run_script(AIOGRAD_SWITCH_INTERVAL="0.002")
    assert out["interval_after"] == pytest.approx(0.002)
    before = sys.getswitchinterval()
    try:
        engine.set_switch_interval(0.003)
        assert sys.getswitchinterval() == pytest.approx(0.003)
        engine.set_switch_interval(0.004)
        engine.set_switch_interval(None)
        assert sys.getswitchinterval() == before
    finally:
        engine.set_switch_interval(None)
    with pytest.raises(ValueError, match="set_switch_interval"):
        engine.set_switch_interval(-1.0)


def test_loop_internals_are_read_in_one_place_with_a_public_fallback(monkeypatch) -> None:
    assert _bridge.Backlog.of(types.SimpleNamespace()) is _bridge.UNREADABLE
    with stopped_loop() as (loop, signal, wakeups):
        assert _bridge.Backlog.of(loop) is None  # a real loop with nothing due: readable
        monkeypatch.setattr(_bridge.Backlog, "of", classmethod(lambda cls, lp: _bridge.UNREADABLE))
        # unreadable: the worker sends a probe through call_soon_threadsafe instead
        seen = in_thread(lambda: signal.watch_turn(None, 3600.0, 10.0))
        assert seen is not None and seen.owner is loop
        assert len(wakeups) == 1
