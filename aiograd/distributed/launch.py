"""``python -m aiograd.distributed.launch --nproc N script.py [args...]``: local workers.

Starts N fresh interpreters (never forks: Note [One RPC thread]) with RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and, unless already set, a
random AIOGRAD_RPC_SECRET. If a worker fails, the others are terminated.
Exits with the first non-zero worker status (0 if all succeed).

Note [One BLAS thread per worker]: with more than one worker, each gets
``OMP_NUM_THREADS=1`` unless the variable is already set (torchrun does the
same). N workers that each run a BLAS pool sized to the machine put N x cores
threads on the cores; OpenBLAS threads spin while they wait for each other, so
a small matmul then waits for its own threads to be scheduled and takes
milliseconds instead of microseconds, in long and short runs at random (the
bimodal one-process backward of ``benchmarks/distributed.py``). OpenBLAS and
OpenMP both read the variable; set it yourself to give each worker more threads.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import time


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def launch(nproc: int, argv: list[str], master_addr: str = "127.0.0.1",
           master_port: int | None = None, grace: float = 10.0) -> int:
    """Run ``python argv...`` as ``nproc`` workers; their combined exit status."""
    if nproc < 1:
        raise ValueError(f"launch: nproc must be >= 1, got {nproc}")
    port = master_port or free_port(master_addr)
    env = dict(os.environ, WORLD_SIZE=str(nproc), MASTER_ADDR=master_addr,
               MASTER_PORT=str(port))
    env.setdefault("AIOGRAD_RPC_SECRET", secrets.token_hex(16))
    if nproc > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # Note [One BLAS thread per worker]
    procs = [subprocess.Popen([sys.executable, *argv],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(nproc)]
    status = 0
    try:
        running = set(range(nproc))
        while running:
            for r in sorted(running):
                rc = procs[r].poll()
                if rc is None:
                    continue
                running.discard(r)
                if rc != 0 and status == 0:
                    status = rc if rc > 0 else 128 - rc
                    print(f"launch: worker {r} exited with status {rc}; stopping the others",
                          file=sys.stderr)
                    _stop([procs[i] for i in running], grace)
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop(procs, grace)
        status = 130
    return status


def _stop(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            p.kill()


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiograd.distributed.launch",
                                     description="Start N local aiograd RPC workers.")
    parser.add_argument("--nproc", type=int, required=True, help="number of workers")
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=None,
                        help="rank 0's port (default: a free one)")
    parser.add_argument("script")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    return launch(ns.nproc, [ns.script, *ns.script_args], ns.master_addr, ns.master_port)


if __name__ == "__main__":
    sys.exit(main())
