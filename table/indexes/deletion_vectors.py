"""Deletion-vector index files of a table on storage: Java ``DeletionVectorsIndexFile``
(apache/paimon 5dacde516b).

A primary-key bucket has at most one DV index file under ``index/``, listed in the index
manifest; it maps data file names to the row positions deleted from them. This module finds a
bucket's file, reads its vectors and writes a new one; what the vectors should hold is the
LSM's business (``paimond.lsm.lookup.deletion_vectors``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from paimond.errors import CodecError, CorruptFileError
from paimond.faults import crash_point
from paimond.format.meta.deletion_vector import (
    DeletionVector,
    decode_deletion_vector_file,
    encode_deletion_vector_file,
)
from paimond.format.meta.index_manifest import (
    INDEX_TYPE_DELETION_VECTORS,
    IndexFileMeta,
    IndexManifestEntry,
)
from paimond.format.meta.manifest import FILE_KIND_ADD
from paimond.table.catalog import Table
from paimond.table.commit.requirements import RequireIndexFile
from paimond.table.layout import INDEX_DIR, INDEX_FILE_PREFIX


def index_file_path(table: Table, meta: IndexFileMeta) -> str:
    return meta.external_path or table.file_path(INDEX_DIR, meta.file_name)


def bucket_dv_entry(entries: Iterable[IndexManifestEntry], partition: bytes, bucket: int
                    ) -> IndexManifestEntry | None:
    """The DV index file of one bucket among the index manifest's entries, if any."""
    for entry in entries:
        if (entry.partition == partition and entry.bucket == bucket
                and entry.index_file.index_type == INDEX_TYPE_DELETION_VECTORS):
            return entry
    return None


def dv_index_unchanged(partition: bytes, bucket: int, entry: IndexManifestEntry | None
                       ) -> RequireIndexFile:
    """A commit's requirement that the bucket's DV index file is still ``entry``'s (None:
    still none): new vectors computed from it would drop what a replacing file added."""
    return RequireIndexFile(partition, bucket, INDEX_TYPE_DELETION_VECTORS,
                            entry.index_file.file_name if entry is not None else None)


def read_deletion_vectors(table: Table, entry: IndexManifestEntry) -> dict[str, DeletionVector]:
    """The vectors of one DV index file, by data file name. A corrupt or truncated file is a
    CorruptFileError naming it; a missing one a MissingFileError."""
    meta = entry.index_file
    path = index_file_path(table, meta)
    data = table.storage.read_bytes(path)
    if len(data) != meta.file_size:
        raise CorruptFileError(path, f"{len(data)} bytes, the index manifest says "
                                     f"{meta.file_size}")
    try:
        return decode_deletion_vector_file(data, meta.dv_ranges or ())
    except CodecError as error:
        raise CorruptFileError(path, error.reason) from None


def write_deletion_vectors(table: Table, vectors: Mapping[str, DeletionVector], partition: bytes,
                           bucket: int, *, bitmap64: bool) -> tuple[IndexManifestEntry, str]:
    """Write ``vectors`` as a new DV index file (the version byte alone when empty, as Java
    does); returns its ADD entry for the index manifest and its path."""
    data, ranges = encode_deletion_vector_file(vectors, bitmap64=bitmap64)
    name = f"{INDEX_FILE_PREFIX}{uuid.uuid4()}-0"
    path = table.file_path(INDEX_DIR, name)
    table.storage.write_bytes(path, data)
    crash_point("deletion_vectors.index_file_written")
    meta = IndexFileMeta(INDEX_TYPE_DELETION_VECTORS, name, len(data), len(ranges), ranges,
                         None, None)
    return IndexManifestEntry(FILE_KIND_ADD, partition, bucket, meta), path
