"""Deterministic manifest entries of a given count and seed."""

from __future__ import annotations

import random

from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.meta.manifest import (
    EMPTY_STATS,
    FILE_KIND_ADD,
    DataFileMeta,
    ManifestEntry,
)
from paimond.format.types.data_types import IntType


def manifest_entries(count: int, seed: int) -> list[ManifestEntry]:
    """Entries of varied width (names, key bytes), so blocks close at varied records."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        name = f"data-{rng.getrandbits(64):x}-{i}" + "x" * rng.randrange(0, 200)
        key = rng.randbytes(rng.randrange(0, 64))
        file = DataFileMeta(name, rng.randrange(1, 1 << 30), rng.randrange(1, 1 << 20), key, key,
                            EMPTY_STATS, EMPTY_STATS, 0, i, 0, rng.randrange(0, 5), (), None,
                            0, None, 0, None, None, None, None, None)
        out.append(ManifestEntry(FILE_KIND_ADD, encode_manifest_row([i % 7], [IntType()]),
                                 i % 3, 4, file))
    return out
