"""Note [Forgotten await]: ``loss.backward()`` without ``await`` never silently trains nothing."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import anyio
import numpy as np
import pytest

import aiograd as ag
from aiograd import nn, optim

pytestmark = pytest.mark.timeout(60)


def _model_and_data() -> tuple[nn.Module, ag.Tensor, ag.Tensor]:
    ag.manual_seed(0)
    rng = np.random.default_rng(0)
    x = ag.tensor(rng.standard_normal((32, 4)).astype(np.float32))
    y = ag.tensor(rng.standard_normal((32, 1)).astype(np.float32))
    return nn.Linear(4, 1), x, y


def test_script_loop_without_await_trains():
    """No loop running: each ``loss.backward()`` runs to completion, as in PyTorch."""
    model, x, y = _model_and_data()
    opt = optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(200):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model.weight.grad is not None
    assert losses[-1] < 0.5 * losses[0]


def test_script_backward_returns_a_finished_awaitable():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    done = ag.backward((x * x).sum())
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])  # before any await
    assert anyio.run(_await, done) is None  # awaiting it later is harmless
    grads = ag.grad((x * x).sum(), x)
    (g,) = grads  # PyTorch's `g, = torch.autograd.grad(...)`
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])
    (again,) = anyio.run(_await, grads)
    np.testing.assert_array_equal(again.numpy(), [2.0, 4.0])


async def _await(awaitable):
    return await awaitable


def test_script_asyncio_run_of_a_backward_call_still_works():
    import asyncio

    x = ag.tensor([3.0], requires_grad=True)
    asyncio.run(ag.backward(x * x))
    np.testing.assert_array_equal(x.grad.numpy(), [6.0])


def test_script_without_await_prints_no_never_awaited_warning():
    """Run in a child so that the warning, printed at collection, is seen."""
    code = textwrap.dedent("""
        import warnings, gc
        warnings.simplefilter("error")
        import aiograd as ag
        x = ag.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        ag.grad((x * x).sum(), x)
        gc.collect()
        print(x.grad.tolist())
    """)
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 4.0]"
    assert "never awaited" not in out.stderr


@pytest.mark.anyio
async def test_loop_without_await_fails_at_the_next_step_naming_the_line():
    model, x, y = _model_and_data()
    opt = optim.SGD(model.parameters(), lr=0.1)
    line = None
    with pytest.raises(RuntimeError, match="never awaited") as info:
        for _ in range(200):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            line = inspect.currentframe().f_lineno + 1
            loss.backward()  # the mistake
            opt.step()
    assert f"{__file__}:{line}" in str(info.value)
    assert "await loss.backward()" in str(info.value)
    assert model.weight.grad is None  # nothing ran, and the user was told


@pytest.mark.anyio
async def test_zero_grad_also_reports_it_and_the_table_is_then_clear():
    model, x, y = _model_and_data()
    opt = optim.SGD(model.parameters(), lr=0.1)
    ag.grad(((model(x) - y) ** 2).mean(), list(model.parameters()))
    with pytest.raises(RuntimeError, match=r"grad\(\) called at .*never awaited"):
        model.zero_grad()
    opt.zero_grad()  # reported once: the next check passes
    await ((model(x) - y) ** 2).mean().backward()
    assert model.weight.grad is not None
    opt.step()


@pytest.mark.anyio
async def test_awaited_and_task_forms_are_unchanged():
    model, x, y = _model_and_data()
    opt = optim.SGD(model.parameters(), lr=0.1)
    await ((model(x) - y) ** 2).mean().backward()
    opt.step()
    opt.zero_grad()
    losses = [((model(x) - y) ** 2).mean(), ((model(x) + y) ** 2).mean()]
    async with anyio.create_task_group() as tg:
        for loss in losses:
            tg.start_soon(loss.backward)  # handed to tasks: started later, not forgotten
    opt.step()  # both ran: no error
    assert model.weight.grad is not None


@pytest.mark.anyio
async def test_a_task_cancelled_before_it_started_is_not_a_mistake():
    x = ag.tensor([1.0], requires_grad=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ag.backward, x * 2)
        tg.cancel_scope.cancel()
    optim.SGD([x], lr=0.1).step()  # no "never awaited" error
