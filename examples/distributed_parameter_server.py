"""A parameter server and two trainers, with distributed autograd.

Run on one machine with one command:

    python -m aiograd.distributed.launch --nproc 3 examples/distributed_parameter_server.py

Rank 0 is the parameter server: it owns the weights of a linear regression.
Ranks 1 and 2 are trainers: each fetches the weights by RPC inside a
distributed autograd context, computes a loss on its own data, runs the
distributed backward (the gradient flows back to the server through the
send/recv pair the RPC recorded) and steps the server's weights with a
DistributedOptimizer. Every worker exits 0 when the loss has dropped.
"""
from __future__ import annotations

import asyncio
import os

import numpy

import aiograd
from aiograd.distributed import autograd as dist_autograd
from aiograd.distributed import rpc
from aiograd.distributed.optim import DistributedOptimizer

TRUE_W = numpy.array([[2.0], [-3.0], [0.5]])
_weights: dict[str, aiograd.Tensor] = {}


def weights() -> aiograd.Tensor:
    """The server's parameter (made on first use, on the server)."""
    if "w" not in _weights:
        _weights["w"] = aiograd.tensor(numpy.zeros((3, 1)), requires_grad=True)
    return _weights["w"]


def weights_rref() -> rpc.RRef:
    return rpc.RRef.local(weights())


async def train(rank: int, steps: int = 30) -> None:
    rng = numpy.random.default_rng(rank)
    x = aiograd.tensor(rng.standard_normal((64, 3)))
    y = aiograd.tensor(x.data @ TRUE_W)
    opt = await DistributedOptimizer.create(
        aiograd.optim.SGD, [await rpc.rpc_async("ps", weights_rref)], lr=0.1)
    losses = []
    for _ in range(steps):
        async with dist_autograd.context() as context_id:
            w = await rpc.rpc_async("ps", weights)
            loss = ((x @ w - y) ** 2).mean()
            await dist_autograd.backward(context_id, [loss])
            await opt.step(context_id)
        losses.append(float(loss.data))
    print(f"trainer {rank}: loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    assert losses[-1] < 0.1 * losses[0], losses


def main() -> None:
    rank = int(os.environ["RANK"])
    rpc.init_rpc("ps" if rank == 0 else f"trainer{rank}")  # the rest from the environment
    if rank != 0:
        asyncio.run(train(rank))
    rpc.shutdown(graceful=True)
    if rank == 0:
        print(f"server: w = {weights().data.ravel().round(3).tolist()}", flush=True)


if __name__ == "__main__":
    main()
