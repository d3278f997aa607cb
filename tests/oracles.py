"""PyTorch as a test oracle: shared checks (and inputs) of the op test modules.

Each check skips (``pytest.importorskip``) when PyTorch is not installed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import aiograd as ag


def arr(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Standard normal float64 values."""
    return np.random.default_rng(seed).standard_normal(shape)


def away_from_zero(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    """float64 values at least 0.5 from zero (safe divisors)."""
    a = arr(shape, seed)
    return np.sign(a) * (0.5 + np.abs(a))


def leaf(a: Any) -> ag.Tensor:
    """A float64 leaf that requires grad."""
    return ag.tensor(np.array(a, dtype=np.float64), requires_grad=True)


def check_against_torch(fn: Callable[..., Any], torch_fn: Callable[..., Any], *arrays: Any,
                        seed: int = 1) -> None:
    """Forward values and vector-Jacobian products agree with PyTorch's."""
    torch = pytest.importorskip("torch")
    xs = [leaf(a) for a in arrays]
    ts = [torch.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out, t_out = fn(*xs), torch_fn(*ts)
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-7,
                               atol=1e-12)
    v = np.random.default_rng(seed).standard_normal(t_out.shape)
    grads = ag.grad_sync(out, xs, ag.tensor(v))
    t_grads = torch.autograd.grad(t_out, ts, torch.tensor(v))
    for g, tg in zip(grads, t_grads):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-7, atol=1e-12)


def check_second_order(fn: Callable[..., Any], torch_fn: Callable[..., Any], *arrays: Any,
                       seed: int = 2) -> None:
    """Gradients of a vector-Jacobian product (create_graph=True) agree with PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    xs = [leaf(a) for a in arrays]
    ts = [torch.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out, t_out = fn(*xs), torch_fn(*ts)
    v = rng.standard_normal(t_out.shape)
    ws = [rng.standard_normal(np.shape(a)) for a in arrays]
    firsts = ag.grad_sync(out, xs, ag.tensor(v), create_graph=True)
    t_firsts = torch.autograd.grad(t_out, ts, torch.tensor(v), create_graph=True)
    total = sum((g * ag.tensor(w)).sum() for g, w in zip(firsts, ws))
    t_total = sum((g * torch.tensor(w)).sum() for g, w in zip(t_firsts, ws))
    seconds = ag.grad_sync(total, xs, allow_unused=True)
    t_seconds = torch.autograd.grad(t_total, ts, allow_unused=True)
    for x, g, tg in zip(xs, seconds, t_seconds):
        got = np.zeros(x.shape) if g is None else g.numpy()
        expected = np.zeros(x.shape) if tg is None else tg.numpy(force=True)
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-12)


def run_both(program: Callable[[Any], Any]) -> tuple[Any, Any]:
    """``program(aiograd), program(torch)``: a program written once against a module."""
    torch = pytest.importorskip("torch")
    return program(ag), program(torch)


def check_on_fake_device(fake_backend: Any, op: Callable[[Any], Any], rtol: float = 1e-7) -> None:
    """``op``'s forward and backward stay on fake:1, with the gradient computed on the CPU."""
    values = arr((2, 3))
    x = ag.tensor(values, device="fake:1", requires_grad=True)
    y = op(x)
    assert y.device is ag.device("fake:1")
    (g,) = ag.grad_sync(y.sum(), x)
    assert g.device is ag.device("fake:1")
    cpu_x = leaf(values)
    (expected,) = ag.grad_sync(op(cpu_x).sum(), cpu_x)
    np.testing.assert_allclose(fake_backend.to_host(g.data), expected.numpy(), rtol=rtol)


def raises_like(fn: Callable[[], Any], torch_fn: Callable[[], Any]) -> None:
    """``fn`` raises the same exception type and message as ``torch_fn``."""
    with pytest.raises(Exception) as expected:
        torch_fn()
    with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
        fn()


def check_module_on_fake_device(fake_backend: Any, make: Any, call: Any,
                                inputs: list[np.ndarray]) -> None:
    """``make()`` moved to fake:1 gives the CPU's outputs and gradients, all on fake:1."""
    ag.manual_seed(0)
    cpu = make()
    dev = make()
    dev.load_state_dict(cpu.state_dict())
    dev.to("fake:1")
    results = []
    for module, device in ((cpu, "cpu"), (dev, "fake:1")):
        xs = [ag.tensor(a, device=device, requires_grad=a.dtype.kind == "f") for a in inputs]
        out = call(module, *xs)
        assert out.device is ag.device(device)
        ag.backward_sync(out.sum())
        grads = [p.grad for p in module.parameters()] + [x.grad for x in xs if x.requires_grad]
        assert all(g.device is ag.device(device) for g in grads)
        results.append([out] + grads)
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(fake_backend.to_host(theirs.data), ours.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
