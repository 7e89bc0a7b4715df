"""Test scaffolding for file indexes on tables: the index of a data file as its manifest entry
places it, and a check of every index against the file's true rows (read with pyarrow, not
paimond): bloom filters have no false negatives, bitmap-like indexes answer exact rows."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow.parquet as pq
from pyroaring import BitMap

from paimond.format.file_index import decode_file_index, decode_index
from paimond.format.file_index.container import FileIndexes
from paimond.format.meta.manifest import DataFileMeta
from paimond.format.types.data_types import DataType
from paimond.table.catalog import Table
from paimond.table.scan.snapshot_scan import LiveFile, data_file_path


def index_files(meta: DataFileMeta) -> list[str]:
    return [n for n in meta.extra_files if n.endswith(".index")]


def placed_index(table: Table, live: LiveFile) -> FileIndexes | None:
    """The decoded container of a live file: embedded, or its ``.index`` extra file."""
    meta = live.meta
    names = index_files(meta)
    assert not (names and meta.embedded_index is not None), "an index both embedded and a file"
    if names:
        directory = data_file_path(table, table.latest_schema(), live).rsplit("/", 1)[0]
        return decode_file_index(table.storage.read_bytes(f"{directory}/{names[0]}"))
    return None if meta.embedded_index is None else decode_file_index(meta.embedded_index)


def parquet_columns(path: str, names: list[str]) -> dict[str, list[Any]]:
    table = pq.ParquetFile(path).read(columns=names)
    return {n: table.column(n).to_pylist() for n in names}


def assert_index_matches(container: FileIndexes, columns: dict[str, list[Any]],
                         types: dict[str, DataType]) -> int:
    """Check every index of ``container`` against the rows; returns how many were checked."""
    checked = 0
    for column, indexes in container.items():
        values = columns[column]
        rows: dict[Any, list[int]] = defaultdict(list)
        for position, value in enumerate(values):
            rows[value].append(position)
        for index_type, payload in indexes.items():
            assert payload is not None, f"{column}/{index_type} is empty"
            index: Any = decode_index(index_type, types[column], payload)
            if index_type == "bloom-filter":
                assert all(index.might_contain(v) for v in rows if v is not None)
            else:
                for value, positions in rows.items():
                    expected = BitMap(positions)
                    assert (index.is_null() if value is None else index.equal(value)) == expected
                assert index.is_null() == BitMap(rows.get(None, []))
            checked += 1
    return checked
