"""Utilities: activation checkpointing."""

from __future__ import annotations

from .checkpoint import checkpoint

__all__ = ["checkpoint"]
