"""gradcheck/gradgradcheck: blocking forms, awaitable forms, and second order vs PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import aiograd as ag

pytestmark = pytest.mark.timeout(120)


def _leaf(lib, values):
    return lib.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def _smooth(lib):
    return lambda x, y: (x ** 3 * lib.sin(y)).sum() + (x * y).exp()


def _square(lib, factor: float, detach: bool):
    """x**2 as a Function whose backward is ``grad * factor * x`` (x detached if asked)."""

    class Square(lib.autograd.Function if lib is not ag else ag.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * factor * (x.detach() if detach else x)

    return Square.apply


def _wrong_second_order(lib):
    """x**2 whose backward treats x as a constant: first order right, second wrong."""
    return _square(lib, 2, detach=True)


def _wrong_first_order(lib):
    return _square(lib, 3, detach=False)


CASES = {
    "smooth": (_smooth, [[0.5, -1.2], [0.3, 2.0]]),
    "wrong-second-order": (_wrong_second_order, [[0.5, -1.2, 2.0]]),
    "wrong-first-order": (_wrong_first_order, [[0.5, -1.2, 2.0]]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
def test_verdicts_match_torch(case, check):
    torch = pytest.importorskip("torch")
    make, values = CASES[case]
    ours = getattr(ag, check)(make(ag), [_leaf(ag, v) for v in values],
                              raise_exception=False)
    theirs = getattr(torch.autograd, check)(make(torch), [_leaf(torch, v) for v in values],
                                            raise_exception=False)
    assert ours == theirs


def test_gradgradcheck_raises_naming_the_mismatch():
    with pytest.raises(ag.GradcheckError, match="Jacobian mismatch"):
        ag.gradgradcheck(_wrong_second_order(ag), [_leaf(ag, [0.5, 2.0])])


def test_gradgradcheck_takes_grad_outputs_and_checks_their_count():
    x = _leaf(ag, [0.5, 2.0])
    go = _leaf(ag, [1.0, -1.0])
    assert ag.gradgradcheck(lambda t: t ** 3, [x], [go])
    with pytest.raises(ValueError, match="2 grad_outputs for 1 outputs"):
        ag.gradgradcheck(lambda t: t ** 3, [x], [go, go])


@pytest.mark.anyio
async def test_blocking_forms_inside_a_loop_say_what_to_await():
    x = _leaf(ag, [0.5, 2.0])
    with pytest.raises(RuntimeError, match=r"await aiograd\.gradcheck_async\(\.\.\.\)"):
        ag.gradcheck(lambda t: t ** 2, [x])
    with pytest.raises(RuntimeError, match=r"await aiograd\.gradgradcheck_async\(\.\.\.\)"):
        ag.gradgradcheck(lambda t: t ** 2, [x])


@pytest.mark.anyio
async def test_awaitable_forms_check_inside_a_loop():
    x = _leaf(ag, [0.5, -1.2, 2.0])
    assert await ag.gradcheck_async(lambda t: (t ** 3).sum(), [x])
    assert await ag.gradgradcheck_async(lambda t: (t ** 3).sum(), [x])
    assert not await ag.gradgradcheck_async(_wrong_second_order(ag), [x],
                                            raise_exception=False)
    with pytest.raises(ag.GradcheckError):
        await ag.gradcheck_async(_wrong_first_order(ag), [x])
