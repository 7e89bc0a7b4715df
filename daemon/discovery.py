"""Finding the tables to maintain: every table of every configured warehouse that the
settings' include/exclude patterns select."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from paimond.daemon.logging import get_logger
from paimond.errors import PaimondError, kind_of
from paimond.table.catalog import Table, list_tables
from paimond.table.storage import Storage

log = get_logger(__name__)


def find_tables(storages: Sequence[Storage], wants: Callable[[str], bool]
                ) -> dict[str, tuple[Table, int]]:
    """``db.table`` -> (table, index of its warehouse). A warehouse that cannot be listed is
    logged and skipped: its tables are simply not found this time."""
    found: dict[str, tuple[Table, int]] = {}
    for index, storage in enumerate(storages):
        try:
            for table in list_tables(storage, storage.root):
                if wants(table.name):
                    found[table.name] = (table, index)
        except PaimondError as error:
            log.warning("discovery_failed", warehouse=storage.root, error_kind=kind_of(error),
                        error=str(error))
    return found


def reachable(storages: Sequence[Storage]) -> bool:
    """Every warehouse answers a listing of its root."""
    try:
        for storage in storages:
            storage.list_dir(storage.root)
    except PaimondError:
        return False
    return True
