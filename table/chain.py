"""A chain table's layout (``chain-table.enabled``; Java ``ChainTableUtils``,
``ChainPartitionProjector``): its full partitions in the branch ``scan.fallback-snapshot-branch``
names, its changes in the one ``scan.fallback-delta-branch`` names; the partition keys split
into group keys (leading) and chain keys (the suffix ``chain-table.chain-partition-keys``
names; default all of them, one group)."""

from __future__ import annotations

from collections.abc import Sequence

from paimond.errors import ConfigError, RefusedError
from paimond.format.meta.schema import TableSchema
from paimond.table.catalog import Table
from paimond.table.layout import BRANCH_DIR, BRANCH_PREFIX

SNAPSHOT_BRANCH_OPTION = "scan.fallback-snapshot-branch"
DELTA_BRANCH_OPTION = "scan.fallback-delta-branch"
CHAIN_KEYS_OPTION = "chain-table.chain-partition-keys"


def chain_branches(table: Table, schema: TableSchema, job: str) -> tuple[Table, Table]:
    """The snapshot and delta branches ``schema``'s options name (Java switches to them from
    whichever branch it writes); RefusedError naming the option that lacks or names no
    branch."""
    found = []
    for option in (SNAPSHOT_BRANCH_OPTION, DELTA_BRANCH_OPTION):
        name = schema.options.get(option)
        if not name:
            raise RefusedError(job, f"{table.name} has no {option}: a chain table names its "
                                    "snapshot and delta branches in both options", table.path)
        if not table.storage.exists(table.file_path(BRANCH_DIR, BRANCH_PREFIX + name)):
            raise RefusedError(job, f"{option} names branch {name!r}, which {table.name} does "
                                    "not have", table.path)
        found.append(table.on_branch(name))
    return found[0], found[1]


def group_size(schema: TableSchema) -> int:
    """How many leading partition keys form the group (the rest: the chain keys)."""
    keys = list(schema.partition_keys)
    text = schema.options.get(CHAIN_KEYS_OPTION)
    if not text:
        return 0
    chain = [k.strip() for k in text.split(",") if k.strip()]
    if not chain or keys[len(keys) - len(chain):] != chain:
        raise ConfigError(CHAIN_KEYS_OPTION, f"{text!r} must be a contiguous suffix of the "
                                             f"partition keys {keys}")
    return len(keys) - len(chain)


def chain_order(values: Sequence[object]) -> tuple[tuple[int, object], ...]:
    """A sort key of chain values in Java's partition order: field by field, null first."""
    return tuple((0, 0) if v is None else (1, v) for v in values)
