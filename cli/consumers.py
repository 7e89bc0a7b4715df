"""``paimond reset-consumer`` and ``clear-consumers``: a table's consumers by hand (Paimon's
``reset_consumer`` and ``clear_consumers`` procedures)."""

from __future__ import annotations

import argparse
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_dry_run_and_json,
    add_storage_option,
    add_table_arguments,
    imports_uncollected,
    int_at_least,
    open_table_of,
    print_result,
    usage_errors_exit_2,
)


def _print(result: Any, args: argparse.Namespace) -> int:
    print_result(result, args.json)
    return EXIT_OK


def _reset_consumer(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from paimond.maintenance.expire.consumer_edits import reset_consumer

    return _print(reset_consumer(open_table_of(args), consumer_id=args.consumer,
                                 next_snapshot=args.next_snapshot, dry_run=args.dry_run), args)


def _clear_consumers(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from paimond.maintenance.expire.consumer_edits import clear_consumers

    return _print(clear_consumers(open_table_of(args), including=args.including,
                                  excluding=args.excluding, dry_run=args.dry_run), args)


def register(commands: Any) -> None:
    reset = commands.add_parser(
        "reset-consumer", help="point a consumer at a snapshot, or delete it",
        description="With --next-snapshot N (a snapshot that exists), overwrite "
                    "<table>/consumer/consumer-ID with {\"nextSnapshot\": N} as Java writes "
                    "it; without, delete the consumer (a missing one is not an error). "
                    "Paimon's reset_consumer.")
    clear = commands.add_parser(
        "clear-consumers", help="delete the consumers whose ids match",
        description="Delete every consumer whose whole id matches --including (default: "
                    "every one) and does not match --excluding (Python regular expressions). "
                    "Paimon's clear_consumers.")
    for command, run in ((reset, _reset_consumer), (clear, _clear_consumers)):
        command.add_argument("warehouse", help="warehouse path or URI")
        add_table_arguments(command)
        if command is reset:
            command.add_argument("--consumer", metavar="ID", required=True,
                                 help="the consumer id")
            command.add_argument("--next-snapshot", type=int_at_least(1), metavar="N",
                                 help="the snapshot it reads next (default: delete it)")
        else:
            command.add_argument("--including", metavar="REGEX",
                                 help="delete the consumers whose id matches (default: all)")
            command.add_argument("--excluding", metavar="REGEX",
                                 help="but keep those whose id matches")
        add_dry_run_and_json(command, "print what would be written or deleted; change nothing")
        add_storage_option(command)
        command.set_defaults(run=usage_errors_exit_2(run))
