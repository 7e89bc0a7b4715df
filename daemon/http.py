"""One HTTP port: /metrics, /healthz, /readyz, /status and POST /trigger (bearer token)."""

from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from paimond.daemon.runner import TableRun
from paimond.errors import ConfigError

if TYPE_CHECKING:  # the daemon serves this server: a runtime import would be a cycle
    from paimond.daemon.service import Daemon

MAX_BODY_BYTES = 64 * 1024


def run_to_json(run: TableRun) -> dict[str, Any]:
    return {"table": run.table, "error": run.error,
            "jobs": {job: {"outcome": r.outcome, "detail": r.detail}
                     for job, r in run.reports.items()}}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # requests are not worth a log line each; structlog covers the jobs

    def _reply(self, code: int, body: bytes | dict[str, Any], content_type: str = "application/json"
               ) -> None:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        service = self.server.service
        if self.path == "/metrics":
            self._reply(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            self._reply(200, {"status": "alive"})
        elif self.path == "/readyz":
            reason = service.unready_reason()
            if reason is None:
                self._reply(200, {"ready": True})
            else:
                self._reply(503, {"ready": False, "reason": reason})
        elif self.path == "/status":
            self._reply(200, {"tables": service.status()})
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        if self.path != "/trigger":
            self._reply(404, {"error": "not found"})
            return
        token = self.server.token
        if token is None:
            self._reply(403, {"error": "triggers are disabled: no trigger token configured"})
            return
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            self._reply(401, {"error": "missing or wrong bearer token"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._reply(400, {"error": "malformed Content-Length"})
            return
        if length > MAX_BODY_BYTES:
            self._reply(413, {"error": "request too large"})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            table, wait = str(body["table"]), bool(body.get("wait", False))
        except (ValueError, KeyError, TypeError):
            self._reply(400, {"error": 'expected JSON {"table": "db.table", "wait": false}'})
            return
        future = self.server.service.trigger(table)
        if future is None:
            where = ", ".join(s.root for s in self.server.service.storages)
            self._reply(404, {"error": f"table {table} not found in {where}"})
        elif wait:
            self._reply(200, run_to_json(future.result()))
        else:
            self._reply(202, {"table": table, "accepted": True})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], service: Daemon, registry: CollectorRegistry,
                 token: str | None) -> None:
        super().__init__(address, _Handler)
        self.service, self.registry, self.token = service, registry, token


class HttpServer:
    def __init__(self, service: Daemon, registry: CollectorRegistry, host: str, port: int,
                 token: str | None) -> None:
        try:
            self._server = _Server((host, port), service, registry, token)
        except OSError as error:  # port taken, address not on this host, no permission
            raise ConfigError("http.port", f"cannot listen on {host}:{port}: {error.strerror}"
                              ) from error
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="paimond-http")

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
