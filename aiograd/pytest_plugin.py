"""pytest plugin (entry point ``pytest11``): the ``aiograd_no_leaks`` fixture.

Request ``aiograd_no_leaks`` in a test (sync, pytest-asyncio or anyio) to fail
it if it leaves engine state behind (``aiograd.testing.no_engine_leaks``);
``pytest --aiograd-leak-check`` applies the fixture to every test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .testing import no_engine_leaks


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--aiograd-leak-check", action="store_true", default=False,
                     help="fail any test that leaves aiograd engine state behind")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--aiograd-leak-check"):
        for item in items:
            names = getattr(item, "fixturenames", None)
            if names is not None and "aiograd_no_leaks" not in names:
                names.insert(0, "aiograd_no_leaks")


@pytest.fixture
def aiograd_no_leaks() -> Iterator[None]:
    """Fails the test if it leaves GraphTasks, queued work, callbacks or threads behind."""
    with no_engine_leaks():
        yield
