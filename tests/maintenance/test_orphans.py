"""Orphan removal: a crashed compaction's files (written, never committed), a commit's
manifests that never got their snapshot, and stale temp files go once older than the window
and stay while younger; nothing a snapshot, tag, branch or changelog names is ever removed;
``schema/``, ``tag/``, ``consumer/`` and unknown directories are never touched; the same on S3
(moto's server on 127.0.0.1) with an injected clock; a dry run changes nothing."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, catalog_for
from support.s3_endpoint import S3Endpoint
from support.table_history import tree

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.errors import ConfigError, CorruptFileError
from paimond.format.meta.manifest import ManifestEntry
from paimond.lsm.rewrite import execute_compaction
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.plan import plan_compaction
from paimond.maintenance.expire.orphans import OrphanJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.table.catalog import Table, open_table
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.scan.snapshot_scan import scan_snapshot, verify_data_files
from paimond.table.storage.interface import open_storage

DAY_S = 86_400


def crash_a_compaction(table: Table) -> list[str]:
    """Rewrite every bucket as a full compaction would, then 'crash' before committing: the new
    data files exist, and so do the manifests of a commit that never wrote its snapshot."""
    plan = plan_compaction(table, full=True, moment=SYSTEM_CLOCK.local_now())
    results = [execute_compaction(task, table.storage, now_millis=SYSTEM_CLOCK.local_ms)
               for task in plan.tasks]
    written = [path for result in results for path in result.written_paths]
    writer = ManifestWriter(table.storage, table.path,
                            table.latest_schema().partition_type.field_types)
    added: list[ManifestEntry] = [e for result in results for e in result.added]
    metas = [writer.write_manifest(added)]
    writer.write_manifest_list(metas)
    written += writer.written
    temp = table.snapshots.path(99).replace("snapshot-99", ".snapshot-99.0d1e.tmp")
    table.storage.write_bytes(temp, b"{}")
    return [*written, temp]


def _age(paths: Any, seconds: float) -> None:
    moment = time.time() - seconds
    for path in paths:
        os.utime(path, (moment, moment))


def _age_tree(root: str, seconds: float) -> None:
    _age((os.path.join(d, f) for d, _, files in os.walk(root) for f in files), seconds)


def _readable_everywhere(warehouse: str, name: str, table: Table,
                         rows: dict[int, Any]) -> None:
    schema = table.latest_schema()
    for snapshot_id in table.snapshots.list_ids():
        verify_data_files(table, schema, scan_snapshot(table, table.snapshots.load(snapshot_id)))
        assert read_rows(warehouse, name, snapshot_id=snapshot_id).equals(rows[snapshot_id])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[int, Any]]:
    warehouse = tmp_path_factory.mktemp("orphans") / "wh"
    spec = build_pk_deduplicate(str(warehouse))
    storage = open_storage(str(warehouse))
    table = open_table(storage, storage.root, spec.name)
    CompactJob(table, clock=SYSTEM_CLOCK, full=False, use_processes=False).run()
    rows = {i: read_rows(str(warehouse), spec.name, snapshot_id=i)
            for i in table.snapshots.list_ids()}
    return warehouse, spec.name, rows


@pytest.fixture
def copy(pristine: tuple[Path, str, dict[int, Any]], tmp_path: Path
         ) -> tuple[str, Table, dict[int, Any]]:
    source, name, rows = pristine
    warehouse = tmp_path / "wh"
    shutil.copytree(source, warehouse)
    storage = open_storage(str(warehouse))
    return str(warehouse), open_table(storage, storage.root, name), rows


def test_crashed_compaction_files_go_once_older_than_the_window(
        copy: tuple[str, Table, dict[int, Any]]) -> None:
    warehouse, table, rows = copy
    _age_tree(table.path, 2 * DAY_S)  # everything committed is old
    orphans = crash_a_compaction(table)
    untouchable = [table.file_path("tag", ".tag-x.5e1f.tmp"), table.file_path("consumer", "stale"),
                   table.file_path("schema", ".schema-1.tmp"), table.file_path("notes", "README")]
    for path in untouchable:
        table.storage.write_bytes(path, b"not Paimon's")
    _age(untouchable, 30 * DAY_S)

    young = OrphanJob(table, clock=SYSTEM_CLOCK).run()  # the crash just happened
    assert young.removed.total_files == 0 and young.young_files == len(orphans)
    assert all(os.path.exists(p) for p in orphans)

    _age(orphans, 2 * DAY_S)
    result = OrphanJob(table, clock=SYSTEM_CLOCK).run()
    assert result.removed.total_files == len(orphans)
    assert result.removed.files["data"] == len(orphans) - 3 > 0
    assert result.removed.files["manifest"] == 1 and result.removed.files["manifest-list"] == 1
    assert result.removed.files["other"] == 1  # the snapshot temp file
    assert not any(os.path.exists(p) for p in orphans)
    assert all(os.path.exists(p) for p in untouchable)
    _readable_everywhere(warehouse, table.name, table, rows)
    assert OrphanJob(table, clock=SYSTEM_CLOCK).run().removed.total_files == 0


def test_dry_run_changes_nothing(copy: tuple[str, Table, dict[int, Any]],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, table, _ = copy
    _age_tree(table.path, 2 * DAY_S)
    orphans = crash_a_compaction(table)
    _age(orphans, 2 * DAY_S)
    before = tree(table.path)
    assert main(["remove-orphans", warehouse, "--table", table.name, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would remove {len(orphans)} orphan files" in out
    assert tree(table.path) == before
    assert main(["remove-orphans", warehouse, "--table", table.name]) == 0
    assert f"removed {len(orphans)} orphan files" in capsys.readouterr().out


def test_windows_under_an_hour_need_force(copy: tuple[str, Table, dict[int, Any]],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, table, rows = copy
    orphans = crash_a_compaction(table)
    _age(orphans, 120)
    now = SYSTEM_CLOCK.wall_ms()
    with pytest.raises(ConfigError, match="under one hour"):
        OrphanJob(table, clock=Clock(fixed_ms=now), older_than_ms=now - 60_000).run()
    with pytest.raises(ConfigError, match="earlier than now"):
        OrphanJob(table, clock=Clock(fixed_ms=now), older_than_ms=now, force=True).run()
    assert main(["remove-orphans", warehouse, "--table", table.name, "--older-than", "1 min"]) == 2
    assert "(use --force)" in capsys.readouterr().err  # the CLI names its flag
    assert main(["remove-orphans", warehouse, "--table", table.name, "--older-than", "1 min",
                 "--force"]) == 0
    assert not any(os.path.exists(p) for p in orphans)
    _readable_everywhere(warehouse, table.name, table, rows)


def test_tags_and_branches_keep_expired_snapshots_files(
        copy: tuple[str, Table, dict[int, Any]]) -> None:
    warehouse, table, rows = copy
    pypaimon_table = catalog_for(warehouse).get_table(table.name)
    pypaimon_table.create_tag("kept", 2)
    pypaimon_table.create_tag("base", 4)
    pypaimon_table.branch_manager().create_branch("side", "base")
    assert pypaimon_table.delete_tag("base")
    ExpireJob(table, clock=Clock(fixed_ms=4_102_444_800_000),
              settings=ExpireSettings(retain_min=1, time_retained_ms=0)).run()
    _age_tree(table.path, 2 * DAY_S)
    result = OrphanJob(table, clock=SYSTEM_CLOCK).run()
    assert result.removed.total_files == 0
    assert "2 tags" in result.describe() and "1 branches" in result.describe()
    for options, snapshot_id in (({"scan.tag-name": "kept"}, 2), ({"branch": "side"}, 4)):
        read = catalog_for(warehouse).get_table(table.name).copy(options)
        builder = read.new_read_builder()
        got = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        assert got.sort_by([(c, "ascending") for c in ("day", "tag", "id")]).equals(rows[snapshot_id])


def test_a_referenced_file_that_cannot_be_read_aborts_before_deleting(
        copy: tuple[str, Table, dict[int, Any]]) -> None:
    _, table, _ = copy
    _age_tree(table.path, 2 * DAY_S)
    orphans = crash_a_compaction(table)
    _age(orphans, 2 * DAY_S)
    latest = table.snapshots.latest()
    assert latest is not None
    Path(table.file_path("manifest", latest.delta_manifest_list)).write_bytes(b"garbage")
    with pytest.raises(CorruptFileError):
        OrphanJob(table, clock=SYSTEM_CLOCK).run()
    assert all(os.path.exists(p) for p in orphans)
    branch_schema = Path(table.file_path("branch", "branch-empty", "schema"))
    branch_schema.mkdir(parents=True)
    with pytest.raises(CorruptFileError, match="branch empty has no schema"):
        OrphanJob(table, clock=SYSTEM_CLOCK).run()


@pytest.mark.s3
def test_on_s3_with_an_injected_clock(s3_endpoint: S3Endpoint,
                                      pristine: tuple[Path, str, dict[int, Any]]) -> None:
    source, name, rows = pristine
    bucket = s3_endpoint.make_bucket("orphans")
    warehouse = f"{bucket}/wh"
    options = s3_endpoint.storage_options
    storage = open_storage(warehouse, options)
    for path in sorted(source.rglob("*")):  # the compacted pypaimon table, uploaded
        if path.is_file():
            storage.write_bytes(storage.join(warehouse, str(path.relative_to(source))),
                                path.read_bytes())
    table = open_table(storage, storage.root, name)
    orphans = crash_a_compaction(table)
    assert all(storage.exists(p) for p in orphans)

    young = OrphanJob(table, clock=SYSTEM_CLOCK).run()  # S3 mtimes are the upload time: young
    assert young.removed.total_files == 0 and young.young_files > len(orphans)
    # two days on, everything is past the window
    later = Clock(fixed_ms=SYSTEM_CLOCK.wall_ms() + 2 * DAY_S * 1000)
    dry = OrphanJob(table, clock=later, dry_run=True).run()
    assert dry.removed.total_files == len(orphans) and all(storage.exists(p) for p in orphans)
    result = OrphanJob(table, clock=later).run()
    assert result.removed.total_files == len(orphans)
    assert not any(storage.exists(p) for p in orphans)
    catalog_options = {"s3.endpoint": s3_endpoint.endpoint_url, "s3.access-key": options["key"],
                       "s3.secret-key": options["secret"], "s3.region": s3_endpoint.region,
                       "s3.path.style.access": "true"}
    ids = table.snapshots.list_ids()
    for snapshot_id in ids:
        verify_data_files(table, table.latest_schema(),
                          scan_snapshot(table, table.snapshots.load(snapshot_id)))
    for snapshot_id in (ids[0], ids[-1]):
        assert read_rows(warehouse, name, snapshot_id=snapshot_id,
                         catalog_options=catalog_options).equals(rows[snapshot_id])
