"""Java's index manifest combiners: the index files of a snapshot once a commit's index
changes apply (``IndexManifestFileHandler``'s bucketed combiner, and ``GlobalCombiner`` for the
deletion-vector files of a bucket-unaware table). The commit (table/commit/committer.py) and its conflict
check use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from paimond.errors import CommitConflictError
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD


def combine_index_entries(previous: Sequence[IndexManifestEntry],
                          deleted: Sequence[IndexManifestEntry],
                          added: Sequence[IndexManifestEntry], *,
                          by_file_name: bool = False,
                          table_name: str = "") -> list[IndexManifestEntry]:
    """Java's bucketed combiner: one index file per (partition, bucket, index type); a DELETE
    removes it, an ADD puts or replaces it. Entries of other buckets stay as they were.
    ``by_file_name`` (a bucket-unaware table): the deletion-vector files combine by name
    instead (Java ``GlobalCombiner``), several per partition; a deleted one no longer listed
    is a conflict of ``table_name``."""
    if by_file_name:
        def is_dv(entry: IndexManifestEntry) -> bool:
            return entry.index_file.index_type == INDEX_TYPE_DELETION_VECTORS
        return (_combine_by_file_name([e for e in previous if is_dv(e)],
                                      [e for e in deleted if is_dv(e)],
                                      [e for e in added if is_dv(e)], table_name)
                + combine_index_entries([e for e in previous if not is_dv(e)],
                                        [e for e in deleted if not is_dv(e)],
                                        [e for e in added if not is_dv(e)]))
    combined: dict[tuple[bytes, int, str], IndexManifestEntry] = {}
    for entry in previous:
        combined[(entry.partition, entry.bucket, entry.index_file.index_type)] = entry
    for entry in deleted:
        key = (entry.partition, entry.bucket, entry.index_file.index_type)
        if key in combined and combined[key].index_file.file_name == entry.index_file.file_name:
            del combined[key]
    for entry in added:
        combined[(entry.partition, entry.bucket, entry.index_file.index_type)] = replace(
            entry, kind=FILE_KIND_ADD)
    return list(combined.values())


def _combine_by_file_name(previous: Sequence[IndexManifestEntry],
                          deleted: Sequence[IndexManifestEntry],
                          added: Sequence[IndexManifestEntry],
                          table_name: str) -> list[IndexManifestEntry]:
    """A deleted file must still be listed: else a concurrent commit replaced it, and what
    this commit computed from it is stale (Java fails the commit likewise)."""
    combined = {e.index_file.file_name: e for e in previous}
    for entry in deleted:
        if combined.pop(entry.index_file.file_name, None) is None:
            raise CommitConflictError(table_name, "RequireIndexFilesListed",
                                      f"index file {entry.index_file.file_name} listed",
                                      "it no longer in the latest index manifest")
    for entry in added:
        combined[entry.index_file.file_name] = replace(entry, kind=FILE_KIND_ADD)
    return list(combined.values())
