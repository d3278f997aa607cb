"""inference_mode as a context manager and decorator (sync and async), and the inference
tensors made inside (Note [Inference tensors]), against torch's behaviour."""

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


def _inference_tensors(m):
    """What torch.inference_mode marks, and what it refuses outside, as outcomes."""
    normal = m.ones(3)
    w = m.ones(3, requires_grad=True)
    with m.inference_mode():
        made = m.ones(3)
        result = normal * 2
        view_of_normal = normal[:2]
        made.add_(1)  # in place inside: allowed
        marks = [t.is_inference() for t in (made, result, made[:2], view_of_normal, normal)]
    marks.append(made.detach().is_inference())
    outcomes = []
    for use in (lambda: made._version,
                lambda: made * w,  # MulBackward0 saves made
                lambda: made @ w,
                lambda: (made + w).sum().item(),  # AddBackward0 saves nothing: fine
                lambda: (made.clone() * w).sum().item(),
                lambda: made.requires_grad_(),
                lambda: made.add_(1)):  # last: torch writes before it refuses
        try:
            outcomes.append(("ok", use()))
        except RuntimeError as e:
            outcomes.append((type(e).__name__, str(e).replace("torch.", "aiograd.")))
    with m.inference_mode(), m.inference_mode(False):
        try:
            made * w
        except RuntimeError as e:
            outcomes.append(("nested", str(e).replace("torch.", "aiograd.")))
    return marks, outcomes


def test_inference_tensors_are_marked_and_refused_as_torchs():
    ours, theirs = _inference_tensors(ag), _inference_tensors(torch)
    assert ours == theirs
    assert ours[0] == [True, True, True, False, False, True]


def test_an_inference_tensor_is_refused_before_anything_is_written():
    with ag.inference_mode():
        made = ag.ones(2)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        made.mul_(3)
    assert made.tolist() == [1.0, 1.0]
