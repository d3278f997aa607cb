"""benchmarks/report.py (the table of latest figures from run_all.sh's JSON lines), and the
benchmark scripts' own checks: ab.py, profiler_off.py, service.py's NumPy floor."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str):
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report():
    return _script("report")


LINES = [
    "# benchmarks/mlp_step.py",
    json.dumps({"bench": "mlp_step", "impl": "env", "metric": "environment", "value": None,
                "unit": None, "python": "3.11", "numpy": "2.0"}),
    json.dumps({"bench": "mlp_step", "impl": "aiograd", "metric": "step_time", "value": 1.25,
                "unit": "ms", "batch": 64}),
    json.dumps({"bench": "mlp_step", "impl": "torch", "metric": "step_time", "value": 0.5,
                "unit": "ms", "batch": 64}),
    json.dumps({"bench": "mlp_step", "impl": "ratios", "metric": "step_time_ratio",
                "value": {"aiograd/torch": 2.5}, "unit": "x", "targets_met": True}),
]


def test_table_has_a_row_per_case_and_a_column_per_impl():
    report = _report()
    text = report.render(report.parse(LINES))
    assert text.startswith(report.START) and text.endswith(report.END)
    assert "| case | aiograd | torch |" in text
    assert "| step_time (batch=64) | 1.25 ms | 0.5 ms |" in text
    assert '`{"aiograd/torch": 2.5}`, targets met: True' in text
    assert "python 3.11, numpy 2.0" in text


def test_write_replaces_the_marked_block(tmp_path, monkeypatch):
    report = _report()
    readme = tmp_path / "README.md"
    readme.write_text(f"# b\n\nintro\n\n{report.START}\nold\n{report.END}\n\nafter\n")
    monkeypatch.setattr(report, "README", readme)
    monkeypatch.setattr(report, "DOCS_PAGE", tmp_path / "benchmarks.md")
    report.write(report.render(report.parse(LINES)))
    text = readme.read_text()
    assert "old" not in text and text.count(report.START) == 1 and text.endswith("after\n")
    assert "| step_time (batch=64) |" in (tmp_path / "benchmarks.md").read_text()


@pytest.mark.timeout(120)
def test_the_ab_script_compares_a_tree_with_itself():
    out = subprocess.run([sys.executable, "benchmarks/ab.py", "--base", ".", "--new", ".",
                          "--rounds", "1"], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=110).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    assert {line["metric"] for line in lines} == {
        f"{g}.{m}" for g in ("chain", "ladder")
        for m in ("forward_per_node", "backward_sync_per_node", "await_backward_per_node")
    } | {"mlp.step", "service.request"}
    assert all(line["base"] > 0 and line["new"] > 0 and line["new/base"] > 0 for line in lines)


@pytest.mark.timeout(120)
def test_the_profiler_off_script_prices_the_seam():
    out = subprocess.run([sys.executable, "benchmarks/profiler_off.py"], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=110).stdout
    line = json.loads(out.splitlines()[-1])
    assert line["seam_reads_per_pass"] >= 3 and line["read_and_branch_ns"] > 0
    assert 0 < line["value"] < 100 and line["target_met"] == (line["value"] < 1)


def test_the_service_numpy_floor_is_the_same_model():
    """``numpy_herd`` is a floor of the service's forward only if ``numpy_functional``
    computes what aiograd's ``nn.functional`` does, from the same model code."""
    import numpy as np

    import aiograd
    import aiograd.nn.functional as F

    service = _script("service")
    params, xs, ys = service.make_data()
    for x, y in zip(xs[:4], ys[:4]):
        floor = service.forward(params, x, y, service.numpy_functional)
        tensors = [aiograd.tensor(p) for p in params]
        ours = service.forward(tensors, aiograd.tensor(x), aiograd.tensor(y), F)
        assert np.isfinite(floor) and floor > 0
        np.testing.assert_allclose(floor, ours.item(), rtol=1e-5)
