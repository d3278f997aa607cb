"""Real CUDA (CuPy) tests. Skipped cleanly without CuPy or without a CUDA device.

The same behaviours run on every machine through the fake backend
(test_devices.py, test_streams.py); these check the CuPy backend itself.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import aiograd as ag

cupy = pytest.importorskip("cupy")
if ag.cuda.device_count() < 1:  # no driver or no device
    pytest.skip("CuPy finds no CUDA device", allow_module_level=True)

from fake_backend import ProbeCall, probe  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.timeout(60)]

CUDA0 = "cuda:0"


def cpu_values(t: ag.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def model(x: ag.Tensor, w: ag.Tensor) -> ag.Tensor:
    return ((x * w + 1.0) * x).tanh().sum()


@pytest.mark.anyio
async def test_forward_backward_on_cuda_matches_cpu():
    data = np.array([0.5, -1.0, 2.0])
    wdata = np.array([1.5, 0.25, -0.5])
    x = ag.tensor(data, device=CUDA0, requires_grad=True)
    w = ag.tensor(wdata, device=CUDA0, requires_grad=True)
    out = model(x, w)
    assert out.device is ag.device(CUDA0) and isinstance(out.data, cupy.ndarray)
    await out.backward()
    cx, cw = ag.tensor(data, requires_grad=True), ag.tensor(wdata, requires_grad=True)
    expected = model(cx, cw)
    await expected.backward()
    assert out.item() == pytest.approx(expected.item())
    assert x.grad.device is ag.device(CUDA0)
    np.testing.assert_allclose(cpu_values(x.grad), cx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(cpu_values(w.grad), cw.grad.numpy(), rtol=1e-6)


@pytest.mark.anyio
async def test_cross_device_copy_gradient_returns_to_the_host():
    calls: list[ProbeCall] = []
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = probe(x.cuda(), "cuda", calls)
    assert y.device is ag.device(CUDA0)
    await (y * y).cpu().sum().backward()
    assert x.grad.device is ag.device("cpu")
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    assert [c.thread for c in calls] == ["aiograd-worker-cuda:0"]


@pytest.mark.anyio
async def test_backward_runs_on_the_forward_stream():
    calls: list[ProbeCall] = []
    side = cupy.cuda.Stream(non_blocking=True)
    x = ag.tensor([1.0, 2.0], device=CUDA0, requires_grad=True)
    with side:
        y = probe(x * 2.0, "side", calls)
    await y.sum().backward()
    assert calls[0].stream == side
    np.testing.assert_allclose(cpu_values(x.grad), [2.0, 2.0])


@pytest.mark.anyio
async def test_dtype_cast_on_cuda():
    x = ag.tensor([1.0, 2.0], device=CUDA0, requires_grad=True)
    y = x.double()
    assert y.dtype == ag.float64 and y.grad_fn.name() == "ToCopyBackward0"
    await (y * y).sum().backward()
    assert x.grad.dtype == ag.float32
    np.testing.assert_allclose(cpu_values(x.grad), [2.0, 4.0])


@pytest.mark.skipif(ag.cuda.device_count() < 2, reason="needs two CUDA devices")
@pytest.mark.anyio
async def test_two_devices_each_run_on_their_worker():
    calls: list[ProbeCall] = []
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    h = probe(x.to("cuda:0") * 2.0, "cuda:0", calls)
    h = probe(h.to("cuda:1") * 3.0, "cuda:1", calls)
    await h.cpu().sum().backward()
    assert {c.label: c.thread for c in calls} == {
        "cuda:0": "aiograd-worker-cuda:0",
        "cuda:1": "aiograd-worker-cuda:1",
    }
    assert threading.current_thread().name not in {c.thread for c in calls}
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])
