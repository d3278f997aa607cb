"""Datasets and the DataLoader, as ``torch.utils.data``, with ``async for``.

``for batch in loader`` loads each batch on the caller's thread, as PyTorch's
``num_workers=0``. ``async for batch in loader`` loads the next batch on aiograd's CPU
worker while the loop body trains on the current one::

    loop task                            CPU worker
    ---------                            ----------
    __anext__: await fetch k  <--------  fetch k: sampler -> dataset[i] -> collate
               queue fetch k+1  ------>  fetch k+1 (while the body runs)
    body: forward, await backward ...    (backward nodes run here too, first)
    __anext__: await fetch k+1 <-------

Note [DataLoader prefetch]
    At most one fetch is in flight per iterator, and a fetch is queued only after the
    previous one has ended, so the sampler's iterator, the dataset and ``collate_fn``
    are called by one thread at a time (the worker, or the caller in a plain ``for``),
    each call ordered after the last by the worker's queue and the loop signal
    (happens-before through their locks). A fetch is a :class:`PendingOffload` job,
    so it runs in a copy of the caller's contextvars and its warnings reach the
    caller. Ending early:

    - ``await it.aclose()`` (or ``contextlib.aclosing``): a fetch that has not started
      never runs; a running one is waited for (shielded), so nothing of the loader runs
      once ``aclose`` returns;
    - a cancelled ``__anext__`` does the same, then closes the iterator; an exception
      from the sampler, the dataset or ``collate_fn`` is raised by ``__anext__`` and
      closes it too;
    - leaving ``async for`` with ``break`` drops the iterator: its fetch, if it has not
      started, never runs; a running one ends on the worker and its batch is dropped.
      Nothing is left behind either way: no task, no thread of its own.

    A plain ``async for`` costs no extra thread: the worker is the one that runs
    backward passes, and backward nodes go before the fetch in its queue.
"""

from __future__ import annotations

import bisect
import collections.abc
import itertools
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy

from .._ops.joining import stack
from .._random import Generator
from .._tensor import Tensor, rand, tensor
from ..engine.offload import PendingOffload

__all__ = [
    "BatchSampler",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "TensorDataset",
    "default_collate",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)


# ---- datasets ----

class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses define ``__getitem__(index)`` and ``__len__``."""

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """An iterable dataset: subclasses define ``__iter__``; the DataLoader batches the
    samples in the order they come (no sampler, no shuffle)."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; the tensors share their first dim."""

    def __init__(self, *tensors: Tensor) -> None:
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"TensorDataset(): argument {i} must be a Tensor, not {type(t).__name__}")
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError(
                "Size mismatch between tensors: first dims "
                f"{[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0] if self.tensors else 0


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index: Any) -> T_co:
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """The samples of each of ``datasets`` in turn (``dataset_a + dataset_b``)."""

    def __init__(self, datasets: Iterable[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        sizes = []
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise ValueError("ConcatDataset does not support IterableDataset")
            if not isinstance(d, collections.abc.Sized):
                raise TypeError(
                    f"ConcatDataset needs datasets with __len__, got {type(d).__name__}")
            sizes.append(len(d))
        self.cumulative_sizes = list(itertools.accumulate(sizes))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> T_co:
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


def random_split(dataset: Dataset[T_co], lengths: Sequence[int | float],
                 generator: Any = None) -> list[Subset[T_co]]:
    """Split ``dataset`` into non-overlapping random Subsets of ``lengths``, as PyTorch's:
    lengths are counts summing to ``len(dataset)``, or fractions summing to 1 (the
    remainder spread one by one over the first parts). The permutation is drawn as
    :class:`RandomSampler` draws it, from ``generator`` or aiograd's global generator."""
    n = len(dataset)  # type: ignore[arg-type]
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(
            "Sum of input lengths does not equal the length of the input dataset!")
    if generator is not None and not isinstance(generator, _generator_types()):
        raise TypeError("random_split(): generator must be a numpy.random.Generator or an "
                        f"aiograd.Generator, not {type(generator).__name__}")
    order = _permutation(n, generator)
    bounds = list(itertools.accumulate(int(k) for k in lengths))
    return [Subset(dataset, order[end - int(k):end]) for k, end in zip(lengths, bounds)]


# ---- samplers ----

class Sampler(Generic[T_co]):
    """Yields dataset indices (or, for a batch sampler, lists of them)."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _generator_types() -> tuple[type, ...]:
    """What ``generator=`` may be: an ``aiograd.Generator`` or a ``numpy.random.Generator``."""
    return (Generator, numpy.random.Generator)


def _uniform(n: int, generator: Any) -> numpy.ndarray:
    """``n`` float64 draws from U(0, 1) of ``generator`` (None: aiograd's global
    generator, the one :func:`aiograd.manual_seed` seeds), as ``aiograd.rand`` draws."""
    return rand(n, dtype=numpy.float64, generator=generator).numpy()


def _permutation(n: int, generator: Any) -> list[int]:
    """A uniform random permutation of ``range(n)``: the ranks of ``n`` uniform draws."""
    order: list[int] = numpy.argsort(_uniform(n, generator), kind="stable").tolist()
    return order


class RandomSampler(Sampler[int]):
    """A random permutation of the indices each epoch, or with ``replacement``
    ``num_samples`` indices drawn uniformly, with the draws of ``aiograd.rand``: from
    ``generator`` (a ``numpy.random.Generator`` or an ``aiograd.Generator``; its state
    advances each epoch) or aiograd's global generator, so :func:`aiograd.manual_seed`
    makes the order reproducible."""

    def __init__(self, data_source: Any, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got replacement="
                            f"{replacement}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")
        if generator is not None and not isinstance(generator, _generator_types()):
            raise TypeError("RandomSampler(): generator must be a numpy.random.Generator or "
                            f"an aiograd.Generator, not {type(generator).__name__}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if self.replacement:
            draws = _uniform(self.num_samples, self.generator) * n
            return iter(numpy.minimum(draws.astype(numpy.int64), n - 1).tolist())
        order: list[int] = []
        while len(order) < self.num_samples:
            order += _permutation(n, self.generator)
        return iter(order[:self.num_samples])

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups ``sampler``'s indices into lists of ``batch_size``; the last, shorter one
    is kept unless ``drop_last``."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                or batch_size <= 0):
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        return _chunks(iter(self.sampler), self.batch_size, self.drop_last)

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def _chunks(items: Iterator[Any], size: int, drop_last: bool) -> Iterator[list[Any]]:
    while True:
        chunk = []
        for item in items:
            chunk.append(item)
            if len(chunk) == size:
                break
        if not chunk or (drop_last and len(chunk) < size):
            return
        yield chunk


# ---- collation ----

def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch, as PyTorch's ``default_collate``.

    Tensors are stacked (a new first dim); NumPy arrays and scalars become stacked
    Tensors; Python floats, ints and bools a 1-D float64, int64 or bool Tensor; strings
    and bytes stay a list; mappings are collated per key, named tuples per field, and
    other sequences per position (a list of collated fields; samples must have equal
    lengths).
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, numpy.ndarray):
        if elem.dtype.kind in "OSUV":
            raise TypeError(
                f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                f"or lists; found numpy array of dtype {elem.dtype}")
        return tensor(numpy.stack(batch))
    if isinstance(elem, numpy.generic):
        return tensor(numpy.array(batch))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, bool):
        return tensor(list(batch), dtype=numpy.bool_)
    if isinstance(elem, numbers.Integral):
        return tensor(list(batch), dtype=numpy.int64)
    if isinstance(elem, numbers.Real):
        return tensor(list(batch), dtype=numpy.float64)
    if isinstance(elem, Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(field)) for field in zip(*batch)]
    raise TypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
        f"lists; found {type(elem)}")


# ---- the loader ----

_END = object()  # what a fetch returns once the batches are exhausted


class DataLoader(Generic[T_co]):
    """``DataLoader(dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
    worker_init_fn=None, multiprocessing_context=None, generator=None, *,
    prefetch_factor=None, persistent_workers=False, pin_memory_device="")``, as
    ``torch.utils.data.DataLoader`` with ``num_workers=0``.

    Iterate with ``for`` (batches load on the caller's thread) or ``async for`` (the
    next batch loads on aiograd's CPU worker while the body runs; see Note [DataLoader
    prefetch]). ``shuffle`` uses a :class:`RandomSampler` with ``generator``.
    ``batch_size=None`` yields samples one by one, without collation. Multiprocess
    loading (``num_workers > 0``) and pinned memory are not supported.
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Callable[[list[Any]], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "") -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        if num_workers > 0 or pin_memory:
            raise NotImplementedError(
                "aiograd's DataLoader loads batches in this process (num_workers=0, "
                "pin_memory=False); `async for` prefetches the next batch on a worker thread")
        if isinstance(dataset, IterableDataset):
            if shuffle:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 "sampler and batch_sampler options")
        elif sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if not isinstance(dataset, IterableDataset):
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.generator = generator
        self.timeout = timeout
        self._auto_collation = batch_sampler is not None or (
            isinstance(dataset, IterableDataset) and batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else _identity
        self.collate_fn = collate_fn

    def _samples(self) -> Iterator[Any]:
        """Each batch's samples (a list), or each sample without auto-collation."""
        if isinstance(self.dataset, IterableDataset):
            samples = iter(self.dataset)
            if self.batch_size is None:
                return samples
            return _chunks(samples, self.batch_size, self.drop_last)
        if self.batch_sampler is not None:
            return ([self.dataset[i] for i in indices] for indices in self.batch_sampler)
        return (self.dataset[i] for i in self.sampler)

    def __iter__(self) -> Iterator[Any]:
        collate = self.collate_fn
        return (collate(samples) for samples in self._samples())

    def __aiter__(self) -> _AsyncBatches:
        return _AsyncBatches(self._samples(), self.collate_fn)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)


def _identity(sample: Any) -> Any:
    return sample


class _AsyncBatches:
    """The ``async for`` iterator of a DataLoader; see Note [DataLoader prefetch].

    Made on the loop's thread, by ``async for``; used from that task only.
    Invariant: ``_pending`` is the one fetch in flight, or None (not started, closed).
    """

    __slots__ = ("_samples", "_collate", "_pending", "_closed")

    def __init__(self, samples: Iterator[Any], collate: Callable[[Any], Any]) -> None:
        self._samples = samples
        self._collate = collate
        self._pending: PendingOffload | None = None
        self._closed = False

    def _fetch(self) -> Any:
        """The next batch, or _END (on the worker). See Note [DataLoader prefetch]."""
        samples = next(self._samples, _END)
        return _END if samples is _END else self._collate(samples)

    def __aiter__(self) -> _AsyncBatches:
        return self

    async def __anext__(self) -> Any:
        if self._closed:
            raise StopAsyncIteration
        pending, self._pending = self._pending, None
        if pending is None:
            pending = PendingOffload(self._fetch)
        try:
            batch = await pending.result()
        except BaseException:
            self._closed = True  # a cancelled or failed fetch ends the iteration
            raise
        if batch is _END:
            self._closed = True
            raise StopAsyncIteration
        self._pending = PendingOffload(self._fetch)
        return batch

    async def aclose(self) -> None:
        """Stop: a queued fetch never runs, a running one is waited for (shielded)."""
        self._closed = True
        pending, self._pending = self._pending, None
        if pending is not None:
            await pending.cancel()

    def __del__(self) -> None:
        # Dropped without aclose (a `break`): keep the queued fetch from starting.
        pending = self._pending
        if pending is not None:
            pending.discard()
