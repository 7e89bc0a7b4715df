"""What the one-shot commands share: storage options, the table argument, --partition, the
executor options, exit codes, and usage errors (a ConfigError) exiting with 2."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from paimond.errors import ConfigError

if TYPE_CHECKING:  # imported by the commands that open storage, not by --help
    from paimond.maintenance.execution import TaskExecutor
    from paimond.table.catalog import Table
    from paimond.table.storage.interface import Storage

EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE = 0, 1, 2


class _Collector:
    """Whether this process is the ``paimond`` command's own (``main`` without ``argv``): only
    then may a command's imports pause the cyclic collector and freeze what they made."""

    owned = False


def own_collector() -> None:
    _Collector.owned = True


@contextlib.contextmanager
def imports_uncollected() -> Iterator[None]:
    """A command's lazy imports without the cyclic collector, what they made then frozen
    (``gc.freeze``). A full collection runs every few thousand new objects: importing a job
    makes ~70,000, and their collections, which free nothing, cost ~20 ms; later collections
    skip the frozen modules too (bench/compact_process.py: 2M rows, 0.93x the wall). Not in
    a caller's process (``main(argv)``): its heap is not ours to freeze."""
    if not _Collector.owned or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _key_values(pairs: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(option, f"wants KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def storage_options_of(pairs: Sequence[str]) -> dict[str, str]:
    return _key_values(pairs, "--storage-option")


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec storage option, e.g. endpoint_url=http://127.0.0.1:9000")
    parser.add_argument("--catalog-option", action="append", default=[], metavar="KEY=VALUE",
                        help="Paimon catalog option of the warehouse's catalog, e.g. "
                             "metastore=jdbc, uri=jdbc:sqlite:/path/catalog.db, "
                             "catalog-key=jdbc, lock.enabled=true (the password: "
                             "PAIMOND_JDBC_PASSWORD), or metastore=rest, "
                             "uri=http://host:port, warehouse=NAME (the token: "
                             "PAIMOND_REST_TOKEN), or metastore=hive, "
                             "uri=thrift://host:9083, lock.enabled=true")


def partitions_of(pairs: Sequence[str]) -> dict[str, str]:
    return _key_values(pairs, "--partition")


def table_partitions_of(table: Table, pairs: Sequence[str]) -> dict[str, str]:
    """``--partition K=V`` pairs, every K a partition key of ``table`` (else ConfigError
    naming the key): every command that takes --partition checks alike."""
    partitions = partitions_of(pairs)
    keys = table.latest_schema().partition_keys
    unknown = sorted(set(partitions) - set(keys))
    if unknown:
        raise ConfigError("--partition", f"{', '.join(unknown)} is not a partition key of "
                          f"{table.name} (partition keys: {list(keys)})")
    return partitions


def open_warehouse_of(args: argparse.Namespace) -> Storage:
    """The warehouse's storage; ConfigError naming it when it does not exist."""
    from paimond.table.catalog import check_warehouse
    from paimond.table.storage.interface import open_storage

    storage = open_storage(args.warehouse, storage_options_of(args.storage_option))
    check_warehouse(storage)
    catalog = _key_values(getattr(args, "catalog_option", []), "--catalog-option")
    if not catalog:
        return storage
    from paimond.table.catalogs.catalog_storage import catalog_secret, with_catalog

    return with_catalog(storage, catalog, secret=catalog_secret(catalog, os.environ))


def table_of(args: argparse.Namespace) -> str:
    """``--table``, checked to be DB.TABLE before any storage is touched (ConfigError)."""
    name = str(args.table)
    database, _, table = name.partition(".")
    if not database or not table or "/" in name:
        raise ConfigError("--table", f"a table name is DB.TABLE, got {name!r}")
    return name


def add_table_arguments(parser: argparse.ArgumentParser, *, required: bool = True,
                        help: str | None = None) -> None:
    """``--table DB.TABLE`` and ``--branch NAME`` (Paimon's ``DB.TABLE$branch_NAME`` names a
    branch too)."""
    parser.add_argument("--table", metavar="DB.TABLE", required=required,
                        help=help or "the table (DB.TABLE$branch_NAME: one of its branches)")
    parser.add_argument("--branch", metavar="NAME",
                        help="a branch of the table (default: main)")


def open_table_of(args: argparse.Namespace) -> Table:
    """``--table`` (on ``--branch``) of the warehouse; ConfigError for a bad name, an
    unknown table or branch, or a warehouse that does not exist."""
    from paimond.table.catalog import open_table

    table_of(args)
    storage = open_warehouse_of(args)
    return open_table(storage, storage.root, args.table, getattr(args, "branch", None))


def usage_errors_exit_2(run: Callable[[argparse.Namespace], int]
                        ) -> Callable[[argparse.Namespace], int]:
    def guarded(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except ConfigError as error:
            print(f"paimond: {cli_wording(error, args)}", file=sys.stderr)
            return EXIT_USAGE
    return guarded


def cli_wording(error: ConfigError, args: argparse.Namespace) -> str:
    """A settings error in the command line's words: a key the command has as a flag is
    named as that flag (``older_than`` -> ``--older-than``), others plainly, without the
    config file's ``config`` prefix."""
    flags = {dest for dest, value in vars(args).items() if not callable(value)}
    key, reason = error.key, error.reason
    if key in flags:
        key = "--" + key.replace("_", "-")
    for dest in flags:
        reason = reason.replace(f"(use {dest})", f"(use --{dest.replace('_', '-')})")
    return f"{key}: {reason}"


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (exit 2 naming the flag)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        return value

    return parse


def progress_bar(done: int, total: int, label: str) -> None:
    """One line on stderr, redrawn in place: ``[####......] done/total label``."""
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<40.40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


# spark.executor.EXECUTORS, spelled here so that building the parser imports no job code
# (tests/cli/test_startup.py keeps them equal)
EXECUTORS = ("local", "spark")


def add_executor_options(command: argparse.ArgumentParser, what: str) -> None:
    """``--executor`` and ``--spark-master``: where ``what`` runs."""
    command.add_argument("--executor", choices=EXECUTORS, default="local",
                         help=f"where {what} run: here (a local process pool), or as Spark "
                              "tasks (pip install paimond[spark]; the driver plans and commits)")
    command.add_argument("--spark-master", metavar="URL",
                         help="with --executor spark and no running session: the master "
                              "(default: spark-submit's, else local[*])")


def open_executor_of(args: argparse.Namespace) -> AbstractContextManager[TaskExecutor | None]:
    """The local pool (None) without importing ``paimond.spark`` (structlog, rich: ~0.3 CPU s)."""
    if args.executor == "local":
        return contextlib.nullcontext()
    from paimond.spark.executor import open_executor

    return open_executor(args.executor, spark_master=args.spark_master)


def add_dry_run_and_json(parser: argparse.ArgumentParser, dry_run_help: str) -> None:
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def plain(value: Any) -> Any:
    """A result as JSON values: dataclasses and mappings as objects, date-times as ISO text
    (``dataclasses.asdict`` would rebuild a Counter from its pairs)."""
    import dataclasses
    import datetime
    from collections.abc import Mapping

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    return value


def print_result(result: Any, as_json: bool) -> None:
    """A command's result: its ``describe()`` text, or (``--json``) its fields as JSON."""
    import json

    print(json.dumps(plain(result), sort_keys=True) if as_json else result.describe())


def check_confirmable(args: argparse.Namespace, what: str) -> None:
    """Before a command that asks first changes anything: ConfigError (exit 2) when there is
    no ``--yes``, no ``--dry-run`` and no terminal to ask on."""
    if not (args.dry_run or args.yes or sys.stdin.isatty()):
        raise ConfigError("--yes", f"standard input is not a terminal to confirm {what} on: "
                                   "pass --yes (or --dry-run to see the plan)")


def confirmed(plan: str, question: str) -> bool:
    """Print ``plan`` and ask ``question`` on the terminal (stderr, so ``--json`` output stays
    clean); True for a yes."""
    print(plan, file=sys.stderr)
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def declined() -> int:
    """The operator answered no: nothing changed, exit 1."""
    print("declined: nothing changed", file=sys.stderr)
    return EXIT_UNREADABLE
