"""nested_update, nested_partial_update and merge_map_with_keytime (lsm/merge/nested_aggregates.py)
against an independent model of Paimon's semantics (tests/support/nested_model.py), over
random versions with retractions and NULLs, on the aggregation engine and inside a
partial-update sequence group; and the settings Java's factories refuse."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.nested_model import (
    ADD,
    RETRACT,
    canonical,
    fold,
    merge_map_with_keytime,
    nested_partial_update,
    nested_update,
    nested_update_retract,
)

from paimond.errors import UnsupportedError
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import (
    ArrayType,
    DataField,
    IntType,
    MapType,
    RowType,
    VarCharType,
)
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.streaming import sort_slice
from paimond.table.options.merge import MergeConfig

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
COLUMNS = ("k", "nu", "nk", "np", "mm")
ROW = pa.struct([("id", pa.int32()), ("v", pa.string()), ("s", pa.int32())])
MAP_ROW = pa.struct([("v", pa.int32()), ("ts", pa.string())])
TYPES = {"k": pa.int32(), "nu": pa.list_(ROW), "nk": pa.list_(ROW), "np": pa.list_(ROW),
         "mm": pa.map_(pa.string(), MAP_ROW)}


def _row_type() -> RowType:
    return RowType(fields=(DataField(10, "id", IntType()), DataField(11, "v", VarCharType(length=5)),
                           DataField(12, "s", IntType())))


def _schema(options: dict[str, str], columns: tuple[str, ...] = COLUMNS) -> TableSchema:
    types = {"k": IntType(nullable=False), "nu": ArrayType(element=_row_type()),
             "nk": ArrayType(element=_row_type()), "np": ArrayType(element=_row_type()),
             "mm": MapType(key=VarCharType(length=5), value=RowType(fields=(
                 DataField(20, "v", IntType()), DataField(21, "ts", VarCharType(length=10))))),
             "g": IntType()}
    fields = tuple(DataField(i, n, types[n]) for i, n in enumerate(columns))
    return TableSchema(id=0, fields=fields, highest_field_id=30, partition_keys=(),
                       primary_keys=("k",), options=options)


def _merge(versions: list[dict[str, Any]], schema: TableSchema, columns: tuple[str, ...],
           types: dict[str, pa.DataType]) -> list[dict[str, Any]]:
    data = {"_KEY_k": pa.array([v["k"] for v in versions], pa.int32()),
            "_SEQUENCE_NUMBER": pa.array(range(len(versions)), pa.int64()),
            "_VALUE_KIND": pa.array([v["_kind"] for v in versions], pa.int8())}
    data |= {c: pa.array([v[c] for v in versions], types[c]) for c in columns}
    reducer = make_reducer(MergeConfig.of(schema), list(columns), False)
    return reducer(sort_slice([pa.table(data)], ["_KEY_k"])).to_pylist()


_rows = st.lists(st.none() | st.fixed_dictionaries({
    "id": st.none() | st.integers(0, 3), "v": st.none() | st.sampled_from(["a", "b", "c"]),
    "s": st.none() | st.integers(0, 3)}), max_size=4)
_map = st.dictionaries(st.sampled_from(["p", "q", "r"]), st.none() | st.fixed_dictionaries({
    "v": st.none() | st.integers(0, 9),
    "ts": st.none() | st.sampled_from(["2026-01", "2026-02", "2026-10", "\uff21", "\U0001f600"])}),
    max_size=3).map(lambda d: list(d.items()))


@st.composite
def _versions(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 30))):
        out.append({"k": draw(st.integers(0, 4)),
                    "_kind": draw(st.sampled_from((INSERT, UPDATE_AFTER, UPDATE_BEFORE, DELETE))),
                    "nu": draw(st.none() | _rows), "nk": draw(st.none() | _rows),
                    "np": draw(st.none() | _rows), "mm": draw(st.none() | _map)})
    return out


@settings(max_examples=80, deadline=None)
@given(_versions(), st.sampled_from(["merge", "ignore"]), st.sampled_from([None, 0, 2, 5]),
       st.booleans(), st.booleans())
def test_nested_functions_match_the_model(versions: list[dict[str, Any]], strategy: str,
                                          limit: int | None, sequenced: bool,
                                          keyed_limit: bool) -> None:
    options = {"merge-engine": "aggregation",
               "fields.nu.aggregate-function": "nested_update",
               "fields.nk.aggregate-function": "nested_update", "fields.nk.nested-key": "id",
               "fields.nk.nested-key-null-strategy": strategy,
               "fields.np.aggregate-function": "nested_partial_update",
               "fields.np.nested-key": " id ", "fields.np.nested-key-null-strategy": strategy,
               "fields.mm.aggregate-function": "merge_map_with_keytime",
               # merge_map_with_keytime and nested_partial_update cannot retract
               "fields.np.ignore-retract": "true", "fields.mm.ignore-retract": "true"}
    if limit is not None:
        options[f"fields.{'nk' if keyed_limit else 'nu'}.count-limit"] = str(limit)
    if sequenced:
        options["fields.nk.nested-sequence-field"] = "s"
    nu_limit = limit if limit is not None and not keyed_limit else 2**31 - 1
    nk_limit = limit if limit is not None and keyed_limit else 2**31 - 1
    sequence = ("s",) if sequenced else ()
    got = {r["k"]: r for r in _merge(versions, _schema(options), COLUMNS, TYPES)}
    for key in sorted({v["k"] for v in versions}):
        mine = [(ADD if v["_kind"] in (INSERT, UPDATE_AFTER) else RETRACT, v) for v in versions
                if v["k"] == key]

        def column(name: str) -> list[tuple[str, Any]]:
            return [(kind, v[name]) for kind, v in mine]  # noqa: B023

        nu = fold(column("nu"), lambda a, v: nested_update(a, v, limit=nu_limit),
                  nested_update_retract)
        nk = fold(column("nk"), lambda a, v: nested_update(a, v, key=("id",), strategy=strategy,
                                                           sequence=sequence, limit=nk_limit),
                  lambda a, v: nested_update_retract(a, v, key=("id",), strategy=strategy))
        np_ = fold(column("np"), lambda a, v: nested_partial_update(
            a, v, key=("id",), fields=("id", "v", "s"), strategy=strategy), None)
        mm = fold(column("mm"), lambda a, v: merge_map_with_keytime(a, v, "ts"), None)
        row = got[key]
        assert row["nu"] == nu, key  # unkeyed: Java's order
        assert canonical(row["nk"]) == canonical(nk), key
        assert canonical(row["np"]) == canonical(np_), key
        assert canonical(row["mm"]) == canonical(mm), key


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.none() | st.integers(0, 3), st.booleans(),
                          st.none() | _rows), min_size=1, max_size=25))
def test_nested_update_in_a_sequence_group(draws: list[tuple[int, int | None, bool, Any]]
                                           ) -> None:
    """Under partial-update the function folds the versions in the group's sequence order:
    older versions go in reversed (agg(input, acc)), retractions retract."""
    options = {"merge-engine": "partial-update", "fields.g.sequence-group": "nk",
               "fields.nk.aggregate-function": "nested_update", "fields.nk.nested-key": "id"}
    versions = [{"k": k, "g": g, "_kind": INSERT if add else DELETE, "nk": rows}
                for k, g, add, rows in draws]
    columns = ("k", "g", "nk")
    got = {r["k"]: r for r in _merge(versions, _schema(options, columns), columns,
                                      {"k": pa.int32(), "g": pa.int32(), "nk": TYPES["nk"]})}
    for key in sorted({v["k"] for v in versions}):
        mine = [v for v in versions if v["k"] == key]
        if len(mine) == 1:
            assert got[key]["nk"] == mine[0]["nk"]
            continue
        acc: Any = None
        top: int | None = None
        first = True
        for v in mine:
            if first and v["_kind"] == DELETE:  # the row starts from a leading retraction
                acc, top = v["nk"], v["g"]
            first = False
            if v["g"] is None:
                continue
            newer = top is None or v["g"] >= top
            if v["_kind"] == DELETE:
                acc = nested_update_retract(acc, v["nk"], key=("id",))
            else:
                acc = (nested_update(acc, v["nk"], key=("id",)) if newer
                       else nested_update(v["nk"], acc, key=("id",)))
            if newer:
                top = v["g"]
        assert canonical(got[key]["nk"]) == canonical(acc), key


@pytest.mark.parametrize(("options", "match"), [
    ({"fields.np.aggregate-function": "nested_partial_update"}, "needs fields.np.nested-key"),
    ({"fields.nu.aggregate-function": "nested_update", "fields.nu.nested-sequence-field": "s"},
     "need fields"),
    ({"fields.nu.aggregate-function": "nested_update",
      "fields.nu.nested-key-null-strategy": "ignore"}, "need fields"),
    ({"fields.nu.aggregate-function": "nested_update", "fields.nu.nested-key": "nope"},
     "not fields of the nested row"),
    ({"fields.mm.aggregate-function": "merge_map_with_keytime", "fields.mm.ts-field": "v"},
     "reads it as a string"),
    ({"fields.k2.aggregate-function": "nested_update"}, "ARRAY<ROW>"),
    ({"fields.nu.aggregate-function": "my_java_udf"}, "'my_java_udf' \\(field nu\\)"),
])
def test_settings_java_refuses_are_refused(options: dict[str, str], match: str) -> None:
    columns = (*COLUMNS, "k2")
    schema = _schema({"merge-engine": "aggregation"} | options, COLUMNS)
    if "fields.k2.aggregate-function" in options:
        schema = TableSchema(id=0, fields=(*schema.fields, DataField(9, "k2", IntType())),
                             highest_field_id=30, partition_keys=(), primary_keys=("k",),
                             options=schema.options)
    versions = [{"k": 1, "_kind": INSERT, "nu": None, "nk": None, "np": None, "mm": None,
                 "k2": 1}] * 2
    with pytest.raises(UnsupportedError, match=match):
        _merge(versions, schema, columns, TYPES | {"k2": pa.int32()})


def test_a_null_nested_key_with_the_error_strategy_fails_the_merge() -> None:
    options = {"merge-engine": "aggregation", "fields.nk.aggregate-function": "nested_update",
               "fields.nk.nested-key": "id", "fields.nk.nested-key-null-strategy": "error"}
    row = {"k": 1, "_kind": INSERT, "nu": None, "np": None, "mm": None}
    fine = [row | {"nk": [{"id": 1, "v": "a", "s": 0}]}, row | {"nk": [{"id": 2, "v": "b",
                                                                          "s": 0}]}]
    assert len(_merge(fine, _schema(options), COLUMNS, TYPES)[0]["nk"]) == 2
    with pytest.raises(UnsupportedError, match="nested-key-null-strategy is error"):
        _merge([*fine, row | {"nk": [{"id": None, "v": "c", "s": 0}]}], _schema(options),
               COLUMNS, TYPES)


def test_merge_map_with_keytime_compares_timestamps_as_java_strings() -> None:
    """U+FF21 sorts after U+1F600 in UTF-16 (a surrogate pair starts 0xD83D), before it in
    code points: Java's order wins."""
    options = {"merge-engine": "aggregation",
               "fields.mm.aggregate-function": "merge_map_with_keytime"}
    row = {"k": 1, "_kind": INSERT, "nu": None, "nk": None, "np": None}
    versions = [row | {"mm": [("p", {"v": 1, "ts": "\uff21"})]},
                row | {"mm": [("p", {"v": 2, "ts": "\U0001f600"}), ("q", {"v": 3, "ts": None})]},
                row | {"mm": [("r", None)]}]
    assert _merge(versions, _schema(options), COLUMNS, TYPES)[0]["mm"] == [
        ("p", {"v": 1, "ts": "\uff21"})]


def test_count_limit_caps_appended_rows_and_new_keys() -> None:
    options = {"merge-engine": "aggregation", "fields.nu.aggregate-function": "nested_update",
               "fields.nu.count-limit": "3", "fields.nk.aggregate-function": "nested_update",
               "fields.nk.nested-key": "id", "fields.nk.count-limit": "2"}

    def rows(*ids: int | None) -> list[Any]:
        return [None if i is None else {"id": i, "v": str(i), "s": 0} for i in ids]

    base = {"k": 1, "_kind": INSERT, "np": None, "mm": None}
    versions = [base | {"nu": rows(1, None), "nk": rows(1)},
                base | {"nu": rows(None, 2, 3, 5), "nk": rows(2, 3, 1)},
                base | {"nu": rows(4), "nk": rows(4)}]
    merged = _merge(versions, _schema(options), COLUMNS, TYPES)[0]
    # NULL elements are dropped; the first two versions fill the 3 places, the third is left
    assert merged["nu"] == rows(1, 2, 3)
    # key 1 is replaced by its later row, keys 3 and 4 are new ones past the limit
    assert merged["nk"] == rows(1, 2)


@pytest.mark.parametrize(("column", "function", "extra"), [
    ("np", "nested_partial_update", {"fields.np.nested-key": "id"}),
    ("mm", "merge_map_with_keytime", {}),
])
def test_functions_without_retraction_refuse_one(column: str, function: str,
                                                 extra: dict[str, str]) -> None:
    """As Java's FieldAggregator.retract: unless fields.<c>.ignore-retract is set."""
    options = {"merge-engine": "aggregation", f"fields.{column}.aggregate-function": function}
    row = {"k": 1, "nu": None, "nk": None, "np": None, "mm": None}
    versions = [row | {"_kind": INSERT}, row | {"_kind": UPDATE_BEFORE}]
    with pytest.raises(UnsupportedError, match=f"{function}.*cannot retract"):
        _merge(versions, _schema(options | extra), COLUMNS, TYPES)
    ignoring = options | extra | {f"fields.{column}.ignore-retract": "true"}
    assert len(_merge(versions, _schema(ignoring), COLUMNS, TYPES)) == 1
