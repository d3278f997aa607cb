"""The device-path fast paths (Note [Device fast paths] in aiograd/engine/evaluate.py).

Each fast path must give what the full path gives: the chain shortcut on a
device worker keeps PyTorch's node order; a node whose stream is already
current runs without a guard, any other node still gets one; a gradient that
does not match its metadata still goes through validation; the device of an
array is found by its type only for a backend's exact array type; the
single-stream accumulation adds on the consumer's stream without waits.

Every async test runs under asyncio and Trio (see conftest.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from fake_backend import FakeArray, FakeBackend, ProbeCall, probe

import aiograd as ag
from aiograd import devices
from aiograd.engine import evaluate
from aiograd.engine.input_buffer import accumulate
from aiograd.engine.validate import plain_grads
from aiograd.graph._node import InputMetadata, Node

pytestmark = pytest.mark.timeout(60)

WORKER0 = "aiograd-worker-fake:0"


def count_guards(monkeypatch: pytest.MonkeyPatch, fake: FakeBackend) -> list[tuple[str, Any]]:
    """Record (thread, stream) for every ``stream_guard`` entered on ``fake`` from now on."""
    entered: list[tuple[str, Any]] = []
    original = fake.stream_guard

    @contextmanager
    def stream_guard(stream: Any) -> Iterator[None]:
        entered.append((threading.current_thread().name, stream))  # atomic under the GIL
        with original(stream):
            yield

    monkeypatch.setattr(fake, "stream_guard", stream_guard)
    return entered


# ---- the chain shortcut and the private heap on a device worker ----


def _ladder(x: Any, calls: list[Any], probe_fn: Any) -> Any:
    """Two branches of probes joined by a sum, then a probe: a graph whose order matters."""
    a = probe_fn(x * 2.0, "a1", calls)
    a = probe_fn(a * 3.0, "a2", calls)
    b = probe_fn(x * 5.0, "b1", calls)
    b = probe_fn(b + 1.0, "b2", calls)
    return probe_fn(a * b, "top", calls)


@pytest.mark.anyio
async def test_nodes_on_a_device_worker_run_in_pytorchs_order(fake_backend, workers_only):
    torch = pytest.importorskip("torch")

    class TorchProbe(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: Any, label: str, calls: list[str]) -> Any:
            ctx.label, ctx.calls = label, calls
            return t * 1.0

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            ctx.calls.append(ctx.label)
            return grad, None, None

    expected: list[str] = []
    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    _ladder(xt, expected, TorchProbe.apply).sum().backward()

    calls: list[ProbeCall] = []
    x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    y = _ladder(x, calls, probe)
    await y.backward(ag.ones(2, device="fake:0"))
    assert [c.label for c in calls] == expected
    assert {c.thread for c in calls} == {WORKER0}
    np.testing.assert_allclose(fake_backend.to_host(x.grad.data), xt.grad.numpy())


@pytest.mark.anyio
async def test_a_chain_on_a_device_worker_never_touches_the_heap(fake_backend, workers_only,
                                                                  monkeypatch):
    torch = pytest.importorskip("torch")
    pushes: list[str] = []
    real_push = evaluate._heappush

    def heappush(heap: list[Any], item: Any) -> None:
        pushes.append(threading.current_thread().name)
        real_push(heap, item)

    monkeypatch.setattr(evaluate, "_heappush", heappush)
    x = ag.tensor([0.5, 1.5], device="fake:0", requires_grad=True)
    xt = torch.tensor([0.5, 1.5], requires_grad=True)
    y, yt = x, xt
    for _ in range(50):
        y, yt = y * 1.5 - 0.25, yt * 1.5 - 0.25
    await y.backward(ag.ones(2, device="fake:0"))
    yt.backward(torch.ones(2))
    assert WORKER0 not in pushes
    np.testing.assert_allclose(fake_backend.to_host(x.grad.data), xt.grad.numpy())


# ---- the stream guard ----


@pytest.mark.anyio
async def test_a_node_on_the_current_stream_runs_unguarded_on_its_device(fake_backend,
                                                                          workers_only,
                                                                          monkeypatch):
    guards = count_guards(monkeypatch, fake_backend)
    calls: list[ProbeCall] = []
    current_devices: list[int] = []
    x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    y = probe(x * 2.0, "default", calls, lambda: current_devices.append(
        fake_backend.current_device()))
    await y.backward(ag.ones(2, device="fake:0"))
    assert calls[0].stream is fake_backend.default_stream(0)
    assert calls[0].thread == WORKER0
    assert current_devices == [0]
    assert [g for g in guards if g[0] == WORKER0] == []
    np.testing.assert_array_equal(fake_backend.to_host(x.grad.data), [2.0, 2.0])


@pytest.mark.anyio
async def test_a_node_on_a_side_stream_is_still_guarded(fake_backend, workers_only,
                                                        monkeypatch):
    guards = count_guards(monkeypatch, fake_backend)
    calls: list[ProbeCall] = []
    side = fake_backend.new_stream(0)
    x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    with fake_backend.stream_guard(side):
        y = probe(x * 2.0, "side", calls)
    await y.backward(ag.ones(2, device="fake:0"))
    assert calls[0].stream is side
    assert (WORKER0, side) in guards
    assert fake_backend.current_stream(0) is fake_backend.default_stream(0)


@pytest.mark.anyio
async def test_a_nested_drive_under_another_device_is_still_guarded(fake_backend,
                                                                    workers_only):
    # A node that makes fake:1 current and drives a nested backward on its own
    # worker: the nested fake:0 nodes must run with fake:0 current again, though
    # their stream (fake:0's default) is current on fake:0.
    calls: list[ProbeCall] = []
    current_devices: list[int] = []
    inner_x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    inner_y = probe(inner_x * 3.0, "inner", calls,
                    lambda: current_devices.append(fake_backend.current_device()))

    class Outer(ag.Function):
        @staticmethod
        def forward(ctx: Any, t: Any) -> Any:
            return t * 1.0

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            with fake_backend.device_guard(1):
                ag.backward_sync(inner_y, ag.ones(2, device="fake:0"))
            return grad

    x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    await Outer.apply(x).backward(ag.ones(2, device="fake:0"))
    assert [c.thread for c in calls] == [WORKER0]
    assert current_devices == [0]
    np.testing.assert_array_equal(fake_backend.to_host(inner_x.grad.data), [3.0, 3.0])


# ---- validation ----


def _consumer(shape: tuple[int, ...], dtype: Any, device: str, stream: Any = None) -> Node:
    node = Node()
    node.input_metadata = (InputMetadata(shape, np.dtype(dtype), ag.device(device), stream),)
    return node


def test_plain_grads_accepts_only_exact_matches(fake_backend):
    on0 = ((_consumer((2,), np.float32, "fake:0"), 0),)
    grad = fake_backend.from_host(np.ones(2, np.float32), 0)
    assert plain_grads(on0, [grad])
    assert plain_grads(on0, [None])
    assert plain_grads((None,), [grad])
    assert not plain_grads(on0, [grad, None])  # a count mismatch
    assert not plain_grads(on0, [fake_backend.from_host(np.ones(2, np.float32), 1)])
    assert not plain_grads(on0, [fake_backend.from_host(np.ones(2, np.float64), 0)])
    assert not plain_grads(on0, [fake_backend.from_host(np.ones((1, 2), np.float32), 0)])
    assert not plain_grads(on0, [np.ones(2, np.float32)])  # a host array
    assert not plain_grads(on0, [ag.tensor(grad)])  # a Tensor: validated
    assert not plain_grads(on0, [grad.view(_SubArray)])  # not exactly the array type
    on_cpu = ((_consumer((2,), np.float32, "cpu"), 0),)
    assert plain_grads(on_cpu, [np.ones(2, np.float32)])
    assert not plain_grads(on_cpu, [grad])


class _Returns(ag.Function):
    """Identity forward; backward returns ``make(grad)``."""

    @staticmethod
    def forward(ctx: Any, t: Any, make: Any) -> Any:
        ctx.make = make
        return t * 1.0

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return ctx.make(grad), None


@pytest.mark.anyio
async def test_a_broadcast_device_gradient_is_still_summed_down(fake_backend, workers_only):
    torch = pytest.importorskip("torch")

    class TorchReturns(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: Any) -> Any:
            return t * 1.0

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad.expand(3, 2) * 2.0

    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    TorchReturns.apply(xt).backward(torch.ones(2))
    x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    y = _Returns.apply(x, lambda g: g.expand(3, 2) * 2.0)
    await y.backward(ag.ones(2, device="fake:0"))
    assert x.grad.shape == (2,)
    np.testing.assert_array_equal(fake_backend.to_host(x.grad.data), xt.grad.numpy())


@pytest.mark.anyio
async def test_a_device_gradient_of_another_dtype_is_still_cast(fake_backend, workers_only):
    x = ag.tensor([1.0, 2.0], device="fake:0", dtype=ag.float64, requires_grad=True)
    y = _Returns.apply(x, lambda g: g.to(dtype=ag.float32))
    await y.backward(ag.ones(2, device="fake:0", dtype=ag.float64))
    assert x.grad.dtype == np.float64
    assert x.grad.device == ag.device("fake:0")


@pytest.mark.anyio
async def test_a_gradient_on_another_device_still_raises(fake_backend, workers_only):
    x = ag.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    y = _Returns.apply(x, lambda g: g.to("fake:1"))
    with pytest.raises(RuntimeError, match=r"returned an invalid gradient at index 0 - "
                                           r"expected device fake:0 but got fake:1"):
        await y.backward(ag.ones(2, device="fake:0"))


# ---- the device of an array ----


class _SubArray(FakeArray):
    """Owned by the fake backend (a FakeArray), but not of its exact array type."""


def test_device_of_array_by_exact_type(fake_backend):
    for index in range(3):
        arr = fake_backend.from_host(np.ones(2), index)
        assert devices.device_of_array(arr) is ag.device(f"fake:{index}")
    assert devices._by_type.get(FakeArray) is fake_backend
    sub = fake_backend.from_host(np.ones(2), 2).view(_SubArray)
    assert devices.device_of_array(sub) is ag.device("fake:2")  # through owns()
    assert _SubArray not in devices._by_type
    assert devices.device_of_array(np.ones(2)) is devices.CPU
    assert devices.device_of_array(np.float32(1.0)) is devices.CPU


def test_device_of_array_forgets_types_when_backends_change(fake_backend):
    arr = fake_backend.from_host(np.ones(2), 1)
    assert devices.device_of_array(arr) is ag.device("fake:1")
    # A second backend of FakeArrays: the first registered still owns them ...
    second = FakeBackend(count=2, name="fakeb")
    devices.register_backend(second)
    try:
        assert devices.device_of_array(arr) is ag.device("fake:1")
        devices.unregister_backend("fake")  # ... until it goes
        try:
            assert devices.device_of_array(arr) is ag.device("fakeb:1")
            assert devices._by_type.get(FakeArray) is second
        finally:
            devices.unregister_backend("fakeb")
        assert FakeArray not in devices._by_type
        # As without the cache: an ndarray subclass no backend owns is a host array.
        assert devices.device_of_array(arr) is devices.CPU
    finally:
        devices.unregister_backend("fakeb")
        if devices.backends().get("fake") is not fake_backend:
            devices.register_backend(fake_backend)  # its devices (and workers) as they were
    assert devices.device_of_array(arr) is ag.device("fake:1")
    assert devices._by_type.get(FakeArray) is fake_backend


def test_a_backend_without_an_array_type_is_found_through_owns(fake_backend):
    class Untyped(FakeBackend):
        array_type = None

    untyped = Untyped(count=1, name="untyped")
    devices.unregister_backend("fake")
    devices.register_backend(untyped)
    try:
        arr = untyped.from_host(np.ones(2), 0)
        assert devices.device_of_array(arr) is ag.device("untyped:0")
        assert devices._by_type == {}
    finally:
        devices.unregister_backend("untyped")
        devices.register_backend(fake_backend)


# ---- accumulation on one stream ----


def test_accumulate_on_one_stream_adds_on_it_without_waits(fake_backend, monkeypatch):
    guards = count_guards(monkeypatch, fake_backend)
    s1 = fake_backend.new_stream(0)
    d0 = ag.device("fake:0")
    buffer: list[Any] = [None]
    node = _consumer((2,), np.float64, "fake:0", s1)
    first = fake_backend.from_host(np.full(2, 1.0), 0)
    accumulate(buffer, 0, first, node, (d0, s1))
    assert buffer[0] is first  # the first gradient is kept, not copied
    assert guards == []
    accumulate(buffer, 0, fake_backend.from_host(np.full(2, 2.0), 0), node, (d0, s1))
    assert [g[1] for g in guards] == [s1]  # the sum is queued on the consumer's stream
    assert fake_backend.waits() == []
    np.testing.assert_array_equal(fake_backend.to_host(buffer[0]), [3.0, 3.0])


def test_accumulate_of_a_gradient_off_the_shared_device_takes_the_full_path(fake_backend):
    # Producer and consumer share stream s1 of fake:0, but the gradient lives on
    # fake:1 (case 5 of Note [Streaming backwards]): fake:1's default stream, no wait.
    s1 = fake_backend.new_stream(0)
    buffer: list[Any] = [None]
    node = _consumer((2,), np.float64, "fake:0", s1)
    accumulate(buffer, 0, fake_backend.from_host(np.ones(2), 1), node, (ag.device("fake:0"), s1))
    accumulate(buffer, 0, fake_backend.from_host(np.ones(2), 1), node, (ag.device("fake:0"), s1))
    assert fake_backend.waits() == []
    assert buffer[0].fake_index == 1
    np.testing.assert_array_equal(fake_backend.to_host(buffer[0]), [2.0, 2.0])
