"""Compaction of partial-update tables with sequence groups and of aggregation tables with
listagg / collect / merge_map, on pypaimon-written files: Paimon's Java reader (and pypaimon
where it implements the merge function) reads the rows of an independent model
(tests/support/merge_model.py) before and after paimond compacts.

pypaimon 2.1.0 writes no sequence-group table, and -U/-D records only on deduplicate tables
(see pypaimon_tables.py), so the tables with retractions are written as deduplicate tables
with ``rowkind.field`` (one version of a key per commit, so its write buffer merges nothing)
and then switched to their merge engine by a second schema version that differs in its
options only (Paimon's ALTER TABLE refuses to change the merge engine; the files are the
same). pypaimon refuses to read sequence groups and remove-record-on-delete, so there Java is
the only reader."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.java_reader import canonical_rows, multiset_diff
from support.merge_model import aggregate, partial_update
from support.merge_oracle_tables import CLOCK, KINDS, Row, random_commits, write_rows
from support.pypaimon_oracle import read_rows

from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage


def _expected(commits: list[list[Row]], schema: pa.Schema,
              model: Callable[[list[Row]], Row | None]) -> pa.Table:
    by_key: dict[int, list[Row]] = {}
    for rows in commits:
        for row in rows:
            by_key.setdefault(row["k"], []).append(row)
    merged = [model(v) for _, v in sorted(by_key.items())]
    return pa.Table.from_pylist([r for r in merged if r is not None], schema=schema)


def _maybe(rng: random.Random, value: Any) -> Any:
    return None if rng.random() < 0.3 else value


SEQ_SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("g1", pa.int32()),
                        ("a", pa.string()), ("b", pa.int64()), ("g2a", pa.int32()),
                        ("g2b", pa.int32()), ("c", pa.string()), ("d", pa.string()),
                        ("rk", pa.string())])
SEQ_GROUPS = {("g1",): ("a", "b"), ("g2a", "g2b"): ("c",)}


def _seq_row(rng: random.Random, k: int) -> Row:
    return {"k": k, "g1": _maybe(rng, rng.randint(0, 4)), "a": _maybe(rng, rng.choice("xyz")),
            "b": _maybe(rng, rng.randint(-9, 9)), "g2a": _maybe(rng, rng.randint(0, 2)),
            "g2b": _maybe(rng, rng.randint(0, 2)), "c": _maybe(rng, rng.choice("pq")),
            "d": _maybe(rng, rng.choice("mn"))}


AGG_SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("s", pa.string()),
                        ("t", pa.string()), ("arr", pa.list_(pa.int32())),
                        ("m", pa.map_(pa.string(), pa.int32())), ("n", pa.int64()),
                        ("rk", pa.string())])
AGG_FUNCTIONS = {"s": "listagg", "t": "listagg", "arr": "collect", "m": "merge_map", "n": "sum"}
MODEL_FUNCTIONS = AGG_FUNCTIONS | {"k": "primary-key"}
AGG_OPTIONS = {f"fields.{c}.aggregate-function": f for c, f in AGG_FUNCTIONS.items()} | {
    "fields.t.list-agg-delimiter": ";"}
# The Java reader's jar (Paimon 1.0) has no listagg distinct (fields.<c>.distinct), which the
# Paimon of this port has: that is covered by tests/lsm/test_row_merge.py against the model.


def _agg_row(rng: random.Random, k: int) -> Row:
    # no blank strings: Paimon 1.0's listagg joins them, newer ones skip them (as paimond)
    return {"k": k, "s": _maybe(rng, rng.choice(["a", "b", "c,d"])),
            "t": _maybe(rng, rng.choice(["x", "y;x", "z"])),
            "arr": _maybe(rng, [rng.randint(0, 3) for _ in range(rng.randint(0, 2))]),
            "m": _maybe(rng, [(rng.choice("uvw"), rng.randint(0, 9))]),
            "n": _maybe(rng, rng.randint(-5, 5))}


NO_MAP = pa.schema([f for f in AGG_SCHEMA if f.name != "m"] + [
    ("bm", pa.binary()), ("hll", pa.binary()), ("theta", pa.binary())])
SKETCHES = {"bm": "rbm32", "hll": "hll_sketch", "theta": "theta_sketch"}


def _sketch(rng: random.Random, function: str) -> bytes | None:
    import datasketches as ds

    if rng.random() < 0.25:
        return None
    values = rng.sample(range(100_000), rng.choice([0, 3, 50, 3000]))
    if function == "hll_sketch":
        hll = ds.hll_sketch(12)
        for v in values:
            hll.update(v)
        return bytes(hll.serialize_compact())
    theta = ds.update_theta_sketch(12)
    for v in values:
        theta.update(v)
    return bytes(theta.compact().serialize())


def _bitmap(rng: random.Random) -> bytes | None:
    """A portable 32-bit roaring bitmap: array, run and bitmap containers."""
    from pyroaring import BitMap

    kind = rng.randrange(4)
    if kind == 0:
        return None
    values = {0: [], 1: rng.sample(range(70_000), 5), 2: range(rng.randrange(100), 3000),
              3: rng.sample(range(1 << 17), 5000)}[kind]
    bitmap = BitMap(values)
    bitmap.run_optimize()
    return bytes(bitmap.serialize())
BASE = {"bucket": "1", "file.format": "parquet", "rowkind.field": "rk"}
CASES: dict[str, tuple[pa.Schema, Callable[[random.Random, int], Row], dict[str, str],
                       dict[str, str], Callable[[list[Row]], Row | None], bool, bool]] = {
    # name: schema, row maker, write options, options set afterwards, model, pypaimon reads,
    # Java merges as the model (False where Paimon 1.0, the Java reader's jar, differs: it
    # fails on remove-record-on-delete and removes on a sequence group otherwise; then Java
    # reads paimond's compacted files only, one version per key, which it does not merge)
    "sequence_groups": (
        SEQ_SCHEMA, _seq_row, BASE, {
            "merge-engine": "partial-update", "fields.g1.sequence-group": "a,b",
            "fields.g2a,g2b.sequence-group": "c", "fields.b.aggregate-function": "sum"},
        lambda v: partial_update(v, SEQ_SCHEMA.names, groups=SEQ_GROUPS, sums=frozenset("b")),
        False, True),
    "remove_on_sequence_group": (
        SEQ_SCHEMA, _seq_row, BASE, {
            "merge-engine": "partial-update", "fields.g1.sequence-group": "a,b",
            "fields.g2a,g2b.sequence-group": "c", "fields.b.aggregate-function": "sum",
            "partial-update.remove-record-on-sequence-group": "g2a,g2b"},
        lambda v: partial_update(v, SEQ_SCHEMA.names, groups=SEQ_GROUPS, sums=frozenset("b"),
                                 remove_on_groups=frozenset({"g2a", "g2b"})), False, False),
    "partial_remove_on_delete": (
        SEQ_SCHEMA, _seq_row, BASE, {
            "merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
        lambda v: partial_update(v, SEQ_SCHEMA.names, remove_on_delete=True), False, False),
    "aggregation_retract": (
        AGG_SCHEMA, _agg_row, BASE, {"merge-engine": "aggregation"} | AGG_OPTIONS | {
            f"fields.{c}.ignore-retract": "true" for c in ("s", "t", "arr", "m")},
        lambda v: aggregate(v, AGG_SCHEMA.names, MODEL_FUNCTIONS, delimiters={"t": ";"}),
        False, True),
    "aggregation_remove_on_delete": (
        AGG_SCHEMA, _agg_row, BASE, {"merge-engine": "aggregation",
                                     "aggregation.remove-record-on-delete": "true"} | AGG_OPTIONS,
        lambda v: aggregate(v, AGG_SCHEMA.names, MODEL_FUNCTIONS, delimiters={"t": ";"},
                            remove_on_delete=True), False, False),
    # pypaimon 2.1.0 reads merged MAP values as dicts it cannot build into Arrow: no map here;
    # rbm32, hll_sketch and theta_sketch instead, whose bytes Java's own merge (before
    # compaction) must equal
    "aggregation_pypaimon": (
        NO_MAP, lambda rng, k: {c: v for c, v in _agg_row(rng, k).items() if c != "m"} | {
            "bm": _bitmap(rng), "hll": _sketch(rng, "hll_sketch"),
            "theta": _sketch(rng, "theta_sketch")},
        BASE | {"merge-engine": "aggregation"} | {
            f"fields.{c}.aggregate-function": f for c, f in SKETCHES.items()} | {
            k: v for k, v in AGG_OPTIONS.items() if not k.startswith("fields.m.")}, {},
        lambda v: aggregate(v, NO_MAP.names, MODEL_FUNCTIONS | SKETCHES,
                            delimiters={"t": ";"}), True, True),
}


def _hip_masked(rows: list[str], schema: pa.Schema) -> list[str]:
    """Rows with the HIP accumulator (bytes 8-15) of out-of-order HLL sketches zeroed: Java
    keeps a value there that no reader uses once the out-of-order flag (0x10 of byte 5) is
    set; DataSketches' C++ writes zeros. Every other byte must match."""
    if "hll" not in schema.names:
        return rows
    at = schema.names.index("hll")
    out = []
    for text in rows:
        row = json.loads(text)
        data = row[at]
        if data is not None and len(data) >= 32 and int(data[10:12], 16) & 0x10:
            row[at] = data[:16] + "0" * 16 + data[32:]
        out.append(json.dumps(row, separators=(",", ":")))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_compaction_reads_as_the_model(case: str, tmp_path: Path, java_reader: Any) -> None:
    schema, make, options, altered, model, pypaimon_reads, java_merges = CASES[case]
    rng = random.Random(case)
    kinds: tuple[str, ...] = ("+I", "+U") if case == "aggregation_pypaimon" else KINDS
    if case == "aggregation_remove_on_delete":  # listagg cannot retract a -U
        kinds = ("+I", "+U", "-D")
    commits = random_commits(rng, make, kinds=kinds)
    warehouse, name = str(tmp_path / "wh"), f"db.{case}"
    write_rows(warehouse, name, schema, options, commits, altered)
    expected_table = _expected(commits, schema, model)
    expected = canonical_rows(expected_table)
    # pypaimon merges sketches its own way (not Java's bytes): it is compared without them
    plain = [c for c in schema.names if c not in ("hll", "theta")]
    path = Path(warehouse) / "db.db" / case

    def check(label: str) -> None:
        if not java_merges and label != "after a full compaction":
            return
        java = java_reader.read(path)
        diff = multiset_diff(_hip_masked(java.rows, schema), _hip_masked(expected, schema))
        assert not diff, f"{case} {label}: Java (left) vs model (right): {diff}"
        if pypaimon_reads:
            diff = multiset_diff(canonical_rows(read_rows(warehouse, name), plain),
                                 canonical_rows(expected_table, plain))
            assert not diff, f"{case} {label}: pypaimon (left) vs model (right): {diff}"

    check("as written")
    table = open_table(open_storage(warehouse), warehouse, name)
    for full in (False, True):
        summary = CompactJob(table, full=full, parallelism=1, use_processes=False,
                             clock=CLOCK).run()
        assert not summary.failures, summary.describe()
        check("after a full compaction" if full else "after a minor compaction")
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "COMPACT"
    for bucket in scan_snapshot(table, latest).buckets().values():
        assert list(bucket.levels) == [5]
