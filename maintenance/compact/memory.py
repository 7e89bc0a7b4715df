"""The memory budget of compaction tasks (``limits.memory_budget_mb``): what one bucket task
needs, estimated from its plan, and the admission that keeps the tasks running at once within
the budget.

A task's estimate (:func:`estimate_task_bytes`) follows what ``lsm.rewrite`` holds: per sorted
run, the batch being merged, the one decoded ahead and a third (a small row group decoded
whole, ``table.data_files.parquet_groups``, is cut into batches); per run read from its files,
its reader's pages, dictionaries and buffers (``lsm.merge.spill.file_reader_bytes``: on a wide
table the larger part); the merged tables queued for the writer and the Parquet row group it
is building; the keys of the level-0 inputs a deletion-vector or first-row lookup keeps; and a
fixed part per task (threads, decompression), measured on pypaimon-written tables. Rows are as
wide as the schema's fixed-width columns, plus an allowance per variable-width column, and
never narrower than twice their compressed size in the input files.

A task that does not fit the budget at the default batch size runs with smaller batches
(:func:`fit_batch_rows`, halving down to :data:`MIN_BATCH_ROWS`) until everything but its
runs' readers fits with the largest one of them; its runs' readers then get what is left
(``TaskMemory.reading_bytes``): the runs past it are read beforehand, one at a time, into
local spill files (``lsm.merge.spill``). A task that does not fit even then runs alone. A
wide table's task that merges key first (``lsm.merge.key_first``) holds no batch of whole
rows per run: it gets what the budget leaves beside its fixed part and its writer, and cuts
its work to fit that.
:class:`MemoryBudget` is shared by every job of a process (the daemon's tables all draw from
one), so the budget bounds the tasks running at once, not each job.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pyarrow as pa

from paimond.lsm.merge.key_first import (
    KEY_FIRST_BYTES,
    MIN_KEY_FIRST_BYTES,
    key_pass_bytes,
    merges_key_first,
)
from paimond.lsm.merge.spill import file_reader_bytes, value_width
from paimond.lsm.task import CompactTask
from paimond.table.data_files.kv_layout import key_fields, physical_arrow_schema, physical_row_type
from paimond.table.data_files.parquet_groups import read_buffer_bytes

MIN_BATCH_ROWS = 1024
TASK_OVERHEAD_BYTES = 64 << 20  # RSS beyond Arrow's pool: decompression, numpy orders, threads
# lsm.rewrite's write queue (8 MB) + a Parquet row group (16 MB), with room to spare (the queue
# was 32 MB when this was measured)
WRITER_BYTES = 48 << 20
_BATCHES_PER_RUN = 3
SPILLED_RUN_READER_BYTES = 1 << 20  # a spill file's reader, besides its batches
MIN_MERGED_RUNS = 4  # a merge of fewer runs would spill most rows more than once
MIN_WRITE_BUFFER_BYTES = 1 << 20
# Under a budget of LARGE_BUDGET_BYTES or more, freed memory goes back to the system after
# 100 ms, not at once: a 500-column compaction held to 1 GB (batches of 1,024 rows) took
# 157 CPU s returning at once (37 s of it in the kernel) and 126 s with 100 ms, peaking
# at 857 and 877 MB; under a small budget what is returned counts more (a 240-column table's
# compaction held to 8 MB: 65 MB over its base at once, 71 MB with 100 ms).
LARGE_BUDGET_BYTES = 256 << 20
LARGE_BUDGET_DECAY_MS = 100
_COMPRESSION_FACTOR = 2  # decoded bytes per compressed byte, at least
_MB = 1 << 20


def _file_schema(task: CompactTask) -> pa.Schema:
    """The columns of the task's files as Arrow decodes them (key-value layout for
    primary-key tables)."""
    return physical_arrow_schema(physical_row_type(task.table.schema, key_value=not task.append))


def row_bytes(task: CompactTask) -> int:
    """Decoded bytes per row of the task's files (key-value layout for primary-key tables)."""
    by_schema = sum(value_width(f.type) for f in _file_schema(task)) + 1  # + validity bits
    rows = sum(e.file.row_count for e in task.inputs)
    by_files = _COMPRESSION_FACTOR * task.input_bytes // rows if rows else 0
    return max(by_schema, by_files)


def sorted_runs(task: CompactTask) -> int:
    """Runs merged at once, at most: each level-0 input is a run, each higher level one."""
    return len(_run_rows(task))


def _run_rows(task: CompactTask) -> list[int]:
    """The rows of each sorted run's largest file (append inputs: one run, read one file
    after another): each level-0 input is a run, each higher level one."""
    if task.append:
        return [max((e.file.row_count for e in task.inputs), default=0)]
    largest: dict[int, int] = {}
    level0 = []
    for entry in task.inputs:
        if entry.file.level == 0:
            level0.append(entry.file.row_count)
        else:
            largest[entry.file.level] = max(largest.get(entry.file.level, 0),
                                            entry.file.row_count)
    return [*level0, *largest.values()] or [0]


def reader_bytes(task: CompactTask) -> list[int]:
    """What each sorted run's file reader holds besides its batches
    (``lsm.merge.spill.file_reader_bytes``)."""
    schema = _file_schema(task)
    buffer = read_buffer_bytes(task.table.location.root)
    return [file_reader_bytes(schema, rows, buffer) for rows in _run_rows(task)]


def estimate_task_bytes(task: CompactTask, batch_rows: int, max_runs: int | None = None,
                        write_buffer_bytes: int | None = None,
                        reading_bytes: int | None = None) -> int:
    """Bytes the task holds at its peak when reading ``batch_rows`` rows per batch, merging
    ``max_runs`` sorted runs at once, at most, their file readers holding ``reading_bytes``
    at most (None: all of them at once), and writing through buffers of
    ``write_buffer_bytes`` (None: :data:`WRITER_BYTES` in all)."""
    readers = sum(reader_bytes(task))
    if reading_bytes is not None:
        readers = min(readers, reading_bytes)
    return _beside_readers(task, batch_rows, max_runs, write_buffer_bytes) + readers


def _beside_readers(task: CompactTask, batch_rows: int, max_runs: int | None,
                    write_buffer_bytes: int | None) -> int:
    """The task's estimate but for its file readers."""
    largest_file = max((e.file.row_count for e in task.inputs), default=0)
    runs = 1 if task.append else sorted_runs(task)  # append inputs are read one after another
    runs = runs if max_runs is None else min(runs, max_runs)
    reading = runs * _BATCHES_PER_RUN * min(batch_rows, max(1, largest_file)) * row_bytes(task)
    return _beside_merge(task, write_buffer_bytes) + reading


def _beside_merge(task: CompactTask, write_buffer_bytes: int | None) -> int:
    """The task's estimate but for its merge's runs: the fixed part, the writer's buffers and
    the level-0 lookups' keys."""
    input_rows = sum(e.file.row_count for e in task.inputs)
    buffers = WRITER_BYTES if write_buffer_bytes is None else 2 * write_buffer_bytes
    writing = min(buffers, input_rows * row_bytes(task))
    lookups = 0
    if task.deletion_vectors or task.lookup_files:
        key_width = sum(value_width(f.type) for f in physical_arrow_schema(
            physical_row_type(task.table.schema, key_value=True).project(
                [f.name for f in key_fields(task.table.schema)])))
        level0_rows = sum(e.file.row_count for e in task.inputs if e.file.level == 0)
        lookups = 2 * level0_rows * key_width  # the keys, and the superseded rows' keys
    return TASK_OVERHEAD_BYTES + writing + lookups


def use_returning_memory_pool(decay_ms: int = 0) -> None:
    """Make Arrow allocate from jemalloc, where pyarrow has it, returning the memory a task
    frees to the system after ``decay_ms`` (0: at once). Arrow's default pool on Linux
    (mimalloc) keeps freed pages in per-thread heaps: a compaction held to an 8 MB budget
    peaked 20-25 MB higher with it, and one with no budget 55 MB higher, for the same speed.
    Returning at once costs a system call per freed block, which adds up where a budget makes
    batches small (:data:`LARGE_BUDGET_DECAY_MS`). A no-op where pyarrow was built without
    jemalloc."""
    try:
        if pa.default_memory_pool().backend_name != "jemalloc":
            pa.set_memory_pool(pa.jemalloc_memory_pool())
        pa.jemalloc_set_decay_ms(decay_ms)
    except NotImplementedError:
        return


def unbudgeted_decay_ms(task: CompactTask) -> int:
    """How soon a task run without a budget returns freed memory: a key-first merge's
    (``lsm.merge.key_first``) allocations churn through every group of columns, and returning
    them at once cost a 500-column compaction 11 of its 38 CPU s in the kernel (100 ms: 3.5
    of 29); other tasks at once."""
    return LARGE_BUDGET_DECAY_MS if not task.append and merges_key_first(task) else 0


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
    """What the admission reserves for a task, the batch size it runs with, the sorted runs
    it merges at once (None: all of them) and what their file readers hold at once (None:
    all of them)."""

    estimate_bytes: int
    batch_rows: int
    max_runs: int | None = None
    write_buffer_bytes: int | None = None  # the write queue's and a row group's (None: default)
    reading_bytes: int | None = None
    decay_ms: int = 0  # freed memory goes back to the system after this long
    key_first_bytes: int | None = None  # what a key-first merge holds (None: its default)


def fit_batch_rows(task: CompactTask, batch_rows: int, budget_bytes: int) -> TaskMemory:
    """The largest batch size up to ``batch_rows`` (halving) with which everything but the
    runs' file readers fits the budget beside the largest reader, or :data:`MIN_BATCH_ROWS`
    when none does; then, if the runs read together still do not fit, as many runs as do (at
    least :data:`MIN_MERGED_RUNS`), the rest merged beforehand through spill files; writer
    buffers of a quarter of the budget each when their defaults (:data:`WRITER_BYTES`) do not
    fit it; when the readers of all runs do not fit beside the rest, what is left of the
    budget for them (at least the largest one: a run read alone into a spill file); and how
    soon freed memory goes back (:data:`LARGE_BUDGET_DECAY_MS`). A wide table's task that
    merges key first (``lsm.merge.key_first``) is planned by :func:`_fit_key_first`."""
    decay = LARGE_BUDGET_DECAY_MS if budget_bytes >= LARGE_BUDGET_BYTES else 0
    if not task.append and merges_key_first(task):
        return _fit_key_first(task, batch_rows, budget_bytes, decay)
    readers = reader_bytes(task)
    alone = max(readers)
    rows = batch_rows
    while _beside_readers(task, rows, None, None) + alone > budget_bytes \
            and rows > MIN_BATCH_ROWS:
        rows = max(MIN_BATCH_ROWS, rows // 2)
    buffers = write_buffer_bytes(budget_bytes)
    runs = 1 if task.append else sorted_runs(task)
    per_run = run_bytes(task, rows)
    max_runs = None
    if runs > MIN_MERGED_RUNS and runs * per_run > budget_bytes:
        max_runs = max(MIN_MERGED_RUNS, budget_bytes // per_run)
    beside = _beside_readers(task, rows, max_runs, buffers)
    reading = None
    if not task.append and beside + sum(readers) > budget_bytes:
        reading = max(alone, budget_bytes - beside)
    estimate = beside + (sum(readers) if reading is None else min(sum(readers), reading))
    return TaskMemory(estimate, rows, max_runs, buffers, reading, decay)


def _fit_key_first(task: CompactTask, batch_rows: int, budget_bytes: int,
                   decay_ms: int) -> TaskMemory:
    """A key-first task: what the budget leaves beside the fixed part, the writer and the
    lookups goes to the merge (up to ``lsm.merge.key_first.KEY_FIRST_BYTES``, at least
    ``MIN_KEY_FIRST_BYTES``), whose keys' pass reads batches halved until it fits half of
    that (the other half: a chunk of merged rows)."""
    buffers = write_buffer_bytes(budget_bytes)
    beside = _beside_merge(task, buffers)
    merging = min(KEY_FIRST_BYTES, max(MIN_KEY_FIRST_BYTES, budget_bytes - beside))
    run_rows = _run_rows(task)
    buffer = read_buffer_bytes(task.table.location.root)
    rows = batch_rows
    while key_pass_bytes(task, run_rows, rows, buffer) > merging // 2 and rows > MIN_BATCH_ROWS:
        rows = max(MIN_BATCH_ROWS, rows // 2)
    return TaskMemory(beside + merging, rows, None, buffers, None, decay_ms,
                      key_first_bytes=merging)


def run_bytes(task: CompactTask, batch_rows: int) -> int:
    """What merging one sorted run read back from a spill file holds: its batches in flight
    and the file's reader."""
    largest_file = max((e.file.row_count for e in task.inputs), default=0)
    return _BATCHES_PER_RUN * min(batch_rows, max(1, largest_file)) * row_bytes(task) \
        + SPILLED_RUN_READER_BYTES


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
