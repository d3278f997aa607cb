"""Differentiable operations, one module per family.

Every op computes its result on the arrays (``t.data``) and, when grad mode
is on and an input requires grad, records a node: a :class:`Node` subclass
named as PyTorch names it (``MulBackward0``) that keeps what its backward
needs and implements ``apply``.

Note [Dual backward formulas]
    A backward formula is written once and runs on two kinds of values.
    Without ``create_graph`` the engine passes raw arrays and saved tensors
    unpack to arrays: the formula is plain NumPy/CuPy math with no wrapper
    cost. With ``create_graph`` the engine passes Tensors and saved tensors
    unpack to Tensors with their history, so the same formula records the
    graph of the gradient. Formulas therefore use only operators
    (``+ - * / ** @``, comparisons) and the helpers of :mod:`._dual`, which
    dispatch on the value's type, never ``numpy.`` functions directly.

Note [Broadcast gradients]
    Formulas may return a gradient of the broadcast shape: the engine's
    ``validate_outputs`` sums it down to the input's shape (seed
    ``InputMetadata::maybe_reduce``), as PyTorch does.

Formulas compute a gradient only for inputs whose edge is not None (the
forward input required grad), like ``needs_input_grad``. Most nodes are
declared as rules (``_rule.Rule``), which generate this masking; see
docs/ops.md, "How to add an op". The Tensor's methods and operators are declared
once, in ``methods.OpMethods``, and bound when this package is first imported.
"""

from __future__ import annotations

from .._tensor import Tensor
from .methods import bind

bind(Tensor)  # the Tensor's op methods: see methods.py
