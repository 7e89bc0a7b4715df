"""Deleting a tag deletes the files only it kept (Java ``TagManager.deleteTag`` with
``TagDeletion``), crash-safe.

Tables written by pypaimon (a partitioned fixed-bucket primary-key table, retired files from
a partition overwrite and a full compaction; a dynamic-bucket table, whose hash index files
make index manifests), tags on snapshots that snapshot expiry then removes, the tags deleted
by hand and by retention. The oracle: an independent account of every file the remaining
snapshots, tags and changelogs reach, read with pypaimon's own manifest readers, must equal
the files on disk (nothing referenced is missing, nothing unreferenced is left), the files
only the deleted tag reached must be gone, and every remaining snapshot and tag must read
with pypaimon (and Java) as a row model of the writes says. Killed at each crash point, a
rerun (or the tags job) finishes the deletion.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon import Schema
from pypaimon.manifest.index_manifest_file import IndexManifestFile
from pypaimon.manifest.manifest_file_manager import ManifestFileManager
from pypaimon.manifest.manifest_list_manager import ManifestListManager
from support import warm_python
from support.java_reader import JavaReader, canonical_rows
from support.pypaimon_tables import catalog_for
from support.table_garbage import unreferenced_files

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.maintenance.tags.job import create_tag, delete_tag
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage
from paimond.table.tags import list_tags

NAME = "db.t"
HOUR_MS, DAY_MS = 3_600_000, 86_400_000
NOW_MS = int(time.time() * 1000) + DAY_MS  # after every commit pypaimon makes here
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False), ("v", pa.string())])
STATE_DIRS = {"schema", "snapshot", "tag", "consumer", "branch", "changelog"}
Rows = dict[tuple[int, str], str]


# ---- building tables -----------------------------------------------------------------------


@dataclass
class Built:
    warehouse: str
    kind: str
    rows: dict[int, Rows] = field(default_factory=dict)  # snapshot id -> rows (the model)

    @property
    def table(self) -> Table:
        return open_table(open_storage(self.warehouse), self.warehouse, NAME)


def _write(py_table: Any, rows: list[tuple[int, str, str]], overwrite: dict[str, str] | None
           = None, *, whole: bool = False) -> None:
    builder = py_table.new_batch_write_builder()
    if overwrite is not None or whole:
        builder = builder.overwrite(overwrite)
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist(
        [{"id": i, "dt": dt, "v": v} for i, dt, v in rows], schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def build(warehouse: Path, kind: str) -> Built:
    """Snapshots 1..6, tags t2 and t2b on 2 and t4 (retained 1 h) on 5 (merged manifests),
    then snapshot expiry down to snapshot 6: t2 alone keeps the files the overwrite (and
    compaction) retired at 3 (4) and their manifests, t4 those only snapshot 5 named."""
    catalog = catalog_for(str(warehouse))
    catalog.create_database("db", True)
    if kind == "fixed":
        schema = Schema.from_pyarrow_schema(SCHEMA, partition_keys=["dt"],
                                            primary_keys=["id", "dt"], options={
            "bucket": "2", "write-only": "true", "snapshot.clean-empty-directories": "true"})
        dts = ("a", "b")
    else:
        schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
            "bucket": "-1", "write-only": "true"})
        dts = ("a",)
    catalog.create_table(NAME, schema, False)
    py_table = catalog.get_table(NAME)
    built = Built(str(warehouse), kind)
    table = built.table
    clock = Clock(fixed_ms=NOW_MS)
    model: Rows = {}

    def commit(rows: list[tuple[int, str, str]], overwrite: str | None = None) -> None:
        if overwrite is not None:
            for key in [k for k in model if k[1] == overwrite]:
                del model[key]
        if kind == "fixed" or overwrite is None:
            _write(py_table, rows, None if overwrite is None else {"dt": overwrite})
        else:
            _write(py_table, rows, whole=True)
        model.update({(i, dt): v for i, dt, v in rows})
        built.rows[table.snapshots.latest_id() or 0] = dict(model)

    commit([(i, dts[i % len(dts)], f"v{i}") for i in range(1, 9)])
    commit([(i, dts[i % len(dts)], f"w{i}") for i in range(5, 13)])
    create_tag(table, clock=clock, name="t2")
    create_tag(table, clock=clock, name="t2b")
    commit([(20, "a", "x20"), (21, "a", "x21")], overwrite="a")
    if kind == "fixed":
        CompactJob(table, full=True, use_processes=False, clock=clock).run()
        built.rows[table.snapshots.latest_id() or 0] = dict(model)
    else:
        commit([(30, "a", "y30")])
    merge = JOBS["merge_manifests"]  # t4's manifests name its live files only
    merge.run(table, merge.settings(), JobContext(clock))
    assert table.snapshots.latest_id() == 5
    built.rows[5] = dict(model)
    create_tag(table, clock=clock, name="t4", time_retained_ms=HOUR_MS)
    commit([(1, dts[1 % len(dts)], "z1"), (40, "a", "z40")])
    ExpireJob(table, clock=clock, settings=ExpireSettings(
        retain_min=1, retain_max=1, time_retained_ms=0)).run()
    assert table.snapshots.list_ids() == [6]
    return built


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("templates")
    out = {}
    for kind in ("fixed", "dynamic"):
        built = build(root / kind, kind)
        assert built.rows == _model_rows(kind)
        out[kind] = Path(built.warehouse)
    return out


def copy_of(templates: dict[str, Path], kind: str, tmp_path: Path) -> Built:
    target = tmp_path / kind
    shutil.copytree(templates[kind], target)
    return Built(str(target), kind, _model_rows(kind))


def _model_rows(kind: str) -> dict[int, Rows]:
    """The rows each snapshot holds, as :func:`build` wrote them."""
    dts = ("a", "b") if kind == "fixed" else ("a",)
    rows: dict[int, Rows] = {}
    model: Rows = {(i, dts[i % len(dts)]): f"v{i}" for i in range(1, 9)}
    rows[1] = dict(model)
    model.update({(i, dts[i % len(dts)]): f"w{i}" for i in range(5, 13)})
    rows[2] = dict(model)
    model = {k: v for k, v in model.items() if k[1] != "a"}
    model.update({(20, "a"): "x20", (21, "a"): "x21"})
    rows[3] = dict(model)
    if kind == "dynamic":
        model[(30, "a")] = "y30"
    rows[4] = dict(model)
    rows[5] = dict(model)
    model.update({(1, dts[1 % len(dts)]): "z1", (40, "a"): "z40"})
    rows[6] = dict(model)
    return rows


# ---- the independent model: what the remaining snapshots and tags reach --------------------


def reachable(warehouse: str) -> dict[str, set[str]]:
    """Per remaining snapshot, tag and changelog (by its file), every file name it reaches,
    read with pypaimon's manifest readers from the JSON files on disk."""
    py_table = catalog_for(warehouse).get_table(NAME)
    lists, manifests = ManifestListManager(py_table), ManifestFileManager(py_table)
    root = Path(py_table.table_path.removeprefix("file://"))
    out: dict[str, set[str]] = {}
    for directory in ("snapshot", "tag", "changelog"):
        folder = root / directory
        for path in sorted(folder.glob("*-*")) if folder.is_dir() else []:
            raw = json.loads(path.read_text())
            names: set[str] = set()
            for key in ("baseManifestList", "deltaManifestList", "changelogManifestList"):
                name = raw.get(key)
                if not name:
                    continue
                if key == "changelogManifestList" and not (root / "manifest" / name).exists():
                    continue  # Paimon deletes a tag's changelog list with its snapshot
                names.add(name)
                for meta in lists.read(name):
                    names.add(meta.file_name)
                    for entry in manifests.read(meta.file_name, drop_stats=False):
                        names.add(entry.file.file_name)
                        names.update(entry.file.extra_files or [])
            if raw.get("indexManifest"):
                names.add(raw["indexManifest"])
                names.update(e.index_file.file_name
                             for e in IndexManifestFile(py_table).read(raw["indexManifest"]))
            if raw.get("statistics"):
                names.add(raw["statistics"])
            out[f"{directory}/{path.name}"] = names
    return out


def files_on_disk(warehouse: str) -> dict[str, str]:
    """File name -> table-relative path of every file outside the state directories."""
    root = Path(warehouse) / "db.db" / "t"
    return {p.name: str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).parts[0] not in STATE_DIRS}


def _all(reach: dict[str, set[str]]) -> set[str]:
    return set().union(*reach.values()) if reach else set()


def _py_rows(warehouse: str, options: dict[str, str]) -> list[dict[str, Any]]:
    table = catalog_for(warehouse).get_table(NAME).copy(options)
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: (r["id"], r["dt"]))


def _expected(rows: Rows) -> list[dict[str, Any]]:
    return sorted(({"id": i, "dt": dt, "v": v} for (i, dt), v in rows.items()),
                  key=lambda r: (r["id"], r["dt"]))


def check(built: Built, java: JavaReader | None = None) -> dict[str, set[str]]:
    """The files on disk are exactly what the remaining snapshots and tags reach, and each of
    them reads as the model says."""
    reach = reachable(built.warehouse)
    disk = files_on_disk(built.warehouse)
    used = _all(reach)
    assert sorted(used - set(disk)) == []  # nothing referenced is missing
    assert sorted(disk[n] for n in set(disk) - used) == []  # nothing unreferenced is left
    assert unreferenced_files(built.warehouse, NAME) == []
    table = built.table
    targets: list[tuple[dict[str, str], dict[str, Any], int]] = [
        ({"scan.snapshot-id": str(i)}, {"snapshot_id": i}, i) for i in table.snapshots.list_ids()]
    targets += [({"scan.tag-name": t.name}, {"tag": t.name}, t.snapshot.id)
                for t in list_tags(table)]
    for py_options, java_options, snapshot_id in targets:
        expected = _expected(built.rows[snapshot_id])
        assert _py_rows(built.warehouse, py_options) == expected, py_options
        if java is not None:
            assert sorted(java.read_rows(table.path, **java_options)) == sorted(
                canonical_rows(pa.Table.from_pylist(expected, schema=SCHEMA))), java_options
    return reach


def _only(reach: dict[str, set[str]], key: str) -> set[str]:
    return reach[key] - _all({k: v for k, v in reach.items() if k != key})


# ---- deleting tags -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fixed", "dynamic"])
def test_deleting_a_tag_deletes_what_only_it_kept(templates: dict[str, Path], tmp_path: Path,
                                                   kind: str, java_reader: JavaReader) -> None:
    built = copy_of(templates, kind, tmp_path)
    table, clock = built.table, Clock(fixed_ms=NOW_MS)
    reach = check(built, java_reader)
    # t2 and t2b pin the same expired snapshot: deleting one deletes its file only.
    assert reach["tag/tag-t2"] == reach["tag/tag-t2b"]
    before = files_on_disk(built.warehouse)
    result = delete_tag(table, clock=clock, name="t2")
    assert result.files.total_files == 0
    assert files_on_disk(built.warehouse) == before
    reach = check(built, java_reader)

    # t2b alone keeps the files snapshot 3 retired and its own manifests and lists.
    only_t2b = _only(reach, "tag/tag-t2b")
    disk = files_on_disk(built.warehouse)
    retired_data = {n for n in only_t2b if n.startswith("data-")}
    assert retired_data and any(n.startswith("manifest-list-") for n in only_t2b)
    if kind == "dynamic":
        assert any(disk[n].startswith("index/") for n in only_t2b)  # a replaced hash index
    dry = delete_tag(table, clock=clock, name="t2b", dry_run=True)
    assert dry.files.total_files == len(only_t2b) and "would delete" in dry.describe()
    assert files_on_disk(built.warehouse) == disk
    result = delete_tag(table, clock=clock, name="t2b")
    assert result.files.total_files == len(only_t2b)
    assert "deleted" in result.describe()
    assert not only_t2b & set(files_on_disk(built.warehouse))
    reach = check(built, java_reader)

    # Retention deletes t4 (retained 1 h) the same way.
    only_t4 = _only(reach, "tag/tag-t4")
    assert only_t4
    expire = JOBS["expire_tags"]
    report = expire.run(table, expire.settings(), JobContext(Clock(fixed_ms=NOW_MS + 2 * HOUR_MS)))
    assert [a.name for a in report.result.done] == ["t4"]
    assert report.result.files.total_files == len(only_t4)
    reach = check(built, java_reader)
    assert list(reach) == ["snapshot/snapshot-6"]
    assert not any(p.startswith(".paimond/jobs/") for p in files_on_disk(built.warehouse).values())


def test_a_tag_on_a_live_snapshot_deletes_its_file_only(templates: dict[str, Path],
                                                        tmp_path: Path) -> None:
    built = copy_of(templates, "fixed", tmp_path)
    table, clock = built.table, Clock(fixed_ms=NOW_MS)
    create_tag(table, clock=clock, name="t5")
    before = files_on_disk(built.warehouse)
    result = delete_tag(table, clock=clock, name="t5")
    assert [a.name for a in result.done] == ["t5"] and result.files.total_files == 0
    assert files_on_disk(built.warehouse) == before
    check(built)


def test_num_retained_max_deletes_the_oldest_with_its_files(templates: dict[str, Path],
                                                            tmp_path: Path) -> None:
    """The automatic tags' count limit goes through the same deletion: t2 renamed to an
    automatic daily name is the oldest of two automatic tags with a limit of one."""
    built = copy_of(templates, "fixed", tmp_path)
    table, clock = built.table, Clock(fixed_ms=NOW_MS)
    delete_tag(table, clock=clock, name="t2b")
    tag_dir = Path(table.path) / "tag"
    os.rename(tag_dir / "tag-t2", tag_dir / "tag-2000-01-01")
    reach = check(built)
    only = _only(reach, "tag/tag-2000-01-01")
    assert only
    schema_path = Path(table.path) / "schema/schema-0"
    raw = json.loads(schema_path.read_text())
    raw["options"].update({"tag.automatic-creation": "process-time", "tag.num-retained-max": "1"})
    schema_path.write_text(json.dumps(raw))
    table = built.table  # reads the options again
    result = JOBS["tags"].run(table, JOBS["tags"].settings(), JobContext(clock)).result
    assert [(a.create, a.name) for a in result.done][-1] == (False, "2000-01-01")
    assert {t.snapshot.id for t in list_tags(table)} == {5, 6}  # t4 and the new daily tag
    assert result.files.total_files == len(only)
    assert not only & set(files_on_disk(built.warehouse))
    check(built)


# ---- crash safety --------------------------------------------------------------------------

_DELETE = f"""
import sys
from paimond.clock import Clock
from paimond.maintenance.tags.job import delete_tag
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
table = open_table(open_storage(sys.argv[1]), sys.argv[1], {NAME!r})
delete_tag(table, clock=Clock(fixed_ms={NOW_MS}), name=sys.argv[2])
"""

_TAGS_JOB = f"""
import sys
from paimond.clock import Clock
from paimond.maintenance.tags.job import TagsJob
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
table = open_table(open_storage(sys.argv[1]), sys.argv[1], {NAME!r})
TagsJob(table, clock=Clock(fixed_ms={NOW_MS})).run()
"""


@pytest.mark.parametrize(("crash_at", "rerun"), [
    ("tags.deletion_noted", "delete"), ("tags.tag_deleted", "delete"),
    ("tags.tag_deleted", "tags-job"), ("tags.file_deleted:1", "delete"),
    ("tags.file_deleted:4", "tags-job"), ("tags.directories_removed", "delete"),
])
def test_a_killed_deletion_is_finished_by_the_next_run(templates: dict[str, Path],
                                                       tmp_path: Path, crash_at: str,
                                                       rerun: str) -> None:
    built = copy_of(templates, "fixed", tmp_path)
    delete_tag(built.table, clock=Clock(fixed_ms=NOW_MS), name="t2")  # t2b alone pins 2 now
    reach = check(built)
    only = _only(reach, "tag/tag-t2b")
    command = ["-c", _DELETE, built.warehouse, "t2b"]  # forked from the warm server
    killed = warm_python.run(command, {**os.environ, "PAIMOND_CRASH_AT": crash_at})
    assert killed.returncode == 137, killed.stderr
    # Whatever is left reads, and nothing any remaining snapshot or tag names is missing.
    left = reachable(built.warehouse)
    assert not _all(left) - set(files_on_disk(built.warehouse))
    if crash_at == "tags.deletion_noted":
        assert "tag/tag-t2b" in left
    else:
        assert "tag/tag-t2b" not in left
        assert only & set(files_on_disk(built.warehouse)) or crash_at == "tags.directories_removed"
    again = ["-c", _DELETE if rerun == "delete" else _TAGS_JOB, built.warehouse, "t2b"]
    done = warm_python.run(again)
    assert done.returncode == 0, done.stderr
    assert [t.name for t in list_tags(built.table)] == ["t4"]
    assert not only & set(files_on_disk(built.warehouse))
    check(built)
