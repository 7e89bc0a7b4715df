"""``paimond compact-chain-table``: Paimon's ``compact_chain_table`` procedure, one partition of a
chain table merged from its snapshot and delta branches into the snapshot branch."""

from __future__ import annotations

import argparse
from typing import Any

from paimond.cli.common import (
    EXIT_OK,
    add_dry_run_and_json,
    add_storage_option,
    add_table_arguments,
    open_table_of,
    print_result,
    usage_errors_exit_2,
)
from paimond.cli.partition_done import partition_specs_of
from paimond.clock import SYSTEM_CLOCK
from paimond.errors import ConfigError


def _compact_chain_table(args: argparse.Namespace) -> int:
    from paimond.maintenance.compact.chain_table import compact_chain_table

    table = open_table_of(args)
    specs = partition_specs_of([args.partition])
    if len(specs) != 1:
        raise ConfigError("--partition", "compact-chain-table compacts one partition; got "
                                         f"{len(specs)} (Paimon: only a single partition)")
    result = compact_chain_table(table, specs[0], clock=SYSTEM_CLOCK, overwrite=args.overwrite,
                                 dry_run=args.dry_run)
    print_result(result, args.json)
    return EXIT_OK


def register(commands: Any) -> None:
    command = commands.add_parser(
        "compact-chain-table", help="merge a chain table's partition into its snapshot branch",
        description="Paimon's compact_chain_table: read partition --partition of a chain table "
                    "(chain-table.enabled) as Paimon reads it, its nearest earlier snapshot "
                    "partition merged with the delta partitions after it, and write the rows "
                    "into the snapshot branch as that partition (one sorted run per bucket), "
                    "in an APPEND snapshot. A partition the snapshot branch has already is left "
                    "alone unless --overwrite, which rebuilds it in an OVERWRITE snapshot. The "
                    "commit fails if the snapshot branch changed meanwhile.")
    command.add_argument("warehouse", help="warehouse path or URI")
    add_table_arguments(command)
    command.add_argument("--partition", required=True, metavar="K=V[,K=V...]",
                         help="the partition, every partition key named (e.g. 'dt=20250811' "
                              "or 'region=CN,dt=20250811'; quotes around a value are dropped)")
    command.add_argument("--overwrite", action="store_true",
                         help="rebuild the partition if the snapshot branch has it already")
    add_dry_run_and_json(command, "print the anchor and delta partitions it would merge; "
                                  "write nothing")
    add_storage_option(command)
    command.set_defaults(run=usage_errors_exit_2(_compact_chain_table))
