"""Readiness that means ready. A local warehouse directory or an S3 bucket that does
not exist is a configuration error at startup (run, run-once) and a 503 naming it in
/readyz, not an empty warehouse; an existing empty warehouse is ready. And POST
/trigger with a malformed Content-Length is a 400."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support.s3_endpoint import S3Endpoint

from paimond.cli.main import main
from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.http.endpoints import HttpServer
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.errors import ConfigError
from paimond.maintenance.jobs import ROUTINE

TOKEN = "letmein"
Serve = Callable[[Daemon], tuple[str, int]]  # serve a daemon's HTTP on a free port


def _daemon(warehouse: str) -> Daemon:
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": warehouse}, jobs=ROUTINE)
    return Daemon(settings, Metrics(CollectorRegistry()))


@pytest.fixture
def serve() -> Iterator[Serve]:
    servers: list[tuple[HttpServer, Daemon]] = []

    def start(daemon: Daemon) -> tuple[str, int]:
        server = HttpServer(Control(daemon), daemon.metrics.registry, "127.0.0.1", 0, TOKEN)
        server.start()
        servers.append((server, daemon))
        address: tuple[str, int] = server.address
        return address

    yield start
    for server, daemon in servers:
        server.stop()
        Lifecycle(daemon).shutdown(0)


def _get(address: tuple[str, int], path: str) -> tuple[int, dict[str, object]]:
    connection = http.client.HTTPConnection(*address, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_missing_local_warehouse_is_not_ready_and_refuses_to_start(
        tmp_path: Path, serve: Serve) -> None:
    missing = tmp_path / "wh"
    daemon = _daemon(str(missing))
    address = serve(daemon)
    status, body = _get(address, "/readyz")
    assert status == 503
    assert body == {"ready": False, "reason": f"config warehouse: {missing} does not exist"}
    assert not daemon.ready()
    with pytest.raises(ConfigError, match=f"{missing} does not exist"):
        daemon.run_once()
    with pytest.raises(ConfigError, match=f"{missing} does not exist"):
        Lifecycle(_daemon(str(missing))).run()
    assert not missing.exists()

    missing.mkdir()  # created: an empty warehouse is ready
    assert _get(address, "/readyz") == (200, {"ready": True})
    assert _daemon(str(missing)).run_once() == []
    shutil.rmtree(missing)  # removed under a running daemon: not ready again
    assert _get(address, "/readyz")[0] == 503


def test_an_s3_bucket_that_does_not_exist_is_not_ready(
        s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch, serve: Serve,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PAIMOND_S3_ENDPOINT_URL", s3_endpoint.endpoint_url)
    missing = _daemon("s3://paimond-no-such-bucket/wh")
    status, body = _get(serve(missing), "/readyz")
    assert status == 503
    assert body["reason"] == ("config warehouse: s3://paimond-no-such-bucket/wh: bucket "
                              "'paimond-no-such-bucket' does not exist")
    with pytest.raises(ConfigError, match="bucket 'paimond-no-such-bucket' does not exist"):
        missing.run_once()
    endpoint = f"endpoint_url={s3_endpoint.endpoint_url}"
    assert main(["status", "s3://paimond-no-such-bucket/wh", "--storage-option", endpoint]) == 2
    assert "bucket 'paimond-no-such-bucket' does not exist" in capsys.readouterr().err

    bucket = s3_endpoint.make_bucket("paimond-readiness")
    empty = _daemon(f"{bucket}/wh")  # an existing bucket, no object under the prefix: empty
    assert _get(serve(empty), "/readyz") == (200, {"ready": True})
    assert empty.run_once() == []
    assert main(["status", f"{bucket}/wh", "--storage-option", endpoint]) == 0
    assert "no Paimon tables under" in capsys.readouterr().out


@pytest.mark.parametrize("length", ["abc", "-5", "1e3"])
def test_trigger_with_a_malformed_content_length_is_a_400(
        tmp_path: Path, serve: Serve, length: str) -> None:
    address = serve(_daemon(str(tmp_path)))
    connection = http.client.HTTPConnection(*address, timeout=30)
    try:
        connection.putrequest("POST", "/trigger")
        connection.putheader("Authorization", f"Bearer {TOKEN}")
        connection.putheader("Content-Length", length)
        connection.endheaders(b'{"table": "db.t"}')
        response = connection.getresponse()
        assert response.status == 400
        assert json.loads(response.read()) == {"error": "malformed Content-Length"}
    finally:
        connection.close()


def test_trigger_of_an_unknown_table_names_the_warehouse(
        tmp_path: Path, serve: Serve, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    host, port = serve(_daemon(str(tmp_path)))
    monkeypatch.setenv("PAIMOND_TRIGGER_TOKEN", TOKEN)
    assert main(["trigger", f"http://{host}:{port}", "--table", "db.x"]) == 2
    assert f"(404): {{\"error\": \"table db.x not found in {tmp_path}\"}}" in (
        capsys.readouterr().err)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_store_is_not_ready_and_run_once_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: Serve,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not a configuration error (it may come back, exit 1), but not an empty warehouse."""
    for name, value in (("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s"),
                        ("AWS_EC2_METADATA_DISABLED", "true")):
        monkeypatch.setenv(name, value)
    config = tmp_path / "paimond.toml"
    config.write_text(
        '[[warehouses]]\nuri = "s3://down-bucket/wh"\nstorage_options = { endpoint_url = '
        f'"http://127.0.0.1:{_closed_port()}", region = "us-east-1", connect_timeout_s = "1", '
        'read_timeout_s = "1", max_attempts = "1" }\n')
    daemon = Daemon(load_settings(str(config), jobs=ROUTINE), Metrics(CollectorRegistry()))
    status, body = _get(serve(daemon), "/readyz")
    assert status == 503 and "s3://down-bucket: storage unavailable" in str(body["reason"])
    assert main(["run-once", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert "s3://down-bucket: storage unavailable" in err and "Traceback" not in err


def test_liveness_follows_the_schedulers_heartbeat(tmp_path: Path, serve: Serve) -> None:
    """/healthz said 200 while every tick was skipped behind a stuck one. It fails once
    no tick has finished for daemon.liveness_timeout_s, and recovers with the next tick."""
    (tmp_path / "wh").mkdir()
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": str(tmp_path / "wh"),
                                        "PAIMOND_DAEMON_LIVENESS_TIMEOUT_S": "1"}, jobs=ROUTINE)
    daemon = Daemon(settings, Metrics(CollectorRegistry()))
    address = serve(daemon)
    assert _get(address, "/healthz") == (200, {"status": "alive"})
    release = threading.Event()
    real_tick = daemon._tick

    def stuck() -> list[Any]:
        release.wait(30)
        return real_tick()

    daemon._tick = stuck  # type: ignore[method-assign]
    ticking = threading.Thread(target=daemon.tick)
    ticking.start()
    time.sleep(1.5)
    status, body = _get(address, "/healthz")
    assert status == 503 and body["status"] == "stuck"
    assert "daemon.liveness_timeout_s = 1" in str(body["reason"])
    release.set()
    ticking.join(30)
    assert _get(address, "/healthz") == (200, {"status": "alive"})
