"""Asking a running daemon: ``paimond status --daemon URL`` (its ``/status``), ``paimond pause``
and ``paimond resume`` (``POST /pause``, ``/resume`` with the bearer token). Exit codes as
everywhere: 2 for the request's fault (a 4xx: unknown table, wrong token, a table the config
pauses), 1 when the daemon cannot be reached or fails (5xx), or a table it reports quarantined."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from paimond.cli.common import EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE, table_of
from paimond.errors import ConfigError


class _Refused(Exception):
    def __init__(self, code: int, text: str) -> None:
        self.code, self.text = code, text
        super().__init__(f"{code}: {text}")


def _call(url: str, path: str, *, token: str | None = None, body: dict[str, Any] | None = None,
          timeout_s: float = 30.0) -> Any:
    """The JSON reply; _Refused for an HTTP error, OSError when unreachable."""
    import urllib.error
    import urllib.request

    headers = {"Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(f"{url.rstrip('/')}{path}", data=data, headers=headers,
                                     method="GET" if data is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise _Refused(error.code, error.read().decode(errors="replace")) from None


def _failed(url: str, error: Exception) -> int:
    if isinstance(error, _Refused):
        print(f"paimond: {url} refused ({error.code}): {error.text}", file=sys.stderr)
        return EXIT_USAGE if 400 <= error.code < 500 else EXIT_UNREADABLE
    print(f"paimond: cannot reach {url}: {getattr(error, 'reason', error)}", file=sys.stderr)
    return EXIT_UNREADABLE


def daemon_status(args: argparse.Namespace) -> int:
    """``paimond status --daemon URL [--table DB.TABLE] [--json]``."""
    from paimond.daemon.http.status_text import render_text

    url = args.daemon
    if args.table:
        table_of(args)
    try:
        tables: dict[str, Any] = _call(url, "/status")["tables"]
    except (_Refused, OSError) as error:
        return _failed(url, error)
    if args.table:
        if args.table not in tables:
            raise ConfigError("--table", f"table {args.table} is not maintained by the daemon "
                                         f"at {url}")
        tables = {args.table: tables[args.table]}
    print(json.dumps({"tables": tables}, indent=2) if args.json else render_text(tables))
    return EXIT_UNREADABLE if any(t.get("quarantined") for t in tables.values()) else EXIT_OK


def _token(args: argparse.Namespace) -> str:
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as error:
            raise ConfigError("--token-file", f"cannot read {args.token_file}: "
                                              f"{error.strerror}") from None
    else:
        token = os.environ.get("PAIMOND_TRIGGER_TOKEN", "")
    if not token:
        raise ConfigError("--token-file", "a token is needed (--token-file or "
                                          "PAIMOND_TRIGGER_TOKEN)")
    return token


def _switch(path: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        table_of(args)
        token = _token(args)
        try:
            reply = _call(args.url, path, token=token, body={"table": args.table})
        except (_Refused, OSError) as error:
            return _failed(args.url, error)
        print(json.dumps(reply))
        return EXIT_OK
    return run


def register(commands: Any) -> None:
    """``pause`` and ``resume``; ``status --daemon`` is an option of ``status``."""
    for name, path, text in (
            ("pause", "/pause", "give a table no further job until resumed (a running job "
                                "finishes); a restart of the daemon forgets it"),
            ("resume", "/resume", "lift a pause made with `paimond pause` (a pause in the "
                                  "config stays: exit 2)")):
        command = commands.add_parser(name, help=text, description=text[0].upper() + text[1:]
                                      + ".")
        command.add_argument("url", help="the daemon's HTTP address, e.g. http://paimond:9181")
        command.add_argument("--table", metavar="DB.TABLE", required=True)
        command.add_argument("--token-file", help="file holding the bearer token (or set "
                                                  "PAIMOND_TRIGGER_TOKEN)")
        command.set_defaults(run=_switch(path))
