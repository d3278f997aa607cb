"""Distributed autograd over gRPC (DESIGN.md §6): ``rpc``, ``autograd``, ``optim``.

Needs the ``dist`` extra (grpcio). Importing ``aiograd`` does not import this package.
"""
from . import autograd, rpc

__all__ = ["autograd", "rpc"]
