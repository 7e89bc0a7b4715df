"""Java's Roaring64Bitmap layout (format/roaring/bitmap64.py): golden bytes from Paimon's own classes
in the Java reader's jar (tests/support/java/Roaring64Golden.java: RoaringBitmap64.bitmapOf
and FieldRoaringBitmap64Agg.agg) for bitmaps that reach every node type (Node4 to Node256,
prefixes split), every container type (array, bitmap, run, full), unsigned high keys and
unsorted insertion; and the union's values against Python sets."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.java_reader import find_jar, unavailable_reason

from paimond.errors import CodecError
from paimond.format.roaring.bitmap64 import Roaring64, encode_values, union_bytes

SOURCE = Path(__file__).parents[1] / "support" / "java" / "Roaring64Golden.java"


def _bitmap(rng: random.Random) -> list[int]:
    """Values in a random order: a mix of shapes, over few or many high parts."""
    shape = rng.randrange(7)
    base = rng.choice([0, 1 << 20, 1 << 40, (1 << 63) + (1 << 33), (1 << 64) - (1 << 18)])
    if shape == 0:  # sparse, many high parts sharing prefixes (Node16/48/256)
        count = rng.choice([3, 20, 60, 300])
        values = [base + (rng.randrange(count * 3) << 16) + rng.randrange(1 << 16)
                  for _ in range(count)]
    elif shape == 1:  # dense: a bitmap container
        values = [base + v for v in rng.sample(range(1 << 16), 6000)]
    elif shape == 2:  # runs
        start = rng.randrange(1 << 17)
        values = [base + start + v for v in range(rng.randrange(1, 70000))]
    elif shape == 3:  # a full container and a neighbour
        values = [base + v for v in range(1 << 16)] + [base + (1 << 16) + 7]
    elif shape == 4:  # far apart high parts (prefixes split at every depth)
        values = [rng.getrandbits(64) for _ in range(rng.randrange(1, 40))]
    elif shape == 5:  # array containers near the 4096 limit
        values = [base + v for v in rng.sample(range(1 << 16), rng.choice([4095, 4096, 4097]))]
    else:
        values = []
    values = [v % (1 << 64) for v in values]
    rng.shuffle(values)
    return values


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> object:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Java unavailable under CI: {reason}")
        pytest.skip(reason)
    jar = find_jar()
    assert jar is not None
    classes = tmp_path_factory.mktemp("roaring64")
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", str(jar), str(SOURCE)],
                   check=True, capture_output=True)

    def ask(requests: list[str]) -> list[bytes]:
        answer = subprocess.run(["java", "-cp", f"{jar}:{classes}", "Roaring64Golden"],
                                input="\n".join(requests) + "\n", check=True,
                                capture_output=True, text=True).stdout.split("\n")
        return [bytes.fromhex(line) for line in answer[:len(requests)]]

    return ask


@pytest.mark.jvm  # starts Java by hand
def test_bitmaps_and_unions_are_byte_equal_to_java(golden: object) -> None:
    rng = random.Random(64)
    sets = [_bitmap(rng) for _ in range(60)]
    ask = golden
    assert callable(ask)
    made = ask(["make " + " ".join(map(str, values)) for values in sets])
    for values, java in zip(sets, made, strict=True):
        assert encode_values(np.array(values, np.uint64)) == java, values[:5]
        assert Roaring64.decode(java).values().tolist() == sorted(set(values))
    # unions of Java's bytes, then unions of those (trees read back and grown)
    pairs = [(rng.randrange(len(made)), rng.randrange(len(made))) for _ in range(80)]
    unions = ask([f"or {made[a].hex()} {made[b].hex()}" for a, b in pairs])
    for (a, b), java in zip(pairs, unions, strict=True):
        assert union_bytes(made[a], made[b]) == java, (a, b)
        assert Roaring64.decode(java).values().tolist() == sorted(set(sets[a]) | set(sets[b]))
    chained = [(rng.randrange(len(unions)), rng.randrange(len(made))) for _ in range(60)]
    again = ask([f"or {unions[a].hex()} {made[b].hex()}" for a, b in chained])
    for (a, b), java in zip(chained, again, strict=True):
        assert union_bytes(unions[a], made[b]) == java, (a, b)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, (1 << 64) - 1) | st.integers(0, 1 << 22),
                         max_size=40), min_size=2, max_size=4))
def test_union_holds_every_value(groups: list[list[int]]) -> None:
    encoded = [encode_values(np.array(g, np.uint64)) for g in groups]
    acc = encoded[0]
    for other in encoded[1:]:
        acc = union_bytes(acc, other)
    assert Roaring64.decode(acc).values().tolist() == sorted(set().union(*groups))


def test_malformed_bytes_are_codec_errors() -> None:
    data = encode_values(np.array([1, 1 << 40], np.uint64))
    for bad in (data[:-3], data + b"\x00", b"\x01\x05"):
        with pytest.raises(CodecError):
            Roaring64.decode(bad)
