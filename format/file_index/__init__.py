"""Data-file indexes (Java ``org.apache.paimon.fileindex``, apache/paimon ``5dacde516b``).

- ``FileIndexBuilder`` (batch by batch) and ``build_file_index`` (all at once): the container
  ``DataFileIndexWriter`` writes for one data file;
- ``encode_file_index`` / ``decode_file_index``: the ``FileIndexFormat`` container;
- ``create_index_writer`` / ``decode_index``: one index type over one column: ``bloom-filter``
  (``might_contain``), ``bitmap``, ``range-bitmap`` and ``bsi`` (``equal``, ``is_in``,
  ``is_null``... returning ``pyroaring.BitMap`` row numbers; range queries on the last two);
- ``columns``: the indexed columns and each index type's typed settings (``paimond.table``
  reads them from the ``file-index.*`` table options).
"""

from paimond.format.file_index.columns import ColumnIndexes, IndexColumn, IndexSettings
from paimond.format.file_index.container import decode_file_index, encode_file_index
from paimond.format.file_index.data_file_index import (
    FileIndex,
    FileIndexBuilder,
    build_file_index,
    create_index_writer,
    decode_index,
)
from paimond.format.file_index.keys import IndexWriter

__all__ = [
    "ColumnIndexes",
    "FileIndex",
    "FileIndexBuilder",
    "IndexColumn",
    "IndexSettings",
    "IndexWriter",
    "build_file_index",
    "create_index_writer",
    "decode_file_index",
    "decode_index",
    "encode_file_index",
]
