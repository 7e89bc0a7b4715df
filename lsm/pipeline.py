"""Threads of a bucket compaction: each run decoded ahead of the merge (``Prefetch``), and
merged tables encoded behind it (``BackgroundWriter``). Arrow releases the GIL while it
decodes and encodes, so these overlap with the merge on the task's thread."""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from typing import Any

import pyarrow as pa


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class Prefetch:
    """A run's batches decoded on a thread of their own, at most ``depth`` ahead of the
    merge. ``close`` stops the thread and closes the batches (and so the file) there."""

    def __init__(self, batches: Iterator[pa.RecordBatch], depth: int) -> None:
        self._ready: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._slots = threading.Semaphore(depth)
        self._stopped = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._produce, args=(batches,), daemon=True,
                                        name="paimond-prefetch")
        self._thread.start()

    def _produce(self, batches: Iterator[pa.RecordBatch]) -> None:
        try:
            while self._slots.acquire() and not self._stopped.is_set():
                batch = next(batches, None)
                self._ready.put(_END if batch is None else batch)
                if batch is None:
                    return
        except BaseException as error:  # noqa: B036 - re-raised by the consumer
            self._ready.put(_Failed(error))
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Prefetch:
        return self

    def __next__(self) -> pa.RecordBatch:
        if self._done:
            raise StopIteration
        item = self._ready.get()
        if isinstance(item, pa.RecordBatch):
            self._slots.release()
            return item
        self._done = True
        if isinstance(item, _Failed):
            raise item.error
        raise StopIteration

    def close(self) -> None:
        self._stopped.set()
        self._slots.release()  # wakes the thread if it waits for a slot
        self._thread.join()


class BackgroundWriter:
    """Hands tables to ``write`` on a thread, holding at most ``max_bytes`` of them (or one
    larger table) in waiting. Leaving the ``with`` block waits for the writes; a write error
    is raised in the caller's thread (at the next ``put`` or on leaving), and after one
    nothing more is written.

    The bound is in bytes, not tables: the writer encodes a whole row group at a time, and
    the merge should go on meanwhile rather than wait for it."""

    def __init__(self, write: Callable[[pa.RecordBatch], None], max_bytes: int) -> None:
        self._write, self._max_bytes = write, max_bytes
        self._waiting: collections.deque[pa.Table] = collections.deque()
        self._waiting_bytes = 0
        self._changed = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._consume, daemon=True,
                                        name="paimond-writer")
        self._thread.start()

    def _consume(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if not self._waiting:
                    return
                table = self._waiting.popleft()
            if self._error is None:
                try:
                    for batch in table.to_batches():
                        self._write(batch)
                except BaseException as error:  # noqa: B036 - re-raised by the caller
                    self._error = error
            with self._changed:
                self._waiting_bytes -= table.nbytes
                self._changed.notify_all()

    def put(self, table: pa.Table) -> None:
        size = table.nbytes
        with self._changed:
            while self._waiting and self._waiting_bytes + size > self._max_bytes \
                    and self._error is None:
                self._changed.wait()
            self._raise()
            self._waiting.append(table)
            self._waiting_bytes += size
            self._changed.notify_all()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def __enter__(self) -> BackgroundWriter:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        with self._changed:
            if kind is not None and self._error is None:
                self._error = CancelledError()  # what is still waiting is not written
            self._closed = True
            self._changed.notify_all()
        self._thread.join()
        if kind is None:
            self._raise()
