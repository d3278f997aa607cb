"""aiograd.testing and its pytest plugin, as a user's test suite would use them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

import aiograd
from aiograd import nn, testing

pytest_plugins = ["pytester"]


def _pair():
    torch = pytest.importorskip("torch")
    aiograd.manual_seed(0)
    ours = nn.Linear(3, 2)
    ref = torch.nn.Linear(3, 2)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(ours.weight.detach().numpy()))
        ref.bias.copy_(torch.from_numpy(ours.bias.detach().numpy()))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    ours(aiograd.tensor(x)).pow(2).sum().backward_sync()
    ref(torch.from_numpy(x)).pow(2).sum().backward()
    return ours, ref


def test_assert_grads_close_against_torch():
    ours, ref = _pair()
    testing.assert_grads_close(ours, ref)
    testing.assert_grads_close(ours.parameters(), [p.grad for p in ref.parameters()])
    ref.weight.grad[0, 0] += 1.0
    with pytest.raises(AssertionError, match="'weight': max abs difference 1"):
        testing.assert_grads_close(ours, ref)


def test_assert_grads_close_reports_missing_grad_and_bad_input():
    layer = nn.Linear(2, 2)
    with pytest.raises(AssertionError, match="has no gradient"):
        testing.assert_grads_close(layer, {"weight": np.zeros((2, 2)), "bias": np.zeros(2)})
    with pytest.raises(AssertionError, match="2 parameters but 1"):
        testing.assert_grads_close(layer, [np.zeros(2)])
    with pytest.raises(TypeError, match="assert_grads_close"):
        testing.assert_grads_close(layer, 3)


def test_check_gradients_passes_and_fails():
    x = aiograd.randn(3, requires_grad=True)
    testing.check_gradients(lambda t: (t * t).sin(), x)

    class Wrong(aiograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    with pytest.raises(AssertionError, match="check_gradients"):
        testing.check_gradients(Wrong.apply, x)


@pytest.mark.timeout(60)
@pytest.mark.anyio
async def test_check_gradients_async_inside_a_loop():
    x = aiograd.randn(2, 2, requires_grad=True)
    await testing.check_gradients_async(lambda t: t.exp().sum(), x)


def test_no_engine_leaks_quiet_on_clean_block():
    with testing.no_engine_leaks():
        x = aiograd.randn(4, requires_grad=True)
        (x * 2).sum().backward_sync()


@pytest.mark.timeout(30)
def test_no_engine_leaks_catches_a_thread_left_running():
    stop = threading.Event()
    with pytest.raises(testing.EngineLeakError, match="threads started and still running: left"):
        with testing.no_engine_leaks(timeout=0):
            threading.Thread(target=stop.wait, name="left", daemon=True).start()
    stop.set()


@pytest.mark.timeout(30)
def test_no_engine_leaks_catches_a_running_graph_task():
    from aiograd.engine.engine import get_engine
    from aiograd.engine.graph_task import GraphTask

    engine = get_engine()
    settled = threading.Event()
    for _ in range(1000):  # passes of earlier tests on this worker finish first
        with engine._lock:
            if not engine._live:
                break
        settled.wait(0.01)
    with pytest.raises(testing.EngineLeakError, match="1 GraphTask"):
        with testing.no_engine_leaks(timeout=0):
            fake = object.__new__(GraphTask)
            fake.final_callbacks = [print]
            fake.cpu_queue, fake.started, fake.finished = None, None, False
            with engine._lock:
                engine._live.add(fake)
    with engine._lock:
        engine._live.discard(fake)


PLUGIN_TESTS = """
import threading
import aiograd

def test_clean(aiograd_no_leaks):
    x = aiograd.randn(3, requires_grad=True)
    (x * x).sum().backward_sync()
    assert x.grad is not None

def test_leaky():
    threading.Thread(target=threading.Event().wait, args=(5,), name="leaky", daemon=True).start()
"""


@pytest.mark.timeout(120)
def test_plugin_fixture_and_option(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    # aiograd is not pip-installed in development: the subprocess finds it on PYTHONPATH
    root = str(Path(__file__).resolve().parent.parent)
    path = [root, os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))
    pytester.makepyfile(PLUGIN_TESTS)
    # installed (pip install -e), the entry point loads the plugin; else name it with -p
    from importlib.metadata import entry_points

    installed = any(ep.value == "aiograd.pytest_plugin" for ep in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "aiograd.pytest_plugin"]
    plain = pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=2)
    checked = pytester.runpytest_subprocess(*plugin, "--aiograd-leak-check",
                                            "-p", "no:cacheprovider")
    checked.assert_outcomes(passed=2, errors=1)
    checked.stdout.fnmatch_lines(["*EngineLeakError*leaky*"])
