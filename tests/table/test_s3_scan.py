"""The metadata read path against a real S3 endpoint (moto's server on 127.0.0.1, via s3fs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.pypaimon_oracle import live_files
from support.pypaimon_tables import build_pk_deduplicate
from support.s3_endpoint import S3Endpoint

from paimond.cli.main import main
from paimond.table.catalog import list_tables
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

pytestmark = pytest.mark.s3


def _pypaimon_s3_options(endpoint: S3Endpoint) -> dict[str, str]:
    options = endpoint.storage_options
    return {"s3.endpoint": endpoint.endpoint_url, "s3.access-key": options["key"],
            "s3.secret-key": options["secret"], "s3.region": endpoint.region,
            "s3.path.style.access": "true"}


def _files(table, snapshot_id: int) -> list[tuple]:  # type: ignore[no-untyped-def]
    scanned = scan_snapshot(table, table.snapshots.load(snapshot_id))
    return sorted((f.entry.partition, f.entry.bucket, f.meta.level, f.meta.file_name,
                   f.meta.file_size, f.meta.row_count) for f in scanned.files)


def test_warehouse_uploaded_to_s3_scans_like_local(
        s3_endpoint: S3Endpoint, oracle_warehouse: tuple[str, list]) -> None:
    local_root = oracle_warehouse[0]
    bucket = s3_endpoint.make_bucket("uploaded")
    s3 = open_storage(bucket, s3_endpoint.storage_options)
    for path in sorted(Path(local_root).rglob("*")):
        if path.is_file():
            s3.write_bytes(s3.join(bucket, "wh", str(path.relative_to(local_root))),
                           path.read_bytes())
    local = {t.name: t for t in list_tables(open_storage(local_root), local_root)}
    remote = {t.name: t for t in list_tables(s3, s3.join(bucket, "wh"))}
    assert sorted(remote) == sorted(local)
    compared = 0
    for name, table in remote.items():
        assert table.snapshots.list_ids() == local[name].snapshots.list_ids()
        for snapshot_id in table.snapshots.list_ids():
            assert _files(table, snapshot_id) == _files(local[name], snapshot_id), name
            compared += 1
    assert compared >= 50


def test_table_written_to_s3_by_pypaimon(s3_endpoint: S3Endpoint,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bucket = s3_endpoint.make_bucket("written")
    warehouse = f"{bucket}/wh"
    catalog_options = _pypaimon_s3_options(s3_endpoint)
    spec = build_pk_deduplicate(warehouse, catalog_options)
    storage = open_storage(warehouse, s3_endpoint.storage_options)
    [table] = list_tables(storage, warehouse)
    assert table.name == spec.name
    for snapshot_id in table.snapshots.list_ids():
        theirs = sorted((d["partition"], d["bucket"], d["level"], d["file_name"], d["file_size"],
                         d["row_count"]) for d in live_files(warehouse, spec.name, snapshot_id,
                                                             catalog_options))
        assert _files(table, snapshot_id) == theirs

    args = ["status", warehouse, "--json"]
    for key, value in s3_endpoint.storage_options.items():
        args += ["--storage-option", f"{key}={value}"]
    assert main(args) == 0
    [status] = json.loads(capsys.readouterr().out)["tables"]
    assert status["error"] is None
    assert status["latest_snapshot"] == spec.snapshot_count
    assert sum(b["levels"][0]["files"] for b in status["buckets"]) >= spec.snapshot_count
