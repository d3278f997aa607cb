"""Streams, per Note [Streaming backwards] (aiograd/engine/input_buffer.py).

The fake backend (tests/fake_backend.py) logs every ``record_event`` and
``wait_event`` with the calling thread, and probes note "<label> ran" in the
same log, so these tests assert the order: a record on the producer's
stream, then a wait on the consumer's, then the consumer runs; and at the
end the caller's stream waits for the leaves' before ``backward()`` returns.

Every async test runs under asyncio and Trio (see conftest.py).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fake_backend import FakeBackend, ProbeCall, probe

import aiograd as ag
from aiograd.engine.input_buffer import CURRENT_STREAM, accumulate
from aiograd.graph._node import InputMetadata, Node

pytestmark = pytest.mark.timeout(30)

def leaf(fake: FakeBackend, index: int = 0) -> ag.Tensor:
    return ag.tensor([1.0, 2.0], device=f"fake:{index}", requires_grad=True)


def caller() -> str:
    return threading.current_thread().name


# ---- a node runs on its forward stream ----


@pytest.mark.anyio
async def test_backward_runs_with_its_forward_stream_current(fake_backend):
    calls: list[ProbeCall] = []
    s1 = fake_backend.new_stream(0)
    t1 = fake_backend.new_stream(1)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        y = probe(x, "on s1", calls)
    z = y.to("fake:1")
    with fake_backend.stream_guard(t1):
        w = probe(z, "on t1", calls)
    assert y.grad_fn.input_metadata[0].stream is s1
    await w.cpu().sum().backward()
    streams = {c.label: (c.stream, c.thread) for c in calls}
    assert streams == {
        "on s1": (s1, "aiograd-worker-fake:0"),
        "on t1": (t1, "aiograd-worker-fake:1"),
    }
    # The worker's own current stream is restored after the node.
    assert fake_backend.current_stream(0) is fake_backend.default_stream(0)


@pytest.mark.anyio
async def test_inline_backward_also_runs_on_the_forward_stream(fake_backend):
    calls: list[ProbeCall] = []
    s1 = fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        y = probe(x, "p", calls)
    with ag.set_multithreading_enabled(False):
        await y.sum().backward()
    assert [(c.stream, c.thread) for c in calls] == [(s1, caller())]


@pytest.mark.anyio
async def test_tensor_hook_runs_on_the_consumer_stream(fake_backend):
    s1 = fake_backend.new_stream(0)
    seen = []
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        y = x * 2.0
    y.register_hook(lambda g: seen.append(fake_backend.current_stream(0)))
    await y.sum().backward()
    assert seen == [s1]


# ---- producer and consumer streams (input buffers) ----


@pytest.mark.anyio
async def test_gradient_crossing_streams_records_on_producer_then_waits_on_consumer(
    fake_backend,
):
    calls: list[ProbeCall] = []
    s1, s2 = fake_backend.new_stream(0), fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        a = probe(x, "consumer", calls)
    with fake_backend.stream_guard(s2):
        b = probe(a, "producer", calls)
    await b.sum().backward()
    log = fake_backend
    produced = log.position("note", text="producer ran")
    recorded = log.position("record", stream=s2)
    waited = log.position("wait", waiter=s1, producer=s2)
    consumed = log.position("note", text="consumer ran")
    assert 0 <= produced < recorded < waited < consumed
    entries = log.entries()
    assert entries[recorded].thread == entries[waited].thread == "aiograd-worker-fake:0"
    # s1 never waits for anything but s2 (no spurious sync with the worker's stream)
    assert [p for w, p in log.waits() if w is s1] == [s2]


@pytest.mark.anyio
async def test_one_stream_throughout_needs_no_sync(fake_backend):
    s1 = fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        loss = ((x * 2.0) * x).sum()
        await loss.backward()  # the caller's stream is s1 too
    assert fake_backend.entries() == []
    np.testing.assert_allclose(x.grad.cpu().numpy(), [4.0, 8.0])


@pytest.mark.anyio
async def test_cross_device_copy_waits_for_the_consumer_devices_default_stream(fake_backend):
    calls: list[ProbeCall] = []
    s1 = fake_backend.new_stream(0)
    default0 = fake_backend.default_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        a = probe(x, "consumer", calls)
    loss = a.to("fake:1").sum()
    await loss.backward()
    waited = fake_backend.position("wait", waiter=s1, producer=default0)
    recorded = fake_backend.position("record", stream=default0)
    assert 0 <= recorded < waited < fake_backend.position("note", text="consumer ran")
    # The copy's backward ran on fake:1's worker, which recorded on fake:0's stream
    # with fake:0 current (the fake backend raises otherwise, as CUDA does).
    assert fake_backend.entries()[recorded].thread == "aiograd-worker-fake:1"
    np.testing.assert_allclose(x.grad.cpu().numpy(), [1.0, 1.0])


# ---- leaf streams and the caller's streams ----


@pytest.mark.anyio
async def test_leaf_streams_are_synced_with_the_caller_stream_before_backward_returns(
    fake_backend,
):
    s1 = fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        loss = (x * 3.0).sum()
    assert x.grad is None
    await loss.backward()
    record, wait = fake_backend.entries()[-2:]
    assert (record.kind, record.stream, record.thread) == ("record", s1, caller())
    assert (wait.kind, wait.stream, wait.event, wait.thread) == (
        "wait", fake_backend.default_stream(0), record.event, caller())
    np.testing.assert_allclose(x.grad.cpu().numpy(), [3.0, 3.0])


@pytest.mark.anyio
async def test_a_caller_on_a_side_stream_waits_for_the_leaves(fake_backend):
    s1, s3 = fake_backend.new_stream(0), fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        loss = (x * 3.0).sum()
    with fake_backend.stream_guard(s3):
        await loss.backward()
    assert fake_backend.waits()[-1] == (s3, s1)


@pytest.mark.anyio
async def test_leaf_on_another_device_is_synced_under_that_device(fake_backend):
    t1 = fake_backend.new_stream(2)
    x = leaf(fake_backend, 2)
    with fake_backend.stream_guard(t1):
        loss = (x * 3.0).sum()
    await loss.backward()  # the caller's current device is fake:0
    assert fake_backend.waits()[-1] == (fake_backend.default_stream(2), t1)


@pytest.mark.anyio
async def test_captured_gradients_count_as_leaf_streams(fake_backend):
    s1 = fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        y = x * 2.0
    loss = (y * y).sum()
    (g,) = await ag.grad(loss, y)
    assert g.device is ag.device("fake:0")
    assert fake_backend.waits()[-1] == (fake_backend.default_stream(0), s1)


@pytest.mark.anyio
async def test_no_streams_no_log(fake_backend):
    x = leaf(fake_backend)
    await (x * x).sum().backward()
    assert fake_backend.entries() == []


@pytest.mark.anyio
async def test_final_callbacks_run_after_leaf_streams_are_synced(fake_backend):
    calls: list[ProbeCall] = []
    s1 = fake_backend.new_stream(0)
    x = leaf(fake_backend)

    def queue() -> None:
        ag.queue_callback(lambda: fake_backend.note("final callback"))

    with fake_backend.stream_guard(s1):
        loss = probe(x, "p", calls, queue).sum()
    await loss.backward()
    synced = fake_backend.position("wait", waiter=fake_backend.default_stream(0), producer=s1)
    assert 0 <= synced < fake_backend.position("note", text="final callback")


@pytest.mark.anyio
async def test_root_gradient_made_on_the_caller_stream_is_waited_for(fake_backend):
    calls: list[ProbeCall] = []
    s1, s3 = fake_backend.new_stream(0), fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        y = probe(x, "root", calls)
    with fake_backend.stream_guard(s3):
        seed = ag.ones(2, device="fake:0")  # made on s3
        await y.backward(seed)
    waited = fake_backend.position("wait", waiter=s1, producer=s3)
    assert 0 <= waited < fake_backend.position("note", text="root ran")


def test_sync_backward_syncs_leaf_streams_on_the_calling_thread(fake_backend):
    s1 = fake_backend.new_stream(0)
    x = leaf(fake_backend)
    with fake_backend.stream_guard(s1):
        loss = (x * 3.0).sum()
    loss.backward_sync()
    wait = fake_backend.entries()[-1]
    assert (wait.stream, wait.event.stream, wait.thread) == (
        fake_backend.default_stream(0), s1, caller())


# ---- accumulate(): the five cases of the Note, with explicit producers ----


def consumer_on(device: str, stream) -> Node:
    node = Node(())
    node.input_metadata = (InputMetadata((2,), np.dtype("float64"), ag.device(device), stream),)
    return node


def fake_grad(fake: FakeBackend, index: int, value: float):
    return fake.from_host(np.full(2, value), index)


def test_accumulate_host_gradients_need_no_streams(fake_backend):
    buffer = [None]
    node = consumer_on("cpu", None)
    accumulate(buffer, 0, np.ones(2), node, None)
    accumulate(buffer, 0, np.ones(2), node, None)
    np.testing.assert_array_equal(buffer[0], [2.0, 2.0])
    assert fake_backend.entries() == []


def test_accumulate_same_device_waits_for_the_producer(fake_backend):
    s1, s2 = fake_backend.new_stream(0), fake_backend.new_stream(0)
    d0 = ag.device("fake:0")
    buffer = [None]
    node = consumer_on("fake:0", s1)
    accumulate(buffer, 0, fake_grad(fake_backend, 0, 1.0), node, (d0, s2))
    assert fake_backend.waits() == [(s1, s2)]
    accumulate(buffer, 0, fake_grad(fake_backend, 0, 2.0), node, (d0, s1))  # same stream
    assert fake_backend.waits() == [(s1, s2)]
    assert buffer[0].fake_index == 0
    np.testing.assert_array_equal(fake_backend.to_host(buffer[0]), [3.0, 3.0])


def test_accumulate_from_another_device_waits_for_the_default_stream(fake_backend):
    s1, t1 = fake_backend.new_stream(0), fake_backend.new_stream(1)
    buffer = [None]
    with fake_backend.device_guard(1):  # as on fake:1's worker
        accumulate(buffer, 0, fake_grad(fake_backend, 0, 1.0), consumer_on("fake:0", s1),
                   (ag.device("fake:1"), t1))
    assert fake_backend.waits() == [(s1, fake_backend.default_stream(0))]


def test_accumulate_for_a_consumer_elsewhere_uses_the_default_stream(fake_backend):
    s2, t1 = fake_backend.new_stream(0), fake_backend.new_stream(1)
    buffer = [None]
    accumulate(buffer, 0, fake_grad(fake_backend, 0, 1.0), consumer_on("fake:1", t1),
               (ag.device("fake:0"), s2))
    assert fake_backend.waits() == [(fake_backend.default_stream(0), s2)]


def test_accumulate_on_neither_device_does_not_sync(fake_backend):
    buffer = [None]
    accumulate(buffer, 0, fake_grad(fake_backend, 0, 1.0),
               consumer_on("fake:1", fake_backend.new_stream(1)), None)
    assert fake_backend.entries() == []


def test_accumulate_current_stream_is_the_callers(fake_backend):
    s1, s3 = fake_backend.new_stream(0), fake_backend.new_stream(0)
    buffer = [None]
    with fake_backend.stream_guard(s3):
        accumulate(buffer, 0, fake_grad(fake_backend, 0, 1.0), consumer_on("fake:0", s1),
                   CURRENT_STREAM)
    assert fake_backend.waits() == [(s1, s3)]
