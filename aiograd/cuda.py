"""``aiograd.cuda``: whether CUDA tensors can be made here (PyTorch's ``torch.cuda`` basics).

CUDA tensors need CuPy (the ``[cuda]`` extra) and a visible device; both
functions answer without raising when either is missing.
"""

from __future__ import annotations

from . import devices

__all__ = ["is_available", "device_count"]


def device_count() -> int:
    """The number of CUDA devices CuPy sees; 0 without CuPy or a driver."""
    try:
        return devices.get_backend("cuda").device_count()
    except RuntimeError:  # no cuda backend registered (CuPy missing: the backend says 0)
        return 0


def is_available() -> bool:
    """True if a CUDA tensor can be made: CuPy is installed and sees a device."""
    return device_count() > 0
