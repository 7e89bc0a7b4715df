"""``paimond mark-partition-done``: Paimon's ``mark_partition_done`` procedure, with the table's
``partition.mark-done-action`` (``success-file``: a ``_SUCCESS`` file in each partition)."""

from __future__ import annotations

import argparse
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_storage_option,
    add_table_arguments,
    open_table_of,
    print_result,
    usage_errors_exit_2,
)
from paimond.clock import SYSTEM_CLOCK
from paimond.errors import ConfigError


def partition_specs_of(texts: list[str]) -> list[dict[str, str]]:
    """Each ``--partition`` is one partition, ``k1=v1,k2=v2`` (Paimon's form; ``;`` separates
    several in one value, as the procedure's ``partitions`` argument)."""
    specs = []
    for text in texts:
        for partition in filter(str.strip, text.split(";")):
            spec = {}
            for pair in partition.split(","):
                key, sep, value = pair.partition("=")
                if not sep or not key.strip():
                    raise ConfigError("--partition", f"wants K=V[,K=V...], got {partition!r}")
                spec[key.strip()] = value.strip()
            specs.append(spec)
    if not specs:
        raise ConfigError("--partition", "name at least one partition")
    return specs


def _mark_partition_done(args: argparse.Namespace) -> int:
    from paimond.maintenance.partition_done import mark_partitions_done

    table = open_table_of(args)
    specs = partition_specs_of(args.partition)
    result = mark_partitions_done(table, specs, SYSTEM_CLOCK, dry_run=args.dry_run)
    print_result(result, args.json)
    return EXIT_OK


def register(commands: Any) -> None:
    command = commands.add_parser(
        "mark-partition-done", help="mark partitions done (a _SUCCESS file in each)",
        description="Run the table's partition.mark-done-action on each --partition: "
                    "success-file (the default) writes <partition>/_SUCCESS, Java's "
                    "SuccessFile JSON (creationTime kept from a file already there, "
                    "modificationTime now). done-partition and mark-event need a metastore, "
                    "http-report and custom a server or a Java class: refused (exit code 2) "
                    "before anything is written. Paimon's mark_partition_done.")
    command.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(command)
    command.add_argument("--partition", action="append", default=[], metavar="K=V[,K=V...]",
                         help="one partition (at least one), its values as in its path (e.g. "
                              "'dt=2024-01-01,hh=10'; the leading keys only: their directory); "
                              "repeat for several")
    command.add_argument("--dry-run", action="store_true",
                         help="print what would be written; change nothing")
    command.add_argument("--json", action="store_true", help="print the result as JSON")
    add_storage_option(command)
    command.set_defaults(run=usage_errors_exit_2(_mark_partition_done))
