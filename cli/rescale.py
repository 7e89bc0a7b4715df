"""``paimond rescale``: rewrite partitions of a primary-key table into another number of
buckets (Paimon's rescale procedure)."""

from __future__ import annotations

import argparse
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_executor_options,
    add_storage_option,
    add_table_arguments,
    imports_uncollected,
    int_at_least,
    open_executor_of,
    open_table_of,
    table_partitions_of,
    usage_errors_exit_2,
)
from paimond.clock import SYSTEM_CLOCK


def _rescale(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from paimond.maintenance.jobs import JOBS, JobContext

    job = JOBS["rescale"]
    table = open_table_of(args)
    settings = job.settings(bucket_num=args.bucket_num, dry_run=args.dry_run,
                            partitions=table_partitions_of(table, args.partition))
    if args.dry_run:
        print(job.run(table, settings, JobContext(SYSTEM_CLOCK)).result.describe())
        return EXIT_OK
    with open_executor_of(args) as executor:
        report = job.run(table, settings, JobContext(SYSTEM_CLOCK, executor=executor))
    print(report.result.describe())
    return EXIT_OK


def register(commands: Any) -> None:
    rescale = commands.add_parser(
        "rescale", help="rewrite partitions into another number of buckets (Paimon rescale)",
        description="Read the partitions' rows (every key once, merged), write them into "
                    "--bucket-num buckets with the table's bucket function, one sorted run per "
                    "bucket at the max level, and commit one OVERWRITE snapshot, which fails "
                    "if anything was committed since the plan. Fixed-bucket tables: set the "
                    "table's bucket option to the new number first. Postpone-bucket tables "
                    "(bucket = -2): --bucket-num is required, and a partition must have no "
                    "postpone rows left (compact first). Try --dry-run first.")
    rescale.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(rescale)
    rescale.add_argument("--bucket-num", type=int_at_least(1), metavar="N",
                         help="the new bucket number (default: the table's bucket option)")
    rescale.add_argument("--partition", action="append", default=[], metavar="K=V",
                         help="only partitions with this value (repeat for several keys); "
                              "default: every partition")
    rescale.add_argument("--dry-run", action="store_true",
                         help="print the partitions and their buckets now; write nothing")
    add_executor_options(rescale, "the partitions' rewrites")
    add_storage_option(rescale)
    rescale.set_defaults(run=usage_errors_exit_2(_rescale))
