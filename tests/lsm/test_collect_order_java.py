"""``collect`` with ``fields.<c>.distinct`` and ``merge_map`` give Java's element order.

Java's ``FieldCollectAgg`` collects distinct elements in a ``HashSet`` and ``FieldMergeMapAgg``
merges into a ``HashMap``: the ARRAY and MAP they write are in those sets' iteration order,
which a reader comparing the values sees. Apache Paimon's own aggregators
(tests/support/java/CollectOrderGolden.java, each Java release) fold random inputs; paimond's
aggregates fold the same inputs and must give the same elements in the same order.
"""

from __future__ import annotations

import datetime
import decimal
import random
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.java_paimon import classpath_text
from support.java_reader import JavaReader

from paimond.lsm.merge.row_merge import make_field_agg
from paimond.table.options.merge import MergeConfig

SOURCE = Path(__file__).parents[1] / "support" / "java" / "CollectOrderGolden.java"
EPOCH = datetime.date(1970, 1, 1)
ARROW = {"INT": pa.int32(), "BIGINT": pa.int64(), "STRING": pa.string(), "DOUBLE": pa.float64(),
         "DECIMAL": pa.decimal128(10, 2), "TIMESTAMP": pa.timestamp("us"), "DATE": pa.date32()}


def _draw(type_name: str, rng: random.Random) -> str:
    """One element as the Java helper reads it."""
    if rng.random() < 0.05:
        return "~"
    if type_name == "INT":
        return str(rng.choice([rng.randint(-40, 40), rng.randint(-2**31, 2**31 - 1)]))
    if type_name == "DATE":  # years 1 to 9999, Python's dates
        return str(rng.choice([rng.randint(-40, 40), rng.randint(-719162, 2932896)]))
    if type_name == "BIGINT":
        return str(rng.choice([rng.randint(-40, 40), rng.randint(-2**63, 2**63 - 1)]))
    if type_name == "STRING":
        return "".join(rng.choice("abcxyzé") for _ in range(rng.randint(0, 9)))
    if type_name == "DOUBLE":
        return repr(rng.choice([rng.randint(-9, 9) / 4, rng.uniform(-1e6, 1e6)]))
    if type_name == "DECIMAL":
        return f"{rng.randint(-10**9, 10**9) / 100:.2f}"
    return f"{rng.randint(-10**12, 10**13)}:{rng.randint(0, 999) * 1000}"  # TIMESTAMP(6)


def _python(type_name: str, text: str) -> Any:
    """The value paimond's aggregate gets for ``text`` (``to_pylist`` of the column)."""
    if text == "~":
        return None
    if type_name in ("INT", "BIGINT"):
        return int(text)
    if type_name == "DATE":
        return pa.array([int(text)], pa.int32()).cast(pa.date32()).to_pylist()[0]
    if type_name == "STRING":
        return text
    if type_name == "DOUBLE":
        return float(text)
    if type_name == "DECIMAL":
        return decimal.Decimal(text)
    millis, nanos = map(int, text.split(":"))
    return pa.array([millis * 1000 + nanos // 1000], pa.timestamp("us")).to_pylist()[0]


def _text(type_name: str, value: Any) -> str:
    if value is None:
        return "~"
    if type_name == "DATE":
        return str((value - EPOCH).days)
    if type_name == "DECIMAL":
        return format(value, "f")
    if type_name == "TIMESTAMP":
        micros = pa.array([value], pa.timestamp("us")).cast(pa.int64()).to_pylist()[0]
        millis, rest = divmod(micros, 1000)
        return f"{millis}:{rest * 1000}"
    if type_name == "DOUBLE":
        return repr(value)
    return str(value)


def _cases(rng: random.Random) -> list[tuple[str, str, list[list[str]]]]:
    cases = []
    for number in range(240):
        function = "merge_map" if number % 3 == 0 else "collect_distinct"
        type_name = sorted(ARROW)[number % len(ARROW)]
        # some inputs repeat earlier elements; large ones make the table resize
        pool = [_draw(type_name, rng) for _ in range(rng.choice([3, 8, 40]))]
        inputs = [[rng.choice(pool) for _ in range(rng.randint(0, 20))]
                  for _ in range(rng.randint(1, 4))]
        if function == "merge_map":
            inputs = [list(dict.fromkeys(k for k in i if k != "~")) for i in inputs]
        cases.append((function, type_name, inputs))
    return cases


def _java(jars: list[Path], tmp_path: Path, cases: list[tuple[str, str, list[list[str]]]]
          ) -> list[str]:
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", classpath_text(jars),
                    str(SOURCE)], check=True, capture_output=True)
    lines = []
    for function, type_name, inputs in cases:
        if function == "merge_map":
            encoded = [",".join(f"{k}={i}" for i, k in enumerate(keys)) for keys in inputs]
        else:
            encoded = [",".join(values) for values in inputs]
        lines.append(f"{function}\t{type_name}\t{';'.join(encoded)}\n")
    answer = subprocess.run(["java", "-cp", classpath_text(jars, classes), "CollectOrderGolden"],
                            input="".join(lines), check=True, capture_output=True, text=True)
    return answer.stdout.split("\n")[:len(cases)]


def _paimond(function: str, type_name: str, inputs: list[list[str]]) -> str:
    type_ = ARROW[type_name]
    config = MergeConfig(engine="aggregation", distinct=frozenset({"f"}))
    if function == "merge_map":
        agg = make_field_agg("f", "merge_map", pa.map_(type_, pa.int32()), config)
        acc = None
        for keys in inputs:
            acc = agg.agg(acc, [(_python(type_name, k), i) for i, k in enumerate(keys)])
        return ",".join(f"{_text(type_name, k)}={v}" for k, v in acc)
    agg = make_field_agg("f", "collect", pa.list_(type_), config)
    acc = None
    for values in inputs:
        acc = agg.agg(acc, [_python(type_name, v) for v in values])
    return ",".join(_text(type_name, v) for v in acc)


def test_distinct_collect_and_merge_map_give_javas_order(java_reader: JavaReader,
                                                        tmp_path: Path) -> None:
    cases = _cases(random.Random(20261201))
    java = _java(java_reader.jars, tmp_path, cases)
    reordered = 0
    for (function, type_name, inputs), theirs in zip(cases, java, strict=True):
        ours = _paimond(function, type_name, inputs)
        assert ours == theirs, (java_reader.release, function, type_name, inputs)
        if function == "collect_distinct":
            first_seen = [_text(type_name, _python(type_name, e))
                          for e in dict.fromkeys(e for i in inputs for e in i)]
            reordered += ours.split(",") != first_seen
    assert reordered > len(cases) // 4  # the order is Java's, not the input's


@pytest.mark.parametrize("element", [pa.binary(), pa.list_(pa.int32())])
def test_elements_without_a_value_hash_keep_first_seen_order(element: pa.DataType) -> None:
    """``byte[]`` hashes by identity (Java's order differs from run to run) and constructed
    elements are compared in a list (first seen): paimond keeps the first-seen order."""
    config = MergeConfig(engine="aggregation", distinct=frozenset({"f"}))
    agg = make_field_agg("f", "collect", pa.list_(element), config)
    values = [b"z", b"a", b"z", b"m"] if element == pa.binary() else [[3], [1], [3], [2]]
    assert agg.agg(None, values) == [values[0], values[1], values[3]]
