"""Each script in examples/ runs to completion in a fresh interpreter and says what it should."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr}"
    return proc.stdout


def test_train_mlp_reaches_high_accuracy():
    out = _run("train_mlp.py")
    match = re.search(r"final test accuracy: ([0-9.]+)", out)
    assert match, out
    assert float(match.group(1)) > 0.75, out
    losses = [float(v) for v in re.findall(r"epoch +\d+ +loss ([0-9.]+)", out)]
    assert len(losses) >= 3 and losses[-1] < 0.5 * losses[0], out
    passes = re.search(r"backward passes: (\d+) \((\d+) inline on the event loop, "
                       r"(\d+) on worker threads\)", out)
    assert passes, out
    total, inline, workers = map(int, passes.groups())
    assert total == inline + workers and inline > 0 and workers > 0, out
    assert re.search(r"nodes run: [1-9]\d*", out) and "worker busy time:" in out, out
    assert "loop lag: median" in out, out


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_concurrent_models_all_learn(backend: str):
    out = _run("concurrent_models.py", "--backend", backend, "--models", "4")
    assert "4 models trained concurrently" in out, out
    assert "models whose loss fell more than 10x: 4/4" in out, out
    assert len(re.findall(r"^model +\d+ ", out, flags=re.MULTILINE)) == 4, out


def test_gradient_service_answers_every_request():
    out = _run("gradient_service.py")
    assert "served 20 requests: 19 ok, 1 deadline exceeded" in out, out
    assert "WRONG" not in out, out
