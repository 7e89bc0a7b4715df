"""The daemon's commands: ``run``, ``run-once`` and ``trigger``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from paimond.cli.common import EXIT_OK, imports_uncollected, table_of
from paimond.cli.common import EXIT_UNREADABLE as EXIT_FAILED
from paimond.cli.common import EXIT_USAGE as EXIT_CONFIG
from paimond.errors import ConfigError, StorageUnavailableError

if TYPE_CHECKING:  # the daemon, its HTTP server and metrics load only for these commands
    from paimond.config.settings import Settings


def _settings(args: argparse.Namespace) -> Settings | None:
    from paimond.config.settings import load_settings
    from paimond.maintenance.jobs import ROUTINE

    try:
        return load_settings(args.config, jobs=ROUTINE)
    except ConfigError as error:
        print(f"paimond: bad configuration: {error}", file=sys.stderr)
        return None


def _run(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from prometheus_client import CollectorRegistry

        from paimond.daemon.lifecycle import Lifecycle
        from paimond.daemon.logging import configure_logging, silence_logging
        from paimond.daemon.metrics import Metrics
        from paimond.daemon.service import Daemon

    settings = _settings(args)
    if settings is None:
        return EXIT_CONFIG
    as_json = configure_logging(settings.log_format, settings.log_level)
    lifecycle = Lifecycle(Daemon(settings, Metrics(CollectorRegistry())))
    try:  # JSON logs carry the URL in daemon_started (metrics_url): every line is JSON
        lifecycle.run(on_serving=None if as_json else lambda url: print(
            f"paimond: serving {url}/metrics", file=sys.stderr, flush=True))
    except ConfigError as error:  # a warehouse is not there, the HTTP address cannot be bound
        print(f"paimond: {error}", file=sys.stderr)
        return EXIT_CONFIG  # deploy/systemd/paimond.service: RestartPreventExitStatus=2
    # Stopped: jobs still running after the grace period were cancelled and can publish
    # nothing more (table/commit/gate.py), so the paimond process leaves at once, without
    # waiting for their threads or a scheduler tick still on its way (which would meet a
    # finalizing interpreter); daemon_stopped stays the last line. Exit 0 unless a second
    # signal forced it (commits are atomic: an abandoned job leaves only its own files,
    # which the next run cleans).
    code = EXIT_FAILED if lifecycle.forced else EXIT_OK
    if args.whole_process or lifecycle.forced:
        silence_logging()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code  # daemon_stopped said whether every job finished in time


def _run_once(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from prometheus_client import CollectorRegistry, write_to_textfile

        from paimond.daemon.http.endpoints import run_to_json
        from paimond.daemon.lifecycle import Lifecycle
        from paimond.daemon.logging import configure_logging
        from paimond.daemon.metrics import Metrics
        from paimond.daemon.service import Daemon

    settings = _settings(args)
    if settings is None:
        return EXIT_CONFIG
    configure_logging(settings.log_format, settings.log_level)
    registry = CollectorRegistry()
    daemon = Daemon(settings, Metrics(registry))
    try:
        runs = daemon.run_once()
    except ConfigError as error:  # a warehouse that does not exist
        print(f"paimond: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except StorageUnavailableError as error:  # it may come back: not a config error
        print(f"paimond: {error}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        Lifecycle(daemon).shutdown(0)
    for run in runs:
        print(json.dumps(run_to_json(run)))
    if args.textfile:
        write_to_textfile(args.textfile, registry)
    return EXIT_FAILED if any(r.error for r in runs) else EXIT_OK


def _trigger(args: argparse.Namespace) -> int:
    import urllib.error
    import urllib.request

    try:
        table_of(args)
    except ConfigError as error:
        print(f"paimond: {error}", file=sys.stderr)
        return EXIT_CONFIG
    token = os.environ.get("PAIMOND_TRIGGER_TOKEN")
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as error:
            print(f"paimond: cannot read --token-file {args.token_file}: {error.strerror}",
                  file=sys.stderr)
            return EXIT_CONFIG
    if not token:
        print("paimond: a trigger token is needed (--token-file or PAIMOND_TRIGGER_TOKEN)",
              file=sys.stderr)
        return EXIT_CONFIG
    body = json.dumps({"table": args.table, "wait": args.wait}).encode()
    request = urllib.request.Request(f"{args.url.rstrip('/')}/trigger", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=args.timeout_s) as response:
            reply: Any = json.loads(response.read())
    except urllib.error.HTTPError as error:
        print(f"paimond: trigger refused ({error.code}): {error.read().decode(errors='replace')}",
              file=sys.stderr)
        # the request's fault (unknown table, token): usage, 2; the daemon's: 1
        return EXIT_CONFIG if 400 <= error.code < 500 else EXIT_FAILED
    except urllib.error.URLError as error:
        print(f"paimond: cannot reach {args.url}: {error.reason}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps(reply))
    return EXIT_FAILED if reply.get("error") else EXIT_OK


def register(commands: Any) -> None:
    """Add the daemon commands to the ``paimond`` parser's subcommands."""
    run = commands.add_parser("run", help="run the maintenance daemon",
                              description="Watch the configured warehouses and keep their tables "
                                          "healthy. SIGTERM/SIGINT stop it gracefully.")
    run.add_argument("--config", help="TOML or YAML settings file (PAIMOND_* env overrides)")
    run.set_defaults(run=_run)

    once = commands.add_parser("run-once", help="one full maintenance pass over every table")
    once.add_argument("--config", help="TOML or YAML settings file (PAIMOND_* env overrides)")
    once.add_argument("--textfile", help="write the metrics to this Prometheus textfile")
    once.set_defaults(run=_run_once)

    trigger = commands.add_parser("trigger", help="ask a running daemon to maintain a table now")
    trigger.add_argument("url", help="the daemon's HTTP address, e.g. http://paimond:9181")
    trigger.add_argument("--table", metavar="DB.TABLE", required=True)
    trigger.add_argument("--wait", action="store_true", help="return when the jobs finished")
    trigger.add_argument("--token-file", help="file holding the bearer token (or set "
                                              "PAIMOND_TRIGGER_TOKEN; never on the command line)")
    trigger.add_argument("--timeout-s", type=float, default=3600.0)
    trigger.set_defaults(run=_trigger)
