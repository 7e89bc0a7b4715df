"""Appends made by pypaimon and renamed manifest entries, for incremental commits."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from paimond.format.meta.manifest import ManifestEntry
from support.pypaimon_oracle import read_rows


def renamed(entry: ManifestEntry, name: str) -> ManifestEntry:
    return dataclasses.replace(entry, file=dataclasses.replace(entry.file, file_name=name))


def append_with_pypaimon(warehouse: str, name: str) -> None:
    """A writer's commit: five existing keys with new values (new level-0 files)."""
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": warehouse}).get_table(name)
    rows = read_rows(warehouse, name).slice(0, 5)
    for column, values in (("v", [f"appended-{i}" for i in range(rows.num_rows)]),
                           ("rk", ["+I"] * rows.num_rows)):
        rows = rows.set_column(rows.schema.get_field_index(column), column, pa.array(values))
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(rows)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
