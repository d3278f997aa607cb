"""Warnings attributed to the user's line, however deep inside aiograd they are raised."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` with the stack level of the first frame outside the aiograd
    package (what Python 3.12's ``skip_file_prefixes`` does), so a warning points at the
    caller's line whether it came through ``nn.functional``, a module or an op."""
    frame: FrameType | None = sys._getframe(1)
    level = 2  # stacklevel 2: the frame that called warn_user
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
