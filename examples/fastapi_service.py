"""A FastAPI service returning saliency maps: per-request input gradients under a deadline.

Run:  python examples/fastapi_service.py      (needs the ``examples`` extra)

``POST /saliency`` takes an 8x8 image, a class and a deadline in milliseconds,
and answers the gradient of that class's logit with respect to the image (a
saliency map), computed with ``await aiograd.grad(logit, [image])`` inside
``anyio.fail_after``. A request past its deadline gets HTTP 504; the engine
stops that backward and goes on serving the others. The graph of one request
is small, so its backward runs inline on the server's event loop; a batch
request (several images in one graph) is larger and runs on aiograd's CPU
worker while the loop goes on serving.

The script starts uvicorn on an ephemeral port, fires concurrent requests from
an ``httpx.AsyncClient`` (one with a deadline of 0 ms), checks every saliency
map against its closed form, prints a summary and shuts the server down.
"""

from __future__ import annotations

import asyncio

import anyio
import numpy as np
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

import aiograd
from aiograd import nn

SIDE = 8
N_CLASSES = 10
HIDDEN = 32
N_REQUESTS = 20
EXPIRED_REQUEST = 7  # sent with a deadline of 0 ms: it must time out


class SaliencyRequest(BaseModel):
    images: list[list[list[float]]]  # a batch of SIDE x SIDE images
    target: int = Field(ge=0, lt=N_CLASSES)
    deadline_ms: float = Field(default=1000.0, ge=0)


def make_model() -> nn.Module:
    aiograd.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(SIDE * SIDE, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, N_CLASSES))


def make_app(model: nn.Module) -> FastAPI:
    app = FastAPI(title="aiograd saliency")

    @app.post("/saliency")
    async def saliency(request: SaliencyRequest) -> dict[str, list]:
        images = np.asarray(request.images, dtype=np.float32)
        if images.ndim != 3 or images.shape[1:] != (SIDE, SIDE):
            raise HTTPException(422, f"images must be N x {SIDE} x {SIDE}, got {images.shape}")
        x = aiograd.tensor(images, requires_grad=True)
        try:
            with anyio.fail_after(request.deadline_ms / 1000):
                logits = model(x)
                (grad,) = await aiograd.grad(logits[:, request.target].sum(), [x])
        except TimeoutError:
            raise HTTPException(504, "deadline exceeded") from None
        return {"saliency": grad.numpy().tolist(), "logits": logits.detach().numpy().tolist()}

    return app


def expected_saliency(model: nn.Module, images: np.ndarray, target: int) -> np.ndarray:
    """The closed form: W1^T (W2[target] * (1 - tanh(W1 x + b1)^2)) for each image."""
    w1, b1 = model[1].weight.detach().numpy(), model[1].bias.detach().numpy()
    w2 = model[3].weight.detach().numpy()
    h = np.tanh(images.reshape(len(images), -1) @ w1.T + b1)
    return ((w2[target] * (1 - h * h)) @ w1).reshape(images.shape)


async def fire(client, model: nn.Module, i: int, rng: np.random.Generator) -> str:
    """One request; returns 'ok', 'deadline exceeded' or a description of what went wrong."""
    images = rng.standard_normal((1 if i % 5 else 64, SIDE, SIDE)).astype(np.float32)
    target = i % N_CLASSES
    deadline = 0.0 if i == EXPIRED_REQUEST else 10_000.0
    reply = await client.post("/saliency", json={"images": images.tolist(), "target": target,
                                                 "deadline_ms": deadline})
    if reply.status_code == 504:
        return "deadline exceeded"
    if reply.status_code != 200:
        return f"WRONG: HTTP {reply.status_code}"
    got = np.asarray(reply.json()["saliency"])
    want = expected_saliency(model, images, target)
    return "ok" if np.allclose(got, want, rtol=1e-4, atol=1e-5) else "WRONG saliency"


async def run_clients(client, model: nn.Module) -> list[str]:
    rng = np.random.default_rng(1)
    results: list[str] = [""] * N_REQUESTS

    async def one(i: int) -> None:
        results[i] = await fire(client, model, i, rng)

    async with anyio.create_task_group() as tg:
        for i in range(N_REQUESTS):
            tg.start_soon(one, i)
    return results


def summarize(results: list[str]) -> str:
    ok = results.count("ok")
    late = results.count("deadline exceeded")
    wrong = [r for r in results if r not in ("ok", "deadline exceeded")]
    return (f"served {len(results)} requests: {ok} ok, {late} deadline exceeded"
            + (f"; {', '.join(wrong)}" if wrong else ""))


async def main() -> None:
    import httpx
    import uvicorn

    model = make_model()
    config = uvicorn.Config(make_app(model), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:  # uvicorn sets this once it listens
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        results = await run_clients(client, model)
    server.should_exit = True
    await serving
    print(summarize(results))


if __name__ == "__main__":
    asyncio.run(main())
