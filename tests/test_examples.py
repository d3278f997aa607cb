"""Each script in examples/ runs to completion in a fresh interpreter and says what it should."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# The examples run beside other tests (pytest-xdist) on few cores: one BLAS thread each, or
# OpenBLAS's spinning threads oversubscribe the cores and an example runs 5x slower.
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _run(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **ONE_BLAS_THREAD},
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


def test_fastapi_service_over_uvicorn():
    out = _run("fastapi_service.py")
    assert "served 20 requests: 19 ok, 1 deadline exceeded" in out, out
    assert "WRONG" not in out, out


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_transformer_chars_loss_goes_down(backend: str):
    out = _run("transformer_chars.py", "--steps", "60", "--backend", backend)
    uniform = float(re.search(r"uniform loss ([0-9.]+)", out).group(1))
    losses = [float(v) for v in re.findall(r"^step +\d+ +loss ([0-9.]+)", out, re.MULTILINE)]
    assert len(losses) == 6, out
    assert losses[-1] < 0.6 * losses[0] < 0.6 * uniform, out
    assert "trained 60 steps" in out and "sample: the cat sees a " in out, out


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_fastapi_service_through_asgi_transport():
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    service = _load_example("fastapi_service")
    model = service.make_model()
    transport = httpx.ASGITransport(app=service.make_app(model))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        results = await service.run_clients(client, model)
        bad = await client.post("/saliency", json={"images": [[[1.0]]], "target": 0})
    assert service.summarize(results) == "served 20 requests: 19 ok, 1 deadline exceeded"
    assert bad.status_code == 422 and "8 x 8" in bad.json()["detail"]


def test_user_test_file_passes_under_pytest():
    """examples/test_model.py, run as a user runs it, with aiograd's pytest plugin."""
    from importlib.metadata import entry_points

    installed = any(ep.value == "aiograd.pytest_plugin" for ep in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "aiograd.pytest_plugin"]
    root = str(EXAMPLES.parent)
    env = {**os.environ, **ONE_BLAS_THREAD, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin,
         str(EXAMPLES / "test_model.py")],
        capture_output=True, text=True, timeout=120, cwd=root, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"\b4 passed\b", proc.stdout), proc.stdout
