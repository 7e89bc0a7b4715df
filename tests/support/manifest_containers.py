"""Avro container codecs and a container rewritten without sync markers."""

from __future__ import annotations

from paimond.format.meta import avro_container

CODECS = ["zstd", "none", "deflate", "bzip2", "xz"]


def unsynced(data: bytes) -> bytes:
    """The container with its sync marker (after the header and every block) zeroed."""
    _, sync, _ = avro_container._read_header(memoryview(data))
    assert data.count(bytes(sync)) >= 1
    return data.replace(bytes(sync), bytes(16))
