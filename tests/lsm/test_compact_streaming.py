"""Compaction as a stream: read-ahead and write-behind threads stay bounded, pass errors to
the task's thread, and a failing task leaves no file behind, finished or half written."""

from __future__ import annotations

import contextvars
import datetime
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.compaction_files import file_per_batch_writer
from support.pypaimon_tables import build_pk_deduplicate

from paimond.errors import CorruptFileError
from paimond.lsm import rewrite
from paimond.lsm.merge.pipeline import (
    MERGE_NICENESS,
    BackgroundWriter,
    Prefetch,
    SharedPrefetch,
    run_at_lower_priority,
)
from paimond.lsm.rewrite import execute_compaction
from paimond.maintenance.compact.plan import plan_compaction
from paimond.table.catalog import open_table
from paimond.table.data_files import arrow_io as data_files
from paimond.table.storage.interface import open_storage


def _batch(i: int) -> pa.RecordBatch:
    return pa.record_batch({"i": [i]})


def test_prefetch_keeps_order_and_reads_at_most_depth_ahead() -> None:
    consumed = [0]
    ahead: list[int] = []

    def source() -> Iterator[pa.RecordBatch]:
        for i in range(50):
            ahead.append(i + 1 - consumed[0])  # batches started but not yet handed over
            yield _batch(i)

    seen = []
    for batch in Prefetch(source(), depth=2):
        seen.append(batch.column(0)[0].as_py())
        consumed[0] += 1
    assert seen == list(range(50))
    # The slot of a batch is freed just before the consumer counts it: one more at most.
    assert max(ahead) <= 2 + 1


def test_prefetch_raises_the_reader_error_and_close_closes_the_source() -> None:
    closed = []

    def failing() -> Iterator[pa.RecordBatch]:
        yield _batch(0)
        raise CorruptFileError("s3://b/data-0.parquet", "bad page")

    prefetch = Prefetch(failing(), depth=1)
    assert next(prefetch).num_rows == 1
    with pytest.raises(CorruptFileError, match="data-0.parquet"):
        next(prefetch)
    with pytest.raises(StopIteration):
        next(prefetch)
    prefetch.close()

    def endless() -> Iterator[pa.RecordBatch]:
        try:
            i = 0
            while True:
                yield _batch(i)
                i += 1
        finally:
            closed.append(True)

    prefetch = Prefetch(endless(), depth=3)
    assert [next(prefetch).column(0)[0].as_py() for _ in range(5)] == list(range(5))
    prefetch.close()  # stops the thread, which closes the source (and so the file)
    assert closed == [True]


def test_shared_prefetch_keeps_each_run_in_order_one_batch_ahead() -> None:
    consumed = [0] * 6
    ahead: list[int] = []

    def source(run: int) -> Iterator[pa.RecordBatch]:
        for i in range(30):
            ahead.append(i - consumed[run])  # batches started but not yet handed over
            yield _batch(100 * run + i)

    with SharedPrefetch(2) as shared:
        runs = [shared.run(source(r)) for r in range(6)]
        seen: list[list[int]] = [[] for _ in runs]
        for step in range(31):  # the runs drawn in turn, as the merge draws them
            for r, run in enumerate(runs):
                batch = next(run, None)
                if batch is not None:
                    seen[r].append(batch.column(0)[0].as_py())
                    consumed[r] += 1
                    assert step < 30
        for run in runs:
            run.close()
    assert seen == [[100 * r + i for i in range(30)] for r in range(6)]
    assert max(ahead) <= 1  # the one handed over next, never more


def test_shared_prefetch_raises_the_reader_error_once_and_close_closes_the_source() -> None:
    closed = []

    def failing() -> Iterator[pa.RecordBatch]:
        yield _batch(0)
        raise CorruptFileError("s3://b/data-0.parquet", "bad page")

    def endless() -> Iterator[pa.RecordBatch]:
        try:
            i = 0
            while True:
                yield _batch(i)
                i += 1
        finally:
            closed.append(True)

    with SharedPrefetch(3) as shared:
        bad, good = shared.run(failing()), shared.run(endless())
        assert next(bad).num_rows == 1
        with pytest.raises(CorruptFileError, match="data-0.parquet"):
            next(bad)
        with pytest.raises(StopIteration):
            next(bad)
        bad.close()
        assert [next(good).column(0)[0].as_py() for _ in range(5)] == list(range(5))
        good.close()  # waits for the batch under way, then closes the source (and the file)
        assert closed == [True]


def test_background_writer_writes_in_order_and_raises_in_the_caller() -> None:
    written: list[int] = []
    with BackgroundWriter(lambda b: written.append(b.column(0)[0].as_py()), max_bytes=20) as writer:
        for i in range(20):
            writer.put(pa.Table.from_batches([_batch(i)]))
    assert written == list(range(20))

    def fail_on_three(batch: pa.RecordBatch) -> None:
        if batch.column(0)[0].as_py() == 3:
            raise OSError("disk full")
        written.append(batch.column(0)[0].as_py())

    written.clear()
    with pytest.raises(OSError, match="disk full"), BackgroundWriter(fail_on_three, max_bytes=1) as writer:
        for i in range(20):
            writer.put(pa.Table.from_batches([_batch(i)]))
    assert written == [0, 1, 2]  # nothing after the failure


def test_background_writer_drops_queued_tables_when_the_caller_fails() -> None:
    written: list[int] = []
    with pytest.raises(RuntimeError, match="merge failed"), \
            BackgroundWriter(lambda b: written.append(1), max_bytes=1 << 20) as writer:
        for i in range(100):
            writer.put(pa.Table.from_batches([_batch(i)]))
        raise RuntimeError("merge failed")
    assert len(written) < 100


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    warehouse = tmp_path_factory.mktemp("streaming") / "wh"
    return warehouse, build_pk_deduplicate(str(warehouse))


def _bucket_files(warehouse: str) -> set[str]:
    return {str(p.relative_to(warehouse)) for p in Path(warehouse).rglob("bucket-*/*")}


@pytest.mark.parametrize("failure", ["merge", "write"])
def test_a_failing_task_leaves_no_file_behind(pristine: tuple[Path, Any], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    warehouse = str(tmp_path / "wh")
    shutil.copytree(pristine[0], warehouse)
    table = open_table(open_storage(warehouse), warehouse, pristine[1].name)
    before = _bucket_files(warehouse)
    real_make_reducer, real_write = rewrite.make_reducer, data_files.DataFileWriter.write
    calls = [0]

    def make_failing_reducer(*args: Any) -> Any:
        reduce = real_make_reducer(*args)

        def failing(piece: Any) -> pa.Table:
            calls[0] += 1
            if calls[0] == 3:
                raise RuntimeError("merge failed")
            return reduce(piece)
        return failing

    def failing_write(self: Any, batch: pa.RecordBatch) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise OSError("disk full")
        real_write(self, batch)

    if failure == "merge":
        monkeypatch.setattr(rewrite, "make_reducer", make_failing_reducer)
    else:
        monkeypatch.setattr(data_files.DataFileWriter, "write", failing_write)

    published: list[str] = []
    # Tiny batches and files: some files are done and one may be open when it fails.
    monkeypatch.setattr(rewrite, "RollingDataFileWriter", file_per_batch_writer(published))
    task = max(plan_compaction(table, full=True, partitions=None,
                               moment=datetime.datetime(2026, 11, 22, 12)).tasks,
               key=lambda t: sum(e.file.row_count for e in t.inputs))
    with pytest.raises((RuntimeError, OSError), match="merge failed|disk full"):
        execute_compaction(task, table.storage, now_millis=lambda: 0, batch_rows=2)
    assert calls[0] == 3 and published
    assert _bucket_files(warehouse) == before


def test_background_writer_holds_at_most_max_bytes_waiting() -> None:
    table = pa.Table.from_batches([pa.record_batch({"i": list(range(100))})])
    held: list[int] = []
    writer: BackgroundWriter

    def write(batch: pa.RecordBatch) -> None:
        held.append(writer._waiting_bytes)

    with BackgroundWriter(write, max_bytes=3 * table.nbytes) as writer:
        for _ in range(40):
            writer.put(table)
    assert len(held) == 40 and max(held) <= 3 * table.nbytes
    big = pa.Table.from_batches([pa.record_batch({"i": list(range(1000))})])
    with BackgroundWriter(write, max_bytes=10) as writer:  # larger than the bound: one at a time
        for _ in range(5):
            writer.put(big)
    # the one being written is counted until it is done, and one may wait beside it
    assert len(held) == 45 and max(held[40:]) <= 2 * big.nbytes


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority: Linux")
def test_the_merge_runs_at_a_lower_priority_and_the_decoders_at_their_creators() -> None:
    caller = _nice()
    tag: contextvars.ContextVar[str] = contextvars.ContextVar("tag")
    tag.set("bucket 3")
    seen: dict[str, Any] = {}

    def decode() -> Iterator[pa.RecordBatch]:
        seen["decoder"] = _nice()
        yield pa.record_batch({"i": [1]})

    with SharedPrefetch(2) as shared:  # its threads start here, at the caller's priority

        def merge() -> int:
            seen["merge"], seen["thread"], seen["tag"] = _nice(), threading.get_native_id(), tag.get()
            run = shared.run(decode())  # submitted from the lowered thread
            rows = sum(batch.num_rows for batch in run)
            run.close()
            return rows

        assert run_at_lower_priority(merge) == 1
    assert seen["merge"] == min(19, caller + MERGE_NICENESS) and seen["decoder"] == caller
    assert seen["thread"] != threading.get_native_id() and seen["tag"] == "bucket 3"
    assert _nice() == caller  # the caller's own priority is untouched


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_worker_runs_lowered_merges_on_threads_of_its_own() -> None:
    assert run_at_lower_priority(lambda: 1) == 1  # the parent's merge threads exist
    child = os.fork()
    if child == 0:  # the parent's threads are gone here: new ones must start
        os._exit(0 if run_at_lower_priority(lambda: 7) == 7 else 1)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(child, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        pytest.fail("the forked worker's merge never ran")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_a_lowered_merge_raises_its_error_on_the_callers_thread() -> None:
    def fail() -> None:
        raise CorruptFileError("s3://b/t/bucket-0/data-1.parquet", "bad footer")

    with pytest.raises(CorruptFileError, match="bad footer"):
        run_at_lower_priority(fail)
