"""The autograd graph: nodes, edges, hooks, saved tensors (PyTorch's ``torch.autograd.graph``)."""

from __future__ import annotations

from ._multi_hook import register_multi_grad_hook
from ._node import (
    AccumulateGrad,
    GradientEdge,
    GraphRoot,
    InputMetadata,
    Node,
    RemovableHandle,
    get_gradient_edge,
)
from ._saved import SavedTensor, disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks

__all__ = [
    "AccumulateGrad",
    "GradientEdge",
    "GraphRoot",
    "InputMetadata",
    "Node",
    "RemovableHandle",
    "SavedTensor",
    "disable_saved_tensors_hooks",
    "get_gradient_edge",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
]
