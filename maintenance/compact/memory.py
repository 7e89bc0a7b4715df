"""The memory budget of compaction tasks (``limits.memory_budget_mb``): what one bucket task
needs, estimated from its plan, and the admission that keeps the tasks running at once within
the budget.

A task's estimate (:func:`estimate_task_bytes`) follows what ``lsm.rewrite`` holds: per sorted
run, the batch being merged, the one decoded ahead and the file's decoded page (about three
batches; a small row group decoded whole, ``table.data_files.parquet_groups``, holds less than a
streaming reader's page and buffers did); the merged tables queued for the writer and the
Parquet row group it is building; the keys of the level-0 inputs a deletion-vector or
first-row lookup keeps; and a fixed part per task (readers' buffers, threads), measured on
pypaimon-written tables. Rows are as wide as the schema's fixed-width columns, plus an
allowance per variable-width column, and never narrower than twice their compressed size in
the input files.

A task that does not fit the budget at the default batch size runs with smaller batches
(:func:`fit_batch_rows`, halving down to :data:`MIN_BATCH_ROWS`); one that does not fit even
then runs alone. :class:`MemoryBudget` is shared by every job of a process (the daemon's
tables all draw from one), so the budget bounds the tasks running at once, not each job.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pyarrow as pa

from paimond.lsm.task import CompactTask
from paimond.table.data_files.kv_layout import key_fields, physical_arrow_schema, physical_row_type

MIN_BATCH_ROWS = 1024
TASK_OVERHEAD_BYTES = 64 << 20  # RSS beyond Arrow's pool: decompression, numpy orders, threads
# lsm.rewrite's write queue (8 MB) + a Parquet row group (16 MB), with room to spare (the queue
# was 32 MB when this was measured)
WRITER_BYTES = 48 << 20
_BATCHES_PER_RUN = 3
RUN_READER_BYTES = 1 << 20  # a run's file reader: its column pages and read buffers
MIN_MERGED_RUNS = 4  # a merge of fewer runs would spill most rows more than once
MIN_WRITE_BUFFER_BYTES = 1 << 20
_VARIABLE_WIDTH_BYTES = 32  # a string or binary value of unknown length
_COMPRESSION_FACTOR = 2  # decoded bytes per compressed byte, at least
_MB = 1 << 20


def _width(data_type: pa.DataType) -> int:
    if pa.types.is_struct(data_type):
        return sum(_width(f.type) for f in data_type)
    try:
        return max(1, int(data_type.bit_width) // 8)
    except ValueError:  # variable width: strings, binaries, lists, maps
        return _VARIABLE_WIDTH_BYTES


def row_bytes(task: CompactTask) -> int:
    """Decoded bytes per row of the task's files (key-value layout for primary-key tables)."""
    schema = task.table.schema
    arrow = physical_arrow_schema(physical_row_type(schema, key_value=not task.append))
    by_schema = sum(_width(f.type) for f in arrow) + 1  # + validity bits, rounded up
    rows = sum(e.file.row_count for e in task.inputs)
    by_files = _COMPRESSION_FACTOR * task.input_bytes // rows if rows else 0
    return max(by_schema, by_files)


def sorted_runs(task: CompactTask) -> int:
    """Runs merged at once, at most: each level-0 input is a run, each higher level one."""
    level0 = sum(1 for e in task.inputs if e.file.level == 0)
    return max(1, level0 + len({e.file.level for e in task.inputs if e.file.level > 0}))


def estimate_task_bytes(task: CompactTask, batch_rows: int, max_runs: int | None = None,
                        write_buffer_bytes: int | None = None) -> int:
    """Bytes the task holds at its peak when reading ``batch_rows`` rows per batch, merging
    ``max_runs`` sorted runs at once, at most, and writing through buffers of
    ``write_buffer_bytes`` (None: :data:`WRITER_BYTES` in all)."""
    width = row_bytes(task)
    input_rows = sum(e.file.row_count for e in task.inputs)
    largest_file = max((e.file.row_count for e in task.inputs), default=0)
    runs = 1 if task.append else sorted_runs(task)  # append inputs are read one after another
    runs = runs if max_runs is None else min(runs, max_runs)
    reading = runs * _BATCHES_PER_RUN * min(batch_rows, max(1, largest_file)) * width
    buffers = WRITER_BYTES if write_buffer_bytes is None else 2 * write_buffer_bytes
    writing = min(buffers, input_rows * width)
    lookups = 0
    if task.deletion_vectors or task.lookup_files:
        key_width = sum(_width(f.type) for f in physical_arrow_schema(
            physical_row_type(task.table.schema, key_value=True).project(
                [f.name for f in key_fields(task.table.schema)])))
        level0_rows = sum(e.file.row_count for e in task.inputs if e.file.level == 0)
        lookups = 2 * level0_rows * key_width  # the keys, and the superseded rows' keys
    return TASK_OVERHEAD_BYTES + reading + writing + lookups


def use_returning_memory_pool() -> None:
    """Make Arrow allocate from jemalloc with no decay, where pyarrow has it: memory a task
    frees goes back to the system at once. Arrow's default pool on Linux (mimalloc) keeps
    freed pages in per-thread heaps: a compaction held to an 8 MB budget peaked 20-25 MB
    higher with it, and one with no budget 55 MB higher, for the same speed. Idempotent; a
    no-op where pyarrow was built without jemalloc."""
    if pa.default_memory_pool().backend_name == "jemalloc":
        return
    try:
        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(0)
    except NotImplementedError:
        return
    pa.set_memory_pool(pool)


def postpone_chunk_bytes(budget: MemoryBudget | None) -> int | None:
    """The postpone rows moved at once (``compact.postpone.PostponeMover``): a quarter of the
    budget (the rows, their sorted order, the merged rows and the writer's buffers), at least
    :data:`MIN_WRITE_BUFFER_BYTES`; None without a budget."""
    return None if budget is None else max(MIN_WRITE_BUFFER_BYTES, budget.budget_bytes // 4)


def write_buffer_bytes(budget_bytes: int) -> int | None:
    """A writer's buffers (its queue, a Parquet row group) within ``budget_bytes``: the
    defaults (None) when :data:`WRITER_BYTES` fits it, else a quarter of it each (at least
    :data:`MIN_WRITE_BUFFER_BYTES`)."""
    return None if WRITER_BYTES <= budget_bytes else max(MIN_WRITE_BUFFER_BYTES, budget_bytes // 4)


@dataclass(frozen=True, slots=True)
class TaskMemory:
    """What the admission reserves for a task, the batch size it runs with, and the sorted
    runs it merges at once (None: all of them)."""

    estimate_bytes: int
    batch_rows: int
    max_runs: int | None = None
    write_buffer_bytes: int | None = None  # the write queue's and a row group's (None: default)


def fit_batch_rows(task: CompactTask, batch_rows: int, budget_bytes: int) -> TaskMemory:
    """The largest batch size up to ``batch_rows`` (halving) whose estimate fits the budget,
    or :data:`MIN_BATCH_ROWS` when none does; then, if the runs read together still do not
    fit, as many runs as do (at least :data:`MIN_MERGED_RUNS`), the rest merged beforehand
    through spill files; and writer buffers of a quarter of the budget each when their
    defaults (:data:`WRITER_BYTES`) do not fit it."""
    rows = batch_rows
    estimate = estimate_task_bytes(task, rows)
    while estimate > budget_bytes and rows > MIN_BATCH_ROWS:
        rows = max(MIN_BATCH_ROWS, rows // 2)
        estimate = estimate_task_bytes(task, rows)
    buffers = write_buffer_bytes(budget_bytes)
    runs = 1 if task.append else sorted_runs(task)
    per_run = run_bytes(task, rows)
    max_runs = None
    if runs > MIN_MERGED_RUNS and runs * per_run > budget_bytes:
        max_runs = max(MIN_MERGED_RUNS, budget_bytes // per_run)
    if max_runs is None and buffers is None:
        return TaskMemory(estimate, rows)
    return TaskMemory(estimate_task_bytes(task, rows, max_runs, buffers), rows, max_runs,
                      buffers)


def run_bytes(task: CompactTask, batch_rows: int) -> int:
    """What reading one sorted run holds: its batches in flight and its reader's buffers."""
    largest_file = max((e.file.row_count for e in task.inputs), default=0)
    return _BATCHES_PER_RUN * min(batch_rows, max(1, largest_file)) * row_bytes(task) \
        + RUN_READER_BYTES


class MemoryBudget:
    """Bytes reserved by running tasks, within ``budget_bytes``. A reservation larger than
    the budget is granted only when nothing else is reserved (the task runs alone)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._reserved = 0
        self._tasks = 0
        self._peak = 0
        self._changed = threading.Condition()

    @classmethod
    def of_mb(cls, budget_mb: int) -> MemoryBudget:
        return cls(budget_mb * _MB)

    def _fits(self, size: int) -> bool:
        return self._tasks == 0 or self._reserved + size <= self.budget_bytes

    def try_reserve(self, size: int) -> bool:
        with self._changed:
            if not self._fits(size):
                return False
            self._take(size)
            return True

    def reserve(self, size: int) -> None:
        """Wait until ``size`` bytes fit (or nothing else runs), then take them."""
        with self._changed:
            while not self._fits(size):
                self._changed.wait()
            self._take(size)

    def _take(self, size: int) -> None:
        self._reserved += size
        self._tasks += 1
        self._peak = max(self._peak, self._reserved)

    def release(self, size: int) -> None:
        with self._changed:
            self._reserved -= size
            self._tasks -= 1
            self._changed.notify_all()

    @property
    def reserved_bytes(self) -> int:
        with self._changed:
            return self._reserved

    @property
    def peak_reserved_bytes(self) -> int:
        """The most ever reserved at once (a task larger than the budget alone may pass it)."""
        with self._changed:
            return self._peak
