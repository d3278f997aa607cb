"""Neural-network building blocks: modules, parameters, layers and losses.

Small on purpose: enough for real training loops with ``await loss.backward()``.
``aiograd.nn.functional`` holds the functional forms (``linear``, ``relu``,
``sigmoid``, ``tanh``, ``softmax``, ``log_softmax``, ``mse_loss``,
``cross_entropy``, ``nll_loss``). See docs/nn.md.
"""

from __future__ import annotations

from . import functional
from ._layers import (
    Identity,
    Linear,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from ._losses import CrossEntropyLoss, MSELoss, NLLLoss
from ._module import Module, Parameter

__all__ = [
    "CrossEntropyLoss",
    "Identity",
    "Linear",
    "MSELoss",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Tanh",
    "functional",
]
