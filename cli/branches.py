"""``paimond create-branch``, ``delete-branch``, ``rename-branch``, ``merge-branch`` and
``fast-forward``: a table's branches (Paimon's procedures of those names). Every other command
takes ``--branch``."""

from __future__ import annotations

import argparse
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_dry_run_and_json,
    add_storage_option,
    check_confirmable,
    confirmed,
    declined,
    open_warehouse_of,
    print_result,
    table_of,
    usage_errors_exit_2,
)


def _main_table(args: argparse.Namespace) -> Any:
    from paimond.table.catalog import open_table

    table_of(args)
    storage = open_warehouse_of(args)
    return open_table(storage, storage.root, args.table)


def _create_branch(args: argparse.Namespace) -> int:
    from paimond.table.branches import create_branch

    result = create_branch(_main_table(args), args.branch, args.tag, dry_run=args.dry_run)
    print_result(result, args.json)
    return EXIT_OK


def _delete_branch(args: argparse.Namespace) -> int:
    from paimond.table.branches import delete_branch

    result = delete_branch(_main_table(args), args.branch, dry_run=args.dry_run)
    print_result(result, args.json)
    return EXIT_OK


def _rename_branch(args: argparse.Namespace) -> int:
    from paimond.table.branches import rename_branch

    result = rename_branch(_main_table(args), args.branch, args.to, dry_run=args.dry_run)
    print_result(result, args.json)
    return EXIT_OK


def _merge_branch(args: argparse.Namespace) -> int:
    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.branch_merge import merge_branch

    result = merge_branch(_main_table(args), args.branch, args.into, clock=SYSTEM_CLOCK,
                          dry_run=args.dry_run)
    print_result(result, args.json)
    return EXIT_OK


def _fast_forward(args: argparse.Namespace) -> int:
    from paimond.table.branches import fast_forward

    table = _main_table(args)
    check_confirmable(args, "the replacement of the main branch's snapshots")
    plan = fast_forward(table, args.branch, dry_run=True)
    if args.dry_run:
        print_result(plan, args.json)
        return EXIT_OK
    if not args.yes and not confirmed(plan.describe(), "Fast-forward the main branch?"):
        return declined()
    print_result(fast_forward(table, args.branch), args.json)
    return EXIT_OK


def register(commands: Any) -> None:
    create = commands.add_parser(
        "create-branch", help="create a branch of a table, from a tag or empty",
        description="Create --branch of the table: from --tag, a branch whose first snapshot "
                    "is the tag's (the tag, its snapshot and the schemas up to its schema are "
                    "copied; no data file is written); without --tag, an empty branch with "
                    "the table's schemas. Paimon's create_branch.")
    delete = commands.add_parser(
        "delete-branch", help="delete a branch of a table",
        description="Delete --branch's directory: its snapshots, changelogs, tags, consumers "
                    "and schemas. Data files it alone used stay until `paimond "
                    "remove-orphans` removes them. Paimon's delete_branch.")
    forward = commands.add_parser(
        "fast-forward", help="make a branch's history the main branch's",
        description="Replace the main branch's snapshots from --branch's earliest snapshot on "
                    "with the branch's: the main branch's snapshots from that id, its schemas "
                    "from that snapshot's schema and its tags on those snapshots are deleted, "
                    "then the branch's schemas, snapshots and tags are copied in. No data file "
                    "is deleted. Prints the plan and asks first unless --yes. Paimon's "
                    "fast_forward.")
    rename = commands.add_parser(
        "rename-branch", help="rename a branch of a table",
        description="Rename --branch to --to (its snapshots, schemas, tags, consumers and "
                    "changelogs move; data files stay where they are). Object stores cannot "
                    "rename a directory: the files are copied, then the old ones deleted; a "
                    "run killed midway completes when run again. Paimon's rename_branch.")
    merge = commands.add_parser(
        "merge-branch", help="add an append table branch's new files to another branch",
        description="Paimon's merge_branch, for append tables whose branches both hold their "
                    "complete APPEND-only history: every data file live in --branch that "
                    "--into (default: main) does not hold is added to --into in one APPEND "
                    "snapshot. Nothing is copied or rewritten.")
    for command, run in ((create, _create_branch), (delete, _delete_branch),
                         (rename, _rename_branch), (merge, _merge_branch),
                         (forward, _fast_forward)):
        command.add_argument("warehouse", help="warehouse path or URI")
        command.add_argument("--table", metavar="DB.TABLE", required=True,
                             help="the table (its main branch)")
        command.add_argument("--branch", metavar="NAME", required=True, help="the branch")
        if command is create:
            command.add_argument("--tag", metavar="TAG", help="the tag to branch from")
        if command is rename:
            command.add_argument("--to", metavar="NAME", required=True, help="its new name")
        if command is merge:
            command.add_argument("--into", metavar="NAME", default="main",
                                 help="the branch to merge into (default: main)")
        add_dry_run_and_json(command, "print what would be written or deleted; change nothing")
        if command is forward:
            command.add_argument("--yes", action="store_true",
                                 help="do it without asking (needed when stdin is no terminal)")
        add_storage_option(command)
        command.set_defaults(run=usage_errors_exit_2(run))
