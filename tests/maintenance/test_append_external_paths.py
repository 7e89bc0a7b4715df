"""External data paths (``data-file.external-paths``): pypaimon writes its files there,
paimond's compaction (append and primary-key tables) writes its outputs there as Java's
``ExternalPathProvider`` does (apache/paimon 5dacde516b), readers find them through
``externalPath``, and orphan removal scans the external bucket directories. The providers
against pypaimon's own. (The Java reader of these tests, Paimon 1.0, predates external
paths: it looks for pypaimon's own external files under the table too, so it is no oracle
here.)"""

from __future__ import annotations

import datetime
import os
import random
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from pypaimon.common.external_path_provider import EntropyInjectExternalPathProvider
from support.pypaimon_oracle import live_files, read_rows, read_rows_rust, snapshot_ids
from support.pypaimon_tables import TableWriter, catalog_for, not_null

from paimond.clock import Clock
from paimond.errors import UnsupportedError
from paimond.format.meta.schema import decode_schema
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.orphans import OrphanJob
from paimond.table.catalog import open_table
from paimond.table.data_files.external_paths import ExternalPaths, entropy_dirs, java_path
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import open_storage

NOON = datetime.datetime(2026, 11, 22, 12, 0)
CLOCK = Clock(fixed_ms=int(NOON.timestamp() * 1000))
NAME = "db.external"
SCHEMA = pa.schema([("dt", pa.string()), not_null("id", pa.int64()), ("v", pa.string())])


def _options(raw: dict[str, str]) -> TableOptions:
    return TableOptions.of(decode_schema(
        b'{"version":3,"id":0,"fields":[{"id":0,"name":"k","type":"INT"}],"highestFieldId":0,'
        b'"partitionKeys":[],"primaryKeys":[],"options":'
        + str(raw).replace("'", '"').encode() + b',"timeMillis":0}'))


def test_java_path_form() -> None:
    assert java_path("file:///tmp/x/") == "file:/tmp/x"
    assert java_path(" s3://bucket//a/b/ ") == "s3://bucket/a/b"
    with pytest.raises(UnsupportedError):
        java_path("/no/scheme")


def test_strategies_pick_roots_as_java() -> None:
    base = {"data-file.external-paths": "file:///e1,s3://b/e2,file:///e3"}
    assert ExternalPaths.of(_options(base)) is None  # strategy none by default
    robin = ExternalPaths.of(_options({**base, "data-file.external-paths.strategy": "round-robin"}))
    assert robin is not None
    provider = robin.provider("dt=a/bucket-0", random.Random(7))
    paths = [provider.next_path(f"f{i}") for i in range(6)]
    roots = [p.rsplit("/dt=a/", 1)[0] for p in paths]
    assert roots[:3] == roots[3:] and sorted(roots[:3]) == sorted(robin.roots)  # one each, in turn
    assert paths[0].endswith("/dt=a/bucket-0/f0")
    specific = ExternalPaths.of(_options({**base, "data-file.external-paths.strategy":
                                          "specific-fs",
                                          "data-file.external-paths.specific-fs": "s3"}))
    assert specific is not None and specific.roots == ("s3://b/e2",)
    weighted = ExternalPaths.of(_options({**base, "data-file.external-paths.strategy": "weighted",
                                          "data-file.external-paths.weights": "1,8,1"}))
    assert weighted is not None
    draw = weighted.provider("bucket-0", random.Random(3))
    drawn = Counter(draw.next_path("f").rsplit("/bucket-0/", 1)[0] for _ in range(2000))
    assert 0.75 < drawn["s3://b/e2"] / 2000 < 0.85
    with pytest.raises(UnsupportedError):
        ExternalPaths.of(_options({**base, "data-file.external-paths.strategy": "weighted",
                                   "data-file.external-paths.weights": "1,2"}))


@pytest.mark.parametrize("name", ["data-1.parquet", "x", "data-bf786645-7360-409a-9ccb-"
                                  "c6c67f229b46-0.parquet", "é€"])
def test_entropy_dirs_equal_pypaimons(name: str) -> None:
    ours = entropy_dirs(name)
    theirs = EntropyInjectExternalPathProvider(["file:/e"], "")._compute_hash(name)
    assert ours == theirs and len(ours.split("/")) == 4


def _table_with_external(tmp_path: Path, *, target: str | None = None) -> tuple[str, list[str]]:
    warehouse = str(tmp_path / "wh")
    roots = [str(tmp_path / "e1"), str(tmp_path / "e2")]
    options = {"bucket": "-1", "file.format": "parquet",
               "data-file.external-paths": ",".join(f"file://{r}" for r in roots),
               "data-file.external-paths.strategy": "round-robin",
               "file-index.bloom-filter.columns": "id",
               "file-index.in-manifest-threshold": "1 b"}
    if target:
        options["target-file-size"] = target
    writer = TableWriter(catalog_for(warehouse), NAME, SCHEMA, partition_keys=("dt",),
                     options=options)
    for commit in range(6):
        writer.commit([{"dt": "a" if i % 3 else "b", "id": commit * 1000 + i, "v": f"v{i}" * 20}
                       for i in range(300)])
    return warehouse, roots


def test_compaction_writes_outputs_to_the_external_paths(tmp_path: Path) -> None:
    warehouse, roots = _table_with_external(tmp_path, target="16 kb")
    history = {i: read_rows(warehouse, NAME, i) for i in snapshot_ids(warehouse, NAME)}
    table = open_table(open_storage(warehouse), warehouse, NAME)
    summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert summary.snapshot is not None and summary.files_in >= 12 and summary.files_out > 4
    for result in summary.results:
        used = []
        for entry in result.added:
            meta = entry.file
            assert meta.external_path is not None
            root, _, rest = meta.external_path.removeprefix("file:").partition("/dt=")
            assert root in roots and rest.endswith(f"/bucket-0/{meta.file_name}")
            local = Path(meta.external_path.removeprefix("file:"))
            assert local.is_file() and local.stat().st_size == meta.file_size
            assert meta.extra_files and all((local.parent / n).is_file() for n in meta.extra_files)
            assert not (Path(warehouse) / "db.db" / "external" / f"dt={rest[:1]}" / "bucket-0"
                        / meta.file_name).exists()
            used.append(root)
        assert all(a != b for a, b in zip(used, used[1:], strict=False))  # round robin
    for snapshot_id, expected in history.items():
        assert read_rows(warehouse, NAME, snapshot_id).equals(expected)
    latest = read_rows(warehouse, NAME)
    assert latest.equals(history[max(history)])
    files = live_files(warehouse, NAME, summary.snapshot.id)
    assert all(f["path"] == f["external_path"] for f in files)
    rust = read_rows_rust(warehouse, NAME)
    assert rust is None or rust.num_rows == latest.num_rows


def test_orphan_removal_scans_the_external_paths(tmp_path: Path) -> None:
    warehouse, roots = _table_with_external(tmp_path)
    table = open_table(open_storage(warehouse), warehouse, NAME)
    compacted = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert compacted.files_in == 12
    bucket = Path(roots[1]) / "dt=a" / "bucket-0"
    bucket.mkdir(parents=True, exist_ok=True)
    stray = bucket / "data-00000000-0000-0000-0000-000000000000-0.parquet"
    stray.write_bytes(b"left by a killed writer")
    live = {Path(f["path"].removeprefix("file:")) for f in
            live_files(warehouse, NAME, table.snapshots.latest().id)}
    expected = read_rows(warehouse, NAME)
    later = Clock(fixed_ms=int(time.time() * 1000) + 3 * 86_400_000)
    result = OrphanJob(table, clock=later).run()
    assert not stray.exists()
    assert result.removed.total_files == 1  # the inputs stay: older snapshots name them
    assert all(p.is_file() for p in live)
    assert read_rows(warehouse, NAME).equals(expected)
    remaining = {Path(d) / n for r in roots for d, _, names in os.walk(r) for n in names}
    parquet = {p for p in remaining if p.suffix == ".parquet"}
    assert live <= parquet and len(parquet) == 12 + compacted.files_out


def test_primary_key_compaction_writes_data_and_changelog_externally(tmp_path: Path) -> None:
    """A primary-key table (changelog-producer lookup): the merged files and the changelog
    files compaction writes go to the external roots too, as Java's path factory puts
    them; the table reads the same rows."""
    warehouse = str(tmp_path / "wh")
    roots = [str(tmp_path / "e1"), str(tmp_path / "e2")]
    schema = pa.schema([not_null("k", pa.int64()), ("v", pa.string())])
    writer = TableWriter(catalog_for(warehouse), "db.pk_external", schema, primary_keys=("k",),
                     options={"bucket": "2", "changelog-producer": "lookup",
                              "data-file.external-paths": ",".join(f"file://{r}" for r in roots),
                              "data-file.external-paths.strategy": "round-robin"})
    rng = random.Random(4)
    for _ in range(6):
        writer.commit([{"k": rng.randrange(50), "v": f"v{rng.randrange(9)}"} for _ in range(40)])
    expected = read_rows(warehouse, "db.pk_external")
    table = open_table(open_storage(warehouse), warehouse, "db.pk_external")
    summary = CompactJob(table, clock=CLOCK, full=True, use_processes=False).run()
    assert summary.snapshot is not None and summary.results
    added = [e for r in summary.results for e in r.added if e.file.level > 0]
    changelog = [e for r in summary.results for e in r.changelog]
    assert added and changelog
    for entry in (*added, *changelog):
        path = entry.file.external_path
        assert path is not None and any(path.startswith(f"file:{r}/bucket-") for r in roots)
        assert Path(path.removeprefix("file:")).is_file()
    assert read_rows(warehouse, "db.pk_external").equals(expected)
