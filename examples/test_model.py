"""Testing a model the way a user would: pytest-asyncio tests with ``aiograd.testing``.

Run:  pytest examples/test_model.py          (aiograd installed: the plugin loads itself)
      PYTHONPATH=. pytest -p aiograd.pytest_plugin examples/test_model.py   (a checkout)

The ``aiograd_no_leaks`` fixture comes from aiograd's pytest plugin: it fails a
test that leaves backward passes running, callbacks pending or threads behind.
The PyTorch comparison runs only where PyTorch is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import aiograd
from aiograd import nn
from aiograd.testing import assert_grads_close, check_gradients, check_gradients_async


class TinyClassifier(nn.Module):
    """The model under test: two layers and a residual connection."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 6)
        self.fc2 = nn.Linear(6, 3)

    def forward(self, x: aiograd.Tensor) -> aiograd.Tensor:
        return self.fc2(x + self.fc1(x).tanh())


@pytest.fixture
def model() -> TinyClassifier:
    aiograd.manual_seed(0)
    return TinyClassifier()


@pytest.fixture
def batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, 5)


@pytest.mark.asyncio
async def test_backward_matches_pytorch(model, batch, aiograd_no_leaks):
    torch = pytest.importorskip("torch")
    x, y = batch
    loss = nn.functional.cross_entropy(model(aiograd.tensor(x)), aiograd.tensor(y))
    await loss.backward()

    reference = torch.nn.Module()
    reference.fc1 = torch.nn.Linear(6, 6)
    reference.fc2 = torch.nn.Linear(6, 3)
    reference.load_state_dict({k: torch.from_numpy(np.array(v))
                               for k, v in model.state_dict().items()})
    tx = torch.from_numpy(x)
    out = reference.fc2(tx + reference.fc1(tx).tanh())
    torch.nn.functional.cross_entropy(out, torch.from_numpy(y)).backward()
    assert_grads_close(model, reference, rtol=1e-4, atol=1e-6)


@pytest.mark.asyncio
async def test_gradcheck_inside_the_loop(model, aiograd_no_leaks):
    x = aiograd.randn(2, 6, dtype=aiograd.float64, requires_grad=True)
    model = model.to(dtype=aiograd.float64)
    await check_gradients_async(lambda t: model(t).sum(), x)


def test_gradcheck_of_the_residual_block(model):
    model = model.to(dtype=aiograd.float64)  # gradcheck needs float64 throughout
    check_gradients(lambda t: t + model.fc1(t).tanh(), aiograd.randn(3, 6, requires_grad=True))


@pytest.mark.asyncio
async def test_a_training_step_lowers_the_loss(model, batch, aiograd_no_leaks):
    x, y = map(aiograd.tensor, batch)
    opt = aiograd.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        await loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
