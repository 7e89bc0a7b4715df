"""Which bitmap file-index version a table's files already use.

Java 1.0 writes bitmap indexes in version 1; Java 1.1 on writes version 2 unless
``file-index.bitmap.<column>.version`` says 1. A reader of version 1 only (Java 1.0:
``read index file fail, your plugin version is lower than 2``) still reads a table whose
writers are 1.0, so paimond writes the version the table's own index files use unless the
table option names one: it looks at the bitmap payloads of the newest data files (the first
byte of a bitmap payload is its version) and hands that to ``TableOptions``.

Bounded: at most ``MAX_MANIFESTS`` manifests of the snapshot (newest first) and
``MAX_INDEX_FILES`` index files are read; a table whose newest files have no bitmap index
gets Java's default. The index codecs load only for a table with file-index options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from paimond.errors import CodecError, CorruptFileError
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.layout import FILE_INDEX_SUFFIX
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import bucket_path, read_manifest, read_manifest_list

MAX_MANIFESTS = 4
MAX_INDEX_FILES = 8
_VERSION_KEY_SUFFIX = ".version"


def needs_bitmap_version(options: TableOptions) -> bool:
    """Whether some bitmap index takes its version from the default (no option names it)."""
    if not options.has_file_index:
        return False
    from paimond.format.file_index.bitmap import BITMAP  # tables with file indexes only

    columns = options.raw.get(f"file-index.{BITMAP}.columns")
    if not columns:
        return False
    named = {k for k in options.raw
             if k.startswith(f"file-index.{BITMAP}.") and k.endswith(_VERSION_KEY_SUFFIX)}
    return any(f"file-index.{BITMAP}.{c.strip()}{_VERSION_KEY_SUFFIX}" not in named
               for c in columns.split(",") if c.strip())


def keeping_bitmap_version(table: Table, options: TableOptions,
                           snapshot: Snapshot | None) -> TableOptions:
    """``options`` that write bitmap indexes in the version the table's files use (the
    same options when an option names the version or no file has a bitmap index)."""
    if snapshot is None or not needs_bitmap_version(options):
        return options
    from paimond.format.file_index.bitmap import VERSION_2

    version = bitmap_version_in_use(table, snapshot)
    if version is None or version == VERSION_2:
        return options
    return dataclasses.replace(options, bitmap_version_in_use=version)


def bitmap_version_in_use(table: Table, snapshot: Snapshot) -> int | None:
    """The version of the first bitmap payload among the newest indexed data files."""
    read_files = 0
    for entry in _newest_added(table, snapshot):
        meta = entry.file
        containers: list[tuple[str, bytes]] = []
        if meta.embedded_index is not None:
            containers.append((f"the manifest entry of {meta.file_name}", meta.embedded_index))
        for name in meta.extra_files:
            if name.endswith(FILE_INDEX_SUFFIX) and read_files < MAX_INDEX_FILES:
                read_files += 1
                directory = (meta.external_path.rpartition("/")[0] if meta.external_path else
                             bucket_path(table, table.schema(meta.schema_id), entry.partition,
                                         entry.bucket))
                path = table.storage.join(directory, name)
                if table.storage.exists(path):
                    containers.append((path, table.storage.read_bytes(path)))
        for where, container in containers:
            version = _bitmap_version(where, container)
            if version is not None:
                return version
        if read_files >= MAX_INDEX_FILES:
            return None
    return None


def _newest_added(table: Table, snapshot: Snapshot) -> Iterator[ManifestEntry]:
    where = table.snapshots.path(snapshot.id)
    metas = list(reversed(read_manifest_list(table, snapshot.delta_manifest_list, where)))
    if len(metas) < MAX_MANIFESTS:
        base = read_manifest_list(table, snapshot.base_manifest_list, where)
        metas += list(reversed(base))[:MAX_MANIFESTS - len(metas)]
    for meta in metas[:MAX_MANIFESTS]:
        for entry in reversed(read_manifest(table, meta, where)):
            if entry.kind == FILE_KIND_ADD:
                yield entry


def _bitmap_version(where: str, container: bytes) -> int | None:
    from paimond.format.file_index.bitmap import BITMAP, VERSION_1, VERSION_2
    from paimond.format.file_index.container import decode_file_index

    try:
        indexes = decode_file_index(container)
    except CodecError as error:
        raise CorruptFileError(where, error.reason) from None
    for types in indexes.values():
        payload = types.get(BITMAP)
        if payload:
            version = payload[0]
            return version if version in (VERSION_1, VERSION_2) else None
    return None
