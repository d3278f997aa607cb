"""Devices: parsing and interning, the backend registry, factories, ``to()`` and its
gradients, and multi-device scheduling on the fake backend (tests/fake_backend.py).

Every async test runs under asyncio and Trio (see conftest.py).
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import numpy as np
import pytest
from fake_backend import FakeArray, ProbeCall, probe

import aiograd as ag
from aiograd import devices
from aiograd.engine.engine import get_engine
from aiograd.graph._node import AccumulateGrad

pytestmark = pytest.mark.timeout(30)


def host(t: ag.Tensor) -> np.ndarray:
    """The values of ``t`` as a NumPy array, from any device."""
    return t.device.backend.to_host(t.detach().data)


# ---- parsing and interning ----


def test_device_strings_are_interned():
    assert ag.device("cpu") is ag.device("cpu", 0) is devices.CPU
    assert ag.device("cuda:1") is ag.device("cuda", 1) is ag.Device("cuda", 1)
    assert ag.device("cuda") is ag.device("cuda:0")
    assert ag.device(ag.device("cuda:1")) is ag.device("cuda:1")


def test_device_str_repr_eq_hash():
    d = ag.device("cuda:1")
    assert str(d) == "cuda:1" and str(ag.device("cpu")) == "cpu"
    assert repr(d) == "device(type='cuda', index=1)"
    assert d == "cuda:1" and d != "cuda:0" and d != "nonsense:0"
    assert {d: 1}[ag.device("cuda", 1)] == 1
    assert (d.type, d.index) == ("cuda", 1)


@pytest.mark.parametrize(
    ("spec", "index", "error", "message"),
    [
        ("gpu", None, RuntimeError, "unknown device type 'gpu'"),
        ("cuda:x", None, ValueError, "invalid device string"),
        ("cuda:-1", None, ValueError, "non-negative"),
        ("cuda:1", 2, ValueError, "already has an index"),
        ("cpu:1", None, ValueError, "one CPU device"),
        ("cuda", True, ValueError, "non-negative int"),
        (3, None, TypeError, "must be a string or a Device"),
    ],
)
def test_device_parse_errors(spec, index, error, message):
    with pytest.raises(error, match=message):
        ag.device(spec, index)


def test_fake_devices_resolve_only_while_registered(fake_backend):
    d = ag.device("fake:2")
    assert d.backend is fake_backend and d.xp is fake_backend.xp
    devices.unregister_backend("fake")
    try:
        with pytest.raises(RuntimeError, match="unknown device type 'fake'"):
            ag.device("fake:2")
    finally:
        devices.register_backend(fake_backend)
    assert ag.device("fake:2") is d  # the same backend again: the same Device


def test_register_backend_rejects_bad_backends():
    with pytest.raises(TypeError, match="expected a DeviceBackend"):
        devices.register_backend(object())
    bad = devices.DeviceBackend()
    bad.name = "no-dashes"
    with pytest.raises(ValueError, match="identifier"):
        devices.register_backend(bad)
    with pytest.raises(ValueError, match="cannot be replaced"):
        devices.register_backend(devices.CPUBackend())
    with pytest.raises(ValueError, match="cannot be removed"):
        devices.unregister_backend("cuda")


def test_device_of_array(fake_backend):
    assert devices.device_of_array(np.zeros(2)) is devices.CPU
    assert devices.device_of_array(np.float32(1)) is devices.CPU
    arr = fake_backend.from_host(np.zeros(2), 1)
    assert devices.device_of_array(arr) is ag.device("fake:1")
    with pytest.raises(TypeError, match="not an array"):
        devices.device_of_array([1, 2])


# ---- the fake backend behaves like a device ----


def test_fake_arrays_stay_on_their_device(fake_backend):
    a = fake_backend.from_host(np.arange(3.0), 1)
    for result in (a * 2, a.sum(), np.exp(a), a[1:], a.astype(np.float32), np.stack([a, a])):
        assert isinstance(result, FakeArray) and result.fake_index == 1
    b = fake_backend.from_host(np.arange(3.0), 2)
    with pytest.raises(RuntimeError, match="different fake devices"):
        a + b
    with pytest.raises(TypeError, match="host NumPy array"):
        a + np.ones(3)


def test_fake_xp_creates_on_the_current_device(fake_backend):
    assert fake_backend.xp.zeros(2).fake_index == 0
    with fake_backend.device_guard(2):
        assert fake_backend.xp.ones(2).fake_index == 2
    with pytest.raises(RuntimeError, match="invalid device ordinal 5"):
        fake_backend.from_host(np.zeros(1), 5)


# ---- factories ----


@pytest.mark.parametrize(
    "make",
    [
        lambda d: ag.tensor([1.0, 2.0], device=d),
        lambda d: ag.zeros(2, 3, device=d),
        lambda d: ag.ones(3, device=d),
        lambda d: ag.full((2,), 7.0, device=d),
        lambda d: ag.arange(4, device=d),
        lambda d: ag.eye(2, device=d),
        lambda d: ag.randn(2, device=d),
        lambda d: ag.rand(2, device=d),
    ],
)
def test_factories_place_on_device(fake_backend, make):
    t = make("fake:1")
    assert t.device is ag.device("fake:1")
    assert isinstance(t.data, FakeArray) and t.data.fake_index == 1
    like = ag.zeros_like(t)
    assert like.device is t.device and like.dtype == t.dtype


def test_tensor_from_a_fake_tensor_keeps_its_device(fake_backend):
    t = ag.tensor([1.0, 2.0], device="fake:2", requires_grad=True)
    assert t.requires_grad and t.is_leaf
    copy = ag.tensor(t.detach())
    assert copy.device is t.device
    np.testing.assert_array_equal(host(copy), [1.0, 2.0])
    with pytest.raises(TypeError, match="Tensor.cpu"):
        t.detach().numpy()


def test_factory_on_a_missing_device_raises(fake_backend):
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        ag.zeros(2, device="fake:3")


# ---- to() ----


def test_to_same_device_and_dtype_returns_self(fake_backend):
    x = ag.tensor([1.0], requires_grad=True)
    assert x.to("cpu") is x
    assert x.to(ag.float32) is x
    assert x.cpu() is x
    assert x.float() is x
    y = x.to("fake:0")
    assert y.to(ag.device("fake", 0)) is y
    assert y.to(y) is y


def test_to_copy_true_makes_a_new_tensor():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x.to("cpu", copy=True)
    assert y is not x and y.grad_fn.name() == "ToCopyBackward0"
    assert not np.shares_memory(y.data, x.data)


def test_to_argument_forms(fake_backend):
    x = ag.tensor([1.0, 2.0])
    other = ag.zeros(1, dtype=ag.float64, device="fake:2")
    assert x.to("fake:1").device is ag.device("fake:1")
    assert x.to(ag.device("fake:1")).device is ag.device("fake:1")
    assert x.to(ag.float64).dtype == ag.float64
    assert x.to(np.float16).dtype == ag.float16
    both = x.to("fake:1", ag.float64)
    assert (both.device, both.dtype) == (ag.device("fake:1"), ag.float64)
    kw = x.to(dtype=ag.float64, device="fake:0")
    assert (kw.device, kw.dtype) == (ag.device("fake:0"), ag.float64)
    like = x.to(other)
    assert (like.device, like.dtype) == (other.device, ag.float64)
    assert x.double().dtype == ag.float64 and x.half().dtype == ag.float16
    assert x.long().dtype == ag.int64 and x.int().dtype == ag.int32
    assert x.bool().dtype == ag.bool_


def test_to_errors(fake_backend):
    x = ag.tensor([1.0])
    with pytest.raises(RuntimeError, match="unknown device type 'tpu'"):
        x.to("tpu")
    with pytest.raises(RuntimeError, match="fake:3 is not available.*3 device"):
        x.to("fake:3")
    with pytest.raises(TypeError, match="expects a device"):
        x.to(3)
    with pytest.raises(TypeError, match="two dtypes"):
        x.to(ag.float64, ag.float32)
    with pytest.raises(TypeError, match="unknown dtype"):
        x.to(dtype="not-a-dtype")
    with pytest.raises(ValueError, match="expects a CUDA device"):
        x.cuda("fake:0")


def test_cuda_without_cupy_says_so():
    try:
        import cupy  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("CuPy is installed")
    with pytest.raises(RuntimeError, match="need CuPy"):
        ag.tensor([1.0]).cuda()


def test_cast_to_integer_drops_the_graph():
    x = ag.tensor([1.5, 2.5], requires_grad=True)
    y = x.to(ag.int64)
    assert y.grad_fn is None and not y.requires_grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype"):
        y.requires_grad_()


@pytest.mark.anyio
async def test_dtype_cast_gradient_is_cast_back():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x.double()
    assert y.grad_fn.name() == "ToCopyBackward0"
    await (y * y).sum().backward()
    assert x.grad.dtype == ag.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


@pytest.mark.anyio
async def test_device_copy_gradient_goes_back_to_the_source(fake_backend):
    x = ag.tensor([1.0, 2.0, 3.0], device="fake:1", requires_grad=True)
    y = x.to("fake:2")
    node = y.grad_fn
    assert node.name() == "ToCopyBackward0"
    assert node.input_metadata[0].device is ag.device("fake:2")
    await (y * y).sum().backward()
    assert x.grad.device is ag.device("fake:1") and x.grad.data.fake_index == 1
    np.testing.assert_allclose(host(x.grad), [2.0, 4.0, 6.0])


def forward_chain(x: ag.Tensor, w: ag.Tensor, route: list[str]) -> ag.Tensor:
    """A small computation that visits ``route``'s devices in turn, ending on the CPU."""
    h = x
    for i, dev in enumerate(route):
        h = h.to(dev)
        h = h * w.to(dev) + float(i)
        h = h * h
    return h.cpu().sum()


@pytest.mark.anyio
async def test_round_trip_gradients_match_a_cpu_run(fake_backend):
    data = np.array([0.5, -1.0, 2.0], dtype=np.float64)
    wdata = np.array([1.5, 0.25, -0.5], dtype=np.float64)
    x, w = ag.tensor(data, requires_grad=True), ag.tensor(wdata, requires_grad=True)
    out = forward_chain(x, w, ["fake:0", "fake:1", "cpu"])
    await out.backward()
    cx, cw = ag.tensor(data, requires_grad=True), ag.tensor(wdata, requires_grad=True)
    expected = forward_chain(cx, cw, ["cpu", "cpu", "cpu"])
    await expected.backward()
    assert out.item() == pytest.approx(expected.item())
    assert x.grad.device is devices.CPU and w.grad.device is devices.CPU
    np.testing.assert_allclose(x.grad.numpy(), cx.grad.numpy())
    np.testing.assert_allclose(w.grad.numpy(), cw.grad.numpy())


@pytest.mark.anyio
async def test_round_trip_matches_torch(fake_backend):
    torch = pytest.importorskip("torch")
    data = np.array([0.5, -1.0, 2.0], dtype=np.float64)
    wdata = np.array([1.5, 0.25, -0.5], dtype=np.float64)
    x, w = ag.tensor(data, requires_grad=True), ag.tensor(wdata, requires_grad=True)
    await forward_chain(x, w, ["fake:0", "fake:1", "fake:2"]).backward()
    tx = torch.tensor(data, requires_grad=True)
    tw = torch.tensor(wdata, requires_grad=True)
    h = tx
    for i in range(3):
        h = (h * tw + float(i)) ** 2
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())


@pytest.mark.anyio
async def test_double_backward_through_device_copies(fake_backend):
    x = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    y = x.to("fake:0")
    (g,) = await ag.grad((y * y * y).sum(), x, create_graph=True)
    assert g.device is devices.CPU and g.grad_fn is not None
    np.testing.assert_allclose(g.detach().numpy(), [3.0, 12.0])
    (gg,) = await ag.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6.0, 12.0])


@pytest.mark.anyio
async def test_gradient_on_the_wrong_device_is_an_error(fake_backend):
    class WrongDevice(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, grad):
            return grad.to("fake:1")

    x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    with pytest.raises(RuntimeError, match=r"WrongDeviceBackward returned an invalid gradient "
                                           r"at index 0 - expected device fake:0 but got fake:1"):
        await WrongDevice.apply(x).sum().backward()


# ---- scheduling: worker threads ----


def threads_by_label(calls: list[ProbeCall]) -> dict[str, str]:
    return {c.label: c.thread for c in calls}


@pytest.mark.anyio
async def test_each_device_runs_its_nodes_on_its_worker(fake_backend):
    calls: list[ProbeCall] = []
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    h = probe(x, "cpu", calls)
    for dev in ("fake:0", "fake:1", "fake:2"):
        h = probe(h.to(dev) * 2.0, dev, calls)
    await h.cpu().sum().backward()
    assert threads_by_label(calls) == {
        "cpu": "aiograd-worker-cpu",
        "fake:0": "aiograd-worker-fake:0",
        "fake:1": "aiograd-worker-fake:1",
        "fake:2": "aiograd-worker-fake:2",
    }
    assert [c.label for c in calls] == ["fake:2", "fake:1", "fake:0", "cpu"]
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 8.0])


@pytest.mark.anyio
async def test_multithreading_disabled_runs_everything_on_the_caller(fake_backend):
    calls: list[ProbeCall] = []
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    h = probe(x, "cpu", calls)
    for dev in ("fake:0", "fake:1"):
        h = probe(h.to(dev) * 3.0, dev, calls)
    with ag.set_multithreading_enabled(False):
        await h.cpu().sum().backward()
    me = threading.current_thread().name
    assert [c.thread for c in calls] == [me, me, me]
    np.testing.assert_allclose(x.grad.numpy(), [9.0, 9.0])


def test_sync_backward_runs_device_nodes_on_their_workers(fake_backend):
    calls: list[ProbeCall] = []
    x = ag.tensor([1.0], requires_grad=True)
    h = probe(probe(x.to("fake:1"), "fake:1", calls).cpu(), "cpu", calls)
    h.sum().backward_sync()
    assert threads_by_label(calls) == {
        "fake:1": "aiograd-worker-fake:1",
        "cpu": threading.current_thread().name,  # backward_sync drives CPU nodes itself
    }
    assert x.grad.item() == 1.0


@pytest.mark.anyio
async def test_a_cpu_leaf_gets_its_gradient_on_the_cpu_executor(fake_backend, monkeypatch):
    writers: list[str] = []
    accumulate = AccumulateGrad.accumulate

    def spy(self, *args):
        writers.append(threading.current_thread().name)
        return accumulate(self, *args)

    monkeypatch.setattr(AccumulateGrad, "accumulate", spy)
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = ag.tensor([3.0], requires_grad=True)
    # x's gradient is copied back by the fake:1 node; y's comes from a CPU node.
    await ((x.to("fake:1") * 2.0).cpu().sum() + (y * 3.0).sum()).backward()
    assert writers == ["aiograd-worker-cpu"] * 2
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    assert y.grad.item() == 3.0


@pytest.mark.anyio
async def test_workers_are_reused_across_registrations(fake_backend):
    x = ag.tensor([1.0], device="fake:1", requires_grad=True)
    await (x * 2.0).sum().backward()
    workers = get_engine().stats().workers
    devices.unregister_backend("fake")
    devices.register_backend(fake_backend)
    y = ag.tensor([1.0], device="fake:1", requires_grad=True)
    await (y * 2.0).sum().backward()
    assert get_engine().stats().workers == workers
    assert y.grad.item() == 2.0


# ---- a GraphTask spanning devices completes exactly once ----


def branchy(x: ag.Tensor, calls: list[ProbeCall], after) -> ag.Tensor:
    """Three branches over three devices, joined on the CPU, each probed."""
    total = None
    for dev in ("fake:0", "fake:1", "fake:2"):
        b = probe(x.to(dev) * 2.0, dev, calls, after)
        b = (b * b).cpu().sum()
        total = b if total is None else total + b
    return total


@pytest.mark.anyio
async def test_multi_device_graph_task_completes_exactly_once(fake_backend):
    engine = get_engine()
    before = engine.stats().completed_graph_tasks
    finals: list[str] = []
    calls: list[ProbeCall] = []

    def queue_final() -> None:
        ag.queue_callback(lambda: finals.append(threading.current_thread().name))

    x = ag.tensor([1.0, -2.0], requires_grad=True)
    await branchy(x, calls, queue_final).backward()
    assert finals == [threading.current_thread().name] * 3  # one per queue_callback
    assert sorted(c.thread for c in calls) == [f"aiograd-worker-fake:{i}" for i in range(3)]
    assert engine.stats().completed_graph_tasks - before == 1
    np.testing.assert_allclose(x.grad.numpy(), 3 * 8.0 * np.array([1.0, -2.0]))


@pytest.mark.anyio
async def test_concurrent_multi_device_backwards_each_complete_once(fake_backend):
    n = 8
    done = [0] * n
    finals = [0] * n
    xs = [ag.tensor([float(i + 1)], requires_grad=True) for i in range(n)]

    async def one(i: int) -> None:
        calls: list[ProbeCall] = []
        called = [False]

        def queue_once() -> None:
            if not called[0]:
                called[0] = True

                def final() -> None:
                    finals[i] += 1

                ag.queue_callback(final)

        await branchy(xs[i], calls, queue_once).backward()
        done[i] += 1

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
    assert done == [1] * n and finals == [1] * n
    for i, x in enumerate(xs):
        assert x.grad.item() == pytest.approx(24.0 * (i + 1))
    assert get_engine().stats().running_graph_tasks == 0


@pytest.mark.anyio
async def test_error_on_a_device_worker_reaches_the_caller_once(fake_backend):
    class Boom(ag.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, grad):
            raise ValueError(f"boom on {threading.current_thread().name}")

    x = ag.tensor([1.0], requires_grad=True)
    y = Boom.apply(x.to("fake:2")).cpu().sum()
    with pytest.raises(ValueError, match="boom on aiograd-worker-fake:2"):
        await y.backward()
    assert x.grad is None
    # the workers serve the next backward normally
    z = (x.to("fake:2") * 5.0).cpu().sum()
    await z.backward()
    assert x.grad.item() == 5.0


# ---- save_on_cpu ----


def _saved_on_cpu_step(x: ag.Tensor, w: ag.Tensor) -> tuple[list[Any], Any]:
    """A step whose saved tensors go through save_on_cpu; returns what was packed and
    the loss (its backward not run yet)."""
    hooks = ag.graph.save_on_cpu()
    packed: list[Any] = []
    pack = hooks.pack_hook
    hooks.pack_hook = lambda t: packed.append(pack(t)) or packed[-1]
    with hooks:
        loss = ((x @ w).tanh() * x.sum(1, keepdim=True)).sum()
    return packed, loss


def test_save_on_cpu_keeps_saved_tensors_on_the_host_and_gives_the_same_gradients(
        fake_backend):
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    x = ag.tensor(xs, device="fake:1", requires_grad=True)
    w = ag.tensor(ws, device="fake:1", requires_grad=True)
    packed, loss = _saved_on_cpu_step(x, w)
    assert packed and all(device == ag.device("fake:1") and t.device == ag.device("cpu")
                          and type(t.data) is np.ndarray for device, t in packed)
    ag.backward_sync(loss)  # the fake device refuses host arrays: unpacking moved them back
    assert isinstance(x.grad.data, FakeArray) and x.grad.data.fake_index == 1

    x0 = ag.tensor(xs, requires_grad=True)
    w0 = ag.tensor(ws, requires_grad=True)
    ag.backward_sync(((x0 @ w0).tanh() * x0.sum(1, keepdim=True)).sum())
    np.testing.assert_allclose(np.asarray(x.grad.data), x0.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(w.grad.data), w0.grad.numpy(), rtol=1e-12)


def test_save_on_cpu_on_the_cpu_matches_pytorchs():
    torch = pytest.importorskip("torch")

    def run(lib: Any, save_on_cpu: Any, backward: Any) -> list[list[float]]:
        x = lib.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        with save_on_cpu():
            loss = (x.exp() * x).sum()
        backward(loss)
        return x.grad.numpy().tolist()

    ours = run(ag, ag.graph.save_on_cpu, ag.backward_sync)
    theirs = run(torch, torch.autograd.graph.save_on_cpu, lambda loss: loss.backward())
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
