"""Requests paimond sends to S3, counted on moto's server on loopback:
an idle daemon check is one request, a table's status five besides its manifests, discovery
lists no excluded table. Counts are deterministic; bench/s3_requests.py prints them all."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.pk_table_writes import write_pk_table
from support.s3_requests import (
    CountingEndpoint,
    isolated_counting_endpoint,
    kinds,
)

from paimond.table.catalog import WATCH_FULL_CHECK_EVERY, Table, list_tables
from paimond.table.status.report import table_status
from paimond.table.storage.interface import Storage, open_storage

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def endpoint() -> Iterator[CountingEndpoint]:
    with isolated_counting_endpoint() as started:
        yield started


@pytest.fixture(scope="module")
def warehouse(endpoint: CountingEndpoint, tmp_path_factory: pytest.TempPathFactory) -> Storage:
    local = tmp_path_factory.mktemp("requests") / "wh"
    write_pk_table(str(local), 3, "db.t")
    write_pk_table(str(local), 1, "db.skipped")
    uri = endpoint.make_bucket("counted") + "/wh"
    endpoint.upload(str(local), uri)
    return open_storage(uri, endpoint.storage_options)


def _table(storage: Storage) -> Table:
    (table,) = list_tables(storage, storage.root, lambda name: name == "db.t")
    return table


def test_an_idle_check_is_one_read_of_latest(endpoint: CountingEndpoint,
                                             warehouse: Storage) -> None:
    table = _table(warehouse)
    with endpoint.log.counting() as first:
        assert table.watched_latest_id() == 3
    # the full check: LATEST, then one HEAD each for snapshot-3 and the absent snapshot-4
    assert [(r.kind, r.key.rsplit("/", 1)[-1]) for r in first] == [
        ("GET", "LATEST"), ("HEAD", "snapshot-3"), ("HEAD", "snapshot-4")]
    for _ in range(WATCH_FULL_CHECK_EVERY - 1):
        with endpoint.log.counting() as idle:
            assert table.watched_latest_id() == 3
        assert [(r.kind, r.key.rsplit("/", 1)[-1]) for r in idle] == [("GET", "LATEST")]
    with endpoint.log.counting() as again:  # the periodic full check
        assert table.watched_latest_id() == 3
    assert len(again) == 3


def test_a_hint_left_behind_is_caught_by_the_next_full_check(endpoint: CountingEndpoint,
                                                             warehouse: Storage) -> None:
    table = _table(warehouse)
    assert table.watched_latest_id() == 3
    snapshot = table.snapshots.path(3)
    copy = table.snapshots.path(4)
    warehouse.write_bytes(copy, warehouse.read_bytes(snapshot))  # only its presence counts
    try:  # a writer died after creating snapshot-4, before moving LATEST
        seen = [table.watched_latest_id() for _ in range(WATCH_FULL_CHECK_EVERY)]
        assert seen[:-1] == [3] * (WATCH_FULL_CHECK_EVERY - 1)
        assert seen[-1] == 4
        warehouse.write_bytes(table.snapshots.hint_path("LATEST"), b"4")
        assert table.watched_latest_id() == 4  # the hint moved: the full check at once
    finally:
        warehouse.delete(copy)
        warehouse.write_bytes(table.snapshots.hint_path("LATEST"), b"3")


def test_status_reads_five_objects_besides_manifests(endpoint: CountingEndpoint,
                                                     warehouse: Storage) -> None:
    table = _table(warehouse)
    with endpoint.log.counting() as requests:
        status = table_status(table, verify_files=False)
    assert status.error is None and status.latest_snapshot == 3 and status.earliest_snapshot == 1
    metadata = [r for r in requests if "/manifest/" not in r.key]
    # table folder, schema/ and snapshot/ listed once each; the schema and the snapshot read
    assert kinds(metadata) == {"LIST": 3, "GET": 2}
    assert len({r.key for r in requests if "/manifest/" in r.key}) == len(
        [r for r in requests if "/manifest/" in r.key])  # each manifest read once


def test_discovery_lists_no_excluded_table(endpoint: CountingEndpoint,
                                           warehouse: Storage) -> None:
    with endpoint.log.counting() as requests:
        tables = list_tables(warehouse, warehouse.root, lambda name: name != "db.skipped")
    assert [t.name for t in tables] == ["db.t"]
    assert not [r for r in requests if "skipped" in r.key]
    assert kinds(requests) == {"LIST": 3}  # warehouse, db.db/, db.db/t/
    with endpoint.log.counting() as again:  # a watcher's next pass: db.t is known
        tables = list_tables(warehouse, warehouse.root, lambda name: name != "db.skipped",
                             known={"db.t"})
    assert [t.name for t in tables] == ["db.t"]
    assert kinds(again) == {"LIST": 2}  # warehouse, db.db/


def test_deletes_go_in_batches_without_asking_first(endpoint: CountingEndpoint, warehouse: Storage,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from paimond.table.storage import fsspec_storage as storage_module

    assert storage_module._DELETE_BATCH == 1000  # S3's limit per DeleteObjects
    monkeypatch.setattr(storage_module, "_DELETE_BATCH", 3)  # 7 keys: 3 requests
    paths = [warehouse.join("scratch", f"f{i}") for i in range(6)]
    endpoint.fs.pipe({p.replace("s3://", ""): b"x" for p in paths})
    absent = warehouse.join("scratch", "absent")
    seen: list[str] = []
    with endpoint.log.counting() as requests:
        warehouse.delete_many([*paths, absent], seen.append)
    assert kinds(requests) == {"BATCH-DELETE": 3}  # no HEAD before, no error for the absent
    assert seen == [*paths, absent]
    assert warehouse.list_dir(warehouse.join("scratch")) == []


def test_the_compaction_job_commit_reads_no_manifest(endpoint: CountingEndpoint,
                                                      tmp_path_factory: pytest.TempPathFactory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The job hands its plan's buckets to the commit: with nothing committed since the plan,
    the conflict check and the manifest merge (below its thresholds) read no manifest list
    nor manifest; the compaction is committed."""
    from support.s3_requests import Request

    from paimond.clock import Clock
    from paimond.format.meta.snapshot import Snapshot
    from paimond.maintenance.compact.job import CompactJob
    from paimond.table.commit.committer import CommitChanges, Committer

    local = tmp_path_factory.mktemp("job_commit") / "wh"
    write_pk_table(str(local), 5, "db.c")
    uri = endpoint.make_bucket("job-commit") + "/wh"
    endpoint.upload(str(local), uri)
    storage = open_storage(uri, endpoint.storage_options)
    (table,) = list_tables(storage, storage.root, lambda name: name == "db.c")
    inside: list[list[Request]] = []
    commit = Committer.commit

    def counted(self: Committer, changes: CommitChanges) -> Snapshot:
        with endpoint.log.counting() as requests:
            result = commit(self, changes)
        inside.append(list(requests))
        return result

    monkeypatch.setattr(Committer, "commit", counted)
    summary = CompactJob(table, full=True, clock=Clock(fixed_ms=1_700_000_000_000),
                         use_processes=False, parallelism=1).run()
    assert summary.snapshot is not None and summary.files_in == 5
    (requests,) = inside
    assert [r.key for r in requests if r.kind == "GET" and "/manifest/" in r.key] == []
    assert kinds(requests)["GET"] == 2  # LATEST and the latest snapshot


def test_a_compaction_fetches_each_manifest_once_and_expiry_heads_nothing(
        endpoint: CountingEndpoint, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A full compaction plans, reads its files' entries back whole and commits with one GET
    per manifest; its job record is never read back; its data files are read with the sizes
    their manifest entries record (no HEAD before the GETs). Expiring the table's old snapshots
    then sizes their files from one listing: no HEAD."""
    from collections import Counter

    from paimond.clock import Clock
    from paimond.maintenance.compact.job import CompactJob
    from paimond.maintenance.jobs import JOBS, JobContext

    local = tmp_path_factory.mktemp("once") / "wh"
    write_pk_table(str(local), 6, "db.o")
    uri = endpoint.make_bucket("once") + "/wh"
    endpoint.upload(str(local), uri)
    storage = open_storage(uri, endpoint.storage_options)
    (table,) = list_tables(storage, storage.root, lambda name: name == "db.o")
    clock = Clock(fixed_ms=1_700_000_000_000)
    with endpoint.log.counting() as requests:
        summary = CompactJob(table, full=True, clock=clock, use_processes=False,
                             parallelism=1).run()
    assert summary.snapshot is not None and summary.files_in == 6
    manifests = Counter(r.key for r in requests if r.kind == "GET" and "/manifest/" in r.key)
    assert len(manifests) >= 6 and set(manifests.values()) == {1}, manifests
    assert not [r for r in requests if r.kind in ("GET", "HEAD") and "/.paimond/" in r.key]
    data = [r for r in requests if r.key.endswith(".parquet") and "/bucket-" in r.key]
    assert {r.kind for r in data if r.kind != "PUT" and "upload" not in r.kind.lower()} == {"GET"}, \
        kinds(data)
    spec = JOBS["expire"]
    with endpoint.log.counting() as expired:
        spec.run(table, spec.settings(retain_max=2, retain_min=1), JobContext(clock))
    assert table.snapshots.earliest_id() == 6
    gone = {f"snapshot-{i}" for i in range(1, 6)}  # the HEADs left: LATEST's hint check
    assert [r.key for r in expired if r.kind in ("HEAD", "DELETE")
            and r.key.rsplit("/", 1)[-1] in gone] == [], kinds(expired)
