"""Test scaffolding: append data files that a test wrote into a table as one APPEND snapshot,
through paimond's own commit path (no conflict checks, as for a plain append in Paimon)."""

from __future__ import annotations

from collections.abc import Sequence

from paimond.clock import SYSTEM_CLOCK
from paimond.format.meta.manifest import FILE_KIND_ADD, DataFileMeta, ManifestEntry
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, Committer


def append_files(table: Table, files: Sequence[tuple[bytes, int, int, DataFileMeta]]) -> int:
    """Commit (partition bytes, bucket, total_buckets, meta) as ADD entries; returns the id."""
    entries = [ManifestEntry(FILE_KIND_ADD, p, b, tb, meta) for p, b, tb, meta in files]
    committer = Committer(table, commit_kind="APPEND", check_conflicts=False, clock=SYSTEM_CLOCK)
    return committer.commit(CommitChanges(added=entries)).id
