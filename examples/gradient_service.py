"""A tiny gradient service: a TCP server that answers gradient requests, and its client.

Run:  python examples/gradient_service.py

The server (``asyncio.start_server`` on 127.0.0.1, an ephemeral port) reads
newline-delimited JSON requests: logistic-regression weights ``w`` and a
batch ``x, y``. Connection handlers put each request on an ``asyncio.Queue``;
a pool of worker tasks takes them, builds the loss and computes its gradient
with ``await aiograd.grad(loss, [w])`` under an ``anyio.fail_after``
deadline. A request whose deadline passes gets an error reply; the engine
stops that backward and goes on serving the others.

The client in the same script opens four connections, sends 20 requests
(one with a deadline that has already passed), checks every gradient
against the closed form, prints a summary and shuts everything down.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import numpy as np

import aiograd

N_WORKERS = 3
N_CLIENTS = 4
REQUESTS_PER_CLIENT = 5
EXPIRED_REQUEST = 7  # sent with deadline 0: it must time out


# ---- server ----

async def gradient_of(request: dict[str, Any]) -> dict[str, Any]:
    """Mean logistic loss of ``w`` on ``(x, y)`` and its gradient, within the request's deadline."""
    w = aiograd.tensor(np.array(request["w"]), requires_grad=True)
    x = aiograd.tensor(np.array(request["x"]))
    signs = aiograd.tensor(2.0 * np.array(request["y"]) - 1.0)
    with anyio.fail_after(request["deadline"]):
        margins = (x @ w) * signs
        loss = (1.0 + (-margins).exp()).log().mean()  # log(1 + exp(-y z))
        (grad,) = await aiograd.grad(loss, [w])
    return {"id": request["id"], "loss": loss.item(), "grad": grad.data.tolist()}


async def worker(queue: asyncio.Queue[tuple[dict[str, Any], asyncio.Future[Any]]]) -> None:
    while True:
        request, reply = await queue.get()
        try:
            reply.set_result(await gradient_of(request))
        except TimeoutError:
            reply.set_result({"id": request["id"], "error": "deadline exceeded"})
        except Exception as exc:  # a bad request must not take the worker down
            reply.set_result({"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})
        finally:
            queue.task_done()


async def serve_connection(queue: asyncio.Queue[Any], reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[None]] = set()

    async def answer(reply: asyncio.Future[Any]) -> None:
        writer.write((json.dumps(await reply) + "\n").encode())
        await writer.drain()

    while True:
        line = await reader.readline()
        if not line:
            break
        reply = loop.create_future()
        await queue.put((json.loads(line), reply))
        task = asyncio.create_task(answer(reply))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    writer.close()
    await writer.wait_closed()


# ---- client ----

def make_request(i: int, rng: np.random.Generator) -> dict[str, Any]:
    x = rng.standard_normal((32, 5))
    y = (x[:, 0] + 0.5 * rng.standard_normal(32) > 0).astype(float)
    w = 0.1 * rng.standard_normal(5)
    deadline = 0.0 if i == EXPIRED_REQUEST else 5.0
    return {"id": i, "w": w.tolist(), "x": x.tolist(), "y": y.tolist(), "deadline": deadline}


def expected_gradient(request: dict[str, Any]) -> np.ndarray:
    """d/dw mean(log(1 + exp(-s x.w))) = x.T @ (-s * sigmoid(-s x.w)) / n, s = 2y - 1."""
    x, w = np.array(request["x"]), np.array(request["w"])
    s = 2.0 * np.array(request["y"]) - 1.0
    m = s * (x @ w)
    return x.T @ (-s / (1.0 + np.exp(m))) / len(s)


async def client(port: int, ids: list[int], results: dict[int, str]) -> None:
    rng = np.random.default_rng(ids[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    requests = {i: make_request(i, rng) for i in ids}
    for request in requests.values():
        writer.write((json.dumps(request) + "\n").encode())
    await writer.drain()
    for _ in ids:
        reply = json.loads(await reader.readline())
        i = reply["id"]
        if "error" in reply:
            results[i] = f"error: {reply['error']}"
            continue
        err = np.abs(np.array(reply["grad"]) - expected_gradient(requests[i])).max()
        status = "ok" if err < 1e-12 else "WRONG"
        results[i] = f"loss {reply['loss']:.4f}  grad max error {err:.1e}  {status}"
    writer.close()
    await writer.wait_closed()


async def main() -> None:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    workers = [asyncio.create_task(worker(queue)) for _ in range(N_WORKERS)]
    server = await asyncio.start_server(
        lambda r, w: serve_connection(queue, r, w), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    print(f"gradient service listening on 127.0.0.1:{port} with {N_WORKERS} workers")

    results: dict[int, str] = {}
    ids = list(range(N_CLIENTS * REQUESTS_PER_CLIENT))
    await asyncio.gather(*(
        client(port, ids[c::N_CLIENTS], results) for c in range(N_CLIENTS)
    ))
    for i in sorted(results):
        print(f"request {i:2d}: {results[i]}")

    server.close()
    await server.wait_closed()
    for task in workers:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)

    ok = sum(1 for r in results.values() if r.endswith(" ok"))
    timed_out = sum(1 for r in results.values() if "deadline exceeded" in r)
    print(f"served {len(results)} requests: {ok} ok, {timed_out} deadline exceeded")


if __name__ == "__main__":
    asyncio.run(main())
