"""Requests paimond sends to S3 for what needs no oracle to set up, counted on moto's server
on loopback, so that the newest-dependencies run counts them on the newest s3fs too: a
metadata read is one GET, a planning window fetches each manifest once even when the plan's
files are read back whole, a job's record is written and deleted without being read back,
expiry-style deletes ask nothing first."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.append_windows import write_append
from support.s3_requests import (
    CountingEndpoint,
    isolated_counting_endpoint,
    kinds,
)

from paimond.clock import Clock
from paimond.maintenance.job_cleanup import recorded_job
from paimond.table.catalog import Table, open_table
from paimond.table.commit.job_records import jobs_dir, list_markers, listed_files, start_job
from paimond.table.scan.bucket_scan import scan_live_windows
from paimond.table.storage.interface import Storage, open_storage

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def endpoint() -> Iterator[CountingEndpoint]:
    with isolated_counting_endpoint() as started:
        yield started


@pytest.fixture(scope="module")
def storage(endpoint: CountingEndpoint) -> Storage:
    return open_storage(endpoint.make_bucket("core-counts") + "/wh", endpoint.storage_options)


@pytest.fixture(scope="module")
def table(endpoint: CountingEndpoint, storage: Storage,
          tmp_path_factory: pytest.TempPathFactory) -> Table:
    """A synthetic append table of 40 partitions over 20 base manifests and delta manifests
    (``support.append_windows``; its data files are never read): two windows of 200 entries."""
    local = tmp_path_factory.mktemp("core") / "wh"
    write_append(local, {"bucket": "-1"}, 1, partitions=40, delta_chunk=2)
    endpoint.upload(str(local), storage.root)
    return open_table(storage, storage.root, "db.t")


def test_a_metadata_read_is_one_get(endpoint: CountingEndpoint, storage: Storage) -> None:
    import s3fs

    path = storage.join("one-get", "snapshot-1")
    storage.write_bytes(path, b'{"id": 1}')
    with endpoint.log.counting() as requests:
        assert storage.read_bytes(path) == b'{"id": 1}'
        assert storage.read_text(path) == '{"id": 1}'
    assert [r.kind for r in requests] == ["GET", "GET"], s3fs.__version__


def test_planning_fetches_each_manifest_once(endpoint: CountingEndpoint, table: Table) -> None:
    """Every live file read back whole (as a plan reads its tasks' files) after a window's
    statistics-free scan costs no request: the window kept the manifest bytes it fetched."""
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    schema = table.latest_schema()

    def scan(read_back: bool) -> int:
        windows = 0
        for live in scan_live_windows(table, snapshot, schema, budget=200):
            windows += 1
            if read_back:
                slim = [f.entry for files in live.buckets() for f in files.files]
                whole = live.full_entries(table, slim)
                assert len(whole) == len(slim)
        return windows

    with endpoint.log.counting() as scanned:
        assert scan(read_back=False) == 2
    with endpoint.log.counting() as read_back:
        assert scan(read_back=True) == 2
    assert Counter(r.key for r in read_back) == Counter(r.key for r in scanned)
    assert {r.kind for r in read_back} == {"GET"}


def test_a_jobs_record_is_deleted_without_reading_it_back(endpoint: CountingEndpoint,
                                                          table: Table) -> None:
    """A job noting two files and keeping one: its record is written (``job.json`` and one
    marker per file), then listed once, the unkept file and the record deleted in batches;
    nothing is read back, nothing asked before a delete."""
    storage = table.storage
    clock = Clock(fixed_ms=1_700_000_000_000)
    kept, dropped = table.file_path("bucket-0", "data-kept.parquet"), table.file_path(
        "dt=2024-01-000", "bucket-0", "data-dropped.parquet")
    with endpoint.log.counting() as requests, recorded_job(table, "compact", clock) as job:
        for path in (kept, dropped):
            job.table.storage.write_bytes(path, b"x")
        job.keep(["data-kept.parquet"])
    assert storage.is_file(kept) and not storage.is_file(dropped)
    assert storage.list_dir(jobs_dir(table)) == []
    counted = kinds(requests)
    assert counted["GET"] == 0 and counted["HEAD"] == 0 and counted["DELETE"] == 0, requests
    # job.json, two markers, two files; the unkept file, the markers, then job.json
    assert counted["PUT"] == 5 and counted["BATCH-DELETE"] == 3, requests
    assert counted["LIST"] <= 6, requests
    storage.delete_many([kept])


def test_a_long_path_is_noted_by_a_hashed_marker(endpoint: CountingEndpoint,
                                                 table: Table) -> None:
    journal = start_job(table, "compact", started_ms=0)
    long = table.file_path("dt=" + "x" * 240, "bucket-0", "data-long.parquet")
    short = table.file_path("dt=2024-01-000", "bucket-0", "data-short.parquet")
    for path in (long, short):
        journal.note(table.storage, path)
    journal.end()
    markers = list_markers(table.storage, journal.directory)
    assert sorted(len(m.name) for m in markers)[0] == 24  # the long one: a hash
    with endpoint.log.counting() as requests:
        assert sorted(listed_files(table.storage, journal.directory, markers)) == sorted(
            [long, short])
    assert [r.kind for r in requests] == ["GET"]  # the hashed marker's content only
    from paimond.table.commit.job_records import delete_record

    delete_record(table.storage, journal.directory)
    assert table.storage.list_dir(jobs_dir(table)) == []


def test_deletes_ask_nothing_first(endpoint: CountingEndpoint, storage: Storage,
                                   tmp_path: Path) -> None:
    paths = [storage.join("batch", f"snapshot-{i}") for i in range(5)]
    for path in paths:
        storage.write_bytes(path, b"{}")
    with endpoint.log.counting() as requests:
        storage.delete_many([*paths, storage.join("batch", "absent")])
        assert not storage.delete_dir_if_empty(storage.join("batch"))  # no marker object
    assert kinds(requests) == {"BATCH-DELETE": 1, "LIST": 1}
    assert storage.list_dir(storage.join("batch")) == []
