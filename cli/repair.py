"""``paimond remove-unexisting-files`` and ``paimond repair``: repairs after a storage accident
(Paimon's ``remove_unexisting_files`` procedure; ``repair`` here repairs snapshot hints)."""

from __future__ import annotations

import argparse
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_storage_option,
    add_table_arguments,
    check_confirmable,
    confirmed,
    declined,
    open_table_of,
    print_result,
    table_partitions_of,
    usage_errors_exit_2,
)
from paimond.clock import SYSTEM_CLOCK


def _remove_unexisting_files(args: argparse.Namespace) -> int:
    from paimond.maintenance.repair.unexisting_files import (
        plan_unexisting_files,
        remove_unexisting_files,
    )

    table = open_table_of(args)
    partitions = table_partitions_of(table, args.partition)
    check_confirmable(args, "the drop")
    plan = plan_unexisting_files(table, partitions)
    if args.dry_run:
        print_result(plan.result(dry_run=True), args.json)
        return EXIT_OK
    if plan.missing and not args.yes and not confirmed(
            plan.result(dry_run=True).describe(),
            f"Drop these {len(plan.missing)} files from the table's manifests?"):
        return declined()
    print_result(remove_unexisting_files(table, plan, SYSTEM_CLOCK), args.json)
    return EXIT_OK


def _repair(args: argparse.Namespace) -> int:
    from paimond.maintenance.repair.hints import repair_hints

    print_result(repair_hints(open_table_of(args), dry_run=args.dry_run), args.json)
    return EXIT_OK


def register(commands: Any) -> None:
    remove = commands.add_parser(
        "remove-unexisting-files",
        help="drop the latest snapshot's entries of data files that are gone "
             "(Paimon remove_unexisting_files)",
        description="After a storage accident, drop from the table the live data files of its "
                    "latest snapshot that are missing from storage, by one snapshot of DELETE "
                    "entries (an OVERWRITE, as Java commits it), so readers stop failing; "
                    "their rows are lost to readers. No file is deleted. Prints what it drops "
                    "(partition, bucket, file, rows) and asks first, unless --yes (needed "
                    "when standard input is not a terminal). Paimon's remove_unexisting_files procedure.")
    remove.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(remove)
    remove.add_argument("--partition", action="append", default=[], metavar="K=V",
                        help="only partitions with this value (repeat for several keys); "
                             "default: every partition")
    remove.add_argument("--dry-run", action="store_true",
                        help="print the missing files; commit nothing")
    remove.add_argument("--yes", action="store_true", help="drop without asking")
    remove.add_argument("--json", action="store_true", help="print the result as JSON")
    add_storage_option(remove)
    remove.set_defaults(run=usage_errors_exit_2(_remove_unexisting_files))

    repair = commands.add_parser(
        "repair", help="rewrite the EARLIEST and LATEST hints of snapshot/ and changelog/",
        description="Check the EARLIEST and LATEST hints of the branch's snapshot/ directory "
                    "(and changelog/, where long-lived changelogs are kept) against the "
                    "snapshot files present, report what is missing, unreadable or wrong, and "
                    "rewrite those hints. Snapshot files are never touched. Paimon's repair "
                    "procedure syncs a Hive metastore's partitions instead: that is a catalog "
                    "feature, not this command.")
    repair.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(repair)
    repair.add_argument("--dry-run", action="store_true",
                        help="print what is wrong; write nothing")
    repair.add_argument("--json", action="store_true", help="print the result as JSON")
    add_storage_option(repair)
    repair.set_defaults(run=usage_errors_exit_2(_repair))
