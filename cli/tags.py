"""``paimond tags``, ``create-tag``, ``delete-tag``, ``expire-tags``, ``rename-tag``,
``replace-tag``: a table's tags."""

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
    print_result,
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


def _print(result: Any, args: argparse.Namespace) -> int:
    print_result(result, args.json)
    return EXIT_OK


def _run(name: str, args: argparse.Namespace, **settings: Any) -> int:
    with imports_uncollected():
        from paimond.maintenance.jobs import JOBS, JobContext

    job = JOBS[name]
    report = job.run(open_table_of(args), job.settings(dry_run=args.dry_run, **settings),
                     JobContext(_one_moment()))
    return _print(report.result, args)


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


def _time_retained_ms(args: argparse.Namespace) -> int | None:
    if not args.time_retained:
        return None
    try:
        return parse_duration_millis(args.time_retained)
    except ValueError as error:
        raise ConfigError("--time-retained", str(error)) from None


def _epoch_millis(text: str) -> int:
    """``--from-timestamp``: epoch milliseconds, or a date-time (local unless it has an
    offset)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError("--from-timestamp", f"{text!r} is neither epoch milliseconds nor a "
                          "timestamp (e.g. '2024-05-01 12:00:00')") from None
    return round(moment.timestamp() * 1000)  # naive: the machine's zone, as Java's local time


def _create_tag(args: argparse.Namespace) -> int:
    retained = _time_retained_ms(args)
    if args.from_timestamp is None and args.from_watermark is None:
        return _run("create_tag", args, tag=args.tag, snapshot_id=args.snapshot,
                    time_retained_ms=retained)
    from_ms = None if args.from_timestamp is None else _epoch_millis(args.from_timestamp)
    with imports_uncollected():
        from paimond.maintenance.tags.job import create_tag

    return _print(create_tag(open_table_of(args), clock=_one_moment(), name=args.tag,
                             time_retained_ms=retained, from_timestamp_ms=from_ms,
                             from_watermark=args.from_watermark, dry_run=args.dry_run), args)


def _rename_tag(args: argparse.Namespace) -> int:
    with imports_uncollected():
        from paimond.maintenance.tags.rename import rename_tag

    return _print(rename_tag(open_table_of(args), name=args.tag, new_name=args.to,
                             dry_run=args.dry_run), args)


def _replace_tag(args: argparse.Namespace) -> int:
    retained = _time_retained_ms(args)
    with imports_uncollected():
        from paimond.maintenance.tags.replace import replace_tag

    return _print(replace_tag(open_table_of(args), clock=_one_moment(), name=args.tag,
                              snapshot_id=args.snapshot, time_retained_ms=retained,
                              dry_run=args.dry_run), args)


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
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
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
        "an error; a tag is never overwritten. Paimon's create_tag; with --from-timestamp, "
        "Paimon's create_tag_from_timestamp: the earliest snapshot committed at or after the "
        "time, or, when snapshots expired, the snapshot of the first tag (by snapshot id) "
        "committed at or after it, if that was committed earlier. With --from-watermark, "
        "Paimon's create_tag_from_watermark: the same by the snapshots' watermarks.")
    create.add_argument("--tag", metavar="NAME", required=True)
    source = create.add_mutually_exclusive_group()
    source.add_argument("--snapshot", type=int_at_least(1), metavar="N",
                        help="snapshot id (default latest)")
    source.add_argument("--from-timestamp", metavar="MILLIS|TIMESTAMP",
                        help="tag the earliest snapshot committed at or after this time: epoch "
                             "milliseconds or a local date-time (e.g. '2024-05-01 12:00:00')")
    source.add_argument("--from-watermark", type=int, metavar="W",
                        help="tag the earliest snapshot whose watermark is at least W")
    create.add_argument("--time-retained", metavar="DURATION",
                        help="keep the tag this long (e.g. '1 d'; default "
                             "tag.default-time-retained, unset: until deleted)")
    create.set_defaults(run=usage_errors_exit_2(_create_tag))

    delete = _table_command(
        commands, "delete-tag", "delete a tag",
        "Delete <table>/tag/tag-NAME (a missing tag is not an error). If its snapshot "
        "expired, the files only the tag kept are deleted with it. Paimon's delete_tag.")
    delete.add_argument("--tag", metavar="NAME", required=True)
    delete.set_defaults(run=usage_errors_exit_2(_delete_tag))

    rename = _table_command(
        commands, "rename-tag", "rename a tag",
        "Rename tag --tag to --to: the new tag file holds the old one's bytes and is written "
        "before the old one is deleted. A missing --tag or an existing --to is an error. "
        "Paimon's rename_tag.")
    rename.add_argument("--tag", metavar="NAME", required=True, help="the tag to rename")
    rename.add_argument("--to", metavar="NEW", required=True, help="its new name")
    rename.set_defaults(run=usage_errors_exit_2(_rename_tag))

    replace = _table_command(
        commands, "replace-tag", "make an existing tag pin another snapshot",
        "Overwrite the existing tag --tag so that it pins --snapshot (default the latest; a "
        "snapshot a tag holds will do), with --time-retained or no retention (as Paimon, "
        "tag.default-time-retained does not apply). If the tag's old snapshot expired, the "
        "files only the tag kept are deleted, as delete-tag deletes them. A missing tag is "
        "an error. Paimon's replace_tag.")
    replace.add_argument("--tag", metavar="NAME", required=True)
    replace.add_argument("--snapshot", type=int_at_least(1), metavar="N",
                         help="snapshot id (default latest)")
    replace.add_argument("--time-retained", metavar="DURATION",
                         help="keep the tag this long from now (e.g. '1 d'; default: until "
                              "deleted)")
    replace.set_defaults(run=usage_errors_exit_2(_replace_tag))
