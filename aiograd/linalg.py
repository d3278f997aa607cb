"""``aiograd.linalg``: PyTorch's ``torch.linalg`` basics.

``inv``, ``det``, ``solve`` (one node each, ``aiograd/_ops/matrix.py``), and
the norms: ``vector_norm`` (one ``LinalgVectorNormBackward0`` node),
``matrix_norm`` (Frobenius as a vector norm over two dims; orders 1, -1,
inf, -inf as max/min of absolute row or column sums) and ``norm``, which
picks one of them by PyTorch's rule. The spectral and nuclear norms need
singular values' gradients, which aiograd does not compute: they raise
NotImplementedError.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from . import _boundary
from ._ops.matrix import det, inv, solve
from ._ops.reductions import norm as _vector_norm
from ._tensor import Tensor

__all__ = ["inv", "det", "solve", "norm", "vector_norm", "matrix_norm"]


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """``sum(|x| ** ord) ** (1 / ord)`` over ``dim`` (None: all elements); ``ord`` any
    number, ``inf`` (max ``|x|``), ``-inf`` (min), 0 (count of nonzeros)."""
    _check_tensor(x, "vector_norm")
    if isinstance(ord, str) or not isinstance(ord, numbers.Real):
        raise TypeError(f"linalg.vector_norm(): argument 'ord' must be a number, not "
                        f"{type(ord).__name__}")
    return _vector_norm(x, ord, dim, keepdim, dtype)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1),  # noqa: A002,N803
                keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The ``ord`` norm of each matrix over ``dim``: "fro", or 1 / -1 (max / min absolute
    column sum), inf / -inf (max / min absolute row sum)."""
    _check_tensor(A, "matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    rows, cols = (d % A.ndim for d in dim)
    if rows == cols:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, "
                           f"{dim[1]})")
    if ord == "fro":
        return _vector_norm(A, 2, (rows, cols), keepdim, dtype)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(
            f"linalg.matrix_norm(ord={ord!r}) needs singular values, which aiograd does not "
            "compute; use 'fro', 1, -1, inf or -inf")
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if dtype is not None:
        A = A.to(dtype=dtype)
    summed, over = (rows, cols) if abs(ord) == 1 else (cols, rows)
    sums = A.abs().sum(dim=summed, keepdim=True)
    out = sums.amax(dim=over, keepdim=True) if ord > 0 else sums.amin(dim=over, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,  # noqa: A002,N803
         dtype: Any = None) -> Tensor:
    """PyTorch's rule: an int ``dim``, a 1-tuple, or ``ord`` None with ``dim`` None (all
    elements, flattened) give a vector norm; a 2-tuple ``dim``, or ``dim`` None with a
    2-D ``A`` and an ``ord``, a matrix norm."""
    _check_tensor(A, "norm")
    if dim is None and ord is None:
        return _vector_norm(A, 2, None, keepdim, dtype)
    if isinstance(dim, int) or (isinstance(dim, (tuple, list)) and len(dim) == 1):
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None:
        if A.ndim == 1:
            return vector_norm(A, ord, None, keepdim, dtype=dtype)
        if A.ndim != 2:
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {A.ndim}D.")
        dim = (-2, -1)
    return matrix_norm(A, "fro" if ord is None else ord, tuple(dim), keepdim, dtype=dtype)


def _check_tensor(x: Any, fn: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"linalg.{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")

_boundary.guard_functions(globals(), __all__)
