"""Utilities: activation checkpointing."""

from __future__ import annotations

from .checkpoint import CheckpointError, checkpoint

__all__ = ["CheckpointError", "checkpoint"]
