"""A plain Python model of Paimon's partial-update (with sequence groups) and aggregation
merge functions over one key's versions, written from the documented semantics for oracle
tests: a key with one version keeps it as written; ``None`` means the key reads as absent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ADDS = ("+I", "+U")
Row = dict[str, Any]


def _newer(new: tuple[Any, ...], old: tuple[Any, ...]) -> bool:
    """new >= old, ascending with NULL first."""
    return [(v is not None, v) for v in new] >= [(v is not None, v) for v in old]


def _sum(acc: Any, value: Any, sign: int = 1) -> Any:
    if value is None:
        return acc
    return sign * value if acc is None else acc + sign * value


def partial_update(versions: Sequence[Row], columns: Sequence[str], *,
                   groups: Mapping[tuple[str, ...], tuple[str, ...]] | None = None,
                   sums: frozenset[str] = frozenset(), remove_on_groups: frozenset[str] =
                   frozenset(), remove_on_delete: bool = False) -> Row | None:
    """Versions oldest first, each with its kind in ``rk``; ``sums`` are protected fields
    aggregated with sum; ``remove_on_groups`` names sequence fields of
    partial-update.remove-record-on-sequence-group."""
    if len(versions) == 1:
        return dict(versions[0]) if versions[0]["rk"] in ADDS else None
    groups = groups or {}
    grouped = {c for s, p in groups.items() for c in (*s, *p)}
    row: Row = {}
    seen_add = deleted = False
    for version in versions:
        deleted = False
        if version["rk"] not in ADDS:
            if not row:
                row = {c: version[c] for c in columns}
            if remove_on_delete and not groups:
                if version["rk"] == "-D":
                    row, deleted = {c: version[c] for c in columns}, True
                continue
            for sequence, protected in groups.items():
                new = tuple(version[s] for s in sequence)
                if all(v is None for v in new):
                    continue
                newer = _newer(new, tuple(row[s] for s in sequence))
                if newer and version["rk"] == "-D" and remove_on_groups & set(sequence):
                    row, deleted = {c: version[c] for c in columns}, True
                    break
                if newer:
                    row.update(zip(sequence, new, strict=True))
                for name in protected:
                    if name in sums:
                        row[name] = _sum(row[name], version[name], -1)
                    elif newer:
                        row[name] = None
            continue
        seen_add = True
        row = row or dict.fromkeys(columns)
        for c in columns:
            if c not in grouped and version[c] is not None:
                row[c] = version[c]
        for sequence, protected in groups.items():
            new = tuple(version[s] for s in sequence)
            if all(v is None for v in new):
                continue
            newer = _newer(new, tuple(row[s] for s in sequence))
            if newer:
                row.update(zip(sequence, new, strict=True))
            for name in protected:
                if name in sums:
                    row[name] = _sum(row[name], version[name])
                elif newer:
                    row[name] = version[name]
    return None if deleted or not seen_add else row


def _blank(text: str) -> bool:
    return text.strip(" \t\n\r\x0b\x0c") == ""


def listagg(acc: str | None, value: str | None, delimiter: str, distinct: bool) -> str | None:
    if value is None or _blank(value):
        return acc
    if acc is None or _blank(acc):
        return value
    if not distinct:
        return f"{acc}{delimiter}{value}"
    tokens = acc.split(delimiter)
    extra = [t for i, t in enumerate(value.split(delimiter))
             if not _blank(t) and t not in tokens and t not in value.split(delimiter)[:i]]
    return delimiter.join([acc, *extra])


def _rbm32_union(left: bytes, right: bytes) -> bytes:
    from pyroaring import BitMap

    union = BitMap.deserialize(left) | BitMap.deserialize(right)
    union.run_optimize()
    return bytes(union.serialize())


def _sketch_union(function: str, left: bytes, right: bytes) -> bytes:
    """Java HllSketchUtil.union / ThetaSketch.union, with DataSketches' Python library."""
    import datasketches as ds

    if function == "hll_sketch":
        union = ds.hll_union(ds.hll_sketch.deserialize(right).lg_config_k)
        union.update(ds.hll_sketch.deserialize(right))
        union.update(ds.hll_sketch.deserialize(left))
        return bytes(union.get_result(ds.tgt_hll_type.HLL_4).serialize_compact())
    theta = ds.theta_union(12)
    for sketch in (left, right):
        theta.update(ds.compact_theta_sketch.deserialize(sketch))
    out = bytearray(theta.get_result(True).serialize())
    if out[0] & 0x3F >= 2:  # Java writes p (1.0f) into the preamble where C++ leaves 0
        out[12:16] = b"\x00\x00\x80\x3f"
    return bytes(out)


def aggregate(versions: Sequence[Row], columns: Sequence[str], functions: Mapping[str, str], *,
              delimiters: Mapping[str, str] | None = None,
              distinct: frozenset[str] = frozenset(), remove_on_delete: bool = False
              ) -> Row | None:
    """Aggregation with sum, listagg, collect, merge_map and last_non_null_value (the default);
    retractions subtract from sums, clear a last_non_null_value, and are ignored by the others
    (fields.<c>.ignore-retract)."""
    if len(versions) == 1:
        return dict(versions[0]) if versions[0]["rk"] in ADDS else None
    row = dict.fromkeys(columns)
    deleted = False
    for version in versions:
        deleted = remove_on_delete and version["rk"] == "-D"
        if deleted:
            row = {c: version[c] for c in columns}
            continue
        add = version["rk"] in ADDS
        for c in columns:
            function, value, acc = functions.get(c, "last_non_null_value"), version[c], row[c]
            if function == "primary-key":
                row[c] = value
            elif function == "sum":
                row[c] = _sum(acc, value, 1 if add else -1)
            elif not add:  # last_non_null_value retracts a non-null value to NULL
                if function == "last_non_null_value" and value is not None:
                    row[c] = None
                continue
            elif function == "listagg":
                row[c] = listagg(acc, value, (delimiters or {}).get(c, ","), c in distinct)
            elif function == "collect":
                if value is not None or (c in distinct and acc is not None):
                    merged = list(acc or []) + list(value or [])
                    row[c] = list(dict.fromkeys(merged)) if c in distinct else merged
            elif function == "rbm32":  # the union, written run-optimized (Java's bytes)
                if value is not None:
                    row[c] = value if acc is None else _rbm32_union(acc, value)
            elif function in ("hll_sketch", "theta_sketch"):
                if value is not None:
                    row[c] = value if acc is None else _sketch_union(function, acc, value)
            elif function == "merge_map":
                if value is not None:
                    row[c] = list({**dict(acc or []), **dict(value)}.items())
            elif value is not None:
                row[c] = value
    return None if deleted else row
