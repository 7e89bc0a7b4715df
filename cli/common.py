"""What the one-shot commands share: storage options, the table argument, --partition,
exit codes, and usage errors (a ConfigError) exiting with 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from paimond.errors import ConfigError
from paimond.table.catalog import Table, open_table
from paimond.table.storage import open_storage

EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE = 0, 1, 2


def _key_values(pairs: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"paimond: {option} wants KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def storage_options_of(pairs: Sequence[str]) -> dict[str, str]:
    return _key_values(pairs, "--storage-option")


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec storage option, e.g. endpoint_url=http://127.0.0.1:9000")


def partitions_of(pairs: Sequence[str]) -> dict[str, str]:
    return _key_values(pairs, "--partition")


def open_table_of(args: argparse.Namespace) -> Table:
    storage = open_storage(args.warehouse, storage_options_of(args.storage_option))
    return open_table(storage, storage.root, args.table)


def usage_errors_exit_2(run: Callable[[argparse.Namespace], int]
                        ) -> Callable[[argparse.Namespace], int]:
    def guarded(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except ConfigError as error:
            print(f"paimond: {error}", file=sys.stderr)
            return EXIT_USAGE
    return guarded


def progress_bar(done: int, total: int, label: str) -> None:
    """One line on stderr, redrawn in place: ``[####......] done/total label``."""
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<40.40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
