"""``paimond tags``, ``create-tag``, ``delete-tag``, ``expire-tags``: a table's tags."""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_storage_option,
    add_table_arguments,
    imports_uncollected,
    int_at_least,
    open_table_of,
    usage_errors_exit_2,
)
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.errors import ConfigError


def parse_duration_millis(text: str) -> int:
    from paimond.table.options.reader import parse_duration_millis as parse  # loaded when run

    return parse(text)


def _one_moment() -> Clock:
    """One reading of now for the whole command (plans and tags agree on it)."""
    return Clock(fixed_ms=SYSTEM_CLOCK.wall_ms())


def _run(name: str, args: argparse.Namespace, **settings: Any) -> int:
    with imports_uncollected():
        from paimond.maintenance.jobs import JOBS, JobContext

    job = JOBS[name]
    report = job.run(open_table_of(args), job.settings(dry_run=args.dry_run, **settings),
                     JobContext(_one_moment()))
    print(report.result.describe())
    return EXIT_OK


def _tags(args: argparse.Namespace) -> int:
    return _run("tags", args)


def _expire_tags(args: argparse.Namespace) -> int:
    if not args.older_than:
        return _run("expire_tags", args)
    try:
        return _run("expire_tags", args, older_than_ms=parse_duration_millis(args.older_than))
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(args.older_than.strip())
    except ValueError:
        raise ConfigError("--older-than", f"{args.older_than!r} is neither a duration (e.g. "
                          "'7 d') nor a local timestamp (e.g. '2024-05-01 12:00:00')") from None
    if moment.tzinfo is not None:  # Java takes local date-times only; convert
        moment = moment.astimezone().replace(tzinfo=None)
    return _run("expire_tags", args, older_than=moment)


def _create_tag(args: argparse.Namespace) -> int:
    retained = None
    if args.time_retained:
        try:
            retained = parse_duration_millis(args.time_retained)
        except ValueError as error:
            raise ConfigError("--time-retained", str(error)) from None
    return _run("create_tag", args, tag=args.tag, snapshot_id=args.snapshot,
                time_retained_ms=retained)


def _delete_tag(args: argparse.Namespace) -> int:
    return _run("delete_tag", args, tag=args.tag)


def _table_command(commands: Any, name: str, help_text: str, description: str
                   ) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text,
                                                          description=description)
    parser.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="print what would change, "
                        "write and delete nothing")
    add_storage_option(parser)
    return parser


def register(commands: Any) -> None:
    tags = _table_command(
        commands, "tags", "create the automatic tags that are due, then expire tags",
        "What a writer's commit does when it is not write-only: create the tags of "
        "tag.automatic-creation (process-time or watermark; tag.creation-period, "
        "tag.creation-period-duration, tag.creation-delay, tag.period-formatter, "
        "tag.automatic-completion), drop the oldest automatic ones past tag.num-retained-max, "
        "then delete tags past their retention (tag.default-time-retained when created; "
        "tag.time-expire-enabled). A deleted tag's files are left to remove-orphans.")
    tags.set_defaults(run=usage_errors_exit_2(_tags))

    expire = _table_command(
        commands, "expire-tags", "delete tags past their retention",
        "Delete every tag whose create time plus retention is before now (Java's "
        "expire_tags procedure). Tags without a retention are kept, unless --older-than: "
        "then every tag created before it goes (a tag without a create time by its file's "
        "modification time).")
    expire.add_argument("--older-than", metavar="DURATION|TIMESTAMP",
                        help="also delete tags created before this local time, or this long "
                             "ago (e.g. '2024-05-01 12:00:00', '7 d')")
    expire.set_defaults(run=usage_errors_exit_2(_expire_tags))

    create = _table_command(
        commands, "create-tag", "tag a snapshot",
        "Write <table>/tag/tag-NAME for a snapshot (default the latest). An existing tag is "
        "an error; a tag is never overwritten.")
    create.add_argument("--tag", metavar="NAME", required=True)
    create.add_argument("--snapshot", type=int_at_least(1), metavar="N", help="snapshot id (default latest)")
    create.add_argument("--time-retained", metavar="DURATION",
                        help="keep the tag this long (e.g. '1 d'; default "
                             "tag.default-time-retained, unset: until deleted)")
    create.set_defaults(run=usage_errors_exit_2(_create_tag))

    delete = _table_command(
        commands, "delete-tag", "delete a tag",
        "Delete <table>/tag/tag-NAME (a missing tag is not an error). The files only the tag "
        "kept are left to remove-orphans.")
    delete.add_argument("--tag", metavar="NAME", required=True)
    delete.set_defaults(run=usage_errors_exit_2(_delete_tag))
