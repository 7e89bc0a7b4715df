"""``rewrite-index`` on pypaimon-written tables after their ``file-index.*`` options change:
pypaimon reads the same rows at every snapshot, each file's index matches its rows, a second
run commits nothing, a dry run writes nothing, removed options drop their indexes; and
expiration and orphan removal afterwards keep every data file and free only old index files."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pypaimon.schema.schema_change import SchemaChange
from support.file_index_checks import assert_index_matches, index_files, parquet_columns, placed_index
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_append_fixed_bucket, build_pk_deduplicate, catalog_for
from support.table_history import assert_exactly_referenced, tree, write_tag

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import CommitConflictError, CorruptFileError
from paimond.format.meta.manifest import FILE_KIND_ADD, FILE_KIND_DELETE
from paimond.maintenance.expire.orphans import OrphanJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.manifests import ManifestMergeJob
from paimond.maintenance.regenerate.rewrite_index import IndexRewriteJob, IndexRewriteSummary
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import Committer
from paimond.table.scan.snapshot_scan import data_file_path, read_manifest, read_manifest_list, scan_snapshot
from paimond.table.storage.interface import open_storage

FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01
FAR_FUTURE = Clock(fixed_ms=FAR_FUTURE_MS)
CLOCK = Clock(fixed_ms=1_700_000_000_000)
BLOOM = {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.items": "2000"}
BITMAP = {"file-index.bitmap.columns": "v"}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("rewrite_index")
    return {"pk": (root / "pk", build_pk_deduplicate(str(root / "pk")).name),
            "append": (root / "append", build_append_fixed_bucket(str(root / "append")).name)}


def _copy(pristine: dict[str, tuple[Path, str]], which: str, tmp_path: Path) -> tuple[str, Table]:
    source, name = pristine[which]
    warehouse = str(tmp_path / "wh")
    shutil.copytree(source, warehouse)
    return warehouse, open_table(open_storage(warehouse), warehouse, name)


def _set_options(warehouse: str, table: Table, options: dict[str, str],
                 removed: tuple[str, ...] = ()) -> None:
    changes = [SchemaChange.set_option(k, v) for k, v in options.items()]
    changes += [SchemaChange.remove_option(k) for k in removed]
    catalog_for(warehouse).alter_table(table.name, changes, False)


def _rewrite(table: Table, **kwargs: Any) -> IndexRewriteSummary:
    return IndexRewriteJob(table, clock=CLOCK, **kwargs).run()


def _check_indexes(table: Table, columns: list[str]) -> list[dict[str, Any]]:
    """Every live file's index against its rows; returns the containers' column sets."""
    schema = table.latest_schema()
    types = {f.name: f.type for f in schema.fields}
    latest = table.snapshots.latest()
    assert latest is not None
    found = []
    for live in scan_snapshot(table, latest).files:
        container = placed_index(table, live) or {}
        rows = parquet_columns(data_file_path(table, schema, live), columns)
        assert assert_index_matches(container, rows, types) == sum(map(len, container.values()))
        found.append({c: sorted(t) for c, t in container.items()})
    return found


def test_rewrite_index_follows_the_options(pristine: dict[str, tuple[Path, str]],
                                           tmp_path: Path) -> None:
    warehouse, table = _copy(pristine, "pk", tmp_path)
    reads = {i: read_rows(warehouse, table.name, snapshot_id=i)
             for i in table.snapshots.list_ids()}
    latest_rows = reads[max(reads)]
    files_before = scan_snapshot(table, table.snapshots.load(max(reads))).files

    _set_options(warehouse, table, {**BLOOM, **BITMAP})
    summary = _rewrite(table)
    assert summary.snapshot is not None and len(summary.changes) == len(files_before)
    snapshot = summary.snapshot
    assert snapshot.commit_kind == "COMPACT" and snapshot.id == max(reads) + 1
    # One delta: each file deleted and added again, same name and level, new index file.
    where = table.snapshots.path(snapshot.id)
    delta = [e for m in read_manifest_list(table, snapshot.delta_manifest_list, where)
             for e in read_manifest(table, m, where)]
    deleted = {(e.file.file_name, e.file.level) for e in delta if e.kind == FILE_KIND_DELETE}
    added = {(e.file.file_name, e.file.level) for e in delta if e.kind == FILE_KIND_ADD}
    assert deleted == added == {(f.meta.file_name, f.meta.level) for f in files_before}
    assert all(index_files(e.file) for e in delta if e.kind == FILE_KIND_ADD)
    assert all(c == {"id": ["bloom-filter"], "v": ["bitmap"]}
               for c in _check_indexes(table, ["id", "v"]))
    reads[snapshot.id] = latest_rows
    for snapshot_id, rows in reads.items():  # time travel: every snapshot reads as before
        assert read_rows(warehouse, table.name, snapshot_id=snapshot_id).equals(rows)

    again = _rewrite(table)
    assert again.snapshot is None and not again.changes
    assert table.snapshots.latest_id() == snapshot.id
    assert "up to date; nothing committed" in again.describe()

    # Small enough for the manifest now: embedded, the index files leave the extra files.
    _set_options(warehouse, table, {"file-index.in-manifest-threshold": "1 mb"})
    embedded = _rewrite(table)
    assert len(embedded.changes) == len(files_before)
    latest = table.snapshots.latest()
    assert latest is not None
    assert all(f.meta.embedded_index and not index_files(f.meta)
               for f in scan_snapshot(table, latest).files)

    # A removed option drops its index; no option left drops them all.
    _set_options(warehouse, table, {}, removed=tuple(BLOOM))
    _rewrite(table)
    assert all(c == {"v": ["bitmap"]} for c in _check_indexes(table, ["id", "v"]))
    # No index at all is each file's first state, whose DELETE the manifests still hold:
    # readers would drop an ADD repeating it, so an empty index file stands in for now.
    _set_options(warehouse, table, {}, removed=tuple(BITMAP))
    _rewrite(table)
    assert read_rows(warehouse, table.name).equals(latest_rows)
    latest = table.snapshots.latest()
    assert latest is not None
    for live in scan_snapshot(table, latest).files:
        assert live.meta.embedded_index is None and placed_index(table, live) == {}
    assert _rewrite(table).snapshot is None
    # Once merged manifests forget those DELETEs, the files go back to no index at all.
    ManifestMergeJob(table, clock=CLOCK).run()
    assert _rewrite(table).snapshot is not None
    latest = table.snapshots.latest()
    assert latest is not None
    assert all(f.meta.embedded_index is None and f.meta.extra_files == ()
               for f in scan_snapshot(table, latest).files)
    assert _rewrite(table).snapshot is None
    assert read_rows(warehouse, table.name).equals(latest_rows)


def test_dry_run_writes_nothing(pristine: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    warehouse, table = _copy(pristine, "pk", tmp_path)
    _set_options(warehouse, table, {**BLOOM, **BITMAP})
    before = tree(warehouse)
    summary = _rewrite(table, dry_run=True)
    assert tree(warehouse) == before
    assert summary.changes and summary.snapshot is None
    text = summary.describe()
    assert "would rewrite" in text and "no index -> index file" in text
    assert summary.changes[0].before.file.file_name in text


def test_partitions_and_an_append_table(pristine: dict[str, tuple[Path, str]],
                                        tmp_path: Path) -> None:
    warehouse, table = _copy(pristine, "append", tmp_path)
    rows = read_rows(warehouse, table.name)
    _set_options(warehouse, table, {"file-index.bsi.columns": "id"})
    summary = _rewrite(table, partitions={"day": "19723"})  # 2024-01-01 in epoch days
    assert summary.snapshot is not None and summary.changes
    schema = table.latest_schema()
    for live in scan_snapshot(table, summary.snapshot).files:
        changed = live.meta.file_name in {c.after.file.file_name for c in summary.changes}
        in_partition = data_file_path(table, schema, live).find("/day=19723/") != -1
        assert changed == in_partition
        assert (live.meta.embedded_index is not None) == in_partition
    assert read_rows(warehouse, table.name).equals(rows)
    assert _rewrite(table, partitions={"day": "19723"}).snapshot is None
    assert _rewrite(table).snapshot is not None  # the other partitions now


def test_expiration_keeps_data_and_frees_replaced_index_files(
        pristine: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    warehouse, table = _copy(pristine, "pk", tmp_path)
    _set_options(warehouse, table, {**BLOOM, **BITMAP})
    first = _rewrite(table)
    assert first.snapshot is not None
    write_tag(table, "indexed", first.snapshot)  # holds the first index files
    _set_options(warehouse, table, {"file-index.bloom-filter.id.items": "3000"})
    second = _rewrite(table)
    _set_options(warehouse, table, {"file-index.bloom-filter.id.items": "4000"})
    third = _rewrite(table)
    assert second.snapshot is not None and third.snapshot is not None
    names = {c.after.file.file_name: index_files(c.after.file)[0] for c in third.changes}
    assert all(n.endswith(".parquet-2.index") for n in names.values())
    rows = read_rows(warehouse, table.name)
    tagged_rows = read_rows(warehouse, table.name, snapshot_id=first.snapshot.id)

    settings = ExpireSettings(retain_min=1, retain_max=1, time_retained_ms=0, max_deletes=100)
    ExpireJob(table, clock=FAR_FUTURE, settings=settings).run()
    assert table.snapshots.list_ids() == [third.snapshot.id]
    # The second index files are gone, the tag's first ones and the live third ones stay.
    assert_exactly_referenced(table)
    bucket_files = {p.name for p in Path(warehouse).rglob("bucket-*/*")}
    assert not any(n.endswith("-1.index") for n in bucket_files)
    assert set(names.values()) <= bucket_files
    assert {c.before.file.file_name for c in third.changes} <= bucket_files
    assert read_rows(warehouse, table.name).equals(rows)

    # Without the tag, its index files are orphans once no manifest kept names them.
    table.storage.delete(table.file_path("tag", "tag-indexed"))
    ManifestMergeJob(table, clock=CLOCK).run()
    ExpireJob(table, clock=FAR_FUTURE, settings=settings).run()
    orphans = _remove_orphans(table)
    assert orphans.removed.files["file-index"] == len(first.changes)
    assert_exactly_referenced(table)
    # A new rewrite's index files are never orphans; expiring frees the ones it replaced.
    _set_options(warehouse, table, {"file-index.bloom-filter.id.items": "5000"})
    fourth = _rewrite(table)
    assert _remove_orphans(table).removed.total_files == 0
    ExpireJob(table, clock=FAR_FUTURE, settings=settings).run()
    assert_exactly_referenced(table)
    assert {index_files(c.after.file)[0] for c in fourth.changes} <= {
        p.name for p in Path(warehouse).rglob("bucket-*/*")}
    assert read_rows(warehouse, table.name).equals(rows)
    assert tagged_rows.equals(rows)  # the tagged snapshot read the same rows


def _remove_orphans(table: Table) -> Any:
    return OrphanJob(table, clock=FAR_FUTURE, older_than_ms=FAR_FUTURE_MS - 1000,
                     force=True).run()


def test_failed_or_conflicting_runs_leave_no_index_files(
        pristine: dict[str, tuple[Path, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse, table = _copy(pristine, "pk", tmp_path)
    _set_options(warehouse, table, {**BLOOM, **BITMAP})
    before = tree(warehouse)

    def lose(self: Committer, changes: Any) -> Any:
        raise CommitConflictError("t", "RequireFilesLive", "inputs live", "a concurrent commit won")

    with monkeypatch.context() as patch:
        patch.setattr(Committer, "commit", lose)
        with pytest.raises(CommitConflictError):
            _rewrite(table, max_attempts=2)
    assert tree(warehouse) == before

    latest = table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(table, latest).files
    victim = data_file_path(table, table.latest_schema(), files[-1])
    Path(victim).write_bytes(b"not parquet" * 10)
    before = tree(warehouse)
    with pytest.raises(CorruptFileError, match=files[-1].meta.file_name):
        _rewrite(table, parallelism=1)
    assert tree(warehouse) == before


def test_cli(pristine: dict[str, tuple[Path, str]], tmp_path: Path,
             capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, table = _copy(pristine, "pk", tmp_path)
    _set_options(warehouse, table, BITMAP)
    latest = table.snapshots.latest_id()
    assert main(["rewrite-index", warehouse, "--table", table.name, "--dry-run"]) == 0
    assert "would rewrite" in capsys.readouterr().out
    assert table.snapshots.latest_id() == latest
    assert main(["rewrite-index", warehouse, "--table", table.name, "--partition", "nope=1"]) == 2
    assert "nope is not a partition key" in capsys.readouterr().err
    assert main(["rewrite-index", warehouse, "--table", table.name]) == 0
    assert "(COMPACT) rewrote" in capsys.readouterr().out
    assert main(["rewrite-index", warehouse, "--table", table.name]) == 0
    assert "nothing committed" in capsys.readouterr().out
    assert table.snapshots.latest_id() == (latest or 0) + 1
