"""The ``paimond`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from paimond import __version__
from paimond.daemon import cli_daemon
from paimond.daemon.report import render_json, render_text
from paimond.errors import PaimondError
from paimond.lsm.task import CompactTask
from paimond.maintenance.compact import CompactJob
from paimond.maintenance.status import TableStatus, table_status
from paimond.table.catalog import Table, list_tables, open_table
from paimond.table.storage import open_storage

EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE = 0, 1, 2


def _storage_options(pairs: Sequence[str]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"paimond: --storage-option wants KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def _status(args: argparse.Namespace) -> int:
    storage = open_storage(args.warehouse, _storage_options(args.storage_option))
    warehouse = storage.root
    tables: list[Table]
    statuses: list[TableStatus]
    if args.table:
        try:
            tables = [open_table(storage, warehouse, args.table)]
        except (PaimondError, ValueError) as error:
            statuses = [TableStatus(args.table, warehouse, error=str(error))]
            tables = []
        else:
            statuses = []
    else:
        tables, statuses = list_tables(storage, warehouse), []
    statuses += [table_status(t, verify_files=not args.no_verify) for t in tables]
    if args.json:
        print(render_json(statuses))
    else:
        if not statuses:
            print(f"no Paimon tables under {warehouse}")
        print("\n\n".join(render_text(s) for s in statuses))
    return EXIT_UNREADABLE if any(s.error for s in statuses) else EXIT_OK


def _partitions(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"paimond: --partition wants KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _progress_bar(done: int, total: int, task: CompactTask) -> None:
    width = 30
    filled = width * done // total
    where = f"{task.partition_text or '-'} bucket {task.bucket}"
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {where:<40.40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _compact(args: argparse.Namespace) -> int:
    options = _storage_options(args.storage_option)
    storage = open_storage(args.warehouse, options)
    table = open_table(storage, storage.root, args.table)
    job = CompactJob(table, storage.root, options, full=args.full,
                     partitions=_partitions(args.partition),
                     parallelism=args.parallelism or (os.cpu_count() or 1),
                     progress=_progress_bar if sys.stderr.isatty() else None)
    if args.dry_run:
        print(job.plan().describe())
        return EXIT_OK
    summary = job.run()
    print(summary.describe())
    return EXIT_UNREADABLE if summary.failures else EXIT_OK


def _add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec storage option, e.g. endpoint_url=http://127.0.0.1:9000")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="paimond", description="Compaction and maintenance for Apache Paimon tables.")
    parser.add_argument("--version", action="version", version=f"paimond {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    status = commands.add_parser(
        "status", help="describe tables: snapshots, manifests, LSM levels per bucket",
        description="Describe the tables of a warehouse. Exit code 1 if any table is unreadable.")
    status.add_argument("warehouse", help="warehouse path or URI (local path, file://, s3://)")
    status.add_argument("--table", metavar="DB.TABLE", help="only this table")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--no-verify", action="store_true",
                        help="skip checking that live data files exist (one listing per bucket)")
    _add_storage_option(status)
    status.set_defaults(run=_status)

    compact = commands.add_parser(
        "compact", help="compact the LSM buckets of a primary-key table",
        description="Plan every bucket (Paimon's universal compaction, or --full), rewrite in "
                    "parallel, commit one COMPACT snapshot. Exit code 1 if a bucket failed.")
    compact.add_argument("warehouse", help="warehouse path or URI")
    compact.add_argument("--table", metavar="DB.TABLE", required=True)
    compact.add_argument("--partition", action="append", default=[], metavar="K=V",
                         help="only partitions with this value (repeat for several keys)")
    compact.add_argument("--full", action="store_true",
                         help="full compaction: every bucket to one sorted run at the max level")
    compact.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    compact.add_argument("--parallelism", type=int, default=0,
                         help="bucket tasks at once (default: CPU count)")
    _add_storage_option(compact)
    compact.set_defaults(run=_compact)

    cli_daemon.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except PaimondError as error:
        print(f"paimond: {error}", file=sys.stderr)
        return EXIT_UNREADABLE


if __name__ == "__main__":
    sys.exit(main())
