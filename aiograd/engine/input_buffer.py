"""Input buffers: accumulating the gradients a node receives, with stream sync.

A node's buffer is a list with one slot per input; ``accumulate`` adds a
gradient into a slot (out of place, so an array sent to two consumers is
never mutated). It is called with the GraphTask's lock held.

Note [Streaming backwards] (seed ``engine.cpp``/``input_buffer.cpp``)
    A node's backward runs on the stream its forward ran on. When a
    gradient produced on one stream is consumed on another, the consumer
    stream waits for an event recorded on the producer stream, and the
    accumulation runs on the consumer stream. At the end of a backward, the
    caller's current streams wait for the streams of the leaves (AccumulateGrad
    nodes and captured gradients), so the caller sees finished gradients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import devices

if TYPE_CHECKING:
    from ..graph._node import Node
    from .graph_task import GraphTask


def accumulate(buffer: list[Any], pos: int, grad: Any, consumer: Node) -> None:
    """Add ``grad`` into ``buffer[pos]``; sync streams if producer and consumer differ."""
    if grad is None:
        return
    meta = consumer.input_metadata[pos]
    stream = meta.stream
    if stream is not None:
        _sync_into(meta.device, stream)
    old = buffer[pos]
    if old is None:
        buffer[pos] = grad
    elif stream is not None:
        with meta.device.backend.stream_guard(stream):
            buffer[pos] = old + grad
    else:
        buffer[pos] = old + grad


def _sync_into(device: devices.Device, consumer: Any) -> None:
    """Make ``consumer`` wait for the stream the gradient was produced on.

    The producing node ran with its own stream current on this thread; if
    that is another stream of the same device, the consumer must wait for it.
    """
    backend = device.backend
    producer = backend.current_stream(device.index)
    if producer is not None and producer is not consumer and producer != consumer:
        backend.wait_stream(consumer, producer)


def stash_current_streams(gt: GraphTask) -> None:
    """Remember the caller's current stream on every device that has streams."""
    for backend in devices.backends().values():
        if not backend.has_streams or not backend.is_initialized():
            continue
        for index in range(backend.device_count()):
            dev = devices.device(backend.name, index)
            gt.caller_streams[dev] = backend.current_stream(index)


def sync_leaf_streams(gt: GraphTask) -> None:
    """Make the caller's streams wait for the leaf streams (end of backward)."""
    for leaf_stream, dev in list(gt.leaf_streams):
        caller = gt.caller_streams.get(dev)
        if caller is not None and caller is not leaf_stream and caller != leaf_stream:
            dev.backend.wait_stream(caller, leaf_stream)
