"""Regenerate the pictures docs/ shows: the backward graph of a small MLP (Graphviz)
and a screenshot of a backward timeline (headless Chromium on the profiler's HTML page).

Run:  PYTHONPATH=. python scripts/docs_pictures.py
Needs Graphviz's ``dot`` and Debian's ``chromium`` (apt-get install -y graphviz chromium).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

import aiograd
from aiograd import nn

IMG = Path(__file__).resolve().parent.parent / "docs" / "img"


def mlp() -> nn.Module:
    aiograd.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def graph_png() -> None:
    model = mlp()
    model[0].weight.register_hook(lambda g: g)  # shown highlighted
    loss = nn.functional.cross_entropy(model(aiograd.randn(2, 4)), aiograd.tensor([0, 2]))
    aiograd.viz.render(loss, IMG / "mlp_graph.png", params=dict(model.named_parameters()))


async def traced(out: Path) -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                          nn.Linear(32, 4))
    async with aiograd.profiler.trace(out, html=True):
        for _ in range(2):
            await model(aiograd.randn(4, 16)).sum().backward()  # inline on the loop
        await model(aiograd.randn(8192, 16)).sum().backward()  # on the worker


def timeline_png() -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium not found")
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "bwd.json"
        asyncio.run(traced(trace))
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", "--window-size=1100,260",
                        f"--screenshot={IMG / 'timeline.png'}",
                        trace.with_suffix(".html").as_uri()],
                       check=True, capture_output=True, timeout=120)


if __name__ == "__main__":
    IMG.mkdir(parents=True, exist_ok=True)
    graph_png()
    timeline_png()
    print("wrote", IMG / "mlp_graph.png", IMG / "timeline.png")
