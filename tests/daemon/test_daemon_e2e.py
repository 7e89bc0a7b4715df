"""`paimond run` as a real process while pypaimon keeps committing (local and S3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.daemon_process import start_daemon
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for, commit_arrow
from support.s3_endpoint import S3Endpoint

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
DEADLINE_S = 180


def _create(warehouse: str, names: list[str], options: dict[str, str] | None) -> None:
    from pypaimon import Schema

    catalog = catalog_for(warehouse, options)
    catalog.create_database("db", True)
    for name in names:
        catalog.create_table(name, Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"],
            options={"bucket": "1", "num-sorted-run.compaction-trigger": "3"}), False)


def _commit(warehouse: str, name: str, start: int, options: dict[str, str] | None) -> None:
    ids = list(range(start, start + 20))
    commit_arrow(warehouse, name, pa.table({"id": ids, "v": [f"v{start}-{i}" for i in ids]},
                                           schema=SCHEMA), options)


def _scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def _maintain_while_writing(tmp_path: Path, warehouse: str, options: dict[str, str] | None,
                            storage_options: str) -> None:
    names = ["db.busy", "db.quiet"]
    _create(warehouse, names, options)
    for i in range(4):
        _commit(warehouse, "db.quiet", i * 10, options)
    config = tmp_path / "paimond.toml"
    config.write_text(f"""
[[warehouses]]
uri = "{warehouse}"
storage_options = {{ {storage_options} }}
[jobs.compact]
interval_s = 1
[jobs.expire]
interval_s = 1
retain_max = 3
retain_min = 1
older_than = "1 ms"
[daemon]
check_interval_s = 0.3
discovery_interval_s = 1
[http]
port = 0
[shutdown]
grace_s = 20
[log]
format = "json"
""")
    env = {**os.environ, "PAIMOND_TRIGGER_TOKEN": "e2e-token"}
    process, url = start_daemon(config, env)
    try:
        for i in range(8):  # an ingestion job keeps committing while the daemon works
            _commit(warehouse, "db.busy", i * 7, options)
            expected = read_rows(warehouse, "db.busy", catalog_options=options,
                                 include_level0=True)
            assert read_rows(warehouse, "db.busy", catalog_options=options,
                             include_level0=True).equals(expected)
        deadline = time.monotonic() + DEADLINE_S
        metrics: dict[str, float] = {}
        while time.monotonic() < deadline:
            metrics = _scrape(url)
            runs = [metrics.get(f'paimond_table_max_sorted_runs{{table="{n}"}}') for n in names]
            if all(r is not None and r <= 3 for r in runs):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"sorted runs stayed above the trigger: {metrics}")
        finished = {k: v for k, v in metrics.items() if "jobs_finished" in k}
        for name in names:
            assert finished.get(f'paimond_jobs_finished_total{{job="compact",outcome="success",'
                                f'table="{name}"}}', 0) >= 1, finished
            assert f'paimond_table_level0_files{{table="{name}"}}' in metrics
        final = read_rows(warehouse, "db.busy", catalog_options=options, include_level0=True)
        assert final.num_rows == 7 * 7 + 20 and read_rows(
            warehouse, "db.busy", catalog_options=options).equals(final)
        reply = subprocess.run([sys.executable, "-m", "paimond.cli", "trigger", url,
                                "--table", "db.quiet", "--wait"], env=env, capture_output=True,
                               text=True, timeout=120)
        assert reply.returncode == 0, reply.stderr
        assert '"compact": {"outcome": "success"' in reply.stdout
        refused = subprocess.run([sys.executable, "-m", "paimond.cli", "trigger", url,
                                  "--table", "db.quiet"], capture_output=True, text=True,
                                 env={**os.environ, "PAIMOND_TRIGGER_TOKEN": "wrong"}, timeout=60)
        assert refused.returncode == 2 and "401" in refused.stderr  # the caller's fault: 2
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=60)  # the grace period (20 s) and a loaded machine's slack
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert code == 0, "SIGTERM: a clean exit within the grace period"
    assert read_rows(warehouse, "db.busy", catalog_options=options,
                     include_level0=True).num_rows == 7 * 7 + 20


def test_daemon_maintains_a_local_warehouse(tmp_path: Path) -> None:
    _maintain_while_writing(tmp_path, str(tmp_path / "wh"), None, "")


@pytest.mark.s3
def test_daemon_maintains_an_s3_warehouse(tmp_path: Path, s3_endpoint: S3Endpoint) -> None:
    bucket = s3_endpoint.make_bucket("daemon")
    options: dict[str, Any] = {
        "s3.endpoint": s3_endpoint.endpoint_url, "s3.access-key": s3_endpoint.storage_options["key"],
        "s3.secret-key": s3_endpoint.storage_options["secret"], "s3.region": s3_endpoint.region,
        "s3.path.style.access": "true"}
    _maintain_while_writing(tmp_path, f"{bucket}/wh", options,
                            f'endpoint_url = "{s3_endpoint.endpoint_url}"')


def test_a_taken_port_exits_2_naming_the_key(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from paimond.cli.main import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "paimond.toml"
        (tmp_path / "wh").mkdir()  # a warehouse that does not exist is refused before the port
        config.write_text(f'[[warehouses]]\nuri = "{tmp_path / "wh"}"\n[http]\nport = {port}\n')
        assert main(["run", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert "http.port" in error and f"127.0.0.1:{port}" in error


def test_every_line_is_json_and_a_stop_ends_with_daemon_stopped(tmp_path: Path) -> None:
    """APScheduler's plain-text lines among the JSON ones, a traceback after
    `daemon_stopped`, the plain "serving" line: every line the process writes is one JSON
    object, `daemon_stopped` is the last, and SIGTERM exits 0."""
    warehouse = str(tmp_path / "wh")
    _create(warehouse, ["db.t"], None)
    for i in range(3):
        _commit(warehouse, "db.t", i * 10, None)
    config = tmp_path / "paimond.toml"
    config.write_text(f"""
[[warehouses]]
uri = "{warehouse}"
[daemon]
check_interval_s = 1
[http]
port = 0
[log]
format = "json"
level = "debug"
""")
    lines: list[str] = []
    process, url = start_daemon(config, dict(os.environ), lines)
    try:
        time.sleep(3)  # ticks, a compaction, APScheduler at work
        assert _scrape(url)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    time.sleep(0.5)  # the reader thread takes the last lines
    records = [json.loads(line) for line in "".join(lines).splitlines() if line.strip()]
    assert code == 0
    assert records[-1]["event"] == "daemon_stopped", records[-3:]
    assert any(r["event"] == "job_finished" for r in records)
