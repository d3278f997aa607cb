"""Functional forms of the neural-network ops (as ``torch.nn.functional``).

``cross_entropy`` records one fused node; see Note [Fused cross entropy] in
``aiograd._ops.nn_ops``.
"""

from __future__ import annotations

from .._ops.nn_ops import cross_entropy, linear, log_softmax, mse_loss, softmax
from .._ops.unary import relu

__all__ = ["cross_entropy", "linear", "log_softmax", "mse_loss", "relu", "softmax"]
