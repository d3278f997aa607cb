"""inference_mode as a context manager and decorator (sync and async), against torch's grad
mode behaviour; tensors made inside are not marked (a documented difference)."""

from __future__ import annotations

import pytest

import aiograd as ag

torch = pytest.importorskip("torch")


def _program(m):
    x = m.ones(2, requires_grad=True)
    seen = []
    with m.inference_mode():
        y = x * 2
        seen.append((m.is_grad_enabled(), m.is_inference_mode_enabled(), y.requires_grad,
                     y.grad_fn is None))
        with m.inference_mode(False):  # grad mode back on inside
            seen.append((m.is_grad_enabled(), m.is_inference_mode_enabled()))
    seen.append((m.is_grad_enabled(), m.is_inference_mode_enabled()))

    @m.inference_mode()
    def f(t):
        return t * 3, m.is_grad_enabled()

    @m.inference_mode
    def g(t):
        return t * 3, m.is_inference_mode_enabled()

    out, enabled = f(x)
    out2, inference = g(x)
    seen.append((out.requires_grad, enabled, out2.requires_grad, inference))
    return seen


def test_grad_mode_inside_and_outside_matches_torch() -> None:
    assert _program(ag) == _program(torch)


@pytest.mark.anyio
async def test_decorates_coroutine_functions() -> None:
    @ag.inference_mode()
    async def infer(t):
        return t * 2, ag.is_inference_mode_enabled()

    out, inference = await infer(ag.ones(2, requires_grad=True))
    assert inference and not out.requires_grad
    assert not ag.is_inference_mode_enabled()


def test_bad_mode_raises_type_error() -> None:
    with pytest.raises(TypeError, match="inference_mode"):
        ag.inference_mode("yes")
