"""The rolling manifest writer writes the bytes it encoded to find its cut points (each entry
encoded once): its files, written at once (``write_rolling``) or streamed as the commit's
full manifest merge feeds them (``RollingWriter.write_full_files``), are the files the
writer wrote before, ``encode_manifest`` of each slice between Java's cut points (found here
by encoding every candidate slice whole), byte for byte but for the random sync marker, for
every codec."""

from __future__ import annotations

import uuid

import pytest
from support.manifest_containers import CODECS, unsynced
from support.manifest_entries import manifest_entries

from paimond.format.meta.manifest import ManifestEntry, decode_manifest, encode_manifest
from paimond.format.types.data_types import IntType
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.commit.manifest_merge import (
    ROLLING_CHECK_RECORDS,
    RollingWriter,
    write_rolling,
)
from paimond.table.storage.interface import open_storage


def expected_files(entries: list[ManifestEntry], target: int, compression: str) -> list[bytes]:
    """Java ``RollingFileWriter``: after every 1000th record, the file closes once it
    reached the target size."""
    files, start = [], 0
    for end in range(ROLLING_CHECK_RECORDS, len(entries), ROLLING_CHECK_RECORDS):
        if len(encode_manifest(
                entries[start:end], compression=compression)) >= target:
            files.append(encode_manifest(entries[start:end], compression=compression))
            start = end
    if start < len(entries):
        files.append(encode_manifest(entries[start:], compression=compression))
    return [unsynced(f) for f in files]


def _written(writer: ManifestWriter) -> list[bytes]:
    return [unsynced(writer.storage.read_bytes(path)) for path in writer.written]


@pytest.mark.parametrize("compression", CODECS)
def test_rolling_files_are_the_slices_encoded_whole(compression: str) -> None:
    entries = manifest_entries(5300, seed=len(compression) + 30)
    target = len(encode_manifest(entries[:1700], compression=compression))
    expected = expected_files(entries, target, compression)
    assert len(expected) >= 3  # cut at 2000, 4000 (not between: checked at thousands only)
    storage = open_storage(f"memory://rolling-bytes-{uuid.uuid4()}")
    writer = ManifestWriter(storage, storage.root, [IntType()], compression=compression)
    metas = write_rolling(writer, entries, target)
    assert _written(writer) == expected
    assert [m.file_size for m in metas] == [
        len(storage.read_bytes(path)) for path in writer.written]
    assert [e for path in writer.written
            for e in decode_manifest(storage.read_bytes(path))] == entries


@pytest.mark.parametrize("compression", CODECS)
@pytest.mark.parametrize("chunk", [700, 2600])
def test_streamed_files_are_the_slices_encoded_whole(compression: str, chunk: int) -> None:
    """Entries arrive ``chunk`` at a time; full files are written as ``_full_compaction``
    asks, the rest at the end."""
    entries = manifest_entries(6100, seed=len(compression) + chunk)
    target = len(encode_manifest(entries[:1300], compression=compression))
    storage = open_storage(f"memory://streamed-bytes-{uuid.uuid4()}")
    writer = ManifestWriter(storage, storage.root, [IntType()], compression=compression)
    stream = RollingWriter(writer, target)
    held: list[ManifestEntry] = []
    next_try, calls = 2 * ROLLING_CHECK_RECORDS, 0
    for start in range(0, len(entries), chunk):
        held += entries[start:start + chunk]
        if len(held) >= next_try:
            _, next_try = stream.write_full_files(held)
            calls += 1
    stream(held)
    assert calls >= 2
    assert _written(writer) == expected_files(entries, target, compression)
