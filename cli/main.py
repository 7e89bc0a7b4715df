"""The ``paimond`` command line."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from paimond import __version__
from paimond.cli import branches as cli_branches
from paimond.cli import chain_table as cli_chain_table
from paimond.cli import consumers as cli_consumers
from paimond.cli import daemon as cli_daemon
from paimond.cli import daemon_status as cli_daemon_status
from paimond.cli import partition_done as cli_partition_done
from paimond.cli import rebuild_dv as cli_rebuild_dv
from paimond.cli import repair as cli_repair
from paimond.cli import rescale as cli_rescale
from paimond.cli import rollback as cli_rollback
from paimond.cli import tags as cli_tags
from paimond.cli.common import (
    EXIT_OK,
    EXIT_UNREADABLE,
    EXIT_USAGE,
    add_executor_options,
    add_storage_option,
    add_table_arguments,
    imports_uncollected,
    int_at_least,
    open_executor_of,
    open_table_of,
    open_warehouse_of,
    own_collector,
    progress_bar,
    table_of,
    table_partitions_of,
    usage_errors_exit_2,
)
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.errors import ConfigError, PaimondError
from paimond.maintenance.arrow_runtime import POOL_ENV, preferred_pool

if TYPE_CHECKING:  # the commands import what they run when they run (bench/startup.py)

    from paimond.lsm.task import CompactTask
    from paimond.maintenance.jobs import JobContext, JobReport
    from paimond.table.catalog import Table


def _status(args: argparse.Namespace) -> int:
    if args.daemon or not args.warehouse:
        if args.daemon and args.warehouse:
            raise ConfigError("status", "give a WAREHOUSE or --daemon URL, not both")
        if not args.daemon:
            raise ConfigError("status", "give a WAREHOUSE, or --daemon URL to ask a daemon")
        return cli_daemon_status.daemon_status(args)
    with imports_uncollected():
        from paimond.cli.report import render_json, render_text
        from paimond.table.catalog import list_tables, open_table
        from paimond.table.status.report import TableStatus, table_status

    if args.table:
        table_of(args)  # a bad name is a usage error before storage is touched
    storage = open_warehouse_of(args)
    warehouse = storage.root
    tables: list[Table]
    statuses: list[TableStatus]
    if args.table:
        try:
            tables = [open_table(storage, warehouse, args.table, args.branch)]
        except ConfigError:  # no such table: a usage error, exit 2
            raise
        except PaimondError as error:
            statuses = [TableStatus(args.table, warehouse, error=str(error))]
            tables = []
        else:
            statuses = []
    else:
        if args.branch:
            raise ConfigError("--branch", "give --table with --branch")
        tables, statuses = list_tables(storage, warehouse, branches=True), []
    statuses += [table_status(t, verify_files=not args.no_verify) for t in tables]
    if args.json:
        print(render_json(statuses))
    else:
        if not statuses:
            print(f"no Paimon tables under {warehouse}")
        print("\n\n".join(render_text(s) for s in statuses))
    return EXIT_UNREADABLE if any(s.error for s in statuses) else EXIT_OK


def _job_context(clock: Clock, **context: Any) -> JobContext:
    from paimond.maintenance.jobs import JobContext

    return JobContext(clock, **context)


def parse_duration_ms(text: str) -> int:
    from paimond.table.options.reader import parse_duration_millis

    return parse_duration_millis(text)


def _task_progress(done: int, total: int, task: CompactTask) -> None:
    progress_bar(done, total, f"{task.partition_text or '-'} bucket {task.bucket}")


def _run(job: str, table: Table, context: JobContext, **settings: Any) -> JobReport:
    """Run a registered job and print what it did (a dry run: what refuses the table)."""
    with imports_uncollected():
        from paimond.maintenance.jobs import JOBS, JobReport

    if settings.get("dry_run"):
        from paimond.cli.report import dry_run_refusals  # status rendering: dry runs only

        if refused := dry_run_refusals(table, job, settings.get("allow_unknown_options", ())):
            print(refused.describe())
            return JobReport(refused)
    spec = JOBS[job]
    report = spec.run(table, spec.settings(**settings), context)
    print(report.result.describe())
    return report


def _compact_tables(args: argparse.Namespace) -> list[Table]:
    """The tables ``compact`` runs on: ``--table`` (on ``--branch``), or every table of
    ``--database`` / matching ``--tables``, less ``--excluding`` (each branch too with
    ``--branches``). ConfigError for a wrong combination or a selection of no table."""
    chosen = [flag for flag, value in (("--table", args.table), ("--database", args.database),
                                       ("--tables", args.tables)) if value]
    if len(chosen) != 1:
        raise ConfigError("--table", "give exactly one of --table, --database or --tables"
                          + (f" (got {', '.join(chosen)})" if chosen else ""))
    if args.table:
        for flag, value in (("--excluding", args.excluding), ("--branches", args.branches)):
            if value:
                raise ConfigError(flag, "goes with --database or --tables, not --table")
        return [open_table_of(args)]
    if args.branch:
        raise ConfigError("--branch", "goes with --table (--branches: every table's branches)")
    import fnmatch

    from paimond.table.catalog import list_tables

    patterns = args.tables or [f"{args.database}.*"]

    def wanted(name: str) -> bool:
        return (any(fnmatch.fnmatchcase(name, p) for p in patterns)
                and not any(fnmatch.fnmatchcase(name, p) for p in args.excluding))

    storage = open_warehouse_of(args)
    tables = list_tables(storage, storage.root, wanted, branches=args.branches)
    if not tables:
        raise ConfigError(chosen[0], f"no table of {args.warehouse} matches "
                                     f"{' '.join(patterns)}")
    return tables


def _partition_selection(table: Table, args: argparse.Namespace) -> dict[str, Any]:
    """The settings that choose ``table``'s partitions: ``--partition`` pairs (checked to be
    its partition keys) and ``--where`` (bound to its partition columns when the job runs)."""
    return {"partitions": table_partitions_of(table, args.partition), "where": args.where}


def _compact(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from paimond.maintenance.execution import LookupCacheSettings
        from paimond.table.options.reader import parse_memory_size

    if args.where and args.partition:
        raise ConfigError("--where", "cannot be used with --partition (Paimon: partitions and "
                                     "where cannot be used together)")
    if args.where:
        from paimond.table.partition_filter import parse_where

        parse_where(args.where)  # a syntax error is a usage error, whatever the tables
    tables = _compact_tables(args)
    cache = None
    if args.lookup_cache:
        try:
            cache = LookupCacheSettings(args.lookup_cache, parse_memory_size(args.lookup_cache_size))
        except ValueError as error:
            raise ConfigError("--lookup-cache-size", str(error)) from None
    budget = None
    if args.memory_budget:
        from paimond.maintenance.compact.memory import MemoryBudget

        try:
            budget = MemoryBudget(parse_memory_size(args.memory_budget))
        except ValueError as error:
            raise ConfigError("--memory-budget", str(error)) from None
    settings = {"full": args.full, "parallelism": args.parallelism or None,
                "dry_run": args.dry_run,
                "allow_unknown_options": tuple(args.allow_unknown_option)}
    for strategy in ("order", "zorder", "hilbert"):
        if columns := getattr(args, f"{strategy}_by"):
            settings.update(order_strategy=strategy, order_by=tuple(
                c.strip() for c in columns.split(",") if c.strip()))
    if args.table:  # one table: a usage error about its partitions exits 2, before any work
        settings.update(_partition_selection(tables[0], args))
        if args.where:
            from paimond.table.partition_filter import table_partition_filter

            table_partition_filter(args.where, tables[0].latest_schema(), tables[0].name)
    progress = _task_progress if sys.stderr.isatty() else None
    if args.dry_run:
        return _compact_each(tables, args, lambda: _job_context(SYSTEM_CLOCK), settings)
    if args.executor == "local" and args.whole_process:  # the tasks run here: no pandas
        from paimond.maintenance.arrow_runtime import skip_pandas

        skip_pandas()
    with open_executor_of(args) as executor:
        return _compact_each(tables, args, lambda: _job_context(
            SYSTEM_CLOCK, executor=executor, progress=progress, lookup_cache=cache,
            memory_budget=budget), settings)


def _compact_each(tables: Sequence[Table], args: argparse.Namespace,
                  context: Callable[[], JobContext], settings: dict[str, Any]) -> int:
    """Compact one table after the other. One table (``--table``): its errors propagate.
    Several: a table that fails is reported and the others still run; exit 1 if any failed."""
    if args.table:
        report = _run("compact", tables[0], context(), **settings)
        return EXIT_UNREADABLE if report.failed and not args.dry_run else EXIT_OK
    failed = []
    for table in tables:
        try:
            report = _run("compact", table, context(), **settings,
                          **_partition_selection(table, args))
        except PaimondError as error:
            print(f"paimond: {table.name}: {error}", file=sys.stderr)
            failed.append(table.name)
            continue
        if report.failed and not args.dry_run:
            failed.append(table.name)
    verb = "planned" if args.dry_run else "compacted"
    print(f"{verb} {len(tables) - len(failed)} of {len(tables)} table(s)"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return EXIT_UNREADABLE if failed else EXIT_OK


# ---- expire-snapshots, merge-manifests, remove-orphans -----------------------------------


def _one_moment() -> Clock:
    """The clock of a command whose window and job must agree on one reading of now."""
    return Clock(fixed_ms=SYSTEM_CLOCK.wall_ms())


def _older_than(text: str | None) -> dict[str, int | None]:
    """``--older-than``: a duration (``1 h``, ``2d``) is a window before now; a timestamp
    (``2024-05-01 12:00:00``, local time unless it names a zone) is a moment."""
    if not text:
        return {}
    try:
        return {"older_than_ms": parse_duration_ms(text)}
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError("--older-than", f"{text!r} is neither a duration (e.g. '1 d') nor a "
                          "timestamp (e.g. '2024-05-01 12:00:00')") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # Java parses it in the default time zone
    return {"older_than_timestamp_ms": int(moment.timestamp() * 1000)}


def _expire_snapshots(args: argparse.Namespace) -> int:
    _run("expire", open_table_of(args), _job_context(_one_moment()), retain_max=args.retain_max,
         retain_min=args.retain_min, max_deletes=args.max_deletes, dry_run=args.dry_run,
         **_older_than(args.older_than))
    return EXIT_OK


def _expire_consumers(args: argparse.Namespace) -> int:
    older_than = None
    if args.older_than:
        try:
            older_than = parse_duration_ms(args.older_than)
        except ValueError as error:
            raise ConfigError("--older-than", str(error)) from None
    _run("expire_consumers", open_table_of(args), _job_context(SYSTEM_CLOCK),
         older_than_ms=older_than, dry_run=args.dry_run)
    return EXIT_OK


def _expire_partitions(args: argparse.Namespace) -> int:
    older_than = None
    if args.older_than:
        try:
            older_than = parse_duration_ms(args.older_than)
        except ValueError as error:
            raise ConfigError("--older-than", str(error)) from None
    _run("expire_partitions", open_table_of(args), _job_context(_one_moment()),
         older_than_ms=older_than, max_num=args.max_num, dry_run=args.dry_run)
    return EXIT_OK


def _merge_manifests(args: argparse.Namespace) -> int:
    _run("merge_manifests", open_table_of(args), _job_context(SYSTEM_CLOCK), dry_run=args.dry_run)
    return EXIT_OK


def _remove_orphans(args: argparse.Namespace) -> int:
    _run("remove_orphans", open_table_of(args), _job_context(_one_moment()), dry_run=args.dry_run,
         force=args.force, **_older_than(args.older_than))
    return EXIT_OK


def _add_table_maintenance_commands(commands: Any) -> None:
    expire = commands.add_parser(
        "expire-snapshots", help="expire old snapshots and delete the files only they used",
        description="Paimon's snapshot expiration: table options snapshot.num-retained.min/max, "
                    "snapshot.time-retained, snapshot.expire.limit, overridden by the flags. "
                    "Tags, consumers and branches keep what they use; EARLIEST is written last.")
    expire.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(expire)
    expire.add_argument("--retain-max", type=int_at_least(1), metavar="N",
                        help="keep at most N snapshots")
    expire.add_argument("--retain-min", type=int_at_least(1), metavar="N",
                        help="keep at least N snapshots")
    expire.add_argument("--older-than", metavar="DURATION|TIMESTAMP",
                        help="expire only snapshots whose successor is older (e.g. '1 h', "
                             "'2024-05-01 12:00:00')")
    expire.add_argument("--max-deletes", type=int_at_least(1), metavar="N",
                        help="expire at most N snapshots in this run")
    expire.add_argument("--dry-run", action="store_true", help="print what would go, delete nothing")
    add_storage_option(expire)
    expire.set_defaults(run=usage_errors_exit_2(_expire_snapshots))

    consumers = commands.add_parser(
        "expire-consumers", help="delete consumer files not modified for a while",
        description="Paimon's consumer expiration (what commits do when "
                    "consumer.expiration-time is set and write-only is not): consumer files "
                    "last modified before now minus the window are deleted, so they no longer "
                    "keep snapshots from expiring; on --branch, that branch's consumers.")
    consumers.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(consumers)
    consumers.add_argument("--older-than", metavar="DURATION",
                           help="the window (e.g. '1 d'); default: the table's "
                                "consumer.expiration-time (unset: nothing expires)")
    consumers.add_argument("--dry-run", action="store_true",
                           help="print what would go, delete nothing")
    add_storage_option(consumers)
    consumers.set_defaults(run=usage_errors_exit_2(_expire_consumers))

    partitions = commands.add_parser(
        "expire-partitions", help="drop partitions older than partition.expiration-time",
        description="Paimon's partition expiration (what commits do when "
                    "partition.expiration-time is set and write-only is not): the expired "
                    "partitions' files leave the table in one OVERWRITE snapshot (per "
                    "partition.expiration-batch-size); snapshot expiration deletes them later. "
                    "Honours partition.expiration-strategy, partition.timestamp-formatter, "
                    "partition.timestamp-pattern and partition.expiration-max-num.")
    partitions.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(partitions)
    partitions.add_argument("--older-than", metavar="DURATION",
                            help="the expiration time (e.g. '7 d'); default: the table's "
                                 "partition.expiration-time (unset: nothing expires)")
    partitions.add_argument("--max-num", type=int_at_least(1), metavar="N",
                            help="drop at most N partitions (default: the table's "
                                 "partition.expiration-max-num, 100)")
    partitions.add_argument("--dry-run", action="store_true",
                            help="print what would be dropped, change nothing")
    add_storage_option(partitions)
    partitions.set_defaults(run=usage_errors_exit_2(_expire_partitions))

    merge = commands.add_parser(
        "merge-manifests", help="merge the latest snapshot's manifests (Paimon compact_manifest)",
        description="Merge small manifests and drop cancelled ADD/DELETE entries, committed as a "
                    "COMPACT snapshot with an empty delta; nothing is committed if nothing merges.")
    merge.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(merge)
    merge.add_argument("--dry-run", action="store_true", help="print the result, commit nothing")
    add_storage_option(merge)
    merge.set_defaults(run=usage_errors_exit_2(_merge_manifests))

    orphans = commands.add_parser(
        "remove-orphans", help="delete files no snapshot, tag, changelog or branch references",
        description="Paimon's orphan file removal. Only files older than the window are "
                    "considered (default 1 day); windows under 1 hour need --force.")
    orphans.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(orphans)
    orphans.add_argument("--older-than", metavar="DURATION|TIMESTAMP",
                         help="the window: a duration before now ('2 d') or a timestamp")
    orphans.add_argument("--dry-run", action="store_true", help="print what would go, delete nothing")
    orphans.add_argument("--force", action="store_true", help="allow a window under 1 hour")
    add_storage_option(orphans)
    orphans.set_defaults(run=usage_errors_exit_2(_remove_orphans))


# ---- rewrite-index --------------------------------------------------------------------------


def _rewrite_index(args: argparse.Namespace) -> int:
    context = _job_context(SYSTEM_CLOCK, progress=progress_bar if sys.stderr.isatty() else None)
    table = open_table_of(args)
    _run("rewrite_index", table, context, partitions=table_partitions_of(table, args.partition),
         dry_run=args.dry_run, parallelism=args.parallelism or min(8, os.cpu_count() or 1))
    return EXIT_OK


def _add_rewrite_index_command(commands: Any) -> None:
    rewrite = commands.add_parser(
        "rewrite-index", help="rebuild the file index of every data file (Paimon "
                              "rewrite_file_index) after changing file-index.* options",
        description="Read each live data file, build the indexes the table's file-index.* "
                    "options configure (dropping those no longer configured), embed small ones "
                    "in the manifest and write larger ones beside the data file; commit the "
                    "changed files in one COMPACT snapshot. Files already indexed so are left "
                    "alone: a second run commits nothing.")
    rewrite.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(rewrite)
    rewrite.add_argument("--partition", action="append", default=[], metavar="K=V",
                         help="only partitions with this value (repeat for several keys)")
    rewrite.add_argument("--dry-run", action="store_true",
                         help="print the files whose index would change; write nothing")
    rewrite.add_argument("--parallelism", type=int_at_least(1), default=0,
                         help="files read at once (default: CPU count, at most 8)")
    add_storage_option(rewrite)
    rewrite.set_defaults(run=usage_errors_exit_2(_rewrite_index))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="paimond", description="Compaction and maintenance for Apache Paimon tables.")
    parser.add_argument("--version", action="version", version=f"paimond {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    status = commands.add_parser(
        "status", help="describe tables: snapshots, manifests, LSM levels per bucket",
        description="Describe the tables of a warehouse (exit code 1 if any table is "
                    "unreadable), or with --daemon URL what a running daemon does with each: "
                    "effective policy, last run and outcome of each job, next due and why "
                    "(exit code 1 if a table is quarantined).")
    status.add_argument("warehouse", nargs="?",
                        help="warehouse path or URI (local path, file://, s3://)")
    status.add_argument("--daemon", metavar="URL",
                        help="ask the daemon at URL (its /status) instead of reading a warehouse")
    add_table_arguments(status, required=False, help="only this table (or branch)")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--no-verify", action="store_true",
                        help="skip checking that live data files exist (one listing per bucket)")
    add_storage_option(status)
    status.set_defaults(run=_status)

    compact = commands.add_parser(
        "compact", help="compact the LSM buckets of a primary-key table (or of many tables)",
        description="Plan every bucket (Paimon's universal compaction, or --full), rewrite in "
                    "parallel, commit one COMPACT snapshot. Exit code 1 if a bucket failed. "
                    "With --database or --tables, every matching table one after the other "
                    "(Paimon's compact_database): a table that fails does not stop the "
                    "others, exit code 1 if any failed. --where is Paimon's compact where.")
    compact.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(compact, required=False,
                        help="the table (DB.TABLE$branch_NAME: one of its branches); or "
                             "--database / --tables")
    compact.add_argument("--database", metavar="DB", help="every table of this database")
    compact.add_argument("--tables", action="append", default=[], metavar="PATTERN",
                         help="every table whose DB.TABLE matches this fnmatch pattern "
                              "(e.g. 'db.*'; repeat for several)")
    compact.add_argument("--excluding", action="append", default=[], metavar="PATTERN",
                         help="with --database or --tables: not the tables matching this "
                              "pattern (repeat for several)")
    compact.add_argument("--branches", action="store_true",
                         help="with --database or --tables: each table's branches too")
    compact.add_argument("--partition", action="append", default=[], metavar="K=V",
                         help="only partitions with this value (repeat for several keys)")
    compact.add_argument("--where", metavar="PREDICATE",
                         help="only partitions this SQL predicate over partition columns "
                              "selects, e.g. \"dt < '2024-01-02' and hh = '10'\" (=, !=, <, "
                              "<=, >, >=, IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT)")
    compact.add_argument("--full", action="store_true",
                         help="full compaction: every bucket to one sorted run at the max level")
    compact.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    order = compact.add_mutually_exclusive_group()
    for strategy in ("order", "zorder", "hilbert"):
        order.add_argument(f"--{strategy}-by", metavar="COL,COL",
                           help=f"sort compaction of a bucket-unaware append table: rewrite "
                                f"the partitions' rows in {strategy} order of these columns")
    compact.add_argument("--allow-unknown-option", action="append", default=[], metavar="KEY",
                         help="accept this table option key although paimond has not decided "
                              "it (a table with any other undecided key is refused; repeat "
                              "for several keys)")
    compact.add_argument("--parallelism", type=int_at_least(1), default=0,
                         help="bucket tasks at once (default: CPU count)")
    add_executor_options(compact, "bucket tasks (and a postpone table's partitions)")
    compact.add_argument("--lookup-cache", metavar="DIR",
                         help="keep the sorted keys of higher-level files here, so deletion-"
                              "vector and first-row lookups need not read them again")
    compact.add_argument("--lookup-cache-size", metavar="SIZE", default="1 gb",
                         help="the cache directory's budget (default '1 gb'); least recently "
                              "used files go first")
    compact.add_argument("--memory-budget", metavar="SIZE",
                         help="hold the bucket tasks running at once to this much memory "
                              "(e.g. '1 gb'; default: no bound), as the daemon's "
                              "limits.memory_budget_mb does: a task that does not fit runs "
                              "with smaller batches and reads runs through local spill files")
    add_storage_option(compact)
    compact.set_defaults(run=_compact)

    _add_table_maintenance_commands(commands)
    _add_rewrite_index_command(commands)
    cli_rebuild_dv.register(commands)
    cli_rescale.register(commands)
    cli_rollback.register(commands)
    cli_tags.register(commands)
    cli_consumers.register(commands)
    cli_branches.register(commands)
    cli_chain_table.register(commands)
    cli_repair.register(commands)
    cli_partition_done.register(commands)
    cli_daemon.register(commands)
    cli_daemon_status.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.whole_process = argv is None  # the paimond command itself, not a caller's main(argv)
    if args.whole_process:
        # paimond uses no linear algebra: numpy's OpenBLAS would start a thread per core
        # that spins ~0.1 CPU s after the import (bench/startup.py)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        # Arrow's buffers from jemalloc on pyarrow >= 20, from the first one on
        # (maintenance/arrow_runtime.py: its mimalloc keeps far more); read when pyarrow loads
        if (pool := preferred_pool()) is not None:
            os.environ.setdefault(POOL_ENV, pool)
        own_collector()
    try:
        return int(args.run(args))
    except ConfigError as error:  # usage and configuration: exit 2 everywhere
        print(f"paimond: {error}", file=sys.stderr)
        return EXIT_USAGE
    except PaimondError as error:
        print(f"paimond: {error}", file=sys.stderr)
        return EXIT_UNREADABLE


if __name__ == "__main__":
    sys.exit(main())
