"""``manifest_sizes``: the size of each prefix of a manifest, computed block by block, equals
the length of that prefix encoded whole by ``encode_manifest`` (what the rolling manifest
writer compared before), for every codec, at block boundaries and between them."""

from __future__ import annotations

import random

import pytest
from support.manifest_entries import manifest_entries

from paimond.format.meta.manifest import (
    encode_manifest,
    manifest_sizes,
)


@pytest.mark.parametrize("compression", ["zstd", "none", "deflate", "bzip2", "xz"])
def test_each_prefix_size_equals_the_prefix_encoded_whole(compression: str) -> None:
    entries = manifest_entries(1500, seed=len(compression))
    sizes = manifest_sizes(entries, compression=compression)
    # the last prefix first: what was encoded is reused for the shorter ones
    points = [1500, 0, 1, 2, 299, 300, 301, 999, 1000, 1001, 1499]
    points += random.Random(3).sample(range(1, 1500), 25)
    for count in points:
        assert sizes.size(count) == len(encode_manifest(entries[:count], compression=compression)), count
    assert len(sizes) == 1500


def test_prefixes_from_a_first_entry_on() -> None:
    entries = manifest_entries(1200, seed=5)
    sizes = manifest_sizes(entries, first=700)
    for count in (500, 0, 1, 250, 499):
        assert sizes.size(count) == len(encode_manifest(entries[700:700 + count])), count
    assert sizes.size(501) is None


def test_a_prefix_longer_than_the_entries_has_no_size() -> None:
    entries = manifest_entries(10, seed=1)
    sizes = manifest_sizes(entries)
    assert sizes.size(5) == len(encode_manifest(entries[:5]))
    assert len(sizes) == 5  # encoded only as far as asked
    assert sizes.size(11) is None
    assert sizes.size(10) == len(encode_manifest(entries))
