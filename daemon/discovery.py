"""Finding the tables to maintain: every table of every configured warehouse that the
settings' include/exclude patterns select."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import suppress

from paimond.daemon.logging import get_logger
from paimond.errors import PaimondError, StorageUnavailableError, kind_of
from paimond.table.catalog import Table, check_warehouse, list_tables, split_branch
from paimond.table.layout import MAIN_BRANCH
from paimond.table.storage.interface import Storage

log = get_logger(__name__)

# A known table's branch/ folder is listed at most this often: at 20,000 idle tables that
# listing is three quarters of a discovery's CPU. A new branch is maintained within this time.
BRANCH_DISCOVERY_S = 300.0


def find_tables(storages: Sequence[Storage], wants: Callable[[str], bool],
                known: Collection[str] = (), *, known_branches: bool = True
                ) -> dict[str, tuple[Table, int]]:
    """``db.table`` (``db.table$branch_b`` for a branch) -> (table, index of its warehouse).
    A warehouse that cannot be listed is logged and skipped: its tables are simply not found
    this time. A ``known`` table whose directory is still there is not listed again; unless
    ``known_branches``, neither is its ``branch/`` folder: its ``known`` branches whose
    folders are still there are kept (one lookup per branch, not one listing per table)."""
    found: dict[str, tuple[Table, int]] = {}
    for index, storage in enumerate(storages):
        try:
            for table in list_tables(storage, storage.root, wants, known, branches=True,
                                     known_branches=known_branches):
                found[table.name] = (table, index)
        except PaimondError as error:
            log.warning("discovery_failed", warehouse=storage.root, error_kind=kind_of(error),
                        error=str(error))
    if not known_branches:
        for name in known:
            base, branch = split_branch(name)
            if branch != MAIN_BRANCH and base in found and name not in found:
                table, index = found[base]
                on_branch = table.on_branch(branch)
                with suppress(PaimondError):  # unreachable now: left out, as a listing would
                    if on_branch.storage.exists(on_branch.meta_path):
                        found[name] = (on_branch, index)
    return found


def unready_reason(storages: Sequence[Storage]) -> str | None:
    """Why the warehouses are not ready, or None: each one exists (a local directory, an S3
    bucket; ``check_warehouse``) and answers a listing of its root. A warehouse that does not
    exist is not an empty one."""
    for storage in storages:
        reason = warehouse_unready(storage)
        if reason is not None:
            return reason
    return None


def warehouse_unready(storage: Storage) -> str | None:
    """Why one warehouse is not ready (gone, or its root cannot be listed), or None."""
    try:
        check_warehouse(storage)
        storage.list_dir(storage.root)
    except PaimondError as error:
        return str(error)
    return None


def check_warehouses(storages: Sequence[Storage], *, unavailable_ok: bool = True) -> None:
    """At startup: ConfigError naming a warehouse that does not exist. A store that cannot be
    reached now is logged (readiness reports it; it may come back) or, unless
    ``unavailable_ok``, raised (StorageUnavailableError)."""
    for storage in storages:
        try:
            check_warehouse(storage)
        except StorageUnavailableError as error:
            if not unavailable_ok:
                raise
            log.warning("warehouse_unreachable", warehouse=storage.root,
                        error_kind=kind_of(error), error=str(error))
