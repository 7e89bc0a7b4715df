"""``paimond rollback``: roll a table (or one of its branches) back to a snapshot, a tag or a
moment (Paimon's ``rollback`` and ``rollback_to_timestamp`` procedures)."""

from __future__ import annotations

import argparse
import datetime
from typing import TYPE_CHECKING, Any

from paimond.cli.common import (
    EXIT_OK,
    add_storage_option,
    add_table_arguments,
    check_confirmable,
    confirmed,
    declined,
    imports_uncollected,
    int_at_least,
    open_table_of,
    print_result,
    usage_errors_exit_2,
)
from paimond.errors import ConfigError

if TYPE_CHECKING:
    from paimond.maintenance.rollback import RollbackTarget


def parse_timestamp_ms(text: str) -> int:
    """Epoch milliseconds, or a local date-time ('2024-05-01 12:00:00'; with an offset, that
    offset) as epoch milliseconds; ConfigError otherwise."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        moment = datetime.datetime.fromisoformat(stripped)
    except ValueError:
        raise ConfigError("--to-timestamp", f"{text!r} is neither epoch milliseconds nor a "
                          "local timestamp (e.g. '2024-05-01 12:00:00')") from None
    return int(moment.timestamp() * 1000)  # a naive moment is local time


def _target_of(args: argparse.Namespace) -> RollbackTarget:
    from paimond.maintenance.rollback import SNAPSHOT, TAG, TIMESTAMP, WATERMARK, RollbackTarget

    given = [args.to_snapshot, args.to_tag, args.to_timestamp, args.to_watermark]
    if sum(value is not None for value in given) != 1:
        raise ConfigError("rollback", "give one of --to-snapshot, --to-tag, --to-timestamp, "
                                      "--to-watermark")
    if args.to_watermark is not None:
        return RollbackTarget(WATERMARK, watermark=args.to_watermark)
    if args.to_snapshot is not None:
        return RollbackTarget(SNAPSHOT, snapshot_id=args.to_snapshot)
    if args.to_tag is not None:
        if not args.to_tag.strip():
            raise ConfigError("--to-tag", "a tag name must not be blank")
        return RollbackTarget(TAG, tag=args.to_tag)
    return RollbackTarget(TIMESTAMP, timestamp_ms=parse_timestamp_ms(args.to_timestamp))


def _rollback(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from paimond.maintenance import rollback

    table = open_table_of(args)  # the table's errors before the target's
    target = _target_of(args)
    plan = rollback.plan_rollback(table, target)
    preview = rollback.result_of(plan, rollback.planned_tally(table, plan), done=False,
                                 dry_run=args.dry_run,
                                 pending=rollback.pending_rollbacks(table))
    if args.dry_run:
        print_result(preview, args.json)
        return EXIT_OK
    check_confirmable(args, "the rollback")
    if not args.yes and not confirmed(
            preview.describe(), f"Roll {preview.table} back to snapshot {preview.snapshot_id}?"):
        return declined()
    finished, tally = rollback.finish_interrupted(table)
    if finished:  # the table moved: plan again from where the killed run left it
        plan = rollback.plan_rollback(table, target)
    done = rollback.execute_rollback(table, plan)
    tally.files.update(done.files)
    tally.size_bytes.update(done.size_bytes)
    print_result(rollback.result_of(plan, tally, done=True, finished=finished), args.json)
    return EXIT_OK


def register(commands: Any) -> None:
    command = commands.add_parser(
        "rollback", help="roll a table back to a snapshot, a tag or a moment (Paimon rollback)",
        description="Make the target the latest snapshot: every newer snapshot, long-lived "
                    "changelog and tag of the branch is deleted (as Paimon's rollback and "
                    "rollback_to_timestamp procedures do), then every data, manifest and "
                    "index file only they used (nothing any remaining snapshot, tag, "
                    "changelog or branch names). A tag whose snapshot has expired is written "
                    "back as the only snapshot. Consumers are kept. Prints the plan and asks "
                    "for confirmation unless --yes; try --dry-run first. Stop the table's "
                    "writers first: a commit during the rollback is refused.")
    command.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(command)
    target = command.add_mutually_exclusive_group()
    target.add_argument("--to-snapshot", type=int_at_least(1), metavar="N",
                        help="a snapshot id (one that expired but a tag pins: that tag)")
    target.add_argument("--to-tag", metavar="TAG", help="a tag of the branch")
    target.add_argument("--to-timestamp", metavar="TS",
                        help="the latest snapshot committed at or before TS: epoch "
                             "milliseconds or a local 'YYYY-MM-DD HH:MM:SS'")
    target.add_argument("--to-watermark", type=int, metavar="W",
                        help="the latest snapshot whose watermark is at most W (Paimon's "
                             "rollback_to_watermark)")
    command.add_argument("--dry-run", action="store_true",
                         help="print the plan; change nothing")
    command.add_argument("--yes", action="store_true",
                         help="roll back without asking for confirmation")
    command.add_argument("--json", action="store_true", help="print the result as JSON")
    add_storage_option(command)
    command.set_defaults(run=usage_errors_exit_2(_rollback))
