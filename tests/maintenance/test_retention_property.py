"""Retention over random histories: pypaimon commits into a date-partitioned primary-key table
(commit times set in the snapshot files, an injected clock moving forward), tags by hand and
by the ``tags`` job, consumer files written, updated and removed by hand and expired by
``expire_consumers``, ``expire_partitions``, snapshot ``expire`` with small retention, full and
minor ``compact`` and ``merge_manifests``, all run through the job registry.

After every step an independent model, written here on JSON and fastavro (not paimond's
readers nor its reference code), checks: every file named by a snapshot, a tag or a long-lived
changelog is on disk (manifest lists, manifests, live data files; for a changelog of a table
without a producer, its delta list, manifests and the data files its APPEND delta added);
every snapshot that existed and that a live consumer still reads (id >= its ``nextSnapshot``)
is kept; every snapshot and tag reads with pypaimon as the rows the model says it holds (rows
as committed, minus the partitions each drop removed from its snapshot on); snapshot and
changelog ids are contiguous and ``EARLIEST``/``LATEST`` name the ends; a snapshot or tag file
never changes; expired consumers are exactly the ones modified before now minus
``consumer.expiration-time``.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for

from paimond.clock import Clock
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

NAME = "db.t"
MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
START_MS = int(datetime.datetime(2024, 1, 10, tzinfo=datetime.timezone.utc).timestamp() * 1000)
SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                    pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
CONSUMER_EXPIRATION_MS = HOUR_MS
PARTITION_EXPIRATION_DAYS = 2
OPTIONS = {
    "bucket": "1", "write-only": "true",
    "partition.expiration-time": f"{PARTITION_EXPIRATION_DAYS} d",
    "partition.timestamp-formatter": "yyyyMMdd",
    "tag.automatic-creation": "process-time", "sink.process-time-zone": "UTC",
    "tag.num-retained-max": "2",
    "consumer.expiration-time": "1 h",
}
# Above every snapshot override below: the changelog is decoupled, so expired snapshots stay as
# changelog/changelog-<id> with what their changelog needs, until changelog expiry.
DECOUPLED = {"changelog.num-retained.min": "4", "changelog.num-retained.max": "4"}
Row = tuple[str, int, str]


# ---- steps ---------------------------------------------------------------------------------

# Steps come from a seeded generator (hypothesis draws the seeds): with a dozen examples,
# hypothesis' own list strategies stay near their simplest values (one-row commits a minute
# apart) and rarely expire anything. A failure prints the seed and the steps.
WEIGHTS = {"commit": 6, "advance": 2, "create_tag": 2, "delete_tag": 2, "tags": 2,
           "consumer": 1, "remove_consumer": 1, "expire_consumers": 2, "expire_partitions": 2,
           "expire": 5, "compact": 4, "merge_manifests": 2}


def random_steps(rng: random.Random, count: int) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    for kind in rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=count):
        if kind == "commit":  # rows, days before today, minutes the clock moves first
            steps.append((kind, rng.randint(1, 3), rng.randint(0, 3), rng.randint(1, 600)))
        elif kind == "advance":  # hours
            steps.append((kind, rng.randint(1, 30)))
        elif kind in ("create_tag", "delete_tag"):  # which snapshot or tag
            steps.append((kind, rng.randint(0, 10)))
        elif kind == "consumer":  # consumer id, nextSnapshot = latest + 1 - this
            steps.append((kind, rng.randint(0, 2), rng.randint(0, 6)))
        elif kind == "remove_consumer":
            steps.append((kind, rng.randint(0, 2)))
        elif kind == "expire":  # retain min, max - min, time retained (minutes), max deletes
            steps.append((kind, rng.randint(1, 3), rng.randint(0, 2), rng.choice([0, 0, 60]),
                          rng.randint(1, 10)))
        elif kind == "compact":  # full
            steps.append((kind, rng.random() < 0.7))
        else:
            steps.append((kind,))
    return steps


# ---- the independent file model (JSON and fastavro) ----------------------------------------


def _avro(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as stream:
        return [record for record in fastavro.reader(io.BytesIO(stream.read()))
                if isinstance(record, dict)]


def _partition_value(raw: bytes) -> str:
    """The one STRING field of a serialized partition: 4-byte arity, then a BinaryRow (8-byte
    header with the null bits, one 8-byte slot; strings over 7 bytes live after the slot,
    named by offset << 32 | length, shorter ones inline with the top bit set)."""
    row = raw[4:]
    (slot,) = struct.unpack_from("<Q", row, 8)
    if slot >> 63:
        return row[8:8 + ((slot >> 56) & 0x7F)].decode()
    offset, length = slot >> 32, slot & 0xFFFFFFFF
    return row[offset:offset + length].decode()


@dataclass
class Refs:
    metadata: set[str] = field(default_factory=set)  # names under manifest/
    data: set[str] = field(default_factory=set)  # paths relative to the table


def _manifest_entries(table_dir: Path, list_name: str, refs: Refs) -> list[dict[str, Any]]:
    """The entries of a manifest list's manifests, in order; a file that is gone is only noted
    in ``refs`` (the presence check names it)."""
    refs.metadata.add(list_name)
    entries = []
    manifest_dir = table_dir / "manifest"
    for meta in _avro(manifest_dir / list_name) if (manifest_dir / list_name).exists() else []:
        refs.metadata.add(meta["_FILE_NAME"])
        if (manifest_dir / meta["_FILE_NAME"]).exists():
            entries += _avro(manifest_dir / meta["_FILE_NAME"])
    return entries


def _data_paths(entry: dict[str, Any]) -> set[str]:
    directory = f"dt={_partition_value(entry['_PARTITION'])}/bucket-{entry['_BUCKET']}"
    file = entry["_FILE"]
    return {f"{directory}/{name}" for name in [file["_FILE_NAME"], *(file["_EXTRA_FILES"] or [])]}


def snapshot_refs(table_dir: Path, snapshot: dict[str, Any], refs: Refs) -> None:
    """A snapshot's (or tag's) lists, manifests and live data files: base then delta entries,
    an ADD adding and a DELETE removing its (partition, bucket, level, name)."""
    live: dict[tuple[bytes, int, int, str], dict[str, Any]] = {}
    for list_name in (snapshot["baseManifestList"], snapshot["deltaManifestList"]):
        for entry in _manifest_entries(table_dir, list_name, refs):
            key = (entry["_PARTITION"], entry["_BUCKET"], entry["_FILE"]["_LEVEL"],
                   entry["_FILE"]["_FILE_NAME"])
            if entry["_KIND"] == 0:
                assert key not in live, f"{key} added twice"
                live[key] = entry
            else:
                live.pop(key, None)
    if snapshot.get("changelogManifestList"):
        _manifest_entries(table_dir, snapshot["changelogManifestList"], refs)
    assert not snapshot.get("indexManifest"), "no index expected on this table"
    for entry in live.values():
        refs.data |= _data_paths(entry)


def changelog_refs(table_dir: Path, changelog: dict[str, Any], refs: Refs) -> None:
    """Without a changelog producer a streaming reader of a changelog reads its delta: the
    list, its manifests and, for an APPEND, the data files it added."""
    for entry in _manifest_entries(table_dir, changelog["deltaManifestList"], refs):
        if entry["_KIND"] == 0 and changelog["commitKind"] == "APPEND":
            refs.data |= _data_paths(entry)


def all_refs(table_dir: Path) -> Refs:
    """What every snapshot, tag and long-lived changelog on disk names."""
    refs = Refs()
    for snapshot_id in snapshot_ids(table_dir):
        path = table_dir / "snapshot" / f"snapshot-{snapshot_id}"
        snapshot_refs(table_dir, json.loads(path.read_text()), refs)
    for tag in tags_on_disk(table_dir).values():
        snapshot_refs(table_dir, tag, refs)
    for path in _numbered(table_dir / "changelog", "changelog-").values():
        changelog_refs(table_dir, json.loads(path.read_text()), refs)
    return refs


def _numbered(directory: Path, prefix: str) -> dict[int, Path]:
    if not directory.exists():
        return {}
    return {int(p.name[len(prefix):]): p for p in directory.iterdir()
            if p.name.startswith(prefix) and p.name[len(prefix):].isdigit()}


def _hint(directory: Path, name: str) -> int | None:
    path = directory / name
    return int(path.read_text().strip()) if path.exists() else None


def snapshot_ids(table_dir: Path) -> list[int]:
    return sorted(_numbered(table_dir / "snapshot", "snapshot-"))


def tags_on_disk(table_dir: Path) -> dict[str, dict[str, Any]]:
    directory = table_dir / "tag"
    if not directory.exists():
        return {}
    return {p.name[len("tag-"):]: json.loads(p.read_text()) for p in directory.iterdir()
            if p.name.startswith("tag-")}


def consumers_on_disk(table_dir: Path) -> dict[str, tuple[int, float]]:
    directory = table_dir / "consumer"
    if not directory.exists():
        return {}
    return {p.name[len("consumer-"):]: (json.loads(p.read_text())["nextSnapshot"],
                                        p.stat().st_mtime)
            for p in directory.iterdir() if p.name.startswith("consumer-")}


# ---- the history ---------------------------------------------------------------------------


class History:
    def __init__(self, warehouse: Path, options: dict[str, str]) -> None:
        self.warehouse = str(warehouse)
        catalog = catalog_for(self.warehouse)
        catalog.create_database("db", True)
        catalog.create_table(NAME, Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"], options=options), False)
        self.py_table = catalog.get_table(NAME)
        self.table = open_table(open_storage(self.warehouse), self.warehouse, NAME)
        self.dir = Path(self.table.path)
        self.now_ms = START_MS
        self.commits = 0
        self.tags_made = 0
        self.current: dict[tuple[str, int], str] = {}  # the rows at the latest snapshot
        self.rows_at: dict[int, frozenset[Row]] = {}  # snapshot id -> its rows
        self.files_seen: dict[str, bytes] = {}  # snapshot and tag files, as first seen
        self.checked: set[str] = set()  # snapshots and tags read by pypaimon since a deletion

    # -- the model's bookkeeping

    def _record_new_snapshots(self) -> None:
        known = max(self.rows_at, default=0)
        for snapshot_id in snapshot_ids(self.dir):
            if snapshot_id > known:
                self.rows_at[snapshot_id] = frozenset(
                    (dt, id_, v) for (dt, id_), v in self.current.items())

    def _local_date(self, days_back: int = 0) -> datetime.date:
        now = datetime.datetime.fromtimestamp(self.now_ms / 1000)
        return now.date() - datetime.timedelta(days=days_back)

    def _run(self, job: str, **settings: Any) -> Any:
        spec = JOBS[job]
        return spec.run(self.table, spec.settings(**settings),
                        JobContext(Clock(fixed_ms=self.now_ms))).result

    # -- the steps

    def commit(self, rows: int, days_back: int, advance_min: int) -> None:
        self.now_ms += advance_min * MINUTE_MS
        self.commits += 1
        dt = self._local_date(days_back).strftime("%Y%m%d")
        batch: list[dict[str, Any]] = [
            {"dt": dt, "id": (self.commits + i) % 4, "v": f"c{self.commits}-{i}"}
            for i in range(rows)]
        builder = self.py_table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        try:
            write.write_arrow(pa.Table.from_pylist(batch, schema=SCHEMA))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
        latest = max(snapshot_ids(self.dir))
        path = self.dir / "snapshot" / f"snapshot-{latest}"
        raw = json.loads(path.read_text())
        assert raw["commitKind"] == "APPEND"
        raw["timeMillis"] = self.now_ms
        path.write_text(json.dumps(raw, indent=2))
        for row in batch:
            self.current[(row["dt"], row["id"])] = row["v"]
        self._record_new_snapshots()

    def step(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "commit":
            self.commit(op[1], op[2], op[3])
        elif kind == "advance":
            self.now_ms += op[1] * HOUR_MS
        elif kind == "create_tag":
            ids = snapshot_ids(self.dir)
            self.tags_made += 1
            self._run("create_tag", tag=f"manual-{self.tags_made}", snapshot_id=ids[op[1] % len(ids)])
        elif kind == "delete_tag":
            names = sorted(tags_on_disk(self.dir))
            if names:
                self._run("delete_tag", tag=names[op[1] % len(names)])
        elif kind == "tags":
            self._run("tags")
        elif kind == "consumer":
            latest = max(snapshot_ids(self.dir))
            path = self.dir / "consumer" / f"consumer-c{op[1]}"
            path.parent.mkdir(exist_ok=True)
            path.write_text(json.dumps({"nextSnapshot": max(1, latest + 1 - op[2])}))
            os.utime(path, (self.now_ms / 1000, self.now_ms / 1000))
        elif kind == "remove_consumer":
            (self.dir / "consumer" / f"consumer-c{op[1]}").unlink(missing_ok=True)
        elif kind == "expire_consumers":
            self._expire_consumers()
        elif kind == "expire_partitions":
            # Java values-time: a day expires when its midnight is strictly before local now
            # minus the expiration time.
            threshold = (datetime.datetime.fromtimestamp(self.now_ms / 1000)
                         - datetime.timedelta(days=PARTITION_EXPIRATION_DAYS))
            kept = {k: v for k, v in self.current.items()
                    if datetime.datetime.strptime(k[0], "%Y%m%d") >= threshold}
            latest = max(snapshot_ids(self.dir))
            self._run("expire_partitions")
            dropped = len(kept) < len(self.current)
            assert (max(snapshot_ids(self.dir)) > latest) == dropped, "a drop commits a snapshot"
            self.current = kept
        elif kind == "expire":
            _, retain_min, extra, older_min, max_deletes = op
            self._run("expire", retain_min=retain_min, retain_max=retain_min + extra,
                      older_than_ms=older_min * MINUTE_MS, max_deletes=max_deletes)
        elif kind == "compact":
            self._run("compact", full=op[1], use_processes=False, parallelism=1)
        elif kind == "merge_manifests":
            self._run("merge_manifests")
        else:
            raise AssertionError(kind)
        self._record_new_snapshots()

    def _expire_consumers(self) -> None:
        before = consumers_on_disk(self.dir)
        self._run("expire_consumers")
        cutoff_s = (self.now_ms - CONSUMER_EXPIRATION_MS) / 1000
        assert set(consumers_on_disk(self.dir)) == {
            c for c, (_, mtime) in before.items() if mtime >= cutoff_s}, "expired consumers"

    # -- the invariant

    def check(self, ids_before: list[int], changelogs_before: list[int], what: str) -> None:
        ids = snapshot_ids(self.dir)
        assert ids == list(range(ids[0], ids[-1] + 1)), f"{what}: snapshot ids {ids}"
        snapshot_dir = self.dir / "snapshot"
        assert _hint(snapshot_dir, "LATEST") in (None, ids[-1]), f"{what}: LATEST"
        assert _hint(snapshot_dir, "EARLIEST") in (None, ids[0]), f"{what}: EARLIEST"
        consumers = consumers_on_disk(self.dir)
        if consumers:
            pinned = min(next_id for next_id, _ in consumers.values())
            lost = [i for i in ids_before if i >= pinned and i not in ids]
            assert not lost, f"{what}: snapshots {lost} expired under consumer at {pinned}"
            kept = set(ids) | set(_numbered(self.dir / "changelog", "changelog-"))
            lost = [i for i in changelogs_before if i >= pinned and i not in kept]
            assert not lost, f"{what}: changelogs {lost} expired under consumer at {pinned}"

        snapshots = {i: (self.dir / "snapshot" / f"snapshot-{i}") for i in ids}
        tags = tags_on_disk(self.dir)
        changelog_dir = self.dir / "changelog"
        cids = sorted(_numbered(changelog_dir, "changelog-"))
        if cids:
            assert cids == list(range(cids[0], cids[-1] + 1)), f"{what}: changelog ids {cids}"
            assert cids[-1] < ids[0] or set(cids) & set(ids), f"{what}: changelog gap"
            assert _hint(changelog_dir, "LATEST") in (None, cids[-1]), f"{what}: changelog LATEST"
            assert _hint(changelog_dir, "EARLIEST") in (None, cids[0]), (
                f"{what}: changelog EARLIEST")
        refs = all_refs(self.dir)
        manifests = {p.name for p in (self.dir / "manifest").iterdir()}
        assert refs.metadata - manifests == set(), f"{what}: referenced metadata deleted"
        missing = {p for p in refs.data if not (self.dir / p).is_file()}
        assert missing == set(), f"{what}: referenced data files deleted"

        # Snapshot and tag files never change (a tag deleted may come back under its name, at
        # another snapshot: the tags job re-creates an automatic tag deleted by hand, as Java's
        # TagAutoCreation does); each reads as the model's rows at its id.
        for gone in [n for n in self.files_seen if n.startswith("tag-") and n[4:] not in tags]:
            del self.files_seen[gone]
            self.checked.discard(gone)
        files = {f"snapshot-{i}": p.read_bytes() for i, p in snapshots.items()}
        files |= {f"tag-{n}": (self.dir / "tag" / f"tag-{n}").read_bytes() for n in tags}
        for name, content in files.items():
            assert self.files_seen.setdefault(name, content) == content, f"{what}: {name} changed"
        for i in ids:
            if f"snapshot-{i}" not in self.checked:
                assert self._py_rows(snapshot_id=i) == self.rows_at[i], f"{what}: snapshot {i}"
                self.checked.add(f"snapshot-{i}")
        for name, tag in tags.items():
            if f"tag-{name}" not in self.checked:
                assert self._py_rows(tag=name) == self.rows_at[tag["id"]], f"{what}: tag {name}"
                self.checked.add(f"tag-{name}")

    def _py_rows(self, *, snapshot_id: int | None = None, tag: str | None = None
                 ) -> frozenset[Row]:
        if tag is None:
            rows = read_rows(self.warehouse, NAME, snapshot_id)
        else:
            table = catalog_for(self.warehouse).get_table(NAME).copy({"scan.tag-name": tag})
            builder = table.new_read_builder()
            rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        return frozenset((r["dt"], r["id"], r["v"]) for r in rows.to_pylist())

    def data_files(self) -> set[Path]:
        return {p for p in self.dir.glob("dt=*/bucket-*/*")}


def _run_history(warehouse: Path, options: dict[str, str], steps: list[tuple[Any, ...]]
                 ) -> History:
    history = History(warehouse, options)
    history.commit(2, 0, 1)
    history.commit(2, 1, 1)
    history.check([], [], "start")
    for n, op in enumerate(steps):
        ids_before = snapshot_ids(history.dir)
        changelogs_before = sorted(_numbered(history.dir / "changelog", "changelog-"))
        files_before = history.data_files()
        history.step(op)
        if files_before - history.data_files():
            history.checked.clear()  # something was deleted: read everything again
        history.check(ids_before, changelogs_before, f"step {n} {op}")
    return history


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(decoupled=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_no_step_deletes_what_is_referenced(tmp_path_factory: pytest.TempPathFactory,
                                            decoupled: bool, seed: int) -> None:
    steps = random_steps(random.Random(seed), 32)
    note(f"steps: {steps}")
    options = {**OPTIONS, **(DECOUPLED if decoupled else {})}
    _run_history(tmp_path_factory.mktemp("retention") / "wh", options, steps)


@pytest.mark.parametrize("decoupled", [False, True])
def test_tag_deleted_after_its_snapshot_expired(tmp_path: Path, decoupled: bool) -> None:
    """A tag outlives its snapshot, compaction replaced the tag's files, then the tag goes
    by hand. Nothing any remaining snapshot, tag or changelog needs may go (the property's
    check), and, as Java's TagManager.deleteTag, the files only the tag kept go with it (with a
    decoupled changelog too: changelog-1, which held snapshot 1's APPEND file, has expired)."""
    options = {**OPTIONS, **(DECOUPLED if decoupled else {})}
    steps: list[tuple[Any, ...]] = [
        ("commit", 2, 0, 600), ("create_tag", 0), ("commit", 2, 0, 600), ("compact", True),
        ("commit", 1, 0, 600), ("expire", 1, 0, 0, 10)]
    history = _run_history(tmp_path / "wh", options, steps)
    assert snapshot_ids(history.dir)[0] > 3 and "manual-1" in tags_on_disk(history.dir)
    tagged = Refs()
    snapshot_refs(history.dir, tags_on_disk(history.dir)["manual-1"], tagged)
    ids_before = snapshot_ids(history.dir)
    changelogs_before = sorted(_numbered(history.dir / "changelog", "changelog-"))
    assert bool(changelogs_before) == decoupled
    history.step(("delete_tag", 0))
    assert "manual-1" not in tags_on_disk(history.dir)
    history.check(ids_before, changelogs_before, "after the tag's deletion")
    only_tagged = tagged.data - all_refs(history.dir).data
    assert only_tagged, "the tag kept a file nothing else needs"
    left = {p for p in only_tagged if (history.dir / p).exists()}
    assert left == set(), f"files only the deleted tag kept are left behind: {left}"
