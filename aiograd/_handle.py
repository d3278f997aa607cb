"""RemovableHandle: what every ``register_*hook`` returns (``torch.utils.hooks.RemovableHandle``).

A leaf module: the graph, ``nn`` and the tensors all hand these out.
"""

from __future__ import annotations

import weakref
from typing import Any


class RemovableHandle:
    """Returned by ``register_*hook``; ``remove()`` unregisters the hook (idempotent).

    ``owner``: the Node or Tensor whose cached ``has_hooks`` flag the hook counts
    in (Note [Has-hooks flag] in ``graph/_node.py``); held weakly, told by
    ``_hooks_removed()`` after a removal.
    """

    __slots__ = ("_hooks", "_hook", "_owner")

    def __init__(self, hooks: list[Any], hook: Any, owner: Any = None) -> None:
        self._hooks = hooks
        self._hook = hook
        self._owner = None if owner is None else weakref.ref(owner)

    def remove(self) -> None:
        try:
            self._hooks.remove(self._hook)
        except ValueError:
            return
        owner = None if self._owner is None else self._owner()
        if owner is not None:
            owner._hooks_removed()

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
