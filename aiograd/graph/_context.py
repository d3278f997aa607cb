"""What the nodes of a running backward pass see in their context (seed: thread-locals
``current_graph_task`` and ``checkpoint_valid``).

On the graph side so that graph code (multi-grad hooks) reads them without
importing the engine; the engine sets them when a pass starts
(``engine._enter_task_context``) and re-exports them from ``engine.graph_task``.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine.graph_task import GraphTask

__all__ = ["checkpoint_valid", "current_graph_task"]

# The GraphTask whose nodes run in this context (seed: current_graph_task).
current_graph_task: contextvars.ContextVar[GraphTask | None] = contextvars.ContextVar(
    "aiograd_current_graph_task", default=None
)
checkpoint_valid: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "aiograd_checkpoint_valid", default=True
)
