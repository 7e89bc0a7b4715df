"""A daemon restarted after a kill cleans what its killed jobs left, at once and whichever job
runs first on the table: a record of its own replica from an earlier process is dead wherever
that process ran (a pod rescheduled on another node keeps its replica id, not its host), while
a young record of another replica elsewhere is left to that replica."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate

from paimond.clock import SYSTEM_CLOCK
from paimond.config.settings import load_settings
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance.jobs import ROUTINE
from paimond.table.catalog import Table, open_table
from paimond.table.commit.job_records import read_records, set_replica, start_job
from paimond.table.storage.interface import open_storage


def _killed_job(table: Table, replica: str, host: str, *names: str) -> str:
    """The record and written files of a job killed in another process on ``host``."""
    journal = start_job(table, "compact", started_ms=SYSTEM_CLOCK.wall_ms())
    for name in names:
        path = table.file_path(*name.split("/"))
        journal.note(table.storage, path)
        table.storage.write_bytes(path, b"half written")
    journal.end()
    body = json.loads(journal.body) | {"host": host, "pid": 1, "process": "killed",
                                       "replica": replica}
    table.storage.write_bytes(table.storage.join(journal.directory, "job.json"),
                              json.dumps(body).encode())
    return journal.job_id


def test_a_restarted_daemon_cleans_its_killed_jobs_on_any_host(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_pk_deduplicate(warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    rows = read_rows(warehouse, spec.name, include_level0=True)
    _killed_job(table, "paimond-0", "node-a", "bucket-0/data-ours-0.parquet",
                "manifest/manifest-ours-0")
    theirs = _killed_job(table, "paimond-1", "node-b", "bucket-0/data-theirs-0.parquet")
    # Only expiry runs: nothing that writes files (and so cleans on its own) is enabled.
    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": warehouse, "POD_NAME": "paimond-0",
        "PAIMOND_JOBS_COMPACT_ENABLED": "false", "PAIMOND_JOBS_MERGE_MANIFESTS_ENABLED": "false"},
        jobs=ROUTINE)
    try:
        runs = Daemon(settings, Metrics(CollectorRegistry())).run_once()
    finally:
        set_replica("")
    assert [r.error for r in runs] == [None] and "expire" in runs[0].reports
    bucket = Path(table.file_path("bucket-0"))
    assert not (bucket / "data-ours-0.parquet").exists()
    assert not Path(table.file_path("manifest", "manifest-ours-0")).exists()
    assert (bucket / "data-theirs-0.parquet").exists()
    assert [r.job_id for r in read_records(table)] == [theirs]
    assert read_rows(warehouse, spec.name, include_level0=True).equals(rows)
