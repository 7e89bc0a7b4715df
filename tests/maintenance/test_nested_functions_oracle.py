"""Compaction of aggregation tables with nested_update, nested_partial_update and
merge_map_with_keytime on pypaimon-written files: Paimon's Java reader and pypaimon read the
rows of an independent model (tests/support/nested_model.py) after paimond compacts.

The tables are written as deduplicate tables with ``rowkind.field`` and switched to the
aggregation engine by a second schema file, as in test_merge_functions_oracle.py. The Java
reader's jar (Paimon 1.0) has nested_update with a nested key only: it merges the
``nested_update`` table itself before compaction too. It has no nested_partial_update,
merge_map_with_keytime, count-limit or nested-sequence-field: for that table Java reads
paimond's compacted files (one version per key) with the same options minus the functions
it lacks, which a reader of single versions does not use. Nested rows are compared as
multisets (Java collects keyed rows in a HashMap, in hash order)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from support.java_reader import canonical_rows, multiset_diff
from support.merge_oracle_tables import CLOCK, random_commits, write_rows
from support.nested_model import (
    ADD,
    RETRACT,
    fold,
    merge_map_with_keytime,
    nested_partial_update,
    nested_update,
    nested_update_retract,
)
from support.pypaimon_oracle import read_rows

from paimond.format.roaring.bitmap64 import Roaring64, encode_values, union_bytes
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

ROW = pa.struct([("id", pa.int32()), ("v", pa.string()), ("s", pa.int32())])
SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("nu", pa.list_(ROW)),
                    ("nk", pa.list_(ROW)), ("np", pa.list_(ROW)),
                    ("mm", pa.map_(pa.string(), pa.struct([("v", pa.int32()),
                                                           ("ts", pa.string())]))),
                    ("rk", pa.string())])
BASE = {"bucket": "1", "file.format": "parquet", "rowkind.field": "rk"}
Row = dict[str, Any]


def _maybe(rng: random.Random, value: Any) -> Any:
    return None if rng.random() < 0.25 else value


def _rows(rng: random.Random, clean: bool) -> list[Any] | None:
    """A nested table; ``clean``: no NULL element, no nested key twice and no all-NULL row
    (Paimon 1.0, the Java reader's, takes a first array as it is, where Paimon now drops NULLs
    and dedups, and reads an all-NULL row as a NULL element, see _sorted)."""
    ids = rng.sample([None, 0, 1, 2, 3], 3) if clean else [
        _maybe(rng, rng.randint(0, 3)) for _ in range(3)]
    return _maybe(rng, [
        {"id": ids[i], "v": rng.choice("abc") if clean else _maybe(rng, rng.choice("abc")),
         "s": _maybe(rng, rng.randint(0, 3))}
        if clean or rng.random() > 0.2 else None for i in range(rng.randint(0, 3))])


def _row(rng: random.Random, k: int, clean: bool = False) -> Row:
    entries = {rng.choice("pqr"): _maybe(rng, {"v": rng.randint(0, 9),
                                               "ts": _maybe(rng, f"2026-0{rng.randint(1, 9)}")})
               for _ in range(rng.randint(0, 2))}
    return {"k": k, "nu": _rows(rng, clean), "nk": _rows(rng, clean), "np": _rows(rng, clean),
            "mm": _maybe(rng, list(entries.items()))}


def _sorted(values: list[Any], java: bool) -> list[Any]:
    """A nested column's value without order (keyed results have none); ``java``: a ROW
    whose fields are all NULL as NULL, which is how Paimon 1.0's parquet reader (the Java
    reader's) reads one, pypaimon-written or not."""
    out = []
    for v in values:
        if isinstance(v, list):
            v = [None if java and isinstance(e, list) and all(x is None for x in e) else e
                 for e in v]
            v = sorted(v, key=json.dumps)
        elif isinstance(v, dict):
            entries = [[k, None if java and isinstance(e, list) and all(x is None for x in e)
                        else e] for k, e in v["map"]]
            v = {"map": sorted(entries, key=json.dumps)}
        out.append(v)
    return out


def _canonical(table: pa.Table, java: bool = False) -> list[str]:
    return [json.dumps(_sorted(json.loads(text), java)) for text in canonical_rows(
        table, [c for c in table.column_names if c != "rk"])]


def _java_canonical(rows: list[str]) -> list[str]:
    return [json.dumps(_sorted(json.loads(text)[:-1], True)) for text in rows]  # without rk


NESTED_UPDATE = {"merge-engine": "aggregation", "fields.nu.aggregate-function": "nested_update",
                 "fields.nk.aggregate-function": "nested_update", "fields.nk.nested-key": "id"}
WITH_OPTIONS = {
    "merge-engine": "aggregation", "fields.nk.aggregate-function": "nested_update",
    "fields.nk.nested-key": "id", "fields.nk.nested-sequence-field": "s",
    "fields.nk.count-limit": "2", "fields.nk.nested-key-null-strategy": "ignore",
    "fields.np.aggregate-function": "nested_partial_update", "fields.np.nested-key": "id",
    "fields.mm.aggregate-function": "merge_map_with_keytime", "fields.mm.ts-field": "ts"}
# Paimon 1.0 reads single versions with these options (the functions it has)
WITH_OPTIONS_FOR_JAVA = {"merge-engine": "aggregation",
                         "fields.nk.aggregate-function": "nested_update",
                         "fields.nk.nested-key": "id"}


def _model(case: str, versions: list[Row]) -> Row | None:
    if len(versions) == 1:
        return dict(versions[0]) if versions[0]["rk"] in ("+I", "+U") else None
    kinds = [ADD if v["rk"] in ("+I", "+U") else RETRACT for v in versions]

    def column(name: str) -> list[tuple[str, Any]]:
        return [(kind, v[name]) for kind, v in zip(kinds, versions, strict=True)]

    row: Row = {"k": versions[0]["k"], "rk": versions[-1]["rk"]}
    if case == "nested_update":
        row["nu"] = fold(column("nu"), nested_update, nested_update_retract)
        row["nk"] = fold(column("nk"), lambda a, v: nested_update(a, v, key=("id",)),
                         lambda a, v: nested_update_retract(a, v, key=("id",)))
        for name in ("np", "mm"):
            row[name] = _last_non_null(column(name))
        return row
    row["nu"] = _last_non_null(column("nu"))
    row["nk"] = fold(column("nk"), lambda a, v: nested_update(
        a, v, key=("id",), strategy="ignore", sequence=("s",), limit=2), None)
    row["np"] = fold(column("np"), lambda a, v: nested_partial_update(
        a, v, key=("id",), fields=("id", "v", "s")), None)
    row["mm"] = fold(column("mm"), lambda a, v: merge_map_with_keytime(a, v, "ts"), None)
    return row


def _last_non_null(versions: list[tuple[str, Any]]) -> Any:
    """last_non_null_value, the default function: a retraction of a value clears it."""
    value = None
    for kind, v in versions:
        if v is not None:
            value = v if kind == ADD else None
    return value


CASES = {"nested_update": (NESTED_UPDATE, ("+I", "+U", "-U", "-D"), True),
         "nested_options": (WITH_OPTIONS, ("+I", "+U"), False)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compaction_reads_as_the_model(case: str, tmp_path: Path, java_reader: Any) -> None:
    altered, kinds, java_merges = CASES[case]
    rng = random.Random(case)
    commits = random_commits(rng, lambda r, k: _row(r, k, clean=java_merges), kinds=kinds)
    warehouse, name = str(tmp_path / "wh"), f"db.{case}"
    write_rows(warehouse, name, SCHEMA, BASE, commits, altered)
    by_key: dict[int, list[Row]] = {}
    for rows in commits:
        for row in rows:
            by_key.setdefault(row["k"], []).append(row)
    merged = [_model(case, v) for _, v in sorted(by_key.items())]
    expected_table = pa.Table.from_pylist([r for r in merged if r is not None], schema=SCHEMA)
    expected, expected_java = _canonical(expected_table), _canonical(expected_table, java=True)
    path = Path(warehouse) / "db.db" / case
    if java_merges:
        diff = multiset_diff(_java_canonical(java_reader.read(path).rows), expected_java)
        assert not diff, f"{case} as written: Java (left) vs model (right): {diff}"
    table = open_table(open_storage(warehouse), warehouse, name)
    summary = CompactJob(table, full=True, parallelism=1, use_processes=False,
                         clock=CLOCK).run()
    assert not summary.failures, summary.describe()
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "COMPACT"
    assert all(list(b.levels) == [5] for b in scan_snapshot(table, latest).buckets().values())
    diff = multiset_diff(_canonical(read_rows(warehouse, name)), expected)
    assert not diff, f"{case}: pypaimon (left) vs model (right): {diff}"
    if not java_merges:  # a third schema file with the options Paimon 1.0 knows
        schema_dir = path / "schema"
        latest_schema = json.loads((schema_dir / "schema-1").read_text())
        latest_schema |= {"id": 2, "options": {k: v for k, v in latest_schema["options"].items()
                                               if not k.startswith("fields.")}
                          | WITH_OPTIONS_FOR_JAVA}
        (schema_dir / "schema-2").write_text(json.dumps(latest_schema))
    diff = multiset_diff(_java_canonical(java_reader.read(path).rows), expected_java)
    assert not diff, f"{case} compacted: Java (left) vs model (right): {diff}"


BM_SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("bm", pa.binary()),
                       ("n", pa.int64()), ("rk", pa.string())])


def _bm_row(rng: random.Random, k: int) -> Row:
    """A Roaring64Bitmap as Paimon's RoaringBitmap64.bitmapOf writes it (format/roaring/bitmap64.py,
    byte-equal to Java's in tests/format/test_roaring64.py): sparse 64-bit values, runs or a
    dense container."""
    shape = rng.randrange(4)
    base = rng.choice([0, 1 << 40, (1 << 64) - (1 << 20)])
    values = {0: [], 1: [base + rng.getrandbits(24) for _ in range(rng.randint(1, 30))],
              2: list(range(base + 5, base + 5 + rng.randint(1, 5000))),
              3: [base + v for v in rng.sample(range(1 << 17), 5000)]}[shape]
    values = [v % (1 << 64) for v in values]
    return {"k": k, "bm": _maybe(rng, encode_values(np.array(values, np.uint64))),
            "n": _maybe(rng, rng.randint(-5, 5))}


def test_rbm64_compaction_is_javas_merge(tmp_path: Path, java_reader: Any) -> None:
    """rbm64 ignoring retractions, next to a sum: Java (whose jar has rbm64) merges the
    table as written to the model's bytes, paimond's compaction writes the same bytes, and
    pypaimon and Java read them. The model ORs the versions' value sets and encodes the
    union with format/roaring/bitmap64.py's Java layout; Java's own merge checks those bytes."""
    rng = random.Random("rbm64")
    commits = random_commits(rng, _bm_row)
    warehouse, name = str(tmp_path / "wh"), "db.rbm64"
    write_rows(warehouse, name, BM_SCHEMA, BASE, commits, {
        "merge-engine": "aggregation", "fields.bm.aggregate-function": "rbm64",
        "fields.bm.ignore-retract": "true", "fields.n.aggregate-function": "sum"})
    by_key: dict[int, list[Row]] = {}
    for rows in commits:
        for row in rows:
            by_key.setdefault(row["k"], []).append(row)
    merged = []
    for key, versions in sorted(by_key.items()):
        if len(versions) == 1:
            if versions[0]["rk"] in ("+I", "+U"):
                merged.append(versions[0])
            continue
        adds = [v for v in versions if v["rk"] in ("+I", "+U")]
        bitmaps = [v["bm"] for v in adds if v["bm"] is not None]
        bm = None
        if bitmaps:  # Java ORs into the first version's bitmap: its layout is kept
            bm = bitmaps[0]
            for other in bitmaps[1:]:
                bm = union_bytes(bm, other)
            union = set().union(*(Roaring64.decode(b).values().tolist() for b in bitmaps))
            assert Roaring64.decode(bm).values().tolist() == sorted(union)
        total = None
        for v in versions:
            if v["n"] is not None:
                sign = 1 if v["rk"] in ("+I", "+U") else -1
                total = sign * v["n"] + (total or 0)
        merged.append({"k": key, "bm": bm, "n": total, "rk": versions[-1]["rk"]})
    expected = canonical_rows(pa.Table.from_pylist(merged, schema=BM_SCHEMA), ["k", "bm", "n"])
    path = Path(warehouse) / "db.db" / "rbm64"

    def java_rows() -> list[str]:
        return [json.dumps(json.loads(r)[:-1], separators=(",", ":"))
                for r in java_reader.read(path).rows]

    diff = multiset_diff(java_rows(), expected)
    assert not diff, f"as written: Java (left) vs model (right): {diff}"
    table = open_table(open_storage(warehouse), warehouse, name)
    summary = CompactJob(table, full=True, parallelism=1, use_processes=False,
                         clock=CLOCK).run()
    assert not summary.failures, summary.describe()
    diff = multiset_diff(java_rows(), expected)
    assert not diff, f"compacted: Java (left) vs model (right): {diff}"
    # pypaimon 2.1 refuses rbm64 (and ignore-retract): it reads the compacted files, one
    # version per key, under a third schema file without them
    schema_dir = path / "schema"
    latest_schema = json.loads((schema_dir / "schema-1").read_text())
    latest_schema |= {"id": 2, "options": {k: v for k, v in latest_schema["options"].items()
                                           if not k.startswith("fields.bm.")}}
    (schema_dir / "schema-2").write_text(json.dumps(latest_schema))
    diff = multiset_diff(canonical_rows(read_rows(warehouse, name), ["k", "bm", "n"]), expected)
    assert not diff, f"compacted: pypaimon (left) vs model (right): {diff}"
