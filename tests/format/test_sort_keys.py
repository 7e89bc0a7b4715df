"""Z-order and Hilbert sort keys (``paimond.format.binary.sort_keys``): bytes equal Apache Paimon's
own ``ZIndexer`` / ``HilbertIndexer`` (run from the Java reader's jar through
``tests/support/java/SortKeyGolden.java``) for golden rows, and hypothesis tests against
straightforward reference implementations (bit strings for the interleaving; the curve's
defining properties for the Hilbert index)."""

from __future__ import annotations

import decimal
import random
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.java_reader import JavaReader, find_jar

from paimond.format.binary.sort_keys import (
    hilbert_index,
    hilbert_key,
    interleave_bits,
    zorder_column_bytes,
    zorder_key,
)
from paimond.format.types.data_types import (
    BigIntType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    SmallIntType,
    TimestampType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

SOURCE = Path(__file__).parents[1] / "support" / "java" / "SortKeyGolden.java"
TYPES: dict[str, DataType] = {
    "INT": IntType(), "BIGINT": BigIntType(), "TINYINT": TinyIntType(),
    "SMALLINT": SmallIntType(), "FLOAT": FloatType(), "DOUBLE": DoubleType(),
    "BOOLEAN": BooleanType(), "STRING": VarCharType(length=2**31 - 1),
    "BYTES": VarBinaryType(length=2**31 - 1), "DATE": DateType(), "TIMESTAMP": TimestampType(),
    "DECIMAL(10;2)": DecimalType(precision=10, scale=2),
    "DECIMAL(30;3)": DecimalType(precision=30, scale=3),
}


def _value(name: str, rng: random.Random) -> object:
    if rng.random() < 0.1:
        return None
    if name in ("INT", "DATE"):
        return rng.choice([0, 1, -1, 2**31 - 1, -(2**31), rng.randint(-(2**31), 2**31 - 1)])
    if name in ("BIGINT", "TIMESTAMP"):
        return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-(2**63), 2**63 - 1)])
    if name == "TINYINT":
        return rng.randint(-128, 127)
    if name == "SMALLINT":
        return rng.randint(-(2**15), 2**15 - 1)
    if name == "FLOAT":
        return struct.unpack(">f", struct.pack(">f", rng.choice([0.0, -0.0, 1.5, -2.25,
                                                                 rng.uniform(-1e6, 1e6)])))[0]
    if name == "DOUBLE":
        return rng.choice([0.0, -0.0, 1e300, -1e-300, rng.uniform(-1e9, 1e9)])
    if name == "BOOLEAN":
        return rng.random() < 0.5
    if name == "STRING":
        return "".join(rng.choice("ab€zé0") for _ in range(rng.randint(0, 12)))
    if name == "BYTES":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))
    scale = 2 if name == "DECIMAL(10;2)" else 3
    digits = 8 if scale == 2 else 27
    return decimal.Decimal(rng.randint(-(10**digits) + 1, 10**digits - 1)).scaleb(-scale)


def _text(value: object, name: str) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _cases() -> list[tuple[str, int, list[str], list[object]]]:
    rng = random.Random(17)
    cases = []
    for number in range(400):
        strategy = "zorder" if number % 2 else "hilbert"
        names = [rng.choice(sorted(TYPES)) for _ in range(rng.randint(2, 4))]
        cases.append((strategy, rng.choice([8, 8, 3, 12]), names,
                      [_value(n, rng) for n in names]))
    return cases


def test_keys_equal_javas(tmp_path: Path, java_reader: JavaReader) -> None:
    jar = find_jar()
    assert jar is not None
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", str(jar), str(SOURCE)],
                   check=True, capture_output=True)
    cases = _cases()
    lines = "".join("\t".join([s, str(size), ",".join(names),
                               *(_text(v, n) for v, n in zip(values, names, strict=True))]) + "\n"
                    for s, size, names, values in cases)
    answer = subprocess.run(["java", "-cp", f"{jar}:{classes}", "SortKeyGolden"], input=lines,
                            check=True, capture_output=True, text=True).stdout.split()
    assert len(answer) == len(cases)
    for (strategy, size, names, values), java in zip(cases, answer, strict=True):
        types = [TYPES[n] for n in names]
        ours = (zorder_key(values, types, size) if strategy == "zorder"
                else hilbert_key(values, types))
        assert ours.hex() == java, (strategy, size, names, values)


def _reference_interleave(columns: list[bytes]) -> bytes:
    bits = ["".join(f"{b:08b}" for b in c) for c in columns]
    out = "".join(s[i] for i in range(max(map(len, bits), default=0)) for s in bits
                  if i < len(s))
    return int(out or "0", 2).to_bytes(sum(map(len, columns)), "big")


@given(st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=5))
def test_interleaving_matches_a_bit_string_reference(columns: list[bytes]) -> None:
    assert interleave_bits(columns) == _reference_interleave(columns)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=2, max_size=2))
def test_zorder_of_one_column_orders_as_the_values(pair: list[int]) -> None:
    low, high = sorted(pair)
    assert zorder_column_bytes(low, BigIntType()) <= zorder_column_bytes(high, BigIntType())


@given(st.lists(st.floats(allow_nan=False), min_size=2, max_size=2))
def test_zorder_of_doubles_orders_as_the_values(pair: list[float]) -> None:
    low, high = sorted(pair)
    if low < high:
        assert zorder_column_bytes(low, DoubleType()) < zorder_column_bytes(high, DoubleType())


@pytest.mark.parametrize(("bits", "dimensions"), [(3, 2), (2, 3), (4, 2)])
def test_hilbert_index_walks_every_cell_to_a_neighbour(bits: int, dimensions: int) -> None:
    """The defining property of a Hilbert curve: the indices of all cells are 0..N-1 and
    consecutive indices are unit steps apart."""
    side = 1 << bits
    cells: dict[int, tuple[int, ...]] = {}
    for number in range(side**dimensions):
        point = tuple(number // side**d % side for d in range(dimensions))
        cells[hilbert_index(point, bits)] = point
    assert sorted(cells) == list(range(side**dimensions))
    for index in range(1, len(cells)):
        step = [abs(a - b) for a, b in zip(cells[index], cells[index - 1], strict=True)]
        assert sorted(step) == [0] * (dimensions - 1) + [1]
    assert cells[0] == (0,) * dimensions


@given(st.lists(st.integers(0, 2**63 - 1), min_size=2, max_size=4, unique=True))
def test_hilbert_keys_are_distinct_for_distinct_points(points: list[int]) -> None:
    keys = {hilbert_index([p, p // 3]) for p in points}
    assert len(keys) == len(points)
