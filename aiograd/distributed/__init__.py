"""Distributed autograd over gRPC (DESIGN.md §6): ``rpc``, ``autograd``, ``optim``.

Needs the ``dist`` extra (grpcio, cryptography): without it, importing this package
raises ModuleNotFoundError saying so. Importing ``aiograd`` does not import this package.
"""
try:
    import cryptography  # noqa: F401
    import grpc  # noqa: F401
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        f"aiograd.distributed needs the 'dist' extra (No module named {missing.name!r}): "
        "pip install 'aiograd[dist]'", name=missing.name) from missing

from . import autograd, rpc  # noqa: E402

__all__ = ["autograd", "rpc"]
