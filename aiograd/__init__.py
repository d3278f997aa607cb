"""aiograd: PyTorch's autograd engine, rebuilt for async Python.

``await aiograd.backward(loss)`` inside asyncio or Trio; the sync forms
(``backward_sync``) for scripts. See docs/ for a guide.
"""

from __future__ import annotations

from . import (
    _ops,  # noqa: F401  (binds the Tensor operators and methods)
    devices,
    graph,
    nn,
    optim,
)
from ._ops.joining import cat, stack
from ._ops.linalg import matmul
from ._ops.unary import where
from ._tensor import (
    Tensor,
    arange,
    bool_,
    eye,
    float16,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    int32,
    int64,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from .autograd import (
    backward,
    backward_sync,
    current_graph_task_execution_order,
    current_graph_task_id,
    grad,
    grad_sync,
    is_checkpoint_valid,
    queue_callback,
    set_multithreading_enabled,
)
from .devices import Device, device
from .engine.offload import offload
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    detect_anomaly,
    enable_grad,
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    set_detect_anomaly,
    set_grad_enabled,
)
from .gradcheck import GradcheckError, gradcheck
from .graph import get_gradient_edge, saved_tensors_hooks
from .utils.checkpoint import checkpoint

__all__ = [
    "Device",
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "Tensor",
    "arange",
    "backward",
    "backward_sync",
    "bool_",
    "cat",
    "checkpoint",
    "current_graph_task_execution_order",
    "current_graph_task_id",
    "detect_anomaly",
    "device",
    "devices",
    "enable_grad",
    "eye",
    "float16",
    "float32",
    "float64",
    "from_numpy",
    "full",
    "full_like",
    "get_gradient_edge",
    "grad",
    "grad_sync",
    "gradcheck",
    "graph",
    "int32",
    "int64",
    "is_anomaly_enabled",
    "is_checkpoint_valid",
    "is_grad_enabled",
    "manual_seed",
    "matmul",
    "nn",
    "no_grad",
    "offload",
    "once_differentiable",
    "optim",
    "ones",
    "ones_like",
    "queue_callback",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "saved_tensors_hooks",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_multithreading_enabled",
    "stack",
    "tensor",
    "where",
    "zeros",
    "zeros_like",
]
