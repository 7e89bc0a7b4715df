"""The console's endpoints in-process: the page and its assets from the package, the versioned
JSON it is built from (every table with its health figures; one table's buckets and levels as
``paimond status`` reads them), and the errors: an unknown table, a missing name, an unknown
asset. No credential or storage option appears in any answer. (The page itself, in a browser:
test_console_browser.py.)"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support.pypaimon_tables import build_pk_deduplicate

from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.http.endpoints import HttpServer
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.errors import ConfigError
from paimond.maintenance.jobs import ROUTINE


def _get(url: str, token: str | None = None) -> tuple[int, str, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def test_the_console_and_its_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_pk_deduplicate(warehouse)
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": warehouse,
                                        "PAIMOND_TRIGGER_TOKEN": "secret-token"}, jobs=ROUTINE)
    daemon = Daemon(settings, Metrics(CollectorRegistry()))
    daemon.discover()
    for run in daemon.tick():  # one pass of every job: the table is read and its figures set
        run.result()
    server = HttpServer(Control(daemon), daemon.metrics.registry, "127.0.0.1", 0, "secret-token")
    server.start()
    url = "http://{}:{}".format(*server.address)
    try:
        status, kind, page = _get(f"{url}/")
        assert status == 200 and kind.startswith("text/html") and b"console.js" in page
        for asset, expected in (("console.js", "text/javascript"), ("console.css", "text/css")):
            status, kind, body = _get(f"{url}/console/{asset}")
            assert status == 200 and kind.startswith(expected) and len(body) > 1000
        assert _get(f"{url}/console/../endpoints.py")[0] == 404
        assert _get(f"{url}/console/secrets.txt")[0] == 404

        status, _, body = _get(f"{url}/api/v1/tables")
        answer: dict[str, Any] = json.loads(body)
        assert status == 200 and answer["api_version"] == 1
        entry = answer["tables"][spec.name]
        assert entry["state"] == "idle" and entry["jobs"]["compact"]["why"]
        figures = entry["figures"]
        assert figures["max_sorted_runs"] >= 1 and figures["stop_trigger"] >= 1
        assert 0 <= figures["health"] <= 100

        status, _, body = _get(f"{url}/api/v1/tables?view=summary")
        summary = json.loads(body)["tables"][spec.name]
        assert summary == {**{k: entry[k] for k in ("state", "error", "quarantined", "failures",
                                                   "running", "paused", "figures")},
                           "refused": []}

        status, _, body = _get(f"{url}/api/v1/table?name={spec.name}")
        detail = json.loads(body)
        assert status == 200 and detail["api_version"] == 1
        assert (detail["status"]["state"], detail["status"]["figures"]) == (entry["state"],
                                                                     entry["figures"])
        buckets = detail["table"]["buckets"]
        assert buckets and all(b["sorted_runs"] >= 1 and b["levels"] for b in buckets)
        # read now: the tick's compaction committed the table's newest snapshot
        assert detail["table"]["latest_commit_kind"] == "COMPACT"
        assert entry["jobs"]["compact"]["outcome"] == "success"
        assert detail["options"]["bucket"] and detail["branches"] == []
        history = detail["history"]
        assert history["figures"] and "max_sorted_runs" in history["figures"][-1]
        assert {r["job"] for r in history["runs"]} >= {"compact", "expire"}
        assert all(r["duration_s"] >= 0 and r["at"] > 0 for r in history["runs"])
        for text in (page, body):
            assert b"secret-token" not in text

        # polled again at the same snapshot: the read is reused, not repeated
        from paimond.daemon.http import control as control_module

        reads: list[str] = []
        original = control_module.table_status
        monkeypatch.setattr(control_module, "table_status",
                            lambda table, **kw: reads.append(table.name) or original(table, **kw))
        assert json.loads(_get(f"{url}/api/v1/table?name={spec.name}")[2])["table"] == \
            detail["table"]
        assert reads == []

        assert _get(f"{url}/api/v1/table?name=db.nope")[0] == 404
        assert _get(f"{url}/api/v1/table")[0] == 400
    finally:
        server.stop()
        Lifecycle(daemon).shutdown(5)


@pytest.mark.parametrize("name", ["index.html", "console.js", "console.css"])
def test_the_assets_ship_in_the_package(name: str) -> None:
    from paimond.daemon.http.console import asset

    found = asset(name)
    assert found is not None and len(found[0]) > 1000


def test_with_console_auth_the_data_needs_the_token(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    build_pk_deduplicate(warehouse)
    env = {"PAIMOND_WAREHOUSE": warehouse, "PAIMOND_HTTP_CONSOLE_AUTH": "true"}
    with pytest.raises(ConfigError) as missing:
        load_settings(None, env=env, jobs=ROUTINE)
    assert missing.value.key == "PAIMOND_HTTP_CONSOLE_AUTH"  # where the setting came from
    assert "needs the trigger token" in str(missing.value)
    settings = load_settings(None, env={**env, "PAIMOND_TRIGGER_TOKEN": "secret-token"},
                             jobs=ROUTINE)
    assert settings.console_auth
    daemon = Daemon(settings, Metrics(CollectorRegistry()))
    daemon.discover()
    server = HttpServer(Control(daemon), daemon.metrics.registry, "127.0.0.1", 0, "secret-token",
                        read_auth=settings.console_auth)
    server.start()
    url = "http://{}:{}".format(*server.address)
    try:
        for path in ("/status", "/api/v1/tables", "/api/v1/table?name=db.pk_deduplicate"):
            assert _get(f"{url}{path}")[0] == 401, path
            assert _get(f"{url}{path}", "wrong")[0] == 401, path
            assert _get(f"{url}{path}", "secret-token")[0] == 200, path
        # the page and its files hold no data: a browser gets them, then the page asks
        for path in ("/", "/console/console.js"):
            assert _get(f"{url}{path}")[0] == 200
        assert _get(f"{url}/metrics")[0] == 200  # Prometheus scrapes as before
    finally:
        server.stop()
        Lifecycle(daemon).shutdown(5)


def test_only_maintenance_options_are_shown() -> None:
    from paimond.daemon.http.status_view import maintenance_options

    shown = maintenance_options({"s3.secret-key": "x", "fs.oss.accessKeySecret": "y",
                                 "num-sorted-run.stop-trigger": "5", "bucket": "4",
                                 "snapshot.num-retained.max": "10", "path": "/wh/t"})
    assert shown == {"bucket": "4", "num-sorted-run.stop-trigger": "5",
                     "snapshot.num-retained.max": "10"}
