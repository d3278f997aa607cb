"""Input buffers: accumulating the gradients a node receives, with stream sync.

A node's buffer is a list with one slot per input; ``accumulate`` adds a
gradient into a slot (out of place, so an array sent to two consumers is
never mutated). It is called with the GraphTask's lock held, on the thread
that ran the producing node (or on the caller's thread, for the root).

Note [Streaming backwards] (seed ``engine.cpp``/``input_buffer.cpp``)
    On devices with streams, a node's backward runs with the stream its
    forward ran on current (``InputMetadata.stream`` of its first input; see
    :func:`node_stream`). The engine guards that stream around the node's
    hooks, function and validation.

    Producer and consumer are synced when a gradient is put into a buffer.
    The stream the accumulation happens on, and the stream it must first
    wait for, depend on where the gradient lives relative to the producer
    (the node that returned it) and the consumer (the node whose buffer it
    enters):

    1. on a device without streams (CPU): nothing to sync;
    2. on the producer's and the consumer's device: accumulate on the
       consumer's stream, after waiting for the producer's stream;
    3. on the consumer's device only (e.g. a device copy's backward made
       it): accumulate on the consumer's stream, after waiting for that
       device's default stream;
    4. on the producer's device only: accumulate on the device's default
       stream, after waiting for the producer's stream;
    5. on neither: accumulate on the device's default stream.

    "Waiting" is an event recorded on one stream and waited for by the
    other: no host blocking. It is skipped when both are the same stream.

    At the end of a backward, the caller's current streams (stashed when the
    GraphTask started, on the caller's thread) wait for the streams of the
    leaves (AccumulateGrad nodes and captured gradients), so the caller sees
    finished gradients. The caller's thread does this before the awaiting
    ``backward()`` returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy

from .. import devices
from .._tensor import Tensor
from ..devices import CPU, Device

if TYPE_CHECKING:
    from ..graph._node import InputMetadata, Node
    from .graph_task import GraphTask

_ndarray = numpy.ndarray

#: ``accumulate(..., producer=CURRENT_STREAM)``: the gradient was made on the
#: calling thread's current stream of its device (the root gradients, made by
#: the caller; or a producer that runs inside its own stream guard).
CURRENT_STREAM: Any = object()


def node_stream(node: Node) -> tuple[Device, Any] | None:
    """The device and stream ``node``'s backward runs on (seed ``Node::stream``).

    Those of its first input, or None when that input's device has no streams.
    """
    meta = node.input_metadata
    if meta:
        first = meta[0]
        if first.stream is not None:
            return (first.device, first.stream)
    return None


def accumulate(buffer: list[Any], pos: int, grad: Any, consumer: Node,
               producer: tuple[Device, Any] | None = CURRENT_STREAM) -> None:
    """Add ``grad`` into ``buffer[pos]``, syncing streams (Note [Streaming backwards]).

    ``producer`` is :func:`node_stream` of the node that returned ``grad``
    (None: it ran on no stream), or :data:`CURRENT_STREAM`.
    """
    if grad is None:
        return
    if type(grad) is _ndarray:
        device = CPU
    elif isinstance(grad, Tensor):
        device = grad.device
    else:
        device = devices.device_of_array(grad)
    stream = None
    if device.backend.has_streams:
        meta = consumer.input_metadata[pos]
        if (producer is not CURRENT_STREAM and producer is not None and producer[0] is device
                and meta.device is device and meta.stream is producer[1]):
            stream = producer[1]  # case 2 on one stream: nothing to wait for
        else:
            stream = _sync(device, meta, producer)
    old = buffer[pos]
    if old is None:
        buffer[pos] = grad
    elif stream is None:
        buffer[pos] = old + grad
    else:
        backend = device.backend
        with backend.device_guard(device.index), backend.stream_guard(stream):
            buffer[pos] = old + grad


def _sync(device: Device, consumer: InputMetadata, producer: Any) -> Any:
    """Make the accumulation stream wait as needed; return it (cases 2-5 of the Note)."""
    backend = device.backend
    index = device.index
    if producer is CURRENT_STREAM:
        producer_stream = backend.current_stream(index)
    elif producer is not None and producer[0] is device:
        producer_stream = producer[1]
    else:
        producer_stream = None
    if consumer.stream is not None and consumer.device is device:
        accumulate_on = consumer.stream
        if producer_stream is not None:
            wait_for = producer_stream  # case 2
        else:
            wait_for = backend.default_stream(index)  # case 3
    elif producer_stream is not None:
        accumulate_on = backend.default_stream(index)  # case 4
        wait_for = producer_stream
    else:
        return backend.default_stream(index)  # case 5
    if wait_for is not None and not _same(accumulate_on, wait_for):
        with backend.device_guard(index):
            backend.wait_stream(accumulate_on, wait_for)
    return accumulate_on


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b


def stash_current_streams(gt: GraphTask) -> None:
    """Remember the caller's current stream on every device that has streams.

    Called on the caller's thread when the GraphTask starts. Backends not yet
    used (``is_initialized()`` False) are skipped, as the seed skips devices
    without a primary context.
    """
    for backend in devices.backends().values():
        if not backend.has_streams or not backend.is_initialized():
            continue
        for index in range(backend.device_count()):
            dev = devices.device(backend.name, index)
            gt.caller_streams[dev] = backend.current_stream(index)


def sync_leaf_streams(gt: GraphTask) -> None:
    """Make the caller's streams wait for the leaf streams (end of backward).

    ``gt.leaf_streams`` holds ``(stream, device)`` pairs, written under
    ``gt.lock`` by executors; this runs after every node finished.
    """
    for leaf_stream, dev in list(gt.leaf_streams):
        caller = gt.caller_streams.get(dev)
        if caller is not None and not _same(caller, leaf_stream):
            backend = dev.backend
            with backend.device_guard(dev.index):
                backend.wait_stream(caller, leaf_stream)
