"""Test scaffolding for the expiration, manifest and orphan tests: synthetic table histories
committed through paimond's own commit path, Paimon-shaped tags and consumers, whole-tree
snapshots of a table directory, a storage that crashes after N deletions, and an independent
account of what retained snapshots and tags reference (from the scan functions, not from
``maintenance.expire.references``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import Schema

from paimond.clock import Clock
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.snapshot import Snapshot, encode_snapshot
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.scan.snapshot_scan import (
    LiveFile,
    data_file_path,
    read_index_manifest,
    read_manifest_list,
    scan_snapshot,
)
from paimond.table.storage.interface import open_storage
from support.pypaimon_tables import catalog_for

HISTORY_TABLE = "db.history"


def tree(path: str | Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``path`` (the whole directory tree)."""
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


def write_tag(table: Table, name: str, snapshot: Snapshot) -> None:
    """``tag/tag-<name>``: the snapshot JSON plus ``tagCreateTime`` (a LocalDateTime array), as
    Java's ``Tag`` writes it."""
    tagged = dataclasses.replace(snapshot, extra={**snapshot.extra,
                                                  "tagCreateTime": [2024, 1, 1, 0, 0, 0, 0]})
    table.storage.write_bytes(table.file_path("tag", f"tag-{name}"), encode_snapshot(tagged))


def write_consumer(table: Table, consumer_id: str, next_snapshot: int) -> None:
    table.storage.write_bytes(table.file_path("consumer", f"consumer-{consumer_id}"),
                              json.dumps({"nextSnapshot": next_snapshot}).encode())


class CrashAfterDeletes:
    """A Storage that raises ``Crash`` right after its ``limit``-th successful deletion."""

    class Crash(Exception):
        pass

    def __init__(self, inner: Any, limit: int | None) -> None:
        self._inner, self.limit, self.deleted = inner, limit, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete(self, path: str) -> bool:
        done = bool(self._inner.delete(path))
        if done:
            self.deleted += 1
            if self.limit is not None and self.deleted >= self.limit:
                raise CrashAfterDeletes.Crash(path)
        return done

    def delete_many(self, paths: Any, on_deleted: Any = None) -> None:
        """One by one, so the crash comes right after the ``limit``-th file that was there."""
        for path in paths:
            if self.delete(path) and on_deleted is not None:
                on_deleted(path)


def references(table: Table, snapshot: Snapshot) -> tuple[set[str], set[str]]:
    """(metadata file names, data file paths) that ``snapshot`` needs: its manifest lists,
    every manifest they name, its index manifest and index files; its live data files (and
    their extra files)."""
    where = table.snapshots.path(snapshot.id)
    metadata = set(snapshot.manifest_lists())
    for name in snapshot.manifest_lists():
        metadata |= {m.file_name for m in read_manifest_list(table, name, where)}
    if snapshot.index_manifest:
        metadata.add(snapshot.index_manifest)
        metadata |= {e.index_file.file_name for e in read_index_manifest(table, snapshot)}
    schema = table.latest_schema()
    data = set()
    for live in scan_snapshot(table, snapshot).files:
        path = data_file_path(table, schema, live)
        data.add(path)
        data |= {path.rsplit("/", 1)[0] + "/" + extra for extra in live.meta.extra_files}
    return metadata, data


def kept_snapshots(table: Table) -> list[Snapshot]:
    """Every snapshot file present plus every tag."""
    return ([table.snapshots.load(i) for i in table.snapshots.list_ids()]
            + list(table.tags().values()))


def files_on_storage(table: Table) -> tuple[set[str], set[str]]:
    """(names under manifest/, index/ and statistics/, paths of files in bucket directories)."""
    metadata = set()
    for directory in ("manifest", "index", "statistics"):
        path = Path(table.path) / directory
        metadata |= {p.name for p in path.iterdir()} if path.exists() else set()
    data = {str(p) for p in Path(table.path).rglob("bucket-*/*") if p.is_file()}
    return metadata, data


def assert_exactly_referenced(table: Table) -> None:
    """Nothing a kept snapshot or tag needs is missing, and nothing else is left."""
    needed_metadata: set[str] = set()
    needed_data: set[str] = set()
    for snapshot in kept_snapshots(table):
        metadata, data = references(table, snapshot)
        needed_metadata |= metadata
        needed_data |= data
    present_metadata, present_data = files_on_storage(table)
    assert needed_metadata - present_metadata == set(), "referenced metadata deleted"
    assert needed_data - present_data == set(), "referenced data files deleted"
    assert present_metadata - needed_metadata == set(), "unreferenced metadata leaked"
    assert present_data - needed_data == set(), "unreferenced data files leaked"


@dataclasses.dataclass
class History:
    """A partitioned append table whose history is made of synthetic commits: each data file
    is a copy of one real parquet file pypaimon wrote, so readers still work."""

    table: Table
    warehouse: str
    templates: list[ManifestEntry]  # one live file per partition, from pypaimon's commit
    template_bytes: dict[str, bytes]  # their content, kept aside: expiration may delete them
    clock_ms: int = 1_700_000_000_000
    tags: int = 0

    @classmethod
    def create(cls, warehouse: str, options: dict[str, str] | None = None) -> History:
        schema = pa.schema([("p", pa.string()), ("id", pa.int64()), ("v", pa.string())])
        catalog = catalog_for(warehouse)
        catalog.create_database("db", True)
        catalog.create_table(HISTORY_TABLE, Schema.from_pyarrow_schema(
            schema, partition_keys=["p"],
            options={"bucket": "-1", "file.format": "parquet", **(options or {})}), False)
        pt = catalog.get_table(HISTORY_TABLE)
        builder = pt.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"p": ["a", "a", "b"], "id": [1, 2, 3], "v": ["x", "y", "z"]},
                                   schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
        table = open_table(open_storage(warehouse), warehouse, HISTORY_TABLE)
        latest = table.snapshots.latest()
        assert latest is not None
        files = scan_snapshot(table, latest).files
        schema = table.latest_schema()
        content = {f.meta.file_name: table.storage.read_bytes(data_file_path(table, schema, f))
                   for f in files}
        return cls(table, warehouse, [f.entry for f in files], content)

    def reopen(self, warehouse: str) -> History:
        table = open_table(open_storage(warehouse), warehouse, HISTORY_TABLE)
        return dataclasses.replace(self, table=table, warehouse=warehouse)

    def _committer(self, kind: str, advance_ms: int) -> Committer:
        self.clock_ms += advance_ms
        return Committer(self.table, commit_kind=kind, check_conflicts=kind != "APPEND",
                         clock=Clock(fixed_ms=self.clock_ms))

    def _new_file(self, template: ManifestEntry, level: int = 0) -> ManifestEntry:
        schema = self.table.latest_schema()
        name = f"data-{uuid.uuid4()}-0.parquet"
        target = data_file_path(self.table, schema, LiveFile(dataclasses.replace(
            template, file=dataclasses.replace(template.file, file_name=name)), "template"))
        source = next(t for t in self.templates if t.partition == template.partition)
        self.table.storage.write_bytes(target, self.template_bytes[source.file.file_name])
        return dataclasses.replace(template, kind=FILE_KIND_ADD, file=dataclasses.replace(
            template.file, file_name=name, level=level))

    def live(self) -> list[ManifestEntry]:
        latest = self.table.snapshots.latest()
        return [f.entry for f in scan_snapshot(self.table, latest).files] if latest else []

    def write(self, rng: random.Random, files: int, advance_ms: int) -> None:
        added = [self._new_file(rng.choice(self.templates)) for _ in range(files)]
        self._committer("APPEND", advance_ms).commit(CommitChanges(added=added))

    def compact(self, rng: random.Random, advance_ms: int) -> bool:
        """Rewrite 2+ live files of one partition into one new file."""
        by_partition: dict[bytes, list[ManifestEntry]] = {}
        for entry in self.live():
            by_partition.setdefault(entry.partition, []).append(entry)
        choices = [entries for entries in by_partition.values() if len(entries) >= 2]
        if not choices:
            return False
        entries = rng.choice(choices)
        inputs = rng.sample(entries, rng.randint(2, len(entries)))
        output = self._new_file(inputs[0], level=1)
        self._committer("COMPACT", advance_ms).commit(CommitChanges(deleted=inputs,
                                                                    added=[output]))
        return True

    def upgrade(self, rng: random.Random, advance_ms: int) -> bool:
        """Move one live file up a level in metadata only (a DELETE and an ADD of one file)."""
        live = self.live()
        if not live:
            return False
        entry = rng.choice(live)
        moved = dataclasses.replace(entry, file=dataclasses.replace(
            entry.file, level=entry.file.level + 1))
        self._committer("COMPACT", advance_ms).commit(CommitChanges(deleted=[entry],
                                                                    added=[moved]))
        return True

    def tag_latest(self) -> None:
        latest = self.table.snapshots.latest()
        assert latest is not None
        self.tags += 1
        write_tag(self.table, f"t{self.tags}", latest)

