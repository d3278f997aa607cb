"""Numerical gradient checking (finite differences in float64).

``gradcheck(fn, inputs)`` compares, for every input that requires grad, the
Jacobian computed by backward (one vector-Jacobian product per output
element, through :func:`aiograd.grad_sync`) with central finite differences.
It returns True or raises ``GradcheckError`` naming the output, the input
and the largest mismatch. ``gradgradcheck`` does the same for the gradient
of ``fn`` (computed with ``create_graph=True``), so it checks second order.

The checks are blocking (they run thousands of tiny passes); inside async
code ``await gradcheck_async(...)``/``await gradgradcheck_async(...)`` run
the same check on aiograd's CPU worker (``aiograd.offload``) while the loop
stays free. Calling the blocking form on a thread whose event loop runs
raises a RuntimeError saying which awaitable to use instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy

from ._tensor import Tensor
from .engine._bridge import running_loop_library

__all__ = ["gradcheck", "gradcheck_async", "gradgradcheck", "gradgradcheck_async",
           "GradcheckError"]


class GradcheckError(RuntimeError):
    """The analytical and numerical Jacobians differ."""


def _refuse_running_loop(name: str) -> None:
    if running_loop_library() is not None:
        raise RuntimeError(
            f"{name}() blocks, and an event loop is running on this thread; use "
            f"'await aiograd.{name}_async(...)' instead (same arguments), which runs the "
            "check on aiograd's CPU worker"
        )


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
    to mean anything); other inputs are passed through unchanged. Blocking:
    in async code use :func:`gradcheck_async`.
    """
    from .autograd import grad_sync
    from .grad_mode import no_grad

    _refuse_running_loop("gradcheck")
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


def gradgradcheck(
    fn: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Check the second derivatives of ``fn`` at ``inputs`` against finite differences.

    As PyTorch's: runs :func:`gradcheck` on ``(inputs, grad_outputs) ->
    grad(fn(inputs), inputs, grad_outputs, create_graph=True)``. Without
    ``grad_outputs``, random float64 ones are drawn (seeded, so a check is
    repeatable), one per output that requires grad. Blocking: in async code
    use :func:`gradgradcheck_async`.
    """
    from .autograd import grad_sync
    from .grad_mode import enable_grad

    _refuse_running_loop("gradgradcheck")
    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    outputs = [o for o in _outputs(fn, inputs) if o.requires_grad]
    if grad_outputs is None:
        rng = numpy.random.default_rng(0)
        grad_outputs = tuple(
            Tensor._wrap(o.device.backend.from_host(rng.standard_normal(o.shape),
                                                    o.device.index), o.device).requires_grad_()
            for o in outputs
        )
    grad_outputs = _as_tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(
            f"gradgradcheck: got {len(grad_outputs)} grad_outputs for {len(outputs)} outputs "
            "that require grad"
        )
    n = len(inputs)

    def first_order(*args: Any) -> tuple[Tensor, ...]:
        with enable_grad():  # also when gradcheck perturbs inputs under no_grad
            outs = [o for o in _outputs(fn, args[:n]) if o.requires_grad]
            if not outs:
                return ()
            grads = grad_sync(outs, [args[i] for i in diff], list(args[n:]),
                              create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, (*inputs, *grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)


async def gradcheck_async(fn: Callable[..., Any], inputs: Any, **kwargs: Any) -> bool:
    """:func:`gradcheck` for async code: the same check on aiograd's CPU worker."""
    from .engine.offload import offload

    return await offload(gradcheck, fn, inputs, **kwargs)


async def gradgradcheck_async(fn: Callable[..., Any], inputs: Any, grad_outputs: Any = None,
                              **kwargs: Any) -> bool:
    """:func:`gradgradcheck` for async code: the same check on aiograd's CPU worker."""
    from .engine.offload import offload

    return await offload(gradgradcheck, fn, inputs, grad_outputs, **kwargs)
