"""RemovableHandle: what every ``register_*hook`` returns (``torch.utils.hooks.RemovableHandle``).

A leaf module: the graph, ``nn`` and the tensors all hand these out.
"""

from __future__ import annotations

from typing import Any


class RemovableHandle:
    """Returned by ``register_*hook``; ``remove()`` unregisters the hook (idempotent)."""

    __slots__ = ("_hooks", "_hook")

    def __init__(self, hooks: list[Any], hook: Any) -> None:
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            pass

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
