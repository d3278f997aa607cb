"""Optimizers that update parameters in place after ``await loss.backward()``.

``SGD``, ``Adam`` and ``AdamW`` follow ``torch.optim``'s formulas exactly; see
Note [Optimizer steps write .data in place] in :mod:`aiograd.optim._optimizer`.
:mod:`aiograd.optim.lr_scheduler` holds the learning-rate schedulers.
"""

from __future__ import annotations

from . import lr_scheduler
from ._adam import Adam, AdamW
from ._optimizer import Optimizer
from ._sgd import SGD

__all__ = ["Adam", "AdamW", "Optimizer", "SGD", "lr_scheduler"]
