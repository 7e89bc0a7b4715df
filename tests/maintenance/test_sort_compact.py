"""Sort compaction (``compact --order-by/--zorder-by/--hilbert-by``) of bucket-unaware
append tables written by pypaimon: every snapshot reads the same rows (pypaimon,
pypaimon-rust), the new files hold the rows in the strategy's order (keys from
``format/sort_keys``, whose bytes equal Java's), and point filters on the order columns
skip far more files than before (per-file min/max read back from the files with pyarrow)."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support.pypaimon_oracle import live_files, read_rows, read_rows_rust, snapshot_ids
from support.pypaimon_tables import TableWriter, catalog_for
from support.sorted_tables import CLOCK, NAME, SCHEMA, write_sorted_table

from paimond.errors import UnsupportedError
from paimond.format.binary.sort_keys import hilbert_key, zorder_key
from paimond.format.types.data_types import IntType
from paimond.maintenance.compact.sort_compact import SortCompactJob
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage


def _file_ranges(warehouse: str, snapshot_id: int, column: str
                 ) -> list[tuple[Any, Any, str, int]]:
    """(min, max, partition, file order) of ``column`` in each live file, from the file."""
    out = []
    for file in live_files(warehouse, NAME, snapshot_id):
        values = pq.ParquetFile(file["path"]).read(columns=[column]).column(column)
        low, high = pc.min_max(values).values()
        out.append((low.as_py(), high.as_py(), file["file_name"], file["row_count"]))
    return out


def _skippable(warehouse: str, snapshot_id: int, column: str, points: list[Any]) -> float:
    """The mean share of files a point filter ``column = p`` skips by min/max."""
    ranges = _file_ranges(warehouse, snapshot_id, column)
    skipped = [sum(1 for low, high, _, _ in ranges if low is None or not low <= p <= high)
               for p in points]
    return sum(skipped) / len(points) / len(ranges)


def _concatenated(warehouse: str, snapshot_id: int, partition: str) -> pa.Table:
    """A partition's rows, file after file in the order compaction wrote them."""
    files = [f for f in live_files(warehouse, NAME, snapshot_id)
             if f["partition_values"] == (partition,)]
    files.sort(key=lambda f: int(f["file_name"].rsplit("-", 1)[1].split(".")[0]))
    return pa.concat_tables(pq.ParquetFile(f["path"]).read() for f in files)


def _compact(warehouse: str, strategy: str, columns: tuple[str, ...]) -> Any:
    table = open_table(open_storage(warehouse), warehouse, NAME)
    return SortCompactJob(table, strategy, columns, clock=CLOCK).run()


@pytest.mark.parametrize(("strategy", "columns"), [
    ("order", ("a",)), ("zorder", ("a", "b")), ("hilbert", ("a", "b"))])
def test_sorted_files_read_alike_and_skip_more(tmp_path: Path, strategy: str,
                                               columns: tuple[str, ...]) -> None:
    warehouse = str(tmp_path / "wh")
    write_sorted_table(warehouse)
    history = {i: read_rows(warehouse, NAME, i) for i in snapshot_ids(warehouse, NAME)}
    before_id = max(history)
    rng = random.Random(9)
    points = {"a": [rng.randrange(10_000) for _ in range(40)],
              "b": [rng.randrange(10_000) for _ in range(40)]}
    before = {c: _skippable(warehouse, before_id, c, points[c]) for c in columns}
    summary = _compact(warehouse, strategy, columns)
    assert summary.snapshot is not None and summary.snapshot.commit_kind == "COMPACT"
    assert summary.files_in == len(live_files(warehouse, NAME, before_id)) >= 24
    assert summary.files_out > 8
    for snapshot_id, expected in history.items():
        assert read_rows(warehouse, NAME, snapshot_id).equals(expected)
    assert read_rows(warehouse, NAME).equals(history[before_id])
    rust = read_rows_rust(warehouse, NAME)
    assert rust is None or rust.num_rows == history[before_id].num_rows
    after = {c: _skippable(warehouse, summary.snapshot.id, c, points[c]) for c in columns}
    for column in columns:
        assert before[column] < 0.1, before  # every input file spans nearly all values
        # a point filter skipped 2-6% of the files before; after: order 89%, z-order
        # 43-59%, Hilbert 56-60% (two INT columns of the same range, 19 files)
        assert after[column] > (0.8 if strategy == "order" else 0.3), (column, after)
    for partition in ("x", "y"):
        rows = _concatenated(warehouse, summary.snapshot.id, partition)
        if strategy == "order":
            values = rows.column("a").to_pylist()
            nulls = values.count(None)
            assert values[:nulls] == [None] * nulls and values[nulls:] == sorted(values[nulls:])
        else:
            key = zorder_key if strategy == "zorder" else hilbert_key
            keys = [key(row, [IntType(), IntType()])
                    for row in zip(rows.column("a").to_pylist(), rows.column("b").to_pylist(),
                                   strict=True)]
            assert keys == sorted(keys)


def test_deleted_rows_stay_deleted_and_vectors_go(tmp_path: Path) -> None:
    import numpy as np

    from paimond.lsm.lookup.deletion_vectors import vector_of
    from paimond.table.commit.committer import CommitChanges, Committer
    from paimond.table.indexes.deletion_vectors import write_deletion_vectors
    from paimond.table.scan.snapshot_scan import scan_snapshot

    warehouse = str(tmp_path / "wh")
    write_sorted_table(warehouse, {"deletion-vectors.enabled": "true"})
    table = open_table(open_storage(warehouse), warehouse, NAME)
    entry = scan_snapshot(table, table.snapshots.latest()).files[0].entry
    index, _ = write_deletion_vectors(
        table, {entry.file.file_name: vector_of(np.array([0, 5, 7], dtype=np.int64),
                                                bitmap64=False)},
        entry.partition, entry.bucket, bitmap64=False)
    Committer(table, commit_kind="APPEND", clock=CLOCK).commit(CommitChanges(index_added=[index]))
    expected = read_rows(warehouse, NAME)
    assert expected.num_rows == 12 * 400 - 3
    summary = SortCompactJob(table, "zorder", ("a", "s"), clock=CLOCK).run()
    assert summary.snapshot is not None
    assert read_rows(warehouse, NAME).equals(expected)
    assert not scan_snapshot(table, table.snapshots.latest()).index_entries


@pytest.mark.parametrize(("options", "strategy", "columns", "reason"), [
    ({}, "zorder", ("dt", "a"), "partition column"),
    ({}, "hilbert", ("a",), "at least two columns"),
    ({}, "order", ("nope",), "no column"),
    ({}, "shuffle", ("a",), "order strategy"),
    ({"bucket": "2", "bucket-key": "id"}, "order", ("a",), "fixed-bucket"),
    ({"row-tracking.enabled": "true"}, "order", ("a",), "row-tracking"),
])
def test_refused_before_anything_is_written(tmp_path: Path, options: dict[str, str],
                                            strategy: str, columns: tuple[str, ...],
                                            reason: str) -> None:
    warehouse = str(tmp_path / "wh")
    writer = TableWriter(catalog_for(warehouse), NAME, SCHEMA, partition_keys=("dt",),
                     options={"bucket": "-1", **options})
    writer.commit([{"dt": "x", "id": 1, "a": 1, "b": 1, "s": "s"}])
    table = open_table(open_storage(warehouse), warehouse, NAME)
    with pytest.raises(UnsupportedError, match=reason):
        SortCompactJob(table, strategy, columns, clock=CLOCK).run()
    assert table.snapshots.latest().id == 1


def test_cli_zorder_by(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from paimond.cli.main import main

    warehouse = str(tmp_path / "wh")
    write_sorted_table(warehouse)
    expected = read_rows(warehouse, NAME)
    args = ["compact", warehouse, "--table", NAME, "--zorder-by", "a, b", "--partition", "dt=y"]
    assert main([*args, "--dry-run"]) == 0
    assert "zorder sort by a, b of 1 partitions" in capsys.readouterr().out
    assert main(args) == 0
    assert "zorder by a, b: 1 partitions" in capsys.readouterr().out
    table = open_table(open_storage(warehouse), warehouse, NAME)
    assert table.snapshots.latest().commit_kind == "COMPACT"
    assert read_rows(warehouse, NAME).equals(expected)
    with pytest.raises(SystemExit) as usage:  # one strategy at a time
        main([*args[:4], "--order-by", "a", "--hilbert-by", "a,b"])
    assert usage.value.code == 2


def test_vectorized_zorder_equals_the_row_keys() -> None:
    """The numpy z-order path (fixed-width and 8-byte var columns) gives Java's key bytes
    (``zorder_key``, checked against Java in tests/format) for every row."""
    from paimond.format.types.data_types import (
        BigIntType,
        BooleanType,
        DataField,
        DateType,
        FloatType,
        TimestampType,
        VarCharType,
    )
    from paimond.maintenance.compact.sort_order import _python_values, sort_indices, zorder_words

    rng = random.Random(3)
    n = 300

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    table = pa.table({
        "i": pa.array([maybe(rng.randint(-(2**63), 2**63 - 1)) for _ in range(n)], pa.int64()),
        "f": pa.array([maybe(rng.choice([0.0, -0.0, -1.5, rng.uniform(-1e9, 1e9)]))
                       for _ in range(n)], pa.float32()),
        "t": pa.array([maybe(rng.choice([True, False])) for _ in range(n)], pa.bool_()),
        "s": pa.array([maybe("".join(rng.choice("aé€z") for _ in range(rng.randint(0, 9))))
                       for _ in range(n)], pa.string()),
        "d": pa.array([maybe(datetime.date(1960, 1, 1) + datetime.timedelta(rng.randrange(40000)))
                       for _ in range(n)], pa.date32()),
        "ts": pa.array([maybe(rng.randint(-(10**15), 10**15)) for _ in range(n)],
                       pa.timestamp("us")),
    })
    fields = [DataField(0, "i", BigIntType()), DataField(1, "f", FloatType()),
              DataField(2, "t", BooleanType()), DataField(3, "s", VarCharType(length=100)),
              DataField(4, "d", DateType()), DataField(5, "ts", TimestampType(precision=6))]
    names = [f.name for f in fields]
    words = zorder_words(table, fields, names)
    assert words is not None
    values = [_python_values(table.column(f.name), f.type) for f in fields]
    types = [f.type for f in fields]
    for row, expected in zip(zip(*values, strict=True), words, strict=True):
        assert zorder_key(row, types) == expected.astype(">u8").tobytes()
    fast = sort_indices(table, fields, "zorder", names).to_pylist()
    keys = [zorder_key(row, types) for row in zip(*values, strict=True)]
    assert [keys[i] for i in fast] == sorted(keys)
    assert zorder_words(table, fields, names, var_type_size=4) is None  # the row path then


@pytest.mark.parametrize("point", ["data_files.file_written:3", "commit.manifest_list_written"])
def test_a_killed_sort_leaves_the_table_readable_and_the_rerun_cleans(tmp_path: Path,
                                                                      point: str) -> None:
    """Killed (as by SIGKILL) at a crash point, the table reads as before; the rerun deletes
    what the killed run wrote, sorts, and leaves exactly the referenced files."""
    import os

    from support import warm_python
    from support.table_history import assert_exactly_referenced

    warehouse = str(tmp_path / "wh")
    write_sorted_table(warehouse)
    expected = read_rows(warehouse, NAME)
    code = ("import sys; from paimond.cli.main import main; "
            f"sys.exit(main(['compact', {warehouse!r}, '--table', {NAME!r}, "
            "'--zorder-by', 'a,b']))")
    env = {**os.environ, "PAIMOND_CRASH_AT": point}
    killed = warm_python.run(["-c", code], env)  # a process of its own, forked warm
    assert killed.returncode == 137, killed.stderr[-2000:]
    table = open_table(open_storage(warehouse), warehouse, NAME)
    assert table.snapshots.latest_id() == 12
    assert read_rows(warehouse, NAME).equals(expected)
    summary = SortCompactJob(table, "zorder", ("a", "b"), clock=CLOCK).run()
    assert summary.snapshot is not None
    assert read_rows(warehouse, NAME).equals(expected)
    assert_exactly_referenced(table)


@pytest.mark.parametrize(("strategy", "columns"), [("order", ("a", "s")), ("zorder", ("a", "b"))])
def test_a_partition_over_the_budget_is_sorted_through_spilled_runs_alike(
        tmp_path: Path, strategy: str, columns: tuple[str, ...],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of 16 KiB spills each partition (~2,400 rows, ~100 KiB) into several runs:
    the files read back in the same key order, with the same rows, as an in-memory sort."""
    import tempfile

    from paimond.maintenance.compact import external_sort

    spills = tmp_path / "spill"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    runs: list[str] = []
    spill = external_sort._spill
    monkeypatch.setattr(external_sort, "_spill",
                        lambda *args: runs.append(spill(*args)) or runs[-1])
    results = {}
    for budget in (16 * 1024, 512 * 1024 * 1024):
        warehouse = str(tmp_path / f"wh-{budget}")
        write_sorted_table(warehouse)
        expected = read_rows(warehouse, NAME)
        table = open_table(open_storage(warehouse), warehouse, NAME)
        summary = SortCompactJob(table, strategy, columns, clock=CLOCK,
                                 memory_budget_bytes=budget).run()
        assert summary.snapshot is not None
        assert read_rows(warehouse, NAME).equals(expected)
        results[budget] = {p: _concatenated(warehouse, summary.snapshot.id, p)
                           for p in ("x", "y")}
    assert len(runs) >= 8  # the small budget's sorts went through runs, the large one's not
    assert all(r.startswith(str(spills)) for r in runs)
    assert list(spills.iterdir()) == []  # every spill directory removed
    for partition in ("x", "y"):
        small, large = (results[b][partition] for b in sorted(results))
        if strategy == "order":
            keys = [list(zip(*(t.column(c).to_pylist() for c in columns), strict=True))
                    for t in (small, large)]
        else:
            keys = [[zorder_key(row, [IntType(), IntType()]) for row in zip(
                t.column("a").to_pylist(), t.column("b").to_pylist(), strict=True)]
                for t in (small, large)]
        assert keys[0] == keys[1]
        assert sorted(small.to_pylist(), key=repr) == sorted(large.to_pylist(), key=repr)
