"""Row tracking on append tables (``row-tracking.enabled``): Java ``DataFileRecordReader`` /
``ColumnarRowIterator.assignRowTracking`` and ``RowTrackingCommitUtils``, apache/paimon
5dacde516b.

A file an ingestion commit wrote holds the table columns only: its rows' ids are its
``firstRowId`` (assigned at commit) plus their positions in the file, and their sequence
number is the file's ``maxSequenceNumber`` (the id of the snapshot that added it). A file
compaction wrote holds ``_ROW_ID`` and ``_SEQUENCE_NUMBER`` physically (``_WRITE_COLS`` names
them) and has no ``firstRowId``: the commit assigns row ids to APPEND files only, so the ids
travel with the rows, and the snapshot's ``nextRowId`` is unchanged by a compaction. A null
in the physical columns falls back to the file's values, as Java's reader does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CorruptFileError
from paimond.format.meta.manifest import DataFileMeta
from paimond.table.data_files.kv_layout import ROW_ID, SEQUENCE_NUMBER


def with_row_tracking(batches: Iterable[pa.RecordBatch], meta: DataFileMeta, path: str
                      ) -> Iterator[pa.RecordBatch]:
    """``batches`` of a whole file (all positions, before any deletion vector) with their
    ``_ROW_ID`` and ``_SEQUENCE_NUMBER`` filled in and declared NOT NULL. Raises
    CorruptFileError when a row has no id and the file no ``firstRowId``."""
    position = 0
    for batch in batches:
        ids = batch.column(ROW_ID.name)
        if ids.null_count:
            if meta.first_row_id is None:
                raise CorruptFileError(path, "rows without _ROW_ID in a file without "
                                             "firstRowId (row-tracking.enabled table)")
            start = meta.first_row_id + position
            positional = pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64))
            ids = pc.if_else(ids.is_null(), positional, ids)
        sequences = pc.fill_null(batch.column(SEQUENCE_NUMBER.name),
                                 pa.scalar(meta.max_sequence_number, pa.int64()))
        position += batch.num_rows
        names = batch.schema.names
        columns = list(batch.columns)
        columns[names.index(ROW_ID.name)] = ids
        columns[names.index(SEQUENCE_NUMBER.name)] = sequences
        schema = batch.schema
        for name in (ROW_ID.name, SEQUENCE_NUMBER.name):
            index = names.index(name)
            schema = schema.set(index, schema.field(index).with_nullable(False))
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
