"""Shared fixtures: every async test runs under asyncio and Trio (anyio's plugin)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


# One FakeBackend for the session: registering the same object again restores
# its devices, so the engine's workers for fake:0..2 are reused across tests.
_fake_backends: list[Any] = []


@pytest.fixture
def fake_backend() -> Iterator[Any]:
    """A ``FakeBackend`` (tests/fake_backend.py) registered as ``fake`` with 3 devices.

    Registered for one test through ``aiograd.devices.register_backend`` and
    unregistered afterwards; its stream log starts empty.
    """
    from fake_backend import FakeBackend

    from aiograd import devices

    if not _fake_backends:
        _fake_backends.append(FakeBackend(count=3, name="fake"))
    backend = _fake_backends[0]
    backend.clear_log()
    devices.register_backend(backend)
    try:
        yield backend
    finally:
        devices.unregister_backend(backend.name)


@pytest.fixture
def workers_only():
    """Send every ``await backward()`` to the device workers, small graphs too
    (for tests about the workers themselves; see Note [Inline small graphs])."""
    import aiograd.engine

    aiograd.engine.set_inline_limits(max_nodes=0)
    try:
        yield
    finally:
        aiograd.engine.set_inline_limits()


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic collector off for one test (after a full collection): memory must
    come back through reference counting alone."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture
def loop_wakes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry each time an awaiting driver's loop is woken (its signal fires: a pass ran
    on a worker)."""
    from aiograd.engine._bridge import LoopSignal

    wakes: list[int] = []
    original = LoopSignal._fire
    monkeypatch.setattr(LoopSignal, "_fire", lambda self: (wakes.append(1), original(self)))
    return wakes
