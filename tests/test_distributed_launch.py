"""The launcher and the distributed example, as a user runs them (one command)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("grpc")

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parent.parent


def _launch(nproc: int, script: str, **env_vars: str | None) -> subprocess.CompletedProcess:
    """Run ``script`` under the launcher; ``env_vars`` set (or, None, unset) variables."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    for name, value in {"AIOGRAD_RPC_SECRET": None, **env_vars}.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run([sys.executable, "-m", "aiograd.distributed.launch", "--nproc",
                           str(nproc), script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=80)


def test_parameter_server_example_runs_with_one_command() -> None:
    proc = _launch(3, "examples/distributed_parameter_server.py")
    assert proc.returncode == 0, proc.stderr
    assert len(re.findall(r"trainer \d: loss [0-9.]+ -> [0-9.]+", proc.stdout)) == 2, proc.stdout
    assert "server: w = [2.0, -3.0, 0.5]" in proc.stdout, proc.stdout


def test_launcher_sets_the_environment_and_forwards_failure(tmp_path: Path) -> None:
    script = tmp_path / "w.py"
    script.write_text(
        "import os, sys\n"
        "keys = ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'AIOGRAD_RPC_SECRET')\n"
        f"path = {str(tmp_path)!r} + '/rank' + os.environ['RANK']\n"
        "open(path, 'w').write(' '.join(os.environ[k] for k in keys))\n"
        "sys.exit(3 if os.environ['RANK'] == '1' else 0)\n")
    proc = _launch(2, str(script))
    assert proc.returncode == 3, proc.stderr
    # (worker 0 may be stopped before it writes: the launcher stops the others on a failure)
    rank, world, addr, port, secret = (tmp_path / "rank1").read_text().split(" ")
    assert (rank, world, addr) == ("1", "2", "127.0.0.1")
    assert int(port) > 0 and len(secret) == 32
    assert "worker 1 exited with status 3" in proc.stderr


@pytest.mark.parametrize("preset", [None, "2"])
def test_launcher_gives_each_worker_one_blas_thread(tmp_path: Path, preset: str | None) -> None:
    """Note [One BLAS thread per worker]: N workers each get OMP_NUM_THREADS=1 (so
    NumPy's OpenBLAS pool has one thread) unless the variable is already set."""
    pytest.importorskip("threadpoolctl")  # the workers ask it for NumPy's BLAS pool
    script = tmp_path / "w.py"
    script.write_text(
        "import os, numpy, threadpoolctl\n"
        "blas = [p['num_threads'] for p in threadpoolctl.threadpool_info()"
        " if p['user_api'] == 'blas']\n"
        f"path = {str(tmp_path)!r} + '/rank' + os.environ['RANK']\n"
        "open(path, 'w').write(os.environ.get('OMP_NUM_THREADS', '-') + ' ' + str(blas[0]))\n")
    for nproc in (1, 2):
        proc = _launch(nproc, str(script), OMP_NUM_THREADS=preset, OPENBLAS_NUM_THREADS=None)
        assert proc.returncode == 0, proc.stderr
        omp, blas = (tmp_path / "rank0").read_text().split(" ")
        if preset is not None:
            assert omp == preset
        elif nproc == 1:  # one worker: the libraries' own choice
            assert omp == "-"
        else:
            assert (omp, blas) == ("1", "1")
