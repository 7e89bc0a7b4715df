"""File indexes against Apache Paimon's own bytes (tests/golden/java/fileindex, MANIFEST.md
section 1): every payload, every single-index container, every ``combined.index`` and
``multi_column/data_file.index`` written byte for byte, every rejected combination rejected,
the bloom hashes of ``bloom_hashes.tsv``, and every payload decoded back to query answers that
agree with the dataset it was built from."""

from __future__ import annotations

import csv
import json
import operator
import os
import struct
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pyroaring import BitMap

from paimond.errors import UnsupportedError
from paimond.format.file_index import (
    build_file_index,
    create_index_writer,
    decode_file_index,
    decode_index,
    encode_file_index,
)
from paimond.format.file_index.bitmap import BitmapIndex
from paimond.format.file_index.bloom import bloom_hash
from paimond.format.file_index.keys import key_type
from paimond.format.types.data_types import DataType
from paimond.format.types.type_json import parse_type_string
from paimond.format.types.values import Timestamp
from paimond.table.options.file_index import file_index_columns, index_settings

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "java"  # tests/golden: copied in
FILEINDEX = GOLDEN / "fileindex"

# MANIFEST.md section 1.1: the generated datasets.
GENERATORS = {
    "int_large": lambda i: None if i % 97 == 0 else ((i * 7919) % 257) - 128,
    "string_large": lambda i: None if i % 101 == 0 else f"key-{(i * 31) % 150:03d}",
    "bigint_runs": lambda i: i // 1000,
    "int_dense": lambda i: i % 2,
}
DATASET_NAMES = ["int", "bigint", "bigint_moderate", "smallint", "tinyint", "boolean", "date",
                 "time", "string", "timestamp3", "timestamp6", "ltz3", "float", "double",
                 "decimal10_2", "int_allnull", "int_single", "string_onenull", "int_large",
                 "string_large", "bigint_runs", "int_dense"]


def _require_golden() -> None:
    if not FILEINDEX.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"golden vectors missing at {FILEINDEX}")
        pytest.skip(f"golden vectors missing at {FILEINDEX}")


@cache
def _datasets() -> dict[str, dict[str, Any]]:
    return {d["dataset"]: d for d in json.loads((FILEINDEX / "datasets.json").read_text())}


@cache
def _index_json() -> dict[str, dict[str, Any]]:
    return {e["file"]: e for e in json.loads((GOLDEN / "index.json").read_text())}


def golden_value(spec: Any) -> Any:
    """Python value (paimond.format.types.values) of a datasets.json value."""
    if not isinstance(spec, dict):
        return spec
    if "millis" in spec:
        return Timestamp(spec["millis"], spec["nanoOfMillisecond"])
    if "float" in spec:
        return struct.unpack(">f", int(spec["bits"], 16).to_bytes(4, "big"))[0]
    if "double" in spec:
        return struct.unpack(">d", int(spec["bits"], 16).to_bytes(8, "big"))[0]
    return Decimal(spec["decimal"])


def dataset(name: str) -> tuple[DataType, list[Any]]:
    _require_golden()
    d = _datasets()[name]
    values = ([golden_value(v) for v in d["values"]] if d.get("values") is not None
              else [GENERATORS[name](i) for i in range(d["rows"])])
    assert len(values) == d["rows"]
    return parse_type_string(d["type"]), values


def variants(name: str) -> list[dict[str, Any]]:
    return list(_datasets()[name]["variants"])


def _read(relative: str) -> bytes:
    return (GOLDEN / relative).read_bytes()


# ------------------------------------------------------------------ byte identity


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_payloads_and_containers_are_written_byte_identical(name: str) -> None:
    data_type, values = dataset(name)
    produced = 0
    for variant in variants(name):
        if "unsupported" in variant:
            continue
        writer = create_index_writer(variant["index_type"], data_type,
                                     index_settings(variant["index_type"], variant["options"]))
        writer.write(values)
        payload = writer.serialized_bytes()
        assert payload == _read(variant["payload_file"]), variant["variant"]
        container = encode_file_index({_datasets()[name]["column"]:
                                       {variant["index_type"]: payload}})
        assert container == _read(variant["container_file"]), variant["variant"]
        produced += 1
    assert produced == len([v for v in variants(name) if "payload_file" in v]) > 0


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_rejected_combinations_are_rejected(name: str) -> None:
    data_type, values = dataset(name)
    for variant in variants(name):
        if "unsupported" not in variant:
            continue
        java_message = variant["unsupported"].split(": ", 1)[1]
        with pytest.raises(UnsupportedError) as raised:
            writer = create_index_writer(
                variant["index_type"], data_type,
                index_settings(variant["index_type"], variant["options"]))
            writer.write(values)  # BSI refuses Long.MIN_VALUE only once it sees it
            writer.serialized_bytes()
        assert raised.value.what == java_message


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_combined_container_is_what_data_file_index_writer_writes(name: str) -> None:
    data_type, values = dataset(name)
    path = _datasets()[name]["combined_container"]
    entry = _index_json()[path]
    container = build_file_index({_datasets()[name]["column"]: (data_type, values)},
                                 file_index_columns(entry["table_options"]))
    assert container == _read(path)
    decoded = decode_file_index(container)
    expected = entry["index_types_in_file_order"]
    assert [(c, list(t)) for c, t in decoded.items()] == [
        (e["column"], [i["index_type"] for i in e["indexes"]]) for e in expected]


def test_multi_column_data_file_index() -> None:
    _require_golden()
    path = "fileindex/multi_column/data_file.index"
    entry = _index_json()[path]
    row_type = {"id": "INT", "name": "STRING", "amount": "BIGINT", "dt": "DATE"}
    columns = {n: (parse_type_string(t), [row[i] for row in entry["rows"]])
               for i, (n, t) in enumerate(row_type.items())}
    container = build_file_index(columns, file_index_columns(entry["table_options"]))
    assert container == _read(path) and len(container) == 802
    decoded = decode_file_index(container)
    assert list(decoded) == ["dt", "amount", "name", "id"]
    offsets = [(i["index_type"], i["start"], i["length"])
               for e in entry["index_types_in_file_order"] for i in e["indexes"]]
    assert [(t, container.find(p), len(p)) for c in decoded.values()
            for t, p in c.items() if p is not None] == offsets
    name = decode_index("bitmap", parse_type_string("STRING"), decoded["name"]["bitmap"])
    assert isinstance(name, BitmapIndex)
    assert name.equal("alice") == BitMap([0, 3]) and name.is_null() == BitMap([2])
    amount = decode_index("range-bitmap", parse_type_string("BIGINT"),
                          decoded["amount"]["range-bitmap"])
    assert amount.greater_than(100) == BitMap([2, 3])


def test_bloom_hashes_match_fast_hash() -> None:
    _require_golden()
    rows = list(csv.DictReader((FILEINDEX / "bloom_hashes.tsv").open(), delimiter="\t"))
    assert len(rows) > 100
    for name in {r["dataset"] for r in rows}:
        data_type, values = dataset(name)
        kind = key_type(data_type)
        for r in (r for r in rows if r["dataset"] == name):
            hash64 = bloom_hash(kind.to_key(values[int(r["row"])]))
            assert hash64 == int(r["hash_signed"]), (name, r["row"])
            assert f"{hash64 & (2**64 - 1):016x}" == r["hash_hex"]


def test_bitmap_dictionary_follows_compute_if_absent_order() -> None:
    """The v1 dictionary lists keys in the writer's HashMap order. Java fills that map with
    computeIfAbsent, which puts a new key at the head of its bucket: for `int` bucket 0 holds
    0, MIN, MAX (rows 6, 5, 4), the reverse of datasets.json's listed order."""
    data_type, _ = dataset("int")
    payload = _read("fileindex/int/bitmap_v1.payload")
    assert BitmapIndex(data_type, payload).values() == [0, -(2**31), 2**31 - 1, -3, 5, 42]
    listed = [e["value"] for e in _datasets()["int"]["bitmap_key_hashmap_iteration_order"]]
    assert listed == [2**31 - 1, -(2**31), 0, -3, 5, 42]


# --------------------------------------------------------------------- decoding


def scan(values: list[Any], data_type: DataType, op: Any, value: Any) -> BitMap:
    """Rows whose key compares to ``value``'s by ``op`` in Java's order: a brute-force query."""
    kind = key_type(data_type)
    target = kind.order(kind.to_key(value))
    return BitMap(i for i, v in enumerate(values)
                  if v is not None and op(kind.order(kind.to_key(v)), target))


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_golden_payloads_answer_queries_like_a_scan(name: str) -> None:
    data_type, values = dataset(name)
    present = list(dict.fromkeys(v for v in values if v is not None))[:40]
    nulls = BitMap(i for i, v in enumerate(values) if v is None)
    for variant in variants(name):
        if "payload_file" not in variant:
            continue
        index = decode_index(variant["index_type"], data_type, _read(variant["payload_file"]))
        if variant["index_type"] == "bloom-filter":
            assert all(index.might_contain(v) for v in present)
            continue
        assert index.is_null() == nulls
        for value in present:
            assert index.equal(value) == scan(values, data_type, operator.eq, value)
            if variant["index_type"] in ("range-bitmap", "bsi"):
                assert index.less_than(value) == scan(values, data_type, operator.lt, value)
                assert index.greater_or_equal(value) == scan(values, data_type, operator.ge,
                                                             value)
