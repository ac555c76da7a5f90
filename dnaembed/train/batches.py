"""Training batches as a function of (seed, stage, rank, step), drawn ahead of the step.

Each batch comes from a generator of its own, seeded by ``[seed, stage, rank,
index]`` (``index`` = the optimizer step, times ``grad_accum`` plus the
micro-step). So a run resumed at step k sees the batches an uninterrupted run
saw from step k on, and worker processes draw the batches this process would.
How they are drawn ahead is the execution strategy, kept here:

* in this process (``train.label_workers = 0``): a background thread keeps up to
  ``train.prefetch`` batches ready (rapidfuzz and most of numpy release the GIL,
  so the labels overlap the step); ``prefetch = 0`` draws each when it is needed;
* in ``train.label_workers`` worker processes (a torch DataLoader over the step
  indices, in order, ``prefetch`` batches ahead per worker), for when the channel
  and the exact Levenshtein labels are slower than the step (a fast accelerator).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from dnaembed.train.pairs import PairConfig, make_sampler


@dataclass(frozen=True)
class StepBatch:
    """One step's sequences (as codes), its labelled pairs, and what drawing them cost."""

    codes: np.ndarray
    left: np.ndarray
    right: np.ndarray
    distance: np.ndarray
    seconds: float

    @property
    def pairs(self) -> int:
        """The number of labelled pairs."""
        return len(self.left)


@dataclass(frozen=True)
class BatchSource:
    """Everything a drawing process needs (plain data, so a worker can receive it)."""

    pairs: PairConfig
    seed: int
    stage: int
    rank: int
    batch_size: int
    window: int

    def draw(self, index: int) -> StepBatch:
        """Batch ``index`` of this run: the same whoever draws it, and whenever."""
        t = time.perf_counter()
        seed = [self.seed, self.stage, self.rank, index]
        batch = make_sampler(self.pairs, seed=seed).sample_train(self.batch_size)
        codes = batch.padded(self.window)
        return StepBatch(codes, batch.left, batch.right, batch.distance,
                         time.perf_counter() - t)


class BatchStream:
    """Batches ``start, start + 1, ... stop - 1`` of a source, in order; counts their cost."""

    def __init__(self, source: BatchSource, start: int, stop: int) -> None:
        self.source, self.start, self.stop = source, start, stop
        self.pairs = 0
        self.seconds = 0.0

    def next(self) -> StepBatch:
        """The next batch, its pairs and drawing time counted."""
        batch = self._next()
        self.pairs += batch.pairs
        self.seconds += batch.seconds
        return batch

    def _next(self) -> StepBatch:
        raise NotImplementedError

    @property
    def pairs_per_second(self) -> float:
        """Labelled pairs per second of drawing (per drawing thread or process)."""
        return self.pairs / self.seconds if self.seconds else 0.0

    def close(self) -> None:
        """Stop drawing ahead (batches not yet taken are dropped)."""


class _InlineStream(BatchStream):
    """Each batch drawn when it is asked for."""

    def __init__(self, source: BatchSource, start: int, stop: int) -> None:
        super().__init__(source, start, stop)
        self.index = start

    def _next(self) -> StepBatch:
        batch = self.source.draw(self.index)
        self.index += 1
        return batch


class _ThreadStream(BatchStream):
    """A background thread keeps ``depth`` batches ready."""

    def __init__(self, source: BatchSource, start: int, stop: int, depth: int) -> None:
        super().__init__(source, start, stop)
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for index in range(self.start, self.stop):
                item = self.source.draw(index)
                while not self.halt.is_set():
                    try:
                        self.queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if self.halt.is_set():
                    return
        except Exception as e:  # noqa: BLE001 - handed to the consumer, raised there
            self.queue.put(e)

    def _next(self) -> StepBatch:
        item = self.queue.get()
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self.halt.set()
        self.thread.join(timeout=5)


class _Steps(torch.utils.data.Dataset):
    """The source as a map-style dataset: item ``i`` is batch ``i``."""

    def __init__(self, source: BatchSource) -> None:
        self.source = source

    def __getitem__(self, index: int) -> StepBatch:
        return self.source.draw(index)


def _as_is(batch: StepBatch) -> StepBatch:
    return batch


class _WorkerStream(BatchStream):
    """Worker processes draw the batches (a DataLoader over the indices, in order)."""

    def __init__(self, source: BatchSource, start: int, stop: int, workers: int,
                 depth: int) -> None:
        super().__init__(source, start, stop)
        self.loader = torch.utils.data.DataLoader(
            _Steps(source), batch_size=None, sampler=range(start, stop), num_workers=workers,
            prefetch_factor=max(1, depth), collate_fn=_as_is,
        )
        self.iterator = iter(self.loader)

    def _next(self) -> StepBatch:
        return next(self.iterator)

    def close(self) -> None:
        # Ends the worker processes now rather than when the iterator is collected.
        shutdown = getattr(self.iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self.iterator = None


def open_stream(source: BatchSource, start: int, stop: int, *, workers: int = 0,
                prefetch: int = 0) -> BatchStream:
    """Batches ``start..stop - 1`` of ``source``: in ``workers`` processes, or in this one
    (``prefetch`` > 0: by a background thread that keeps that many ready)."""
    if workers > 0:
        return _WorkerStream(source, start, stop, workers, prefetch)
    if prefetch > 0:
        return _ThreadStream(source, start, stop, prefetch)
    return _InlineStream(source, start, stop)
