"""aiograd.utils.data against torch.utils.data: datasets, samplers, default_collate and
the DataLoader's batches, lengths and checks; then ``async for``: the same batches under
asyncio and Trio, the next batch loading while the body runs, and early ends (break,
aclose, cancellation) that leave no fetch behind. Concurrency is observed with events,
never sleeps."""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest

import aiograd as ag
from aiograd.utils import data

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")
tdata = pytest.importorskip("torch.utils.data")

Point = namedtuple("Point", ["x", "label"])


def _plain(value: Any) -> Any:
    """A collated batch (either library's) as nested lists/dicts of (dtype kind, values)."""
    if isinstance(value, (ag.Tensor, torch.Tensor)):
        arr = np.asarray(value.detach().numpy())
        return (arr.dtype.str, arr.tolist())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__ if isinstance(value, Point) else "seq",
                [_plain(v) for v in value])
    return value


def _tensor_datasets(n: int = 10) -> tuple[data.TensorDataset, Any]:
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n, dtype=np.int64)
    return (data.TensorDataset(ag.tensor(x), ag.tensor(y)),
            tdata.TensorDataset(torch.tensor(x), torch.tensor(y)))


# ---- datasets and collation ----

def test_tensor_dataset_indexes_every_tensor() -> None:
    ds, tds = _tensor_datasets()
    assert len(ds) == len(tds) == 10
    assert _plain(list(ds[3])) == _plain(list(tds[3]))
    with pytest.raises(ValueError, match="Size mismatch"):
        data.TensorDataset(ag.zeros(3), ag.zeros(4))


COLLATE_CASES = {
    "tensors": [np.ones((2, 3), np.float32) * i for i in range(3)],
    "numpy_arrays": [np.arange(4, dtype=np.int32) + i for i in range(3)],
    "numpy_scalars": [np.float32(i) for i in range(3)],
    "floats": [0.5, 1.5, 2.5],
    "ints": [1, 2, 3],
    "bools": [True, False, True],
    "strings": ["a", "b", "c"],
    "tuples": [(np.float32(i), i, "s") for i in range(3)],
    "lists": [[i, float(i)] for i in range(3)],
    "dicts": [{"x": np.full(2, i, np.float64), "y": i, "meta": {"id": i}} for i in range(3)],
    "namedtuples": [Point(np.ones(2, np.float32) * i, i) for i in range(3)],
}


@pytest.mark.parametrize("case", sorted(COLLATE_CASES))
def test_default_collate_matches_torch(case: str) -> None:
    batch = COLLATE_CASES[case]
    ours_in = batch
    theirs_in = batch
    if case == "tensors":
        ours_in = [ag.tensor(a) for a in batch]
        theirs_in = [torch.tensor(a) for a in batch]
    assert _plain(data.default_collate(ours_in)) == _plain(tdata.default_collate(theirs_in))


def test_default_collate_errors() -> None:
    with pytest.raises(RuntimeError, match="equal size"):
        data.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate"):
        data.default_collate([object(), object()])


# ---- the loader, synchronously ----

@pytest.mark.parametrize("batch_size", [1, 3, 4, 10, 12])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_batches_and_len_match_torch(batch_size: int, drop_last: bool) -> None:
    ds, tds = _tensor_datasets()
    dl = data.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
    tdl = tdata.DataLoader(tds, batch_size=batch_size, drop_last=drop_last)
    assert len(dl) == len(tdl)
    assert [_plain(b) for b in dl] == [_plain(b) for b in tdl]


def test_shuffle_with_a_generator_is_a_reproducible_permutation_per_epoch() -> None:
    ds, _ = _tensor_datasets(20)

    def epochs(dl: data.DataLoader[Any]) -> list[list[int]]:
        return [[int(i) for b in dl for i in b[1].tolist()] for _ in range(3)]

    first = epochs(data.DataLoader(ds, 6, shuffle=True, generator=np.random.default_rng(7)))
    again = epochs(data.DataLoader(ds, 6, shuffle=True, generator=np.random.default_rng(7)))
    assert first == again
    assert all(sorted(order) == list(range(20)) for order in first)
    assert first[0] != first[1] and first[0] != list(range(20))


def test_shuffle_without_a_generator_follows_manual_seed() -> None:
    ds, _ = _tensor_datasets(20)
    orders = []
    for _ in range(2):
        ag.manual_seed(3)
        dl = data.DataLoader(ds, 5, shuffle=True)
        orders.append([[int(i) for b in dl for i in b[1].tolist()] for _ in range(2)])
    assert orders[0] == orders[1] and orders[0][0] != orders[0][1]


def test_samplers_and_batch_sampler() -> None:
    ds, _ = _tensor_datasets()
    sampler = [9, 0, 4]
    assert [b[1].tolist() for b in data.DataLoader(ds, 2, sampler=sampler)] == [[9, 0], [4]]
    batches = [[1, 2, 3], [0]]
    assert [b[1].tolist() for b in data.DataLoader(ds, batch_sampler=batches)] == batches
    replace = data.RandomSampler(ds, replacement=True, num_samples=30,
                                 generator=np.random.default_rng(0))
    drawn = list(replace)
    assert len(drawn) == len(replace) == 30 and set(drawn) <= set(range(10))
    longer = list(data.RandomSampler(ds, num_samples=15, generator=np.random.default_rng(0)))
    assert len(longer) == 15 and sorted(longer[:10]) == list(range(10))
    bs = data.BatchSampler(data.SequentialSampler(range(7)), 3, drop_last=False)
    tbs = tdata.BatchSampler(tdata.SequentialSampler(range(7)), 3, drop_last=False)
    assert list(bs) == list(tbs) and len(bs) == len(tbs)


def test_no_auto_batching_and_custom_collate() -> None:
    ds, tds = _tensor_datasets(4)
    ours = [_plain(list(s)) for s in data.DataLoader(ds, batch_size=None)]
    assert ours == [_plain(list(s)) for s in tdata.DataLoader(tds, batch_size=None)]
    sizes = list(data.DataLoader(ds, batch_size=3, collate_fn=len))
    assert sizes == [3, 1]


def test_iterable_dataset_is_batched_in_order() -> None:
    class Count(data.IterableDataset[int]):
        def __iter__(self) -> Iterator[int]:
            return iter(range(7))

    assert [b.tolist() for b in data.DataLoader(Count(), batch_size=3)] == [
        [0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in data.DataLoader(Count(), 3, drop_last=True)] == [
        [0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="shuffle"):
        data.DataLoader(Count(), shuffle=True)


@pytest.mark.parametrize("kwargs", [
    {"sampler": [0, 1], "shuffle": True},
    {"batch_sampler": [[0]], "batch_size": 2},
    {"batch_sampler": [[0]], "drop_last": True},
    {"batch_size": None, "drop_last": True},
    {"num_workers": -1},
])
def test_option_conflicts_raise_torchs_value_error(kwargs: dict[str, Any]) -> None:
    ds, tds = _tensor_datasets()
    with pytest.raises(ValueError) as theirs:
        tdata.DataLoader(tds, **kwargs)
    with pytest.raises(ValueError, match=str(theirs.value)[:40]):
        data.DataLoader(ds, **kwargs)


def test_worker_processes_are_refused() -> None:
    ds, _ = _tensor_datasets()
    with pytest.raises(NotImplementedError, match="num_workers"):
        data.DataLoader(ds, num_workers=2)


# ---- async for ----

class Probe(data.Dataset[int]):
    """Records each index it loads (and on which thread); an index may be gated: its load
    announces itself on ``started[i]`` and waits for ``gates[i]``."""

    def __init__(self, n: int, gated: tuple[int, ...] = ()) -> None:
        self.n = n
        self.loaded: list[int] = []
        self.threads: set[int] = set()
        self.started = {i: threading.Event() for i in range(n)}
        self.finished = {i: threading.Event() for i in range(n)}
        self.gates = {i: threading.Event() for i in gated}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        self.threads.add(threading.get_ident())
        self.started[i].set()
        gate = self.gates.get(i)
        if gate is not None and not gate.wait(30):
            raise TimeoutError(f"gate {i} never opened")
        self.loaded.append(i)
        self.finished[i].set()
        return i


async def _wait(event: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(event.wait, 30), "event never set"


async def _drain_worker() -> None:
    """Return once every job queued on aiograd's CPU worker before this one has ended."""
    await ag.offload(lambda: None)


@pytest.mark.anyio
async def test_async_for_gives_the_same_batches_as_for() -> None:
    ds, _ = _tensor_datasets(11)
    dl = data.DataLoader(ds, batch_size=4, shuffle=True, generator=np.random.default_rng(1))
    dl_sync = data.DataLoader(ds, batch_size=4, shuffle=True,
                              generator=np.random.default_rng(1))
    got = [_plain(b) async for b in dl]
    assert got == [_plain(b) for b in dl_sync]
    assert len(got) == 3


@pytest.mark.anyio
async def test_next_batch_loads_on_a_worker_while_the_body_runs() -> None:
    probe = Probe(3)
    seen = []
    async for batch in data.DataLoader(probe, batch_size=1):
        seen.append(batch.tolist())
        if len(seen) < 3:
            # The body has not finished, yet the next batch is being loaded.
            await _wait(probe.started[len(seen)])
    assert seen == [[0], [1], [2]]
    assert threading.get_ident() not in probe.threads


@pytest.mark.anyio
async def test_break_leaves_no_fetch_behind() -> None:
    probe = Probe(4, gated=(1,))
    async for _batch in data.DataLoader(probe, batch_size=1):
        await _wait(probe.started[1])  # the prefetch of batch 1 is running, held at its gate
        break
    probe.gates[1].set()
    await _wait(probe.finished[1])
    await _drain_worker()
    assert probe.loaded == [0, 1]  # batch 1 ended on the worker, dropped; nothing after


@pytest.mark.anyio
async def test_aclose_waits_for_a_running_fetch() -> None:
    probe = Probe(4, gated=(1,))
    it = data.DataLoader(probe, batch_size=1).__aiter__()
    assert (await it.__anext__()).tolist() == [0]
    await _wait(probe.started[1])
    closed = anyio.Event()

    async def close() -> None:
        await it.aclose()
        closed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(close)
        await anyio.wait_all_tasks_blocked()
        assert not closed.is_set()  # held by the running fetch
        probe.gates[1].set()
    assert probe.loaded == [0, 1]
    with pytest.raises(StopAsyncIteration):
        await it.__anext__()
    await _drain_worker()
    assert probe.loaded == [0, 1]


@pytest.mark.anyio
async def test_cancelled_anext_keeps_a_queued_fetch_from_running() -> None:
    probe = Probe(4)
    worker_busy, release = threading.Event(), threading.Event()

    def hold_the_worker() -> None:
        worker_busy.set()
        release.wait(30)

    it = data.DataLoader(probe, batch_size=1).__aiter__()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ag.offload, hold_the_worker)
        await _wait(worker_busy)
        with anyio.CancelScope() as scope:
            tg.start_soon(_cancel_when_blocked, scope)
            await it.__anext__()  # queued behind hold_the_worker; cancelled there
        assert scope.cancelled_caught
        release.set()
    await _drain_worker()
    assert probe.loaded == [] and not probe.started[0].is_set()
    with pytest.raises(StopAsyncIteration):
        await it.__anext__()


async def _cancel_when_blocked(scope: anyio.CancelScope) -> None:
    await anyio.wait_all_tasks_blocked()
    scope.cancel()


@pytest.mark.anyio
async def test_a_failing_dataset_raises_in_the_loop() -> None:
    class Broken(data.Dataset[int]):
        def __len__(self) -> int:
            return 3

        def __getitem__(self, i: int) -> int:
            if i == 1:
                raise KeyError(i)
            return i

    seen = []
    with pytest.raises(KeyError):
        async for batch in data.DataLoader(Broken(), batch_size=1):
            seen.append(batch.tolist())
    assert seen == [[0]]


@pytest.mark.anyio
async def test_training_with_async_for() -> None:
    ag.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32))[:, None]
    loader = data.DataLoader(data.TensorDataset(ag.tensor(x), ag.tensor(y)), batch_size=16,
                             shuffle=True, generator=np.random.default_rng(0))
    model = ag.nn.Linear(3, 1)
    opt = ag.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(10):
        total = 0.0
        async for xb, yb in loader:
            loss = ((model(xb) - yb) ** 2).mean()
            opt.zero_grad()
            await loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total)
    assert losses[-1] < 0.05 * losses[0]


@pytest.mark.anyio
async def test_async_for_without_multithreading_loads_on_the_callers_thread() -> None:
    probe = Probe(3)
    with ag.set_multithreading_enabled(False):
        got = [b.tolist() async for b in data.DataLoader(probe, batch_size=2)]
    assert got == [[0, 1], [2]]
    assert probe.threads == {threading.get_ident()}


def test_random_sampler_refuses_other_generators() -> None:
    ds, _ = _tensor_datasets()
    with pytest.raises(TypeError, match="generator"):
        data.DataLoader(ds, shuffle=True, generator=torch.Generator())


def test_subset_and_concat_dataset_match_torch() -> None:
    ds, tds = _tensor_datasets(6)
    sub, tsub = data.Subset(ds, [4, 0, 2]), tdata.Subset(tds, [4, 0, 2])
    assert len(sub) == len(tsub) == 3
    assert [_plain(list(sub[i])) for i in range(3)] == [_plain(list(tsub[i])) for i in range(3)]
    both, tboth = ds + sub, tds + tsub
    assert isinstance(both, data.ConcatDataset) and len(both) == len(tboth) == 9
    for i in [0, 5, 6, 8, -1, -9]:
        assert _plain(list(both[i])) == _plain(list(tboth[i])), i
    assert both.cumulative_sizes == tboth.cumulative_sizes
    loaded = [b[1].tolist() for b in data.DataLoader(both, batch_size=4)]
    assert loaded == [[0, 1, 2, 3], [4, 5, 4, 0], [2]]


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.25, 0.25, 0.5], [0.33, 0.33, 0.34]])
def test_random_split_sizes_match_torch_and_cover_the_dataset(lengths: list[Any]) -> None:
    ds, tds = _tensor_datasets(10)
    parts = data.random_split(ds, lengths, generator=np.random.default_rng(0))
    tparts = tdata.random_split(tds, lengths)
    assert [len(p) for p in parts] == [len(p) for p in tparts]
    indices = [i for p in parts for i in p.indices]
    assert sorted(indices) == list(range(10)) and indices != list(range(10))
    again = data.random_split(ds, lengths, generator=np.random.default_rng(0))
    assert [p.indices for p in again] == [p.indices for p in parts]


def test_random_split_bad_lengths_raise_torchs_error() -> None:
    ds, tds = _tensor_datasets(10)
    with pytest.raises(ValueError) as theirs:
        tdata.random_split(tds, [3, 3])
    with pytest.raises(ValueError, match=str(theirs.value)):
        data.random_split(ds, [3, 3])
