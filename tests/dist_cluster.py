"""Start a real local cluster for the distributed tests: this process is rank 0."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiograd.distributed import rpc
from aiograd.distributed.launch import free_port

TESTS = Path(__file__).parent
SECRET = "test-secret"


@contextmanager
def spawned(world_size: int, timeout: float = 20.0,
            **rpc_options: float) -> Iterator[tuple[int, list[subprocess.Popen[bytes]]]]:
    """Ranks 1.. as worker processes, rank 0 left to the caller to start on the port
    given; the processes are waited for (bounded) afterwards. ``rpc_options``
    (heartbeat_timeout, context_ttl) go to every worker's init_rpc."""
    port = free_port()
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(world_size), AIOGRAD_RPC_SECRET=SECRET,
               PYTHONPATH=os.pathsep.join([str(TESTS.parent), str(TESTS),
                                           os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, str(TESTS / "dist_worker.py"), str(r),
                               str(timeout), json.dumps(rpc_options)],
                              env=dict(env, RANK=str(r)))
             for r in range(1, world_size)]
    try:
        yield port, procs
    finally:
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@contextmanager
def cluster(world_size: int, timeout: float = 20.0,
            **rpc_options: float) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Rank 0 here (its agent on a thread), ranks 1.. as worker processes (``spawned``);
    shut down (bounded) afterwards."""
    with spawned(world_size, timeout, **rpc_options) as (port, procs):
        try:
            rpc.init_rpc("worker0", 0, world_size, master_addr="127.0.0.1", master_port=port,
                         secret=SECRET, timeout=timeout, **rpc_options)
            yield procs
        finally:
            if rpc._agent is not None:
                rpc.shutdown(graceful=all(p.poll() is None for p in procs), timeout=10)
