"""Neural-network building blocks: modules, parameters, layers and losses.

Enough for real training loops with ``await loss.backward()``: linear, convolution,
pooling, normalization and embedding layers, attention and Transformer encoders,
recurrent layers (RNN, LSTM, GRU), activations, losses and containers.
``aiograd.nn.functional`` holds the functional forms; ``aiograd.nn.utils`` gradient
clipping (``clip_grad_norm_``, ``clip_grad_value_``). See docs/nn.md.
"""

from __future__ import annotations

from . import functional, init, utils
from ._attention import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer
from ._conv import AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv2d, MaxPool2d
from ._layers import (
    GELU,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from ._losses import CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from ._module import Module, Parameter
from ._more import (
    ELU,
    BCELoss,
    BCEWithLogitsLoss,
    Hardtanh,
    HuberLoss,
    KLDivLoss,
    LogSigmoid,
    Mish,
    ReLU6,
    SiLU,
    SmoothL1Loss,
    Softplus,
    Softsign,
)
from ._norm import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d, InstanceNorm2d
from ._rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

__all__ = [
    "GRU",
    "GRUCell",
    "LSTM",
    "LSTMCell",
    "RNN",
    "RNNCell",
    "MultiheadAttention",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "BCELoss",
    "BCEWithLogitsLoss",
    "ELU",
    "Hardtanh",
    "HuberLoss",
    "KLDivLoss",
    "LogSigmoid",
    "Mish",
    "ReLU6",
    "SiLU",
    "SmoothL1Loss",
    "Softplus",
    "Softsign",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "Conv1d",
    "Conv2d",
    "MaxPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "GELU",
    "Identity",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
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
    "Softmax",
    "Tanh",
    "functional",
    "init",
    "utils",
]
