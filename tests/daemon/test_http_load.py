"""The daemon's HTTP port under hostile clients, on 127.0.0.1: 320 slow connections
once took the daemon from 7 to 328 threads, and a client that disconnected printed a raw
`BrokenPipeError` traceback into the JSON log. Now 500 slow connections leave the thread count
bounded and /metrics answering within a second, and a vanished client prints nothing."""

from __future__ import annotations

import http.client
import resource
import socket
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.http.endpoints import HttpServer
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance.jobs import ROUTINE

SLOW_CLIENTS = 500


def _metrics_seconds(address: tuple[str, int]) -> float:
    started = time.monotonic()
    connection = http.client.HTTPConnection(*address, timeout=5)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        assert response.status == 200 and b"paimond_up" in response.read()
    finally:
        connection.close()
    return time.monotonic() - started


def test_slow_clients_cost_no_threads_and_metrics_keep_answering(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 4 * SLOW_CLIENTS))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    (tmp_path / "wh").mkdir()
    daemon = Daemon(load_settings(None, env={"PAIMOND_WAREHOUSE": str(tmp_path / "wh")}, jobs=ROUTINE),
                    Metrics(CollectorRegistry()))
    server = HttpServer(Control(daemon), daemon.metrics.registry, "127.0.0.1", 0, None)
    server.start()
    address = server.address
    slow: list[socket.socket] = []
    try:
        assert _metrics_seconds(address) < 1.0
        threads_before = threading.active_count()
        for number in range(SLOW_CLIENTS):  # each sends part of a request, then nothing
            client = socket.create_connection(address, timeout=5)
            client.sendall(b"GET /metrics HTTP/1.0\r\nX-Slow: " + str(number).encode())
            slow.append(client)
            if number % 100 == 99:
                assert _metrics_seconds(address) < 1.0, f"after {number + 1} slow clients"
        time.sleep(0.5)
        assert threading.active_count() - threads_before <= 17, threading.active_count()
        assert max(_metrics_seconds(address) for _ in range(5)) < 1.0
        # clients that leave before their reply: nothing printed
        for _ in range(20):
            gone = socket.create_connection(address, timeout=5)
            gone.sendall(b"GET /status HTTP/1.0\r\n\r\n")
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            gone.close()  # a reset, as a client killed mid-request sends
        assert _metrics_seconds(address) < 1.0
    finally:
        for client in slow:
            client.close()
        server.stop()
        Lifecycle(daemon).shutdown(0)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err[-2000:]
