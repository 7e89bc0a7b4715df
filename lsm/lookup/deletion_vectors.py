"""A bucket's deletion vectors during compaction: Java ``BucketedDvMaintainer`` (apache/paimon
5dacde516b).

A primary-key bucket has at most one DV index file (read and written by
``paimond.table.indexes.deletion_vectors``); it maps data file names to the row positions deleted from
them. Compaction restores that map, drops the vectors of the files it rewrites, adds the
positions its lookups supersede, and, if the map changed, writes ONE new file for the bucket
(the version byte alone when the map became empty, as Java does). The index manifest's
bucketed combiner then replaces the old file.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from paimond.format.meta.deletion_vector import DeletionVector
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.roaring.bitmap32 import bitmap_of
from paimond.table.catalog import Table
from paimond.table.indexes.deletion_vectors import read_deletion_vectors, write_deletion_vectors


def deleted_positions(vector: DeletionVector | None) -> np.ndarray:
    """The positions of a vector as a sorted int64 array (empty for None)."""
    if not vector:
        return np.empty(0, dtype=np.int64)
    width = np.uint64 if isinstance(vector, BitMap64) else np.uint32
    return np.frombuffer(vector.to_array(), dtype=width).astype(np.int64)


def vector_of(positions: np.ndarray, *, bitmap64: bool) -> DeletionVector:
    """A vector holding ``positions`` (built from the array's bytes, no Python ints)."""
    if bitmap64:
        return BitMap64(array.array("Q", positions.astype(np.uint64).tobytes()))
    return bitmap_of(positions)


def filter_deleted(batches: Iterable[pa.RecordBatch], deleted: np.ndarray
                   ) -> Iterator[pa.RecordBatch]:
    """``batches`` of one file without the rows at ``deleted`` (sorted positions)."""
    start = 0
    for batch in batches:
        end = start + batch.num_rows
        low, high = np.searchsorted(deleted, [start, end])
        if high > low:
            keep = np.ones(batch.num_rows, dtype=bool)
            keep[deleted[low:high] - start] = False
            batch = batch.filter(pa.array(keep))
        start = end
        if batch.num_rows:
            yield batch


class BucketDeletionVectors:
    """The DV map of one bucket, changed by compaction, written once."""

    def __init__(self, vectors: Mapping[str, DeletionVector], *, bitmap64: bool,
                 base: IndexManifestEntry | None) -> None:
        self.bitmap64, self.base = bitmap64, base
        self._vectors: dict[str, DeletionVector] = dict(vectors)
        self.changed = False

    @classmethod
    def load(cls, table: Table, base: IndexManifestEntry | None, *, bitmap64: bool
             ) -> BucketDeletionVectors:
        return cls(read_deletion_vectors(table, base) if base else {}, bitmap64=bitmap64,
                   base=base)

    def vector_of(self, file_name: str) -> DeletionVector | None:
        return self._vectors.get(file_name)

    def positions_of(self, file_name: str) -> np.ndarray:
        return deleted_positions(self._vectors.get(file_name))

    def vectors(self) -> dict[str, DeletionVector]:
        return dict(self._vectors)

    def remove(self, file_name: str) -> None:
        """The file was rewritten: its vector goes with it."""
        if self._vectors.pop(file_name, None) is not None:
            self.changed = True

    def mark(self, file_name: str, positions: np.ndarray) -> None:
        """Delete ``positions`` of ``file_name`` (a superseded row each)."""
        if len(positions) == 0:
            return
        vector = self._vectors.get(file_name)
        added = vector_of(positions, bitmap64=self.bitmap64 if vector is None
                          else isinstance(vector, BitMap64))
        if vector is None:
            self._vectors[file_name] = added
            self.changed = True
            return
        before = len(vector)
        vector.update(added)
        self.changed = self.changed or len(vector) != before

    def write(self, table: Table, partition: bytes, bucket: int) -> tuple[IndexManifestEntry,
                                                                           str]:
        """Write the map as a new DV index file; returns its ADD entry and its path."""
        return write_deletion_vectors(table, self._vectors, partition, bucket,
                                      bitmap64=self.bitmap64)
