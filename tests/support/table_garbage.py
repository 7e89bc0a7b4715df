"""Files in a table that nothing references: what a job left behind.

Every file under the table's own directories is either metadata that names the table's state
(schemas, snapshots and their hints, tags, consumers, branches, changelogs) or must be named by
one of them: a data file, its extra files, a manifest, a manifest list, an index file. Anything
else (a stale manifest, an uncommitted data file, a half-written temp file, a job record left
under ``.paimond/``) is garbage.
"""

from __future__ import annotations

from pathlib import Path

from paimond.maintenance.expire.references import referencing_snapshots, used_files
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

STATE_DIRS = {"schema", "snapshot", "tag", "consumer", "branch", "changelog"}


def unreferenced_files(warehouse: str, table_name: str) -> list[str]:
    """Table-relative paths of every file no snapshot, tag, changelog or branch names."""
    table = open_table(open_storage(warehouse), warehouse, table_name)
    used = used_files(table, referencing_snapshots(table)).all
    root = Path(table.path.removeprefix("file://"))
    assert root.is_dir(), root
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.relative_to(root).parts[0] not in STATE_DIRS
                  and p.name not in used)
