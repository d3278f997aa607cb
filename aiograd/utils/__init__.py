"""Utilities: activation checkpointing; datasets and the DataLoader (``utils.data``)."""

from __future__ import annotations

from . import data
from .checkpoint import CheckpointError, checkpoint

__all__ = ["CheckpointError", "checkpoint", "data"]
