"""Note [Forgotten await], the "next backward" half: a backward or grad coroutine
that was dropped without being awaited is reported by the next backward()/grad()
of the thread, before that pass runs; one still held (by a variable, a task or a
task group) is left alone until a step."""

from __future__ import annotations

import anyio
import numpy as np
import pytest

import aiograd as ag

pytestmark = [
    pytest.mark.timeout(60),
    # the dropped coroutine is closed by the check; Python may still have warned first
    pytest.mark.filterwarnings("ignore:coroutine .* was never awaited"),
]


def _line(text: str) -> int:
    """The number of the line of this file that makes the call marked ``text``."""
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "_line(" not in line)


@pytest.mark.anyio
async def test_dropped_backward_raises_at_next_backward():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)  # forgotten: dropped backward
    with pytest.raises(RuntimeError, match="never awaited") as info:
        await y.backward(retain_graph=True)
    assert f"{__file__}:{_line('forgotten: dropped backward')}" in str(info.value)
    assert x.grad is None  # the pass that raised did not run either
    await y.backward()  # reported once: the next one runs
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


@pytest.mark.anyio
async def test_dropped_grad_raises_at_next_grad():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    ag.grad(y, x, retain_graph=True)  # forgotten: dropped grad
    with pytest.raises(RuntimeError, match="grad\\(\\) called at .* never awaited") as info:
        await ag.grad(y, x)
    assert f"{__file__}:{_line('forgotten: dropped grad')}" in str(info.value)
    (g,) = await ag.grad((x * 3).sum(), x)
    np.testing.assert_allclose(g.numpy(), [3.0, 3.0])


@pytest.mark.anyio
async def test_held_backward_is_not_reported_by_the_next_backward():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    held = y.backward(retain_graph=True)
    await ag.backward(y, retain_graph=True)
    await held
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


@pytest.mark.anyio
async def test_task_group_of_backwards_is_not_reported():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(ag.backward, y, None, True)
        tg.start_soon(y.backward, None, True)
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])
    opt = ag.optim.SGD([x], lr=0.0)
    opt.step()  # nothing left un-awaited
