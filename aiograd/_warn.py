"""Warnings attributed to the user's line, however deep inside aiograd they are raised."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_frame() -> tuple[FrameType | None, int]:
    """The innermost frame outside the aiograd package (None if there is none), and its
    stack level as ``warnings.warn`` counts from the caller of ``user_frame``."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return frame, level


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` with the stack level of the first frame outside the aiograd
    package (what Python 3.12's ``skip_file_prefixes`` does), so a warning points at the
    caller's line whether it came through ``nn.functional``, a module or an op."""
    warnings.warn(message, category, stacklevel=user_frame()[1])
