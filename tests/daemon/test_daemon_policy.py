"""Per-table policy in the running daemon, on pypaimon tables: two patterns (one paused by the
config, one with its own jobs, retention and a concurrency share of 1), the share's round robin,
a table's own Paimon option over the policy; then through HTTP: pause and resume, a trigger of
a paused table, admission at the stop trigger, ``paimond.spark.admission`` waiting for the
daemon's compaction, and ``paimond status --daemon``."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for

from paimond.cli.main import main
from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.http.endpoints import HttpServer
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance.jobs import ROUTINE
from paimond.spark import AdmissionTimeoutError, admission

SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), ("v", pa.string())])
HELD = {"bucket": "1", "write-only": "true", "num-sorted-run.compaction-trigger": "2",
        "num-sorted-run.stop-trigger": "3"}
TABLES = {"logs.a": HELD, "logs.b": {**HELD, "snapshot.num-retained.max": "10"},
          "sales.c": HELD}
COMMITS = 3  # three level-0 files in the one bucket: at the stop trigger
TOKEN = "letmein"
CONFIG = """
[[warehouses]]
uri = "{warehouse}"
[jobs.expire]
enabled = false
[jobs.merge_manifests]
enabled = false
[daemon]
backoff_base_s = 0
[[policies]]
tables = ["sales.*"]
paused = true
[[policies]]
tables = ["logs.*"]
concurrency = 1
[policies.jobs.expire]
enabled = true
retain_min = 1
retain_max = 2
"""


def _write(table: Any, rows: list[dict[str, Any]]) -> None:
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(pa.Table.from_pylist(rows, schema=SCHEMA))
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("daemon_policy") / "wh"
    catalog = catalog_for(str(warehouse))
    for name, options in TABLES.items():
        catalog.create_database(name.split(".")[0], True)
        catalog.create_table(name, Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"], options=options), False)
        table = catalog.get_table(name)
        for commit in range(COMMITS):
            _write(table, [{"id": i, "v": f"{name}-{commit}"} for i in range(commit, commit + 4)])
    return warehouse


@pytest.fixture
def daemon(pristine: Path, tmp_path: Path) -> tuple[Daemon, CollectorRegistry, Path]:
    warehouse = tmp_path / "wh"
    shutil.copytree(pristine, warehouse)
    config = tmp_path / "paimond.toml"
    config.write_text(CONFIG.format(warehouse=warehouse))
    registry = CollectorRegistry()
    service = Daemon(load_settings(str(config), env={"PAIMOND_TRIGGER_TOKEN": TOKEN}, jobs=ROUTINE),
                     Metrics(registry))
    yield service, registry, warehouse
    Lifecycle(service).shutdown(5)


def _snapshots(warehouse: Path, name: str) -> int:
    database, table = name.split(".")
    return len(list((warehouse / f"{database}.db" / table / "snapshot").glob("snapshot-*")))


def _tables(futures: list[Any]) -> list[str]:
    return [f.result().table for f in futures]


def test_two_patterns_a_paused_table_gets_no_job_and_the_share_goes_round_robin(
        daemon: tuple[Daemon, CollectorRegistry, Path]) -> None:
    service, registry, warehouse = daemon
    before = {n: read_rows(str(warehouse), n, include_level0=True) for n in TABLES}
    first = _tables(service.tick())
    assert len(first) == 1 and first[0] in ("logs.a", "logs.b"), first  # logs.* share is 1
    other = "logs.b" if first == ["logs.a"] else "logs.a"
    status: Any = Control(service).status()
    assert status["sales.c"]["state"] == "paused"
    assert status["sales.c"]["jobs"]["compact"]["why"] == "paused by policies[0] (sales.*)"
    assert status[other]["jobs"]["compact"]["why"] == ("waiting: policies[1] (logs.*) runs at "
                                                       "most 1 table(s) at once")
    done = status[first[0]]["jobs"]
    assert done["compact"]["outcome"] == "success" and done["expire"]["outcome"] == "success"
    assert done["merge_manifests"]["why"] == "disabled (jobs.merge_manifests.enabled)"
    # the first table is due again (its compaction moved it), yet the other one's turn comes
    assert _tables(service.tick()) == [other]
    # the policy's retention; logs.b sets snapshot.num-retained.max itself and keeps it
    assert _snapshots(warehouse, "logs.a") <= 2
    assert _snapshots(warehouse, "logs.b") == COMMITS + 1  # the compaction's, nothing expired
    assert _snapshots(warehouse, "sales.c") == COMMITS
    sources = Control(service).status()["logs.b"]["policy"]["sources"]  # type: ignore[index]
    assert sources["expire.retain_max"].startswith("table option snapshot.num-retained.max=10")
    assert Control(service).status()["logs.a"]["policy"]["jobs"]["expire"]["retain_max"] == 2  # type: ignore[index]
    assert registry.get_sample_value("paimond_jobs_started_total",
                                     {"job": "compact", "table": "sales.c"}) is None
    for name in TABLES:
        assert read_rows(str(warehouse), name, include_level0=True).equals(before[name])
    runs = {r.table: r for r in service.run_once()}
    assert runs["sales.c"].reports == {}, "run-once leaves a paused table alone too"
    assert _snapshots(warehouse, "sales.c") == COMMITS


def _http(url: str, path: str, body: dict[str, Any] | None = None, token: str | None = TOKEN
          ) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}{path}", data=data, headers=headers,
                                     method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_pause_resume_and_admission_through_http_python_and_the_cli(
        daemon: tuple[Daemon, CollectorRegistry, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    service, registry, warehouse = daemon
    server = HttpServer(Control(service), registry, "127.0.0.1", 0, TOKEN)
    server.start()
    url = "http://{}:{}".format(*server.address)
    try:
        assert _http(url, "/admission?table=logs.a", token=None)[0] == 401
        assert _http(url, "/admission?table=logs.a", token="nope")[0] == 401
        assert _http(url, "/admission?table=db.nope")[0] == 404
        code, held = _http(url, "/admission?table=logs.a")
        assert code == 200 and not held["admitted"] and "stop trigger 3" in held["reason"]
        assert (held["max_sorted_runs"], held["stop_trigger"]) == (COMMITS, 3)

        assert _http(url, "/pause", {"table": "logs.a"}) == (
            200, {"table": "logs.a", "paused": service.policies.paused("logs.a")})
        assert _http(url, "/pause", {"table": "db.nope"})[0] == 404
        assert _http(url, "/pause", {"tabel": "logs.a"})[0] == 400
        assert _http(url, "/resume", {"table": 7})[0] == 400
        assert _http(url, "/pause", {"table": "logs.b"}, token=None)[0] == 401
        assert "logs.a" not in _tables(service.tick()), "paused through the API: no job"
        code, refused = _http(url, "/trigger", {"table": "logs.a"})
        assert code == 409 and "paused through the API" in refused["error"]
        code, kept = _http(url, "/resume", {"table": "sales.c"})
        assert code == 409 and kept["paused"] == "paused by policies[0] (sales.*)"
        assert _http(url, "/resume", {"table": "logs.a"}) == (200, {"table": "logs.a",
                                                                     "paused": None})

        # a writer waits; the daemon compacts meanwhile (here: when the writer sleeps)
        now = [0.0]

        def nap(seconds: float) -> None:
            now[0] += seconds
            assert service.trigger("logs.a").result().reports["compact"].outcome == "success"  # type: ignore[union-attr]

        answer = admission(url, "logs.a", token=TOKEN, wait=True, poll_s=5, sleep=nap,
                           monotonic=lambda: now[0])
        assert answer.admitted and answer.waited_s == 5 and answer.max_sorted_runs < 3

        def idle(seconds: float) -> None:
            now[0] += seconds

        now[0] = 0.0
        with pytest.raises(AdmissionTimeoutError) as late:  # sales.c: paused, never compacted
            admission(url, "sales.c", token=TOKEN, wait=True, timeout_s=10, poll_s=5,
                      sleep=idle, monotonic=lambda: now[0])
        assert late.value.last.max_sorted_runs == COMMITS and "after 10 s" in str(late.value)
        assert now[0] == 10  # asked at 0, 5 and 10 s

        monkeypatch.setenv("PAIMOND_TRIGGER_TOKEN", TOKEN)
        capsys.readouterr()
        assert main(["status", "--daemon", url]) == 0
        text = capsys.readouterr().out
        assert "sales.c  paused; policy policies[0] (sales.*)" in text
        assert "logs.a  idle; policy policies[1] (logs.*)" in text
        assert main(["status", "--daemon", url, "--json", "--table", "logs.a"]) == 0
        shown = json.loads(capsys.readouterr().out)["tables"]
        assert list(shown) == ["logs.a"] and shown["logs.a"]["jobs"]["compact"]["outcome"] == (
            "success")
        assert main(["status", "--daemon", url, "--table", "db.nope"]) == 2
        assert main(["pause", url, "--table", "db.nope"]) == 2
        assert "table db.nope not found in" in capsys.readouterr().err
        assert main(["resume", url, "--table", "sales.c"]) == 2
        assert "stays paused" in capsys.readouterr().err
        assert main(["pause", url, "--table", "logs.b"]) == 0
        assert service.policies.paused("logs.b") is not None
        page = urllib.request.urlopen(f"{url}/status?format=html", timeout=30)
        assert page.headers["Content-Type"].startswith("text/html")
        assert b"logs.b  paused" in page.read()
    finally:
        server.stop()
