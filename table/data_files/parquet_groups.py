"""Parquet data files as Arrow batches for ``data_files.read_data_file``: Java
``ParquetReaderFactory`` (apache/paimon 5dacde516b), one row group at a time.

A row group of at most ``EAGER_BATCHES`` batches of rows is decoded whole and cut into
batches; a larger one streams. A streaming reader holds, per column, the decompressed page it
is in and the column chunk's dictionary (writers try a dictionary of up to 1 MB before they fall
back to plain pages), plus its buffers: on the files writers flush (one row group of ~100k
rows, about one page per column) that is nearly twice the decoded row group, held until the
file ends. A whole decoded row group is less, and its batches are slices of it, so the batch
read ahead costs nothing more (bench/compact_process.py: 20 overlapping files of 100k rows,
Arrow's peak allocation 260 -> 137 MB, CPU -5%).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, MutableMapping
from typing import BinaryIO, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from paimond.format.types.data_types import RowType
from paimond.table.data_files.kv_layout import conform, physical_arrow_schema

EAGER_BATCHES = 4
# A streamed column chunk is read in pieces, not whole: a reader then holds about a page and a
# buffer per column, however large the row group is. On object stores each piece is a ranged
# GET; a local file's pieces are reads without the GIL (below), so they can be smaller.
READ_BUFFER_BYTES = 256 << 10
LOCAL_READ_BUFFER_BYTES = 64 << 10
# Parsed footers by file, kept by a reader that opens the same files again for other columns
# (a 500-column file's footer costs about 2.5 ms to parse), while they describe at most
# KEPT_FOOTER_CHUNKS column chunks in all (a parsed footer holds ~1.75 KB per column chunk:
# 875 KB for one row group of 500 columns, so ~56 MB at most).
FooterCache: TypeAlias = MutableMapping[str, pq.FileMetaData]
KEPT_FOOTER_CHUNKS = 32768


def read_buffer_bytes(root: str) -> int:
    """The read buffer of a streamed column chunk of a file under ``root``."""
    local = "://" not in root or root.startswith("file://")
    return LOCAL_READ_BUFFER_BYTES if local else READ_BUFFER_BYTES


def read_parquet_batches(source: BinaryIO, columns: RowType, batch_rows: int,
                         footers: FooterCache | None = None, path: str = ""
                         ) -> Iterator[pa.RecordBatch]:
    """The ``columns`` of a Parquet data file in batches of at most ``batch_rows`` rows,
    conformed to ``physical_arrow_schema(columns)``; columns the file lacks read as null.
    ``footers``: where the file's parsed footer is found, or kept, under ``path``."""
    local = _local_file(source)
    try:
        yield from _batches(local or source, columns, batch_rows,
                            LOCAL_READ_BUFFER_BYTES if local else READ_BUFFER_BYTES,
                            footers, path)
    finally:
        if local is not None:
            local.close()


def _local_file(source: BinaryIO) -> pa.NativeFile | None:
    """A local file opened again as Arrow's own file, else None. Arrow reads a Python file
    holding the GIL, and decoding threads then wait for the merge's and the writer's Python
    code at every read; Arrow's own file reads without it."""
    name = getattr(source, "name", None)
    if isinstance(source, io.BufferedReader) and isinstance(name, str):
        return pa.OSFile(name)
    return None


def _batches(source: BinaryIO | pa.NativeFile, columns: RowType, batch_rows: int,
             buffer_bytes: int, footers: FooterCache | None, path: str
             ) -> Iterator[pa.RecordBatch]:
    schema = physical_arrow_schema(columns)
    known = footers.get(path) if footers is not None else None
    # pre_buffer off, as pyarrow < 20 had it: pre-buffering reads each column chunk whole before
    # decoding (about the compressed row group per open file: +6 MB per run of a merge)
    parquet = pq.ParquetFile(source, buffer_size=buffer_bytes, pre_buffer=False, metadata=known)
    if footers is not None and known is None and _chunks(footers.values()) \
            + _chunks([parquet.metadata]) <= KEPT_FOOTER_CHUNKS:
        footers[path] = parquet.metadata
    present = set(parquet.schema_arrow.names)
    names = [n for n in columns.field_names if n in present]
    metadata = parquet.metadata
    eager_rows = EAGER_BATCHES * batch_rows
    for group in range(metadata.num_row_groups):
        if names and metadata.row_group(group).num_rows <= eager_rows:
            batches = parquet.read_row_group(group, columns=names).to_batches(
                max_chunksize=batch_rows)
        else:
            batches = parquet.iter_batches(batch_size=batch_rows, columns=names,
                                           row_groups=[group])
        for batch in batches:
            if batch.num_rows:
                yield _conformed(batch, schema)


def _chunks(footers: Iterable[pq.FileMetaData]) -> int:
    return sum(footer.num_columns * footer.num_row_groups for footer in footers)


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    names = batch.schema.names
    return pa.RecordBatch.from_arrays(
        [conform(batch.column(f.name), f.type) if f.name in names
         else pa.nulls(batch.num_rows, f.type) for f in schema], schema=schema)
