"""``paimond rebuild-dv``: recompute a deletion-vector table's vectors from its levels."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_storage_option,
    add_table_arguments,
    imports_uncollected,
    open_table_of,
    progress_bar,
    table_partitions_of,
    usage_errors_exit_2,
)
from paimond.clock import SYSTEM_CLOCK


def _rebuild_dv(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from paimond.cli.report import dry_run_refusals
        from paimond.maintenance.jobs import JOBS, JobContext

    job = JOBS["rebuild_dv"]
    table = open_table_of(args)
    settings = job.settings(dry_run=args.dry_run, discard_existing=args.discard_existing,
                            partitions=table_partitions_of(table, args.partition))
    context = JobContext(SYSTEM_CLOCK, progress=progress_bar if sys.stderr.isatty() else None)
    if args.dry_run and (refused := dry_run_refusals(table, "rebuild_dv")):
        print(refused.describe())
        return EXIT_OK
    print(job.run(table, settings, context).result.describe())
    return EXIT_OK


def register(commands: Any) -> None:
    rebuild = commands.add_parser(
        "rebuild-dv", help="recompute the deletion vectors of a table from its levels",
        description="For a primary-key table with deletion-vectors.enabled: in levels >= 1, "
                    "delete every row that a lower level (newer) row of the same key "
                    "supersedes, and newest rows that are retractions. Existing vectors of "
                    "live files are kept (they may record deletions no file holds any more) "
                    "unless --discard-existing. One COMPACT snapshot; a second run commits "
                    "nothing.")
    rebuild.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(rebuild)
    rebuild.add_argument("--partition", action="append", default=[], metavar="K=V",
                         help="only partitions with this value (repeat for several keys)")
    rebuild.add_argument("--dry-run", action="store_true",
                         help="print the buckets whose vectors would change; write nothing")
    rebuild.add_argument("--discard-existing", action="store_true",
                         help="ignore the current vectors (known wrong): deletions that only "
                              "they record are lost")
    add_storage_option(rebuild)
    rebuild.set_defaults(run=usage_errors_exit_2(_rebuild_dv))
