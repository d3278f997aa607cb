"""Numerical gradient checking (finite differences in float64).

``gradcheck(fn, inputs)`` compares, for every input that requires grad, the
Jacobian computed by backward (one vector-Jacobian product per output
element, through :func:`aiograd.grad_sync`) with central finite differences.
It returns True or raises ``GradcheckError`` naming the output, the input
and the largest mismatch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy

from ._tensor import Tensor

__all__ = ["gradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """The analytical and numerical Jacobians differ."""


def _as_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[Tensor, ...]:
    return tuple(o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor))


def _numerical(fn: Callable[..., Any], inputs: Sequence[Any], i: int, eps: float) -> list[Any]:
    """Per output, d out / d inputs[i] as an (out.size, in.size) matrix."""
    x = inputs[i]
    host = x.device.backend.to_host(x.data)
    flat = host.reshape(-1)
    columns: list[list[Any]] = []
    for k in range(flat.size):
        orig = flat[k]
        values = []
        for delta in (eps, -eps):
            flat[k] = orig + delta
            x.data = x.device.backend.from_host(host, x.device.index)
            values.append([o.device.backend.to_host(o.data).astype(numpy.float64).reshape(-1)
                           for o in _outputs(fn, inputs)])
        flat[k] = orig
        x.data = x.device.backend.from_host(host, x.device.index)
        columns.append([(p - m) / (2 * eps) for p, m in zip(*values)])
    n_out = len(columns[0]) if columns else len(_outputs(fn, inputs))
    return [numpy.stack([c[j] for c in columns], axis=1) if columns else None
            for j in range(n_out)]


def gradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Check the gradients of ``fn`` at ``inputs`` against finite differences.

    Inputs that require grad must be float64 (a float32 check is too coarse
    to mean anything); other inputs are passed through unchanged.
    """
    from .autograd import grad_sync
    from .grad_mode import no_grad

    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    for i in diff:
        if inputs[i].dtype != numpy.float64:
            raise ValueError(
                f"gradcheck needs float64 inputs; input {i} is {inputs[i].dtype}. "
                "Use .to(dtype=aiograd.float64)."
            )
    outputs = _outputs(fn, inputs)
    if not outputs:
        raise ValueError("gradcheck: fn returned no tensor")
    with no_grad():
        numerical = {i: _numerical(fn, inputs, i, eps) for i in diff}
    for j, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        n = int(out.data.size)
        analytical = {i: numpy.zeros((n, int(inputs[i].data.size))) for i in diff}
        for k in range(n):
            seed = numpy.zeros(n, dtype=out.dtype)
            seed[k] = 1
            seed_t = Tensor._wrap(out.device.backend.from_host(seed.reshape(out.shape),
                                                              out.device.index), out.device)
            grads = grad_sync(out, [inputs[i] for i in diff], seed_t, retain_graph=True,
                              allow_unused=True)
            for i, g in zip(diff, grads):
                if g is not None:
                    analytical[i][k] = g.device.backend.to_host(g.data).reshape(-1)
        for i in diff:
            num = numerical[i][j]
            ana = analytical[i]
            if num is None:
                continue
            if not numpy.allclose(ana, num, atol=atol, rtol=rtol):
                if not raise_exception:
                    return False
                worst = numpy.abs(ana - num).max()
                raise GradcheckError(
                    f"Jacobian mismatch for output {j} with respect to input {i}: largest "
                    f"difference {worst:.3g}\nnumerical:{num}\nanalytical:{ana}"
                )
    return True
