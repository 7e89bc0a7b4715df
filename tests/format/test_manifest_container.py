"""``manifest_sizes``' containers: the file of a prefix made from the records the sizes
encoded (each closed block kept compressed) is ``encode_manifest``'s file of that prefix,
byte for byte but for the random sync marker, for every codec; and so are the prefixes after
a cut (``rest``), which re-block the records already encoded without encoding them again."""

from __future__ import annotations

import pytest
from support.manifest_containers import CODECS, unsynced
from support.manifest_entries import manifest_entries

from paimond.format.meta.manifest import (
    ManifestEntry,
    decode_manifest,
    encode_manifest,
    manifest_sizes,
)


def as_written(entries: list[ManifestEntry], compression: str) -> bytes:
    return unsynced(encode_manifest(entries, compression=compression))


@pytest.mark.parametrize("compression", CODECS)
def test_each_prefix_container_is_the_prefix_encoded_whole(compression: str) -> None:
    entries = manifest_entries(1500, seed=len(compression) + 10)
    sizes = manifest_sizes(entries, compression=compression)
    for count in (1500, 0, 1, 299, 300, 301, 999, 1000, 1001, 1499):
        made = sizes.container(count)
        assert unsynced(made) == as_written(entries[:count], compression), count
        assert len(made) == sizes.size(count)
        assert decode_manifest(made) == entries[:count]
    with pytest.raises(ValueError):
        sizes.container(1501)


@pytest.mark.parametrize("compression", CODECS)
def test_the_prefixes_after_a_cut_are_those_of_the_rest(compression: str) -> None:
    entries = manifest_entries(1400, seed=len(compression) + 20)
    for cut in (0, 1, 450, 700, 1399, 1400):
        sizes = manifest_sizes(entries, compression=compression)
        assert sizes.size(1400) is not None  # everything encoded before the cut
        rest = sizes.rest(cut, entries, cut)
        assert len(rest) == 1400 - cut  # taken over, not encoded again
        for count in (1400 - cut, 0, (1400 - cut) // 2):
            assert rest.size(count) == len(encode_manifest(entries[cut:cut + count],
                                                           compression=compression))
            assert unsynced(rest.container(count)) == as_written(entries[cut:cut + count],
                                                                 compression)


def test_cuts_of_a_list_cut_in_front_and_partly_encoded() -> None:
    """As the streamed merge uses them: the written entries removed from the list's front,
    more appended later, only some encoded before each cut."""
    entries = manifest_entries(2600, seed=7)
    held = entries[:900]
    sizes = manifest_sizes(held, compression="zstd")
    assert sizes.size(600) is not None and sizes.follows(held)
    first = sizes.container(500)
    del held[:500]
    sizes = sizes.rest(500, held, 0)
    assert len(sizes) == 100 and sizes.follows(held)
    held += entries[900:2600]  # appended: still followed
    assert sizes.follows(held) and not sizes.follows(list(held))
    second = sizes.container(1500)
    del held[:1500]
    sizes = sizes.rest(1500, held, 0)
    assert len(sizes) == 0 and sizes.follows(held)
    last = sizes.container(len(held))
    assert [unsynced(f) for f in (first, second, last)] == [
        as_written(entries[a:b], "zstd") for a, b in ((0, 500), (500, 2000), (2000, 2600))]
    assert len(sizes) == 600 and sizes.follows(held)
    held[599] = entries[0]  # the last encoded replaced: not the records encoded any more
    assert not sizes.follows(held)
    del held[599]
    assert not sizes.follows(held)
