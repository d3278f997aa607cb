"""No host synchronisation in a training step on a device (issue 22, item 2).

The fake backend counts what would sync a CUDA device (``HostSyncs``): ``bool()``,
``int()``, ``float()``, ``.item()``, ``.get()`` of a device array, ``to_host`` and
``synchronize``. A full step (forward, backward, optimizer step) of an MLP and of a CNN
must do none.
"""

from __future__ import annotations

import numpy as np
import pytest
from fake_backend import host_syncs

import aiograd as ag
import aiograd.nn.functional as F
from aiograd import nn

pytestmark = pytest.mark.timeout(60)


class _Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.head = nn.Linear(6 * 2 * 2, 5)

    def forward(self, x: ag.Tensor) -> ag.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.reshape(x.shape[0], -1))


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))


def _step_syncs(model: nn.Module, optimizer_cls: type, x: np.ndarray) -> list:
    """The host syncs of the second of two training steps on fake:1."""
    model = model.to("fake:1")
    opt = optimizer_cls(model.parameters(), lr=1e-2)
    inputs = ag.tensor(x.astype(np.float32), device="fake:1")
    target = ag.tensor(np.arange(x.shape[0]) % 5, device="fake:1")

    def step() -> None:
        opt.zero_grad()
        loss = F.cross_entropy(model(inputs), target)
        ag.backward_sync(loss)
        opt.step()

    step()  # the first step creates the optimizer's state
    host_syncs.clear()
    step()
    return list(host_syncs.events)


@pytest.mark.parametrize("optimizer_cls", [ag.optim.SGD, ag.optim.Adam])
def test_mlp_training_step_does_not_sync(fake_backend, optimizer_cls):
    x = np.random.default_rng(0).standard_normal((8, 12))
    assert _step_syncs(_mlp(), optimizer_cls, x) == []


@pytest.mark.parametrize("optimizer_cls", [ag.optim.SGD, ag.optim.Adam])
def test_cnn_training_step_does_not_sync(fake_backend, optimizer_cls):
    x = np.random.default_rng(1).standard_normal((4, 3, 8, 8))
    assert _step_syncs(_Cnn(), optimizer_cls, x) == []


def test_a_host_read_is_counted(fake_backend):
    x = ag.tensor(np.arange(3.0), device="fake:1")
    host_syncs.clear()
    assert float(x.data.sum()) == 3.0
    x.data.max().item()
    fake_backend.to_host(x.data)
    assert [kind for kind, _ in host_syncs.events] == ["float", "item", "to_host"]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_device_cross_entropy_ignores_ignore_index_as_the_cpu(fake_backend, reduction):
    logits = np.random.default_rng(2).standard_normal((5, 4))
    target = np.array([1, -100, 3, -100, 0])
    results = []
    for device in ("cpu", "fake:1"):
        x = ag.tensor(logits, device=device, requires_grad=True)
        loss = F.cross_entropy(x, ag.tensor(target, device=device), reduction=reduction)
        (g,) = ag.grad_sync(loss.sum(), x)
        results.append((np.asarray(loss.detach().cpu().numpy()), g.cpu().numpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)


def test_device_cross_entropy_out_of_range_target_is_nan_without_sync(fake_backend):
    x = ag.tensor(np.zeros((3, 4)), device="fake:1", requires_grad=True)
    host_syncs.clear()
    loss = F.cross_entropy(x, ag.tensor(np.array([0, 7, 1]), device="fake:1"))
    (g,) = ag.grad_sync(loss, x)
    assert host_syncs.events == []
    assert np.isnan(loss.item()) and np.isnan(g.cpu().numpy()[1]).all()
