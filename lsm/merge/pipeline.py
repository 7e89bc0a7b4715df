"""Threads of a bucket compaction: each run decoded ahead of the merge (``Prefetch`` on a
thread of its own, or ``SharedPrefetch``: the runs of a merge on a few shared threads), and
merged tables encoded behind it (``BackgroundWriter``). Arrow releases the GIL while it
decodes and encodes, so these overlap with the merge, which runs on the task's thread or, at
a lower priority, on one of its own (``run_at_lower_priority``)."""

from __future__ import annotations

import collections
import contextvars
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Any, TypeVar, cast

import pyarrow as pa


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()
T = TypeVar("T")

# How much higher the merge threads' nice value is than that of the thread that started them:
# a merge's CPU share against an encoder or decoder thread on the same core falls to ~1/4
# (CFS weights 1024 and 335). Not 19: a merge that holds the GIL while it waits for a core
# would hold up the writer's Python steps.
MERGE_NICENESS = 5


def run_at_lower_priority(work: Callable[[], T]) -> T:
    """``work()`` on a thread whose nice value is ``MERGE_NICENESS`` above its creator's (a
    pool of such threads, kept for the process's later merges), its result returned and its
    exception raised here; threads it starts inherit that priority, so start the decoders
    and the writer first.

    For a merge between decoders and an encoder: on a busy machine (2 cores at 10M rows) the
    encoder is the slowest stage and the merge has slack (it waits on the writer's full
    queue), so letting the encoder and decoders win the cores shortens the whole
    (bench/compact_process.py). The threads are kept because a new thread per merge also
    takes new allocator arenas (8 small buckets: +40 MB peak, bench/parallel_buckets.py).
    Only Linux sets a thread's own priority; elsewhere ``work`` runs on the caller's thread."""
    if not sys.platform.startswith("linux"):
        return work()
    context = contextvars.copy_context()  # the caller's log context (structlog) goes along
    return _merge_threads().submit(context.run, work).result()


_MERGE_THREADS = 64  # more merges at once than that wait for one to end
_merge_pool: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): a fork starts anew
_merge_pool_lock = threading.Lock()


def _merge_threads() -> ThreadPoolExecutor:
    global _merge_pool
    with _merge_pool_lock:
        if _merge_pool is None or _merge_pool[0] != os.getpid():
            _merge_pool = (os.getpid(), ThreadPoolExecutor(
                _MERGE_THREADS, thread_name_prefix="paimond-merge", initializer=_lower_priority))
        return _merge_pool[1]


def _lower_priority() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       os.getpriority(os.PRIO_PROCESS, 0) + MERGE_NICENESS)
    except OSError:  # a sandbox that refuses it: the same work at the same priority
        pass


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


class SharedPrefetch:
    """Runs decoded one batch ahead of the merge on ``threads`` shared threads. Arrow decodes
    a batch on its own thread pool, so a thread per run adds no speed; each thread that
    allocates keeps an allocator heap of its own, and 20 runs' threads held ~25 MB more at
    peak than 4 shared ones, for a little more CPU (bench/compact_process.py). ``run`` wraps
    one run; leaving the ``with`` block waits for the decoding still under way.

    The threads start here, so they run at their creator's priority, not at that of a merge
    (``run_at_lower_priority``) that submits to them."""

    def __init__(self, threads: int) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="paimond-prefetch")
        started = threading.Barrier(threads)
        for _ in range(threads):  # a busy pool starts a thread per submit, up to ``threads``
            self._executor.submit(started.wait)

    def run(self, batches: Iterator[pa.RecordBatch]) -> PrefetchedRun:
        return PrefetchedRun(batches, self._executor)

    def __enter__(self) -> SharedPrefetch:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _next_or_end(batches: Iterator[pa.RecordBatch]) -> object:
    return next(batches, _END)


class PrefetchedRun:
    """One run of a :class:`SharedPrefetch`: the next batch is always being decoded (at most
    one at a time, so the iterator never runs on two threads at once). ``close`` waits for
    it and closes the batches (and so the file) on the caller's thread."""

    def __init__(self, batches: Iterator[pa.RecordBatch], executor: ThreadPoolExecutor) -> None:
        self._batches, self._executor = batches, executor
        self._next: Future[object] | None = executor.submit(_next_or_end, batches)

    def __iter__(self) -> PrefetchedRun:
        return self

    def __next__(self) -> pa.RecordBatch:
        if self._next is None:
            raise StopIteration
        future, self._next = self._next, None
        item = future.result()  # the decoder's error is raised here, once
        if item is _END:
            raise StopIteration
        self._next = self._executor.submit(_next_or_end, self._batches)
        return cast(pa.RecordBatch, item)

    def close(self) -> None:
        future, self._next = self._next, None
        if future is not None and not future.cancel():
            try:
                future.result()
            except BaseException:  # noqa: B036, S110 - the merge is over (or failed) already
                pass
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()


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
