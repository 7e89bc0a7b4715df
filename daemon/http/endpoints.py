"""One HTTP port: /metrics, /healthz, /readyz, /status (JSON, or HTML for a browser or
``?format=html``), the web console at / (``daemon.http.console``) and the JSON it is built
from (/api/v1/tables, /api/v1/table?name=db.table), and with the bearer token: POST /trigger,
/pause, /resume and GET /admission?table=db.table (with ``http.console_auth``, /status and
/api/v1/* too; the console's page and files never: they hold no data)."""

from __future__ import annotations

import hmac
import json
import threading
import urllib.parse
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from paimond.daemon.http.bounded_server import BoundedHttpServer, BufferedHandler
from paimond.daemon.http.console import asset
from paimond.daemon.http.control import Control
from paimond.daemon.http.status_text import render_html
from paimond.daemon.http.status_view import summary_json
from paimond.daemon.runner import TableRun
from paimond.errors import ConfigError, PaimondError, UnreadableTableError

MAX_BODY_BYTES = 64 * 1024
API_VERSION = 1  # of /api/v1/*: a key removed or changed in meaning makes a /api/v2


def run_to_json(run: TableRun) -> dict[str, Any]:
    return {"table": run.table, "error": run.error,
            "jobs": {job: {"outcome": r.outcome, "detail": r.detail}
                     for job, r in run.reports.items()}}


class _Handler(BufferedHandler):
    server: _Server  # type: ignore[assignment]  # not a socketserver server (http_server.py)

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

    def _authorized(self) -> bool:
        """The bearer token of the mutating and admission endpoints; replies when not."""
        token = self.server.token
        if token is None:
            self._reply(403, {"error": "disabled: no trigger token configured"})
            return False
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            self._reply(401, {"error": "missing or wrong bearer token"})
            return False
        return True

    def _body(self) -> dict[str, Any] | None:
        """The JSON object sent, or None after replying 400/413."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self._reply(400, {"error": "malformed Content-Length"})
            return None
        if length > MAX_BODY_BYTES:
            self._reply(413, {"error": "request too large"})
            return None
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("table"), str):
            self._reply(400, {"error": 'expected JSON {"table": "db.table"}'})
            return None
        return body

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        control = self.server.control
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/metrics":
            self._reply(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif url.path == "/healthz":  # the scheduler's heartbeat
            reason = control.liveness_reason()
            if reason is None:
                self._reply(200, {"status": "alive"})
            else:
                self._reply(503, {"status": "stuck", "reason": reason})
        elif url.path == "/readyz":
            reason = control.unready_reason()
            if reason is None:
                self._reply(200, {"ready": True})
            else:
                self._reply(503, {"ready": False, "reason": reason})
        elif (url.path == "/status" or url.path.startswith("/api/")) and \
                self.server.read_auth and not self._authorized():
            return
        elif url.path == "/status":
            tables = control.status()
            wants_html = (query.get("format") == ["html"]
                          or "text/html" in self.headers.get("Accept", ""))
            if wants_html:
                self._reply(200, render_html(tables).encode(), "text/html; charset=utf-8")
            else:
                self._reply(200, {"tables": tables})
        elif url.path == "/api/v1/tables":
            tables = control.status()
            if query.get("view") == ["summary"]:
                tables = {name: summary_json(entry) for name, entry in tables.items()
                          if isinstance(entry, dict)}
            self._reply(200, {"api_version": API_VERSION, "tables": tables})
        elif url.path == "/api/v1/table":
            self._table_detail(query.get("name", [""])[0])
        elif url.path == "/" or url.path.startswith("/console/"):
            found = asset("index.html" if url.path == "/" else url.path[len("/console/"):])
            if found is None:
                self._reply(404, {"error": "not found"})
            else:
                self._reply(200, *found)
        elif url.path == "/admission":
            if self._authorized():
                self._admission(query.get("table", [""])[0])
        else:
            self._reply(404, {"error": "not found"})

    def _not_found(self, table: str) -> None:
        where = ", ".join(self.server.control.warehouses())
        self._reply(404, {"error": f"table {table} not found in {where}"})

    def _table_detail(self, table: str) -> None:
        if not table:
            self._reply(400, {"error": "expected /api/v1/table?name=db.table"})
            return
        try:
            detail = self.server.control.table_detail(table)
        except PaimondError as error:
            self._reply(503, {"error": f"cannot read {table}: {type(error).__name__}: {error}"})
            return
        if detail is None:
            self._not_found(table)
        else:
            self._reply(200, {"api_version": API_VERSION, **detail})

    def _admission(self, table: str) -> None:
        if not table:
            self._reply(400, {"error": "expected /admission?table=db.table"})
            return
        try:
            answer = self.server.control.admission(table)
        except UnreadableTableError as error:
            self._reply(503, {"error": f"cannot read {table}: {error}"})
        except PaimondError as error:
            self._reply(503, {"error": f"{type(error).__name__}: {error}"})
        else:
            if answer is None:
                self._not_found(table)
            else:
                self._reply(200, answer.to_json())

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        if self.path not in ("/trigger", "/pause", "/resume"):
            self._reply(404, {"error": "not found"})
            return
        if not self._authorized():
            return
        body = self._body()
        if body is None:
            return
        control, table = self.server.control, str(body["table"])
        if self.path == "/pause":
            if control.pause(table):
                self._reply(200, {"table": table, "paused": control.paused(table)})
            else:
                self._not_found(table)
            return
        if self.path == "/resume":
            if not control.known(table):
                self._not_found(table)
            elif (held := control.resume(table)) is not None:
                self._reply(409, {"table": table, "paused": held,
                                  "error": f"{table} stays paused: {held} in the config"})
            else:
                self._reply(200, {"table": table, "paused": None})
            return
        if control.known(table) and (paused := control.paused(table)) is not None:
            self._reply(409, {"error": f"{table} is {paused}: resume it first"})
            return
        future = control.trigger(table)
        if future is None:
            self._not_found(table)
        elif bool(body.get("wait", False)):
            self._reply(200, run_to_json(future.result()))
        else:
            self._reply(202, {"table": table, "accepted": True})


class _Server(BoundedHttpServer):
    """Slow or idle clients cost a socket, never a thread (daemon/http/bounded_server.py)."""

    def __init__(self, address: tuple[str, int], control: Control, registry: CollectorRegistry,
                 token: str | None, read_auth: bool) -> None:
        super().__init__(address, _Handler, max_body_bytes=MAX_BODY_BYTES)
        self.control, self.registry, self.token = control, registry, token
        self.read_auth = read_auth  # /status and /api/v1/* ask for the token too


class HttpServer:
    def __init__(self, control: Control, registry: CollectorRegistry, host: str, port: int,
                 token: str | None, *, read_auth: bool = False) -> None:
        try:
            self._server = _Server((host, port), control, registry, token, read_auth)
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
