"""Where compaction's bucket tasks run: the executor protocol (Spark implements it in
``paimond.spark.executor``), the picklable task runner a worker calls, and the local pool
(processes, or threads). A task that fails for good is a :class:`BucketFailure`; the other
buckets still land. Under a :class:`~paimond.maintenance.compact.memory.MemoryBudget` the local pool
starts a task only once its estimate fits, with the batch size that makes it fit.

The local pool's worker processes fork after the parent imported what a task imports late
(:func:`_before_fork`) and start with :func:`prepare_worker` (pyarrow without pandas:
``maintenance.arrow_runtime``). Tasks go to the pool largest first (:func:`largest_first`), so
the last bucket to start is a small one and the workers finish together; results come back in
the order of the plan."""

from __future__ import annotations

import collections
import dataclasses
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Executor, Future, wait
from dataclasses import dataclass
from typing import Protocol

from paimond.clock import Clock
from paimond.errors import PaimondError, WorkerError
from paimond.lsm.rewrite import execute_compaction
from paimond.lsm.task import CompactResult, CompactTask
from paimond.maintenance.arrow_runtime import skip_pandas, use_compaction_allocator
from paimond.maintenance.compact.append_rewrite import execute_append_compaction
from paimond.maintenance.compact.memory import (
    MemoryBudget,
    TaskMemory,
    fit_batch_rows,
    unbudgeted_decay_ms,
    use_returning_memory_pool,
)
from paimond.table.commit.job_records import JobJournal

Progress = Callable[[int, int, CompactTask], None]


@dataclass(frozen=True, slots=True)
class BucketFailure:
    task: CompactTask
    error: str


@dataclass(frozen=True, slots=True)
class LookupCacheSettings:
    """Where the key-lookup cache lives on the machine running a task (``lsm.lookup.lookup_cache``)."""

    directory: str
    max_bytes: int = 1 << 30


def _run_task(task: CompactTask, batch_rows: int, clock: Clock,
              lookup_cache: LookupCacheSettings | None = None,
              journal: JobJournal | None = None,
              memory: TaskMemory | None = None) -> CompactResult:
    """Worker entry point: reopens the table's storage from the task (process pools share
    nothing); ``clock`` (the driver's, as data) stamps the files' creation time; ``journal``
    notes each file in the job's record before it is written."""
    use_returning_memory_pool(memory.decay_ms if memory else unbudgeted_decay_ms(task))
    try:
        storage = task.table.location.open()
        if journal is not None:
            storage = journal.recording(storage)
        if task.append:
            return execute_append_compaction(
                task, storage, now_millis=clock.local_ms, batch_rows=batch_rows,
                write_buffer_bytes=memory.write_buffer_bytes if memory else None)
        cache = None
        if lookup_cache is not None and task.lookup_files:
            from paimond.lsm.lookup.lookup_cache import LookupCache

            cache = LookupCache(lookup_cache.directory, lookup_cache.max_bytes)
        return execute_compaction(task, storage, now_millis=clock.local_ms,
                                  batch_rows=batch_rows, lookup_cache=cache,
                                  max_runs=memory.max_runs if memory else None,
                                  write_buffer_bytes=memory.write_buffer_bytes if memory else None,
                                  reading_bytes=memory.reading_bytes if memory else None,
                                  key_first_bytes=memory.key_first_bytes if memory else None)
    except PaimondError:
        raise
    except Exception as error:  # a library's exception may not pickle back to the parent
        where = f"{task.partition_text or '-'} bucket {task.bucket}"
        raise WorkerError(where, type(error).__name__, str(error), traceback.format_exc()) from None


@dataclass(frozen=True, slots=True)
class TaskRunner:
    """One task on any worker, as plain picklable data (a Spark executor unpickles it); the
    task says where the table's storage is."""

    batch_rows: int
    clock: Clock
    lookup_cache: LookupCacheSettings | None = None
    journal: JobJournal | None = None
    memory: TaskMemory | None = None  # what the budget allows the task (None: no budget)

    def __call__(self, task: CompactTask) -> CompactResult:
        return _run_task(task, self.batch_rows, self.clock, self.lookup_cache, self.journal,
                         self.memory)


class TaskExecutor(Protocol):
    """Runs bucket tasks elsewhere (Spark: ``paimond.spark.executor``); ``CompactJob`` uses
    its local pool when it has none. A task that fails for good is a ``BucketFailure``."""

    def execute(self, tasks: Sequence[CompactTask], runner: TaskRunner, progress: Progress | None
                ) -> tuple[list[CompactResult], list[BucketFailure]]: ...


def _before_fork() -> None:
    """What a task imports on first use, imported in the parent before the workers fork: they
    inherit it instead of each importing it again, and no worker waits on an import lock that
    another of the parent's threads (the daemon's) held at the fork. (Not pyarrow's first
    conversion of a Python value, which imports dateutil: in a caller's process it would
    import pandas too.)"""
    import pyarrow.orc  # noqa: F401  (an ORC table's files: table/data_files/file_formats.py)

    from paimond.format.row_file import file as row_file  # noqa: F401  (a .row table's files)
    from paimond.lsm.lookup import lookup_cache  # noqa: F401  (a task with level-0 lookups)
    from paimond.table.options import file_index as file_index_options  # noqa: F401  (TableOptions imports it late)


def prepare_worker() -> None:
    """A local pool worker process's start: nothing it runs needs pandas, which pyarrow would
    otherwise import in each worker (0.9 s of CPU apiece); its buffers come from jemalloc
    (``maintenance.arrow_runtime``)."""
    skip_pandas()
    use_compaction_allocator()


def largest_first(tasks: Sequence[CompactTask]) -> list[CompactTask]:
    """The tasks by input bytes, largest first (the plan's order among equals): with buckets
    of different sizes, a large one started last would run alone at the end."""
    return sorted(tasks, key=lambda task: task.input_bytes, reverse=True)


def in_plan_order(results: Sequence[CompactResult], tasks: Sequence[CompactTask]
                  ) -> list[CompactResult]:
    """The results in the order of their tasks in the plan, whatever order they finished in
    (a process pool's results carry copies of the tasks: matched by their input files, which
    no two tasks share)."""
    position = {_identity(task): index for index, task in enumerate(tasks)}
    return sorted(results, key=lambda result: position[_identity(result.task)])


def _identity(task: CompactTask) -> tuple[bytes, int, tuple[str, ...]]:
    return task.partition, task.bucket, tuple(e.file.file_name for e in task.inputs)


def run_in_local_pool(tasks: Sequence[CompactTask], runner: TaskRunner, parallelism: int,
                      use_processes: bool, progress: Progress | None,
                      budget: MemoryBudget | None = None
                      ) -> tuple[list[CompactResult], list[BucketFailure]]:
    """``budget``: admit each task once its estimate fits beside what runs (this job's tasks
    and other jobs' drawing on the same budget), in order; without one, all at once."""
    results: list[CompactResult] = []
    failures: list[BucketFailure] = []
    workers = max(1, min(parallelism, len(tasks)))
    processes = use_processes and workers > 1
    pool: Executor
    if processes:  # concurrent.futures.process imports multiprocessing: only when used
        from concurrent.futures import ProcessPoolExecutor

        _before_fork()
        pool = ProcessPoolExecutor(max_workers=workers, initializer=prepare_worker)
    else:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=workers)
    pending = collections.deque(tasks)
    running: list[tuple[CompactTask, Future[CompactResult]]] = []
    with pool:
        while pending or running:
            while pending and len(running) < workers:
                try:
                    submitted = _admit(pool, pending[0], runner, budget, wait_for_room=not running)
                except BrokenExecutor as error:  # a worker died: the buckets left fail, named
                    failures.extend(BucketFailure(task, f"{type(error).__name__}: {error}")
                                    for task in pending)
                    pending.clear()
                    break
                if submitted is None:
                    break
                running.append((pending.popleft(), submitted))
            wait([future for _, future in running], return_when=FIRST_COMPLETED)
            for task, future in [r for r in running if r[1].done()]:
                running.remove((task, future))
                try:
                    results.append(future.result())
                except Exception as error:  # the bucket fails, named; the others still land
                    failures.append(BucketFailure(task, f"{type(error).__name__}: {error}"))
                if progress is not None:
                    progress(len(results) + len(failures), len(tasks), task)
    return results, failures


def _admit(pool: Executor, task: CompactTask, runner: TaskRunner,
           budget: MemoryBudget | None, *, wait_for_room: bool) -> Future[CompactResult] | None:
    """Submit the task once its memory is reserved (released when it ends); None when it does
    not fit now and ``wait_for_room`` is off (this job still has tasks running)."""
    if budget is None:
        return pool.submit(runner, task)
    memory = fit_batch_rows(task, runner.batch_rows, budget.budget_bytes)
    if wait_for_room:
        budget.reserve(memory.estimate_bytes)
    elif not budget.try_reserve(memory.estimate_bytes):
        return None
    try:
        future = pool.submit(dataclasses.replace(runner, batch_rows=memory.batch_rows,
                                                 memory=memory), task)
    except BaseException:
        budget.release(memory.estimate_bytes)
        raise
    future.add_done_callback(lambda _: budget.release(memory.estimate_bytes))
    return future
