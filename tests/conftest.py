"""Shared fixtures: every async test runs under asyncio and Trio (anyio's plugin)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param
