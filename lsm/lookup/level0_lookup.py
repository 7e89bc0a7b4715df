"""What a compaction's level-0 inputs find in the levels above its output (Java's
``LookupChangelogMergeFunctionWrapper`` with deletion vectors, ``FirstRowMergeFunctionWrapper``).

Readers of deletion-vector and first-row tables skip level 0 and read the other files
unmerged, so a key may live in one file of levels >= 1 only. When level-0 files move up,
their keys are looked up (set-wise, ``lsm.lookup.key_lookup``) in the files above the output:
- deletion vectors: the rows found are superseded; their positions are marked, and for
  merge engines that combine versions the rows themselves join the merge of the section
  holding the key, as one more (oldest) run;
- first-row: the row found stays first; the key is left out of the section's output.

Keys are grouped by section (its index is the tag), since sections merge one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.meta.manifest import DataFileMeta
from paimond.format.types.data_types import DataType
from paimond.lsm.interval_partition import Section
from paimond.lsm.lookup.deletion_vectors import BucketDeletionVectors
from paimond.lsm.lookup.key_lookup import (
    TAG_COLUMN,
    KeyIndex,
    Superseded,
    find_superseded,
    no_deletions,
    rows_at,
    wanted_keys,
)

Read = Callable[[DataFileMeta], Iterator[pa.RecordBatch]]


class Level0Lookup:
    def __init__(self, key_columns: Sequence[str], key_types: Sequence[DataType],
                 key_schema: pa.Schema, dvs: BucketDeletionVectors | None,
                 merges_superseded: bool, *, first_row: bool = False,
                 level_column: str | None = None) -> None:
        """``merges_superseded``: the rows found join the merge (their values are needed);
        ``level_column``: they carry their file's level in it (changelog production)."""
        self.key_columns, self.key_types = list(key_columns), list(key_types)
        self.key_schema, self.dvs = key_schema, dvs
        self.merges_superseded, self.first_row = merges_superseded, first_row
        self.level_column = level_column
        self.tag_of: dict[str, int] = {}  # level-0 input -> its section's tag
        self.superseded_rows: dict[int, pa.Table] = {}  # tag -> rows to merge
        self.existing_keys: dict[int, pa.Table] = {}  # first-row: tag -> keys found above
        self.rows_superseded = 0

    def run(self, sections: Sequence[Section], above: Sequence[DataFileMeta], index: KeyIndex,
            read_keys: Read, read_all: Read) -> None:
        """``read_keys``: a level-0 file's key columns; ``read_all``: every row of a file
        above (row numbers are positions)."""
        level0 = [(meta, tag) for tag, section in enumerate(sections)
                  for meta in section.files if meta.level == 0]
        if not level0 or not above:
            return
        self.tag_of = {meta.file_name: tag for meta, tag in level0}
        wanted = wanted_keys(((pa.Table.from_batches(list(read_keys(meta)),
                                                     schema=self.key_schema), tag)
                              for meta, tag in level0), self.key_columns)
        deleted = self.dvs.positions_of if self.dvs is not None else no_deletions
        found = find_superseded(above, wanted, self.key_columns, self.key_types, index, deleted)
        if self.first_row:
            self._keep_existing_keys(wanted, found)
        else:
            self._supersede(self.dvs, found, read_all)

    def _supersede(self, dvs: BucketDeletionVectors | None, found: Sequence[Superseded],
                   read_all: Read) -> None:
        """Without vectors (a lookup changelog table), every version found above is taken;
        the merge keeps the lowest level's."""
        rows: list[pa.Table] = []
        for superseded in found:
            if dvs is not None:
                dvs.mark(superseded.meta.file_name, superseded.positions)
                self.rows_superseded += len(superseded.positions)
            if self.merges_superseded:
                taken = rows_at(read_all(superseded.meta), superseded.positions)
                if taken is not None:
                    if self.level_column is not None:
                        taken = taken.append_column(self.level_column, pa.array(
                            np.full(taken.num_rows, superseded.meta.level, np.int32)))
                    rows.append(taken.append_column(TAG_COLUMN, pa.array(superseded.tags)))
        if rows:
            table = pa.concat_tables(rows)
            tags = table.column(TAG_COLUMN)
            for tag in pc.unique(tags).to_pylist():
                picked = table.filter(pc.equal(tags, tag)).drop_columns([TAG_COLUMN])
                self.superseded_rows[tag] = picked.sort_by(
                    [(k, "ascending") for k in self.key_columns])

    def _keep_existing_keys(self, wanted: pa.Table, found: Sequence[Superseded]) -> None:
        if not found:
            return
        keys = wanted.take(pa.array(np.concatenate([f.wanted_rows for f in found])))
        tags = keys.column(TAG_COLUMN)
        for tag in pc.unique(tags).to_pylist():
            self.existing_keys[tag] = keys.filter(pc.equal(tags, tag)).select(self.key_columns)

    def _tags(self, section: Section) -> list[int]:
        return sorted({self.tag_of[m.file_name] for m in section.files
                       if m.file_name in self.tag_of})

    def existing_keys_of(self, section: Section) -> pa.Table | None:
        """First-row: keys of ``section`` to leave out (a row above is first)."""
        found = [self.existing_keys.pop(t) for t in self._tags(section)
                 if t in self.existing_keys]
        return pa.concat_tables(found) if found else None

    def superseded_run(self, section: Section) -> pa.Table | None:
        """Deletion vectors: the superseded rows to merge into ``section``, in key order."""
        found = [self.superseded_rows.pop(t) for t in self._tags(section)
                 if t in self.superseded_rows]
        if not found:
            return None
        table = pa.concat_tables(found)
        return table.sort_by([(k, "ascending") for k in self.key_columns]) if len(found) > 1 \
            else table
