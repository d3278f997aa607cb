"""aiograd.Generator, the default generator and ``generator=`` (Note [Generators across
tasks and threads])."""

from __future__ import annotations

import threading

import anyio
import numpy as np
import pytest

import aiograd as ag
from aiograd import nn

pytestmark = pytest.mark.timeout(60)


def test_a_seed_fixes_the_stream_and_manual_seed_returns_the_generator():
    g = ag.Generator()
    assert g.manual_seed(7) is g
    first = ag.randn(5, generator=g).tolist()
    assert ag.randn(5, generator=g.manual_seed(7)).tolist() == first
    assert ag.randn(5, generator=ag.Generator().manual_seed(8)).tolist() != first
    assert g.initial_seed() == 7


def test_manual_seed_reseeds_the_default_generator_in_place():
    held = ag.default_generator
    assert ag.manual_seed(3) is held
    a = ag.rand(4).tolist()
    ag.manual_seed(3)
    assert ag.rand(4, generator=held).tolist() == a
    assert ag.initial_seed() == 3


def test_state_round_trips():
    g = ag.Generator().manual_seed(11)
    state = g.get_state()
    assert state.dtype == np.uint8
    a = ag.randn(6, generator=g).tolist()
    g.set_state(state)
    assert ag.randn(6, generator=g).tolist() == a
    ag.manual_seed(1)
    saved = ag.get_rng_state()
    b = ag.rand(3).tolist()
    ag.set_rng_state(saved)
    assert ag.rand(3).tolist() == b
    with pytest.raises(TypeError, match="set_state"):
        g.set_state([1, 2])
    with pytest.raises(RuntimeError, match="not a state"):
        g.set_state(ag.tensor([1, 2, 3], dtype=ag.uint8))


def test_seed_is_nondeterministic_and_remembered():
    g = ag.Generator()
    s = g.seed()
    assert g.initial_seed() == s
    assert ag.Generator().initial_seed() != ag.Generator().initial_seed()


def test_seed_errors_match_torch():
    torch = pytest.importorskip("torch")
    for bad in (2 ** 64, -(2 ** 63) - 1):
        with pytest.raises(ValueError, match="Overflow"):
            torch.Generator().manual_seed(bad)
        with pytest.raises(ValueError, match="Overflow"):
            ag.Generator().manual_seed(bad)
    assert ag.Generator().manual_seed(-1).initial_seed() == torch.Generator().manual_seed(
        -1).initial_seed()
    with pytest.raises(TypeError, match="manual_seed"):  # torch truncates it silently
        ag.manual_seed(1.5)


def test_generator_reaches_every_random_op():
    def draws(g):
        layer = nn.Linear(3, 2)
        nn.init.uniform_(layer.weight, generator=g)
        nn.init.normal_(layer.bias, generator=g)
        w = nn.init.trunc_normal_(ag.empty(8), generator=g)
        return [ag.rand(2, generator=g).tolist(), ag.randn(2, generator=g).tolist(),
                ag.randint(0, 10, (3,), generator=g).tolist(), layer.weight.tolist(),
                layer.bias.tolist(), w.tolist()]

    assert draws(ag.Generator().manual_seed(5)) == draws(ag.Generator().manual_seed(5))
    assert draws(np.random.default_rng(5)) == draws(np.random.default_rng(5))  # NumPy's too
    with pytest.raises(TypeError, match=r"randn\(\): argument 'generator'"):
        ag.randn(2, generator=5)


def test_randint_follows_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = ag.randint(3, 7, (200,)), torch.randint(3, 7, (200,))
    assert str(ours.dtype) == "int64" and theirs.dtype == torch.int64
    assert set(ours.tolist()) == set(range(3, 7))
    assert ag.randint(5, (2, 3)).shape == tuple(torch.randint(5, (2, 3)).shape)
    assert str(ag.randint(0, 2, (2,), dtype=ag.float32).dtype) == "float32"
    with pytest.raises(RuntimeError, match="from=4 >= to=4"):
        torch.randint(4, 4, (1,))
    with pytest.raises(RuntimeError, match="from=4 >= to=4"):
        ag.randint(4, 4, (1,))


def test_threads_sharing_the_default_generator_draw_whole_disjoint_chunks():
    ag.manual_seed(21)
    expected = sorted(tuple(ag.rand(50, dtype=ag.float64).tolist()) for _ in range(64))
    ag.manual_seed(21)
    chunks: list[tuple[float, ...]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        for _ in range(8):
            chunk = tuple(ag.rand(50, dtype=ag.float64).tolist())
            with lock:
                chunks.append(chunk)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(chunks) == expected  # the same numbers, in whole draws


@pytest.mark.anyio
async def test_a_generator_per_task_repeats_under_concurrency():
    async def task(seed: int, out: dict, turns: anyio.Event) -> None:
        g = ag.Generator().manual_seed(seed)
        values = []
        for _ in range(5):
            values.append(ag.randn(3, generator=g).tolist())
            ag.randn(3)  # the shared default generator: interleaved with the other task
            await anyio.lowlevel.checkpoint()
        out[seed] = values

    out: dict = {}
    async with anyio.create_task_group() as tg:
        for seed in (1, 2):
            tg.start_soon(task, seed, out, anyio.Event())
    for seed in (1, 2):
        g = ag.Generator().manual_seed(seed)
        assert out[seed] == [ag.randn(3, generator=g).tolist() for _ in range(5)]
