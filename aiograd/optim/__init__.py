"""Optimizers that update parameters in place after ``await loss.backward()``.

``SGD``, ``Adam``, ``AdamW``, ``RMSprop`` and ``Adagrad`` follow ``torch.optim``'s
formulas exactly; see
Note [Optimizer steps write .data in place] in :mod:`aiograd.optim._optimizer`.
:mod:`aiograd.optim.lr_scheduler` holds the learning-rate schedulers.
"""

from __future__ import annotations

from . import lr_scheduler
from ._adagrad import Adagrad
from ._adam import Adam, AdamW
from ._optimizer import Optimizer
from ._rmsprop import RMSprop
from ._sgd import SGD

__all__ = ["Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]
