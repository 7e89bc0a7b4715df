"""Apache Paimon's Java batch read (tests/support/java/PaimonReader.java, run by Java Paimon
1.0, 1.4 and 2.0: every test here runs once per release) reads every table paimond
maintained exactly as pypaimon does: pypaimon writes, paimond compacts, rebuilds
deletion vectors, rewrites file indexes, merges manifests and expires snapshots, and Java's
rows equal pypaimon's rows (as multisets, in one canonical form, tests/java_reader.py) at the
latest snapshot, at older snapshots and at tags.

What Java 1.0 cannot decode in pypaimon-written parquet files, found by running it:
- TIMESTAMP(7..9) stored as INT64 nanoseconds: `IllegalArgumentException: Unexpected type:
  INT64` (ParquetSplitReaderUtil.createWritableColumnVector expects INT96 above precision 6).
  A primary-key read always reads the key columns, so a table with such a key column cannot
  be read at all until paimond rewrites its files.
- Dictionary-encoded DECIMAL(10,2) (pyarrow's FIXED_LEN_BYTE_ARRAY with a dictionary):
  `UnsupportedOperationException: ...PlainValuesDictionary$PlainBinaryDictionary`.
- BYTES partitions: Java renders the partition directory as `p=[B@<hash>` and looks for files
  there: `FileNotFoundException: File '.../p=%5BB@...' not found`.
Those columns are left out of the compared projection; every other column is compared.
"""

from __future__ import annotations

import collections
import datetime
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pypaimon.schema.schema_change import SchemaChange
from support.dv_layered import enable_vectors, layered
from support.dv_scenarios import SCENARIOS, Live, Scenario
from support.file_index_checks import placed_index
from support.java_reader import (
    JavaRead,
    JavaReader,
    JavaReadError,
    canonical_rows,
    multiset_diff,
)
from support.pypaimon_tables import TableSpec, catalog_for, set_options
from support.write_only_writer import Writer

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.errors import RefusedError
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.manifests import ManifestMergeJob
from paimond.maintenance.regenerate.rebuild_dv import RebuildDvJob
from paimond.maintenance.regenerate.rewrite_index import IndexRewriteJob
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NOW = datetime.datetime(2026, 11, 22, 12)
CLOCK = Clock(fixed_ms=int(NOW.timestamp() * 1000))  # its local time is NOW
COMMIT_CLOCK = Clock(fixed_ms=1_700_000_000_000)
FAR_FUTURE = Clock(fixed_ms=4_102_444_800_000)  # 2100-01-01
# Every comparison of a Java read with a pypaimon read, by label (see test_zz_...).
COMPARED: list[str] = []

# Java 1.0 cannot decode these pypaimon-written parquet columns (module docstring).
INT64_NANOS = ("v_timestamp_9", "v_timestamp_ltz_9")  # "Unexpected type: INT64"
DICT_DECIMAL = ("v_decimal_10_2",)  # "PlainValuesDictionary$PlainBinaryDictionary"
# pypaimon writes `_VALUE_STATS_COLS` [] with empty value stats; Java 1.0's stats filter then
# reads null counts past the empty array.
STATS_COLS_CRASH = r"ArrayIndexOutOfBoundsException: Index \d+ out of bounds for length 1"
# pypaimon's INT64-nanosecond TIMESTAMP(9) files: Java 1.0 cannot decode the type, Java 1.4
# fails on their dictionary pages (its LongUpdater casts the vector of a TIMESTAMP); 2.0 reads
# them.
PYPAIMON_NANOS_FAILURES = {"1.0": "Unexpected type: INT64",
                           "1.4": "HeapTimestampVector cannot be cast"}


# ---- reading both ways -------------------------------------------------------------------


def table_path(warehouse: str, name: str) -> Path:
    database, table = name.split(".")
    return Path(warehouse) / f"{database}.db" / table


def pypaimon_read(warehouse: str, name: str, *, snapshot_id: int | None = None,
                  tag: str | None = None) -> pa.Table:
    """pypaimon's normal batch read (level 0 skipped where Java skips it too)."""
    table = catalog_for(warehouse).get_table(name)
    options = {}
    if snapshot_id is not None:
        options["scan.snapshot-id"] = str(snapshot_id)
    if tag is not None:
        options["scan.tag-name"] = tag
    if options:
        table = table.copy(options)
    builder = table.new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


def compare(reader: JavaReader, warehouse: str, name: str, label: str, *,
            snapshot_id: int | None = None, tag: str | None = None,
            projection: list[str] | None = None,
            filters: tuple[tuple[str, str, Any], ...] = ()) -> JavaRead:
    """Java's rows == pypaimon's rows (filtered here in Python by `filters`, which Java gets
    as pushed-down predicates and applies row by row). Returns the Java read."""
    rows = pypaimon_read(warehouse, name, snapshot_id=snapshot_id, tag=tag)
    for column, op, value in filters:
        field = pc.field(column)
        rows = rows.filter({"=": field == value, "<": field < value, ">": field > value,
                            "<=": field <= value, ">=": field >= value}[op])
    columns = projection if projection is not None else rows.column_names
    java = reader.read(table_path(warehouse, name), snapshot_id=snapshot_id, tag=tag,
                       projection=projection,
                       filters=[f"{c}{op}{v}" for c, op, v in filters])
    assert java.columns == columns
    diff = multiset_diff(java.rows, canonical_rows(rows, columns))
    assert not diff, f"{name} {label}: Java (left) vs pypaimon (right): {diff}"
    COMPARED.append(f"{reader.release} {name} {label}")
    return java


def copy_table(source_warehouse: str, name: str, tmp_path: Path) -> tuple[str, Table]:
    warehouse = str(tmp_path / "wh")
    shutil.copytree(table_path(source_warehouse, name), table_path(warehouse, name))
    return warehouse, open_table(open_storage(warehouse), warehouse, name)


def spec_of(oracle_warehouse: tuple[str, list[TableSpec]], name: str) -> TableSpec:
    return next(s for s in oracle_warehouse[1] if s.name == name)


def compact(table: Table, warehouse: str, *, full: bool) -> None:
    summary = CompactJob(table, full=full, parallelism=2, use_processes=False,
                         clock=CLOCK).run()
    assert not summary.failures, summary.describe()


def expire_keeping(table: Table, retain: int) -> None:
    settings = ExpireSettings(retain_min=retain, retain_max=retain, time_retained_ms=0,
                              max_deletes=10_000)
    ExpireJob(table, clock=FAR_FUTURE, settings=settings).run()
    assert len(table.snapshots.list_ids()) == retain


# ---- primary-key tables: compact, merge manifests, expire ---------------------------------

PK_TABLES = ["db.pk_deduplicate", "db.pk_deduplicate_orc", "db.pk_partial_update",
             "db.pk_aggregation", "db.pk_first_row", "db.pk_deletion_vectors"]


@pytest.mark.parametrize("name", PK_TABLES)
def test_primary_key_tables_read_alike_through_maintenance(
        name: str, oracle_warehouse: tuple[str, list[TableSpec]], java_reader: JavaReader,
        tmp_path: Path) -> None:
    spec = spec_of(oracle_warehouse, name)
    warehouse, table = copy_table(oracle_warehouse[0], name, tmp_path)
    ids = table.snapshots.list_ids()
    middle = ids[len(ids) // 2]
    catalog_for(warehouse).get_table(name).create_tag("before", middle)

    # pypaimon's own files: Java merges level 0 (or skips it: first-row, DV) like pypaimon.
    before = compare(java_reader, warehouse, name, "as written")
    assert set(before.levels()) <= {0}
    compact(table, warehouse, full=False)
    compare(java_reader, warehouse, name, "after a minor compaction")
    compact(table, warehouse, full=True)
    after = compare(java_reader, warehouse, name, "after a full compaction")
    # Java reads paimond's compacted files above level 0, and they hold the model's rows.
    assert after.levels() and min(after.levels()) > 0, after.splits
    assert not multiset_diff(after.rows, canonical_rows(spec.compacted_rows))
    assert len(after.rows) == spec.compacted_rows.num_rows > 0

    ManifestMergeJob(table, clock=COMMIT_CLOCK).run()
    compare(java_reader, warehouse, name, "after merge-manifests")
    compact(table, warehouse, full=False)  # nothing to do, or an upgrade: still alike
    expire_keeping(table, 2)
    kept = table.snapshots.list_ids()
    compare(java_reader, warehouse, name, "after expire", snapshot_id=kept[0])
    latest = compare(java_reader, warehouse, name, "after expire (latest)")
    # Time travel to the tag: its files outlived the expiration; it reads as it did.
    tagged = compare(java_reader, warehouse, name, "tag 'before' after expire", tag="before")
    assert multiset_diff(tagged.rows, latest.rows), "the tag should differ from the latest"


def test_all_types_primary_key_table_after_full_compaction(
        oracle_warehouse: tuple[str, list[TableSpec]], java_reader: JavaReader,
        tmp_path: Path) -> None:
    """Every type in the key and the values. pypaimon's own files are unreadable by Java
    1.0 (its TIMESTAMP(9) keys are INT64 nanoseconds); once paimond rewrote every file, Java
    reads them."""
    name = "db.all_types_pk"
    spec = spec_of(oracle_warehouse, name)
    warehouse, table = copy_table(oracle_warehouse[0], name, tmp_path)
    failure = PYPAIMON_NANOS_FAILURES.get(java_reader.release)
    if failure is None:
        compare(java_reader, warehouse, name, "as written")
    else:
        with pytest.raises(JavaReadError, match=failure):
            java_reader.read(table_path(warehouse, name))
    catalog_for(warehouse).get_table(name).create_tag("written", table.snapshots.latest_id())
    compact(table, warehouse, full=True)
    after = compare(java_reader, warehouse, name, "after a full compaction")
    assert len(after.rows) == spec.compacted_rows.num_rows > 0
    assert min(after.levels()) > 0
    assert not multiset_diff(after.rows, canonical_rows(spec.compacted_rows))


# ---- deletion vectors written by paimond ---------------------------------------------------


def _without_vectors(live: Live, target: Path) -> str:
    """A copy whose latest snapshot lists no index manifest (no vectors to apply)."""
    shutil.copytree(live.warehouse, target)
    table = open_table(open_storage(str(target)), str(target), live.name)
    path = Path(table.snapshots.path(table.snapshots.latest_id()))
    snapshot = json.loads(path.read_text())
    snapshot["indexManifest"] = None
    path.write_text(json.dumps(snapshot))
    return str(target)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_deletion_vector_tables_read_alike_after_every_compaction(
        scenario: Scenario, java_reader: JavaReader, tmp_path: Path) -> None:
    live = Live(scenario, str(tmp_path / "wh"))
    # A compaction may upgrade a pypaimon-written level-0 file without rewriting it; Java
    # then reads pypaimon's dictionary-encoded DECIMAL(12,2) (FIXED_LEN_BYTE_ARRAY) and fails
    # ("UnsupportedOperationException: ...PlainValuesDictionary$PlainBinaryDictionary" in
    # ParquetDecimalVector.getDecimal). paimond writes it as INT64; the column is left out.
    projection = [c for c in scenario.schema.names if c != "amount"]
    snapshots, vectors_seen = [], 0
    for round_no in range(5):
        live.write(30 if round_no else 50)
        live.compact(full=round_no == 3)
        java = compare(java_reader, live.warehouse, live.name, f"round {round_no}",
                       projection=projection)
        assert not multiset_diff(java.rows, canonical_rows(live.expected(), projection))
        assert java.rows and min(java.levels()) > 0
        vectors_seen = max(vectors_seen, java.splits["deletionFiles"])
        snapshots.append(live.table.snapshots.latest_id())
    for snapshot_id in snapshots[:-1]:  # time travel to every earlier compaction
        compare(java_reader, live.warehouse, live.name, f"snapshot {snapshot_id}",
                snapshot_id=snapshot_id, projection=projection)
    if scenario.options.get("deletion-vectors.enabled") != "true":
        return
    # One more write and minor compaction: vectors are live (where the compaction's lookups
    # superseded rows). Without them both readers see more rows, so Java applies them.
    live.write(30)
    live.compact()
    with_vectors = compare(java_reader, live.warehouse, live.name, "vectors live",
                           projection=projection)
    vectors_seen = max(vectors_seen, with_vectors.splits["deletionFiles"])
    assert vectors_seen > 0, "Java planned no deletion file in any round"
    if not with_vectors.splits["deletionFiles"]:
        return
    raw = _without_vectors(live, tmp_path / "raw")
    without = compare(java_reader, raw, live.name, "index manifest dropped",
                      projection=projection)
    assert len(without.rows) > len(with_vectors.rows)


def test_rebuilt_deletion_vectors_read_alike(java_reader: JavaReader, tmp_path: Path) -> None:
    live = layered(tmp_path)
    enable_vectors(live)
    before_id = live.table.snapshots.latest_id()
    # Vectors enabled, none written yet: both read every level >= 1 row unmerged.
    unvectored = compare(java_reader, live.warehouse, live.name, "before rebuild-dv")
    summary = RebuildDvJob(live.table, clock=SYSTEM_CLOCK).run()
    assert summary.snapshot is not None
    rebuilt = compare(java_reader, live.warehouse, live.name, "after rebuild-dv")
    assert rebuilt.splits["deletionFiles"] > 0
    assert not multiset_diff(rebuilt.rows, canonical_rows(live.expected()))
    assert multiset_diff(unvectored.rows, rebuilt.rows), "the rebuild changed nothing"
    compare(java_reader, live.warehouse, live.name, "snapshot before rebuild-dv",
            snapshot_id=before_id)


# ---- append tables: file indexes, manifests, expiration -------------------------------------

# name -> whether the table has the columns Java 1.0 cannot decode (left out when compared)
APPEND_TABLES: dict[str, bool] = {
    "db.append_unaware": False,
    "db.append_fixed_bucket": False,
    "db.append_deletion_vectors": False,
    "db.all_types_partitioned": True,
    "db.float_partitions": True,
}


def _projection(rows: pa.Table, undecodable: bool) -> list[str] | None:
    """Every column but INT64_NANOS and DICT_DECIMAL, or None (all) for other tables."""
    if not undecodable:
        return None
    return [c for c in rows.column_names if c not in INT64_NANOS + DICT_DECIMAL]


@pytest.mark.parametrize("name", sorted(APPEND_TABLES))
def test_append_tables_read_alike_through_index_rewrite_and_expiration(
        name: str, oracle_warehouse: tuple[str, list[TableSpec]], java_reader: JavaReader,
        tmp_path: Path) -> None:
    spec = spec_of(oracle_warehouse, name)
    warehouse, table = copy_table(oracle_warehouse[0], name, tmp_path)
    projection = _projection(spec.expected_rows, APPEND_TABLES[name])
    ids = table.snapshots.list_ids()
    catalog_for(warehouse).get_table(name).create_tag("early", ids[max(0, len(ids) // 2 - 1)])
    if java_reader.release == "1.4" and {"data-evolution.enabled", "deletion-vectors.enabled"} <= {
            k for k, v in table.options().raw.items() if v == "true"}:
        # Java 1.4's SchemaValidation.validateRowTracking refuses this combination (1.0 has
        # no such check, 2.0 allows it): the table, pypaimon's, cannot be opened in 1.4.
        with pytest.raises(JavaReadError, match="Data evolution config must disabled with "
                                                "deletion-vectors.enabled"):
            java_reader.read(table_path(warehouse, name))
        return
    written = compare(java_reader, warehouse, name, "as written", projection=projection)
    assert len(written.rows) == spec.expected_rows.num_rows > 0

    set_options(warehouse, name, {"file-index.bloom-filter.columns": "id",
                                  "file-index.bloom-filter.id.items": "500",
                                  "file-index.bitmap.columns": "id"})
    if table.options().raw.get("data-evolution.enabled") == "true":
        # files may hold some columns only: rewrite-index refuses before writing anything
        with pytest.raises(RefusedError, match="data-evolution.enabled"):
            IndexRewriteJob(table, clock=COMMIT_CLOCK).run()
    else:
        summary = IndexRewriteJob(table, clock=COMMIT_CLOCK).run()
        assert summary.snapshot is not None
    compare(java_reader, warehouse, name, "after rewrite-index", projection=projection)
    # A filter makes Java evaluate each file's value stats before its index; the files are
    # pypaimon's (rewrite-index keeps their metadata), whose `_VALUE_STATS_COLS` is [] with
    # empty stats, and Java 1.0 indexes past those empty arrays (STATS_COLS_CRASH); later
    # releases filter them.
    if java_reader.release == "1.0":
        with pytest.raises(JavaReadError, match=STATS_COLS_CRASH):
            java_reader.read(table_path(warehouse, name), projection=["id"], filters=["id=1"])
    else:
        compare(java_reader, warehouse, name, "filtered after rewrite-index",
                projection=["id"], filters=(("id", "=", 1),))
    ManifestMergeJob(table, clock=COMMIT_CLOCK).run()
    compare(java_reader, warehouse, name, "after merge-manifests", projection=projection)
    expire_keeping(table, 2)
    latest = compare(java_reader, warehouse, name, "after expire", projection=projection)
    compare(java_reader, warehouse, name, "oldest kept snapshot", projection=projection,
            snapshot_id=table.snapshots.list_ids()[0])
    early = compare(java_reader, warehouse, name, "tag 'early' after expire",
                    projection=projection, tag="early")
    assert 0 < len(early.rows) < len(latest.rows)


def test_java_cannot_read_a_bytes_partition(
        oracle_warehouse: tuple[str, list[TableSpec]], java_reader: JavaReader) -> None:
    """Java 1.0's own limit, not paimond's: it names the directory after byte[].toString()."""
    path = table_path(oracle_warehouse[0], "db.binary_partition")
    with pytest.raises(JavaReadError, match=r"FileNotFoundException.*p=%5BB@"):
        java_reader.read(path)


# ---- primary-key file indexes ----------------------------------------------------------------


def test_primary_key_file_indexes_filter_alike(
        oracle_warehouse: tuple[str, list[TableSpec]], java_reader: JavaReader,
        tmp_path: Path) -> None:
    """Index options set, then a full compaction writes every file with paimond's stats and
    indexes, then rewrite-index adds another index: filtered reads (pushed down to stats and
    file indexes in Java) agree with pypaimon's read filtered in Python."""
    name = "db.pk_deduplicate"
    warehouse, table = copy_table(oracle_warehouse[0], name, tmp_path)
    # pypaimon's files: `_VALUE_STATS_COLS` [] and empty stats crash Java 1.0's filtering.
    if java_reader.release == "1.0":
        with pytest.raises(JavaReadError, match=STATS_COLS_CRASH):
            java_reader.read(table_path(warehouse, name), filters=["v=v1"])
    else:
        compare(java_reader, warehouse, name, "pypaimon's files filtered",
                filters=(("v", "=", "v1"),))
    set_options(warehouse, name, {"file-index.bloom-filter.columns": "v",
                                  "file-index.bloom-filter.v.items": "200"})
    compact(table, warehouse, full=True)
    everything = compare(java_reader, warehouse, name, "indexed, after full compaction")
    values = [json.loads(r)[3] for r in everything.rows]
    some_v = next(v for v in values if v is not None)

    def filtered(stage: str) -> None:
        cases = {"v=": (("v", "=", some_v),), "v= missing": (("v", "=", "nope"),),
                 "id=": (("id", "=", 7),), "id<": (("id", "<", 10),),
                 "score>=": (("score", ">=", 3.5),), "v= and id<": (("v", "=", some_v),
                                                                    ("id", "<", 30))}
        for label, filters in cases.items():
            java = compare(java_reader, warehouse, name, f"{label} {stage}", filters=filters)
            assert len(java.rows) <= java.candidates <= len(everything.rows)
        hit = compare(java_reader, warehouse, name, f"v= hit {stage}",
                      filters=(("v", "=", some_v),))
        assert 0 < len(hit.rows) == values.count(some_v)

    filtered("after full compaction")
    set_options(warehouse, name, {"file-index.bitmap.columns": "id,v"})
    summary = IndexRewriteJob(table, clock=COMMIT_CLOCK).run()
    assert summary.snapshot is not None
    filtered("after rewrite-index")


def _bitmap_versions(table: Table) -> collections.Counter[int]:
    """How many live files' bitmap payloads are of each version (its first byte)."""
    latest = table.snapshots.latest()
    assert latest is not None
    versions: collections.Counter[int] = collections.Counter()
    for live in scan_snapshot(table, latest).files:
        for indexes in (placed_index(table, live) or {}).values():
            if indexes.get("bitmap"):
                versions[indexes["bitmap"][0]] += 1
    return versions


def test_bitmap_indexes_keep_the_version_of_the_tables_files(
        java_reader: JavaReader, tmp_path: Path) -> None:
    """Java 1.0 reads bitmap indexes of version 1 only (Java >= 1.1 writes 2 by default): a
    table whose files carry version 1 keeps getting version 1 from paimond's compaction and
    rewrite-index, unless its option names a version, and every release reads it filtered."""
    warehouse, name = str(tmp_path / "wh"), "db.bitmap_v1"
    writer = Writer(warehouse, name, compaction_trigger=2)
    for _ in range(3):
        writer.commit()
    set_options(warehouse, name, {"file-index.bitmap.columns": "v",
                                  "file-index.bitmap.v.version": "1"})
    table = open_table(open_storage(warehouse), warehouse, name)
    compact(table, warehouse, full=True)
    assert _bitmap_versions(table) == {1: 1}
    catalog_for(warehouse).alter_table(
        name, [SchemaChange.remove_option("file-index.bitmap.v.version")], False)
    writer.table = catalog_for(warehouse).get_table(name)
    for _ in range(3):
        writer.commit()
    compact(table, warehouse, full=True)  # the option is gone: the files' version stays
    assert _bitmap_versions(table) == {1: 1}
    set_options(warehouse, name, {"file-index.bloom-filter.columns": "id"})
    assert IndexRewriteJob(table, clock=COMMIT_CLOCK).run().snapshot is not None
    assert _bitmap_versions(table) == {1: 1}
    for value in ("v3", "v27", "nope"):
        compare(java_reader, warehouse, name, f"bitmap v1, v={value}",
                filters=(("v", "=", value),))
    # An option that names the version wins over the files'.
    set_options(warehouse, name, {"file-index.bitmap.v.version": "2"})
    writer.table = catalog_for(warehouse).get_table(name)
    writer.commit()
    compact(table, warehouse, full=True)
    assert _bitmap_versions(table) == {2: 1}
    if java_reader.release != "1.0":
        compare(java_reader, warehouse, name, "bitmap v2, v=v3", filters=(("v", "=", "v3"),))


# ---- the count ---------------------------------------------------------------------------------


def test_zz_reads_compared(java_reader: JavaReader) -> None:
    """Runs last (file order): how many Java reads were compared with pypaimon's. Each
    comparison has its own label, so none was counted twice."""
    per_read = java_reader.read_seconds / max(java_reader.reads, 1)
    mine = [c for c in COMPARED if c.startswith(f"{java_reader.release} ")]
    print(f"\nJava {java_reader.release} reads compared with pypaimon: {len(mine)}; the JVM "
          f"served {java_reader.reads} reads in {java_reader.read_seconds:.1f}s "
          f"({per_read * 1000:.0f} ms each, its start included)")
    assert len(COMPARED) == len(set(COMPARED)), sorted(COMPARED)
    assert mine and java_reader.reads >= len(mine)
