"""Importing and using aiograd changes no process-wide state the user did not ask for."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Run a backward on the workers (small graphs too) whose custom backward warns.
_PROGRAM = """
import asyncio, json, sys, threading, warnings
before = (warnings._showwarnmsg, warnings.showwarning, sys.getswitchinterval())
shown = []

def user_hook(message, category, filename, lineno, file=None, line=None):
    shown.append((str(message), threading.current_thread().name))

warnings.showwarning = user_hook
import aiograd as ag
import aiograd.engine
after_import = (warnings._showwarnmsg is before[0], warnings.showwarning is user_hook,
                sys.getswitchinterval())
aiograd.engine.set_inline_limits(max_nodes=0)

class Warns(ag.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        warnings.warn("from the backward on " + threading.current_thread().name)
        return grad * 2

async def main():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    await Warns.apply(x).sum().backward()
    return x.grad.tolist()

grad = asyncio.run(main())
print(json.dumps({
    "private_hook_kept": warnings._showwarnmsg is before[0],
    "after_import": list(after_import),
    "interval": sys.getswitchinterval(),
    "grad": grad,
    "shown": shown,
}))
"""


def _run(**env: str) -> dict:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    full.pop("AIOGRAD_SWITCH_INTERVAL", None)
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_PROGRAM)], env=full,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_import_and_workers_leave_warnings_and_the_switch_interval_alone():
    report = _run()
    assert report["after_import"] == [True, True, 0.005]
    assert report["private_hook_kept"]
    assert report["interval"] == 0.005  # workers ran, and the interval is the interpreter's
    assert report["grad"] == [2.0, 2.0]


def test_a_workers_warning_reaches_the_users_hook_on_the_callers_thread():
    report = _run()
    [(message, thread)] = report["shown"]
    assert message.startswith("from the backward on aiograd-worker")  # raised on a worker
    assert thread == "MainThread"  # shown (replayed) on the awaiting thread


def test_the_switch_interval_is_shortened_only_when_asked():
    report = _run(AIOGRAD_SWITCH_INTERVAL="0.001")
    assert report["interval"] == 0.001
