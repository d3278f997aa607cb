"""Utilities: activation checkpointing (``utils.checkpoint``); datasets and the
DataLoader (``utils.data``).

As in PyTorch, ``aiograd.utils.checkpoint`` is the module and
``aiograd.utils.checkpoint.checkpoint`` the function (also ``aiograd.checkpoint``).
"""

from __future__ import annotations

from . import checkpoint, data
from .checkpoint import CheckpointError

__all__ = ["CheckpointError", "checkpoint", "data"]
