"""Deterministic races: two committers held at a barrier between planning (and executing) and
committing, then released together, for compact/compact, compact/expire, compact/rewrite-index,
compact/pypaimon-writer commit and expire/expire, on local files and on the loopback S3
endpoint (moto, conditional puts). Exactly one commit lands per snapshot id (ids stay
continuous, each snapshot names one commit), the other re-plans or stops cleanly, no file is
left that nothing references, and pypaimon reads exactly the expected rows."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon.schema.schema_change import SchemaChange
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, catalog_for, sort_rows
from support.s3_endpoint import S3Endpoint

import paimond.maintenance.expire.snapshots as expire_module
from paimond.clock import SYSTEM_CLOCK
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.orphans import list_candidates
from paimond.maintenance.expire.references import referencing_snapshots, used_files
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.regenerate.rewrite_index import IndexRewriteJob
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import Committer
from paimond.table.commit.job_records import read_records
from paimond.table.storage.interface import open_storage

pytestmark = pytest.mark.crash_campaign  # minutes on S3: once per CI run

BLOOM = {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.items": "2000",
         "file-index.in-manifest-threshold": "1 b"}
KEEP_TWO = ExpireSettings(retain_min=2, retain_max=2, time_retained_ms=0)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    warehouse = tmp_path_factory.mktemp("races") / "wh"
    return warehouse, build_pk_deduplicate(str(warehouse)).name


@dataclass
class Place:
    warehouse: str
    table: Table
    catalog_options: dict[str, str] | None

    def rows(self) -> pa.Table:
        return read_rows(self.warehouse, self.table.name, catalog_options=self.catalog_options)

    def catalog(self) -> Any:
        return catalog_for(self.warehouse, self.catalog_options)


@pytest.fixture(params=["local", "s3"])
def place(request: pytest.FixtureRequest, pristine: tuple[Path, str], tmp_path: Path) -> Place:
    source, name = pristine
    if request.param == "local":
        shutil.copytree(source, tmp_path / "wh")
        storage = open_storage(str(tmp_path / "wh"))
        return Place(str(tmp_path / "wh"), open_table(storage, storage.root, name), None)
    s3: S3Endpoint = request.getfixturevalue("s3_endpoint")
    warehouse = s3.make_bucket(f"races-{uuid.uuid4().hex[:12]}") + "/wh"
    storage = open_storage(warehouse, s3.storage_options)
    for path in sorted(source.rglob("*")):
        if path.is_file():
            storage.write_bytes(storage.join(warehouse, str(path.relative_to(source))),
                                path.read_bytes())
    options = s3.storage_options
    catalog_options = {"s3.endpoint": s3.endpoint_url, "s3.access-key": options["key"],
                       "s3.secret-key": options["secret"], "s3.region": s3.region,
                       "s3.path.style.access": "true"}
    return Place(warehouse, open_table(storage, storage.root, name), catalog_options)


@pytest.fixture
def barrier(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Barrier]:
    """Two parties. A Committer's first commit in each thread, and an expiration between
    its plan and its deletions, wait at it."""
    gate = threading.Barrier(2, timeout=120)
    waited: set[int] = set()
    original_commit, original_collect = Committer.commit, expire_module.collect_expired

    def wait_once() -> None:
        if threading.get_ident() not in waited:
            waited.add(threading.get_ident())
            gate.wait()

    def commit(self: Committer, changes: Any) -> Any:
        wait_once()
        return original_commit(self, changes)

    def collect(*args: Any, **kwargs: Any) -> Any:
        wait_once()
        return original_collect(*args, **kwargs)

    monkeypatch.setattr(Committer, "commit", commit)
    monkeypatch.setattr(expire_module, "collect_expired", collect)
    yield gate
    gate.abort()


def _together(*jobs: Callable[[], Any]) -> list[Any]:
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = jobs[i]()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    return results


def _compact(place: Place) -> Callable[[], Any]:
    return lambda: CompactJob(place.table, clock=SYSTEM_CLOCK, full=True, use_processes=False,
                              parallelism=1).run()


def _expire(place: Place) -> Callable[[], Any]:
    return lambda: ExpireJob(place.table, clock=SYSTEM_CLOCK, settings=KEEP_TWO).run()


def _check(place: Place, rows: pa.Table, before: list[int], committed: list[int]) -> None:
    """Snapshot ids continuous, one per commit, nothing unreferenced, reads exact."""
    table = place.table
    ids = table.snapshots.list_ids()
    assert ids == list(range(ids[0], ids[-1] + 1))
    assert len(committed) == len(set(committed)) and max(committed) == ids[-1]
    assert ids[-1] == before[-1] + len(committed)
    used = used_files(table, referencing_snapshots(table)).all
    left = [c.status.path for c in list_candidates(table)
            if not c.by_name or c.status.name not in used]
    assert left == [] and read_records(table) == []
    assert place.rows().equals(rows)


def test_compact_and_compact(place: Place, barrier: threading.Barrier) -> None:
    rows, before = place.rows(), place.table.snapshots.list_ids()
    first, second = _together(_compact(place), _compact(place))
    committed = [s.snapshot.id for s in (first, second) if s.snapshot is not None]
    assert len(committed) >= 1 and max(first.attempts, second.attempts) >= 2
    _check(place, rows, before, committed)


def test_compact_and_expire(place: Place, barrier: threading.Barrier) -> None:
    rows, before = place.rows(), place.table.snapshots.list_ids()
    summary, expired = _together(_compact(place), _expire(place))
    assert summary.snapshot is not None and expired.plan.expires
    _check(place, rows, before, [summary.snapshot.id])
    assert len(place.table.snapshots.list_ids()) <= 3


def test_expire_and_expire(place: Place, barrier: threading.Barrier) -> None:
    rows, before = place.rows(), place.table.snapshots.list_ids()
    first, second = _together(_expire(place), _expire(place))
    assert first.plan.end_id == second.plan.end_id  # both planned the same range
    assert place.table.snapshots.list_ids() == before[-2:]
    used = used_files(place.table, referencing_snapshots(place.table)).all
    assert [c for c in list_candidates(place.table) if c.status.name not in used] == []
    assert place.rows().equals(rows)


def test_compact_and_rewrite_index(place: Place, barrier: threading.Barrier) -> None:
    place.catalog().alter_table(place.table.name,
                                [SchemaChange.set_option(k, v) for k, v in BLOOM.items()], False)
    rows, before = place.rows(), place.table.snapshots.list_ids()
    summary, indexed = _together(
        _compact(place), lambda: IndexRewriteJob(place.table, clock=SYSTEM_CLOCK).run())
    committed = [s.snapshot.id for s in (summary, indexed) if s.snapshot is not None]
    assert len(committed) >= 1 and summary.attempts + indexed.attempts >= 3
    _check(place, rows, before, committed)


def test_compact_and_a_pypaimon_writer(place: Place, barrier: threading.Barrier) -> None:
    rows, before = place.rows(), place.table.snapshots.list_ids()
    table = place.catalog().get_table(place.table.name)
    template = rows.slice(0, 1).to_pylist()[0]
    new = [{**template, "id": 1000 + i, "rk": "+I"} for i in range(5)]

    def write() -> int:
        builder = table.new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        try:
            writer.write_arrow(pa.Table.from_pylist(new, schema=rows.schema))
            messages = writer.prepare_commit()
            barrier.wait()  # planned and written; now both commit
            commit.commit(messages)
        finally:
            writer.close()
            commit.close()
        return 1

    summary, _ = _together(_compact(place), write)
    expected = sort_rows(pa.concat_tables([rows, pa.Table.from_pylist(new, schema=rows.schema)]),
                         ["day", "tag", "id"])
    assert summary.snapshot is not None
    ids = place.table.snapshots.list_ids()
    assert ids == list(range(before[0], before[-1] + 3))
    assert place.rows().equals(expected)
