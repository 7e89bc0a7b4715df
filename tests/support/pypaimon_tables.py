"""Paimon tables written by pypaimon 2.1.0, the interop fixtures of the test suite.

Each builder creates one table in a warehouse and returns a `TableSpec` whose
`expected_rows` come from an independent Python model of the merge engine, never from
pypaimon's reader. pypaimon is a test-only dependency; nothing under the package imports it.

Warehouses: a local path, or an object store given pypaimon catalog options. For S3,
pypaimon 2.1.0 (`filesystem/pyarrow_file_io.py`) builds a pyarrow `S3FileSystem` from:
`s3.endpoint` (`http://host:port` works), `s3.access-key`, `s3.secret-key`,
`s3.session-token`, `s3.region`, `s3.path.style.access` (or `s3.path-style-access`);
each key also answers to the `s3a.`, `fs.s3.` and `fs.s3a.` prefixes, and the Java-style
`fs.s3.accessKeyId` / `fs.s3.accessKeySecret` / `fs.s3.endpoint` / `fs.s3.region` work
too. Pass e.g. `{'s3.endpoint': 'http://127.0.0.1:5000', 's3.access-key': 'k',
's3.secret-key': 's', 's3.region': 'us-east-1', 's3.path.style.access': 'true'}`.
pypaimon-rust 0.4.0 accepts the same `s3.*` spellings.

What pypaimon 2.1.0 cannot write, found by running it (so absent from these tables):
- ARRAY, MAP and ROW in primary or partition keys: "BinaryRow only support AtomicType yet"
  for keys, "unhashable type" for partitions. Nested types are values only.
- MAP or TIMESTAMP(7..9) columns in avro files ("Unsupported pyarrow type for Avro").
- Retractions (-U/-D) on partial-update and aggregation tables (NotImplementedError in the
  merge functions), and `ignore-delete` on partial-update. first-row needs `ignore-delete`,
  and pypaimon then drops the retractions before writing. So only deduplicate tables
  carry -U/-D records in their files.
- Deletion vectors on primary-key tables: with `deletion-vectors.enabled` pypaimon writes
  level-0 files and no index, and batch reads skip level 0, so the table reads empty until
  something compacts it. Its only DV writer is `delete_by_row_id` on a data-evolution
  append table (`append_deletion_vectors` below), which writes an index manifest.
Quirks worked around or kept: pypaimon truncates TIMESTAMP(9) partition values, and every
row of a merging read, to microseconds (Python datetime; the files keep nanoseconds), so
TIMESTAMP(9) partitions and primary-key tables use whole microseconds (`_MICROS_ONLY`).
A BYTES partition directory is the Python repr (`b%27abc%27`), not Java's rendering
(`binary_partition`). pypaimon-rust 0.4.0 cannot read FLOAT, DOUBLE or binary partitions.
"""

from __future__ import annotations

import datetime as dt
import random
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import AtomicType, PyarrowFieldParser
from pypaimon.schema.schema_change import SchemaChange

Row = dict[str, Any]
Options = dict[str, str] | None
UTC = dt.timezone.utc


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One written table. `expected_rows` is what a pypaimon batch read returns at the
    latest snapshot, sorted by `sort_columns`; `compacted_rows` is the content once every
    file is merged (differs only where batch reads skip level 0: first-row and
    deletion-vector primary-key tables)."""

    name: str
    primary_keys: tuple[str, ...]
    partition_keys: tuple[str, ...]
    options: dict[str, str]
    expected_rows: pa.Table
    compacted_rows: pa.Table
    snapshot_count: int
    sort_columns: tuple[str, ...]


def catalog_for(warehouse: str, catalog_options: Options = None) -> Any:
    """A pypaimon filesystem catalog; `catalog_options` add e.g. the S3 keys above."""
    return CatalogFactory.create({**(catalog_options or {}), "warehouse": warehouse})


def commit_arrow(warehouse: str, name: str, rows: pa.Table,
                 catalog_options: Options = None) -> None:
    """One pypaimon batch commit of ``rows`` into table ``name``."""
    table = catalog_for(warehouse, catalog_options).get_table(name)
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(rows)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def sort_columns_of(schema: pa.Schema, primary_keys: Sequence[str]) -> tuple[str, ...]:
    """Primary keys, else every column pyarrow can sort (nested ones cannot be)."""
    if primary_keys:
        return tuple(primary_keys)
    nested = (pa.types.is_nested, pa.types.is_map)
    return tuple(f.name for f in schema if not any(check(f.type) for check in nested))


def sort_rows(rows: pa.Table, columns: Sequence[str]) -> pa.Table:
    return rows.sort_by([(c, "ascending") for c in columns]) if rows.num_rows else rows


# ---- writing ---------------------------------------------------------------------------


def set_options(warehouse: str, name: str, options: dict[str, str]) -> None:
    """ALTER TABLE ``name`` SET ``options``, through pypaimon's catalog."""
    catalog_for(warehouse).alter_table(
        name, [SchemaChange.set_option(k, v) for k, v in options.items()], False)


class TableWriter:
    """Creates a table from an Arrow schema, commits batches and counts snapshots."""

    def __init__(self, catalog: Any, name: str, schema: pa.Schema, *,
                 primary_keys: Sequence[str] = (), partition_keys: Sequence[str] = (),
                 options: dict[str, str], type_overrides: dict[str, str] | None = None):
        paimon_schema = Schema.from_pyarrow_schema(
            schema, partition_keys=list(partition_keys), primary_keys=list(primary_keys),
            options=dict(options))
        for field in paimon_schema.fields:
            if field.name in (type_overrides or {}):
                field.type = AtomicType(type_overrides[field.name], field.type.nullable)
        catalog.create_database(name.split(".")[0], True)
        catalog.create_table(name, paimon_schema, False)
        self.table = catalog.get_table(name)
        self.read_schema = PyarrowFieldParser.from_paimon_schema(self.table.table_schema.fields)
        self.write_schema = schema
        self.commits = 0
        self.spec_args = dict(name=name, primary_keys=tuple(primary_keys),
                              partition_keys=tuple(partition_keys), options=dict(options))

    def commit(self, rows: Sequence[Row]) -> None:
        builder = self.table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        try:
            write.write_arrow(pa.Table.from_pylist(list(rows), schema=self.write_schema))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
        self.commits += 1

    def delete_row_ids(self, row_ids: Sequence[int]) -> None:
        builder = self.table.new_batch_write_builder()
        commit = builder.new_commit()
        try:
            commit.commit(builder.new_update().delete_by_row_id(list(row_ids)))
        finally:
            commit.close()
        self.commits += 1

    def spec(self, compacted: Iterable[Row], *, skips_level0: bool = False) -> TableSpec:
        columns = sort_columns_of(self.read_schema, self.spec_args["primary_keys"])
        rows = sort_rows(pa.Table.from_pylist(list(compacted), schema=self.read_schema), columns)
        expected = self.read_schema.empty_table() if skips_level0 else rows
        return TableSpec(**self.spec_args, expected_rows=expected, compacted_rows=rows,
                         snapshot_count=self.commits, sort_columns=columns)


# ---- merge-engine model ----------------------------------------------------------------

_RETRACT = ("-U", "-D")


class MergeModel:
    """The rows a full merge keeps, fed records in sequence-number order."""

    def __init__(self, engine: str, keys: Sequence[str],
                 aggregates: dict[str, str] | None = None):
        self.engine, self.keys, self.aggregates = engine, tuple(keys), aggregates or {}
        self.state: dict[tuple[Any, ...], Row] = {}

    def apply(self, row: Row) -> None:
        key = tuple(row[k] for k in self.keys)
        old = self.state.get(key)
        if row.get("rk") in _RETRACT:
            if self.engine == "deduplicate":
                self.state.pop(key, None)
            return  # first-row with ignore-delete drops retractions before writing
        if old is None or self.engine == "deduplicate":
            self.state[key] = dict(row)
        elif self.engine == "partial-update":
            self.state[key] = {c: old[c] if v is None else v for c, v in row.items()}
        elif self.engine == "aggregation":
            self.state[key] = {c: self._aggregate(c, old[c], v) for c, v in row.items()}

    def _aggregate(self, column: str, acc: Any, value: Any) -> Any:
        function = self.aggregates.get(column, "last_non_null_value")
        if acc is None or value is None:
            return value if acc is None else acc
        return {"sum": lambda: acc + value, "max": lambda: max(acc, value),
                "min": lambda: min(acc, value)}.get(function, lambda: value)()

    def rows(self) -> list[Row]:
        return list(self.state.values())


def seeded_rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(name.encode()))


def random_changes(rng: random.Random, model: MergeModel, pool: Sequence[tuple[Any, ...]], count: int,
             make: Callable[[random.Random], Row], *, retract: bool) -> list[Row]:
    """`count` upserts of keys from `pool`, some keys twice; with `retract`, also -U/+U
    pairs, -D of live keys and -D of absent keys. `model` sees each row as it is made."""
    rows: list[Row] = []
    for key in rng.sample(list(pool), min(count, len(pool))) + rng.choices(pool, k=count // 4):
        row = dict(zip(model.keys, key, strict=False)) | make(rng)
        live, roll = key in model.state, rng.random()
        kinds = ["+U" if live else "+I"]
        if retract and live and roll < 0.2:
            kinds = ["-D"]
        elif retract and live and roll < 0.45:
            kinds = ["-U", "+U"]
        elif retract and not live and roll < 0.15:
            kinds = ["-D"]
        for kind in kinds:
            record = (dict(model.state[key]) if kind == "-U" else dict(row)) | {"rk": kind}
            model.apply(record)
            rows.append(record)
    return rows


def _build_pk(warehouse: str, catalog_options: Options, name: str, schema: pa.Schema, *,
              keys: tuple[str, ...], partition_keys: tuple[str, ...] = (),
              options: dict[str, str], pool: Callable[[random.Random], list[tuple[Any, ...]]],
              make: Callable[[random.Random], Row], counts: Sequence[int], retract: bool,
              aggregates: dict[str, str] | None = None) -> TableSpec:
    """A primary-key table with a string `rk` column as `rowkind.field`, one commit per
    entry of `counts`."""
    options = {"rowkind.field": "rk"} | options
    w = TableWriter(catalog_for(warehouse, catalog_options), name, schema, primary_keys=keys,
                partition_keys=partition_keys, options=options)
    engine = options.get("merge-engine", "deduplicate")
    rng, model = seeded_rng(name), MergeModel(engine, keys, aggregates)
    keys_pool = pool(rng)
    for count in counts:
        w.commit(random_changes(rng, model, keys_pool, count, make, retract=retract))
    skips_level0 = engine == "first-row" or options.get("deletion-vectors.enabled") == "true"
    return w.spec(model.rows(), skips_level0=skips_level0)


def not_null(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=False)


def _maybe(rng: random.Random, value: Any, null_chance: float = 0.3) -> Any:
    return None if rng.random() < null_chance else value


# ---- primary-key tables ----------------------------------------------------------------

# Partition values that need escaping; '' is whitespace-only, so its directory is the
# default partition name while the BinaryRow keeps ''. DATE renders as epoch days.
_TAGS = ("a/b", "x y", "k=v", "10:30", "50%", "plain", "")
_DAYS = (dt.date(2024, 1, 1), dt.date(1969, 12, 31), dt.date(2000, 2, 29))


def _short_values(rng: random.Random) -> Row:
    return {"v": f"v{rng.randrange(1000)}", "score": _maybe(rng, rng.randrange(-99, 99) / 4)}


def build_pk_deduplicate(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Deduplicate, partitioned by DATE and an escaped STRING, 2 buckets, parquet,
    6 commits with -U/+U/-D."""
    schema = pa.schema([not_null("day", pa.date32()), not_null("tag", pa.string()),
                        not_null("id", pa.int32()), ("v", pa.string()),
                        ("score", pa.float64()), ("rk", pa.string())])
    partitions = list(zip(_DAYS * 3, _TAGS, strict=False))
    return _build_pk(
        warehouse, catalog_options, "db.pk_deduplicate", schema, keys=("day", "tag", "id"),
        partition_keys=("day", "tag"), options={"bucket": "2", "file.format": "parquet"},
        pool=lambda rng: [rng.choice(partitions) + (i,) for i in range(60)],
        make=_short_values, counts=(40, 30, 30, 30, 30, 30), retract=True)


def _order_values(rng: random.Random) -> Row:
    return {"name": rng.choice(["ann", "bob", None, "a longer name"]),
            "amount": Decimal(rng.randrange(-10**6, 10**6)).scaleb(-2),
            "at": dt.datetime(2024, 5, 1) + dt.timedelta(microseconds=rng.randrange(10**12))}


def build_pk_deduplicate_orc(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Deduplicate, unpartitioned, 4 buckets, orc, 6 commits with -U/+U/-D."""
    schema = pa.schema([not_null("id", pa.int64()), ("name", pa.string()),
                        ("amount", pa.decimal128(12, 2)), ("at", pa.timestamp("us")),
                        ("rk", pa.string())])
    return _build_pk(
        warehouse, catalog_options, "db.pk_deduplicate_orc", schema, keys=("id",),
        options={"bucket": "4", "file.format": "orc"},
        pool=lambda rng: [(i * 7919,) for i in range(80)],
        make=_order_values, counts=(60, 40, 40, 40, 40, 40), retract=True)


def _partial_values(rng: random.Random) -> Row:
    return {"a": _maybe(rng, f"a{rng.randrange(100)}", 0.4),
            "b": _maybe(rng, rng.randrange(10**9), 0.4),
            "c": _maybe(rng, rng.randrange(99) / 8, 0.4)}


def build_pk_partial_update(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Partial-update, partitioned by INT, 2 buckets, avro, 5 commits of +I/+U with NULLs."""
    schema = pa.schema([not_null("region", pa.int32()), not_null("id", pa.int32()),
                        ("a", pa.string()), ("b", pa.int64()), ("c", pa.float64()),
                        ("rk", pa.string())])
    return _build_pk(
        warehouse, catalog_options, "db.pk_partial_update", schema, keys=("region", "id"),
        partition_keys=("region",),
        options={"bucket": "2", "file.format": "avro", "merge-engine": "partial-update"},
        pool=lambda rng: [(rng.choice((-1, 0, 7)), i) for i in range(50)],
        make=_partial_values, counts=(40, 30, 30, 30, 30), retract=False)


_AGGREGATES = {"total": "sum", "amount": "sum", "hi": "max", "lo": "min", "n": "sum"}


def _aggregated_values(rng: random.Random) -> Row:
    return {"total": _maybe(rng, rng.randrange(-50, 100)),
            "amount": Decimal(rng.randrange(-10**5, 10**5)).scaleb(-3),
            "hi": rng.randrange(1000), "lo": rng.randrange(-800, 800) / 16, "n": 1,
            "last": _maybe(rng, rng.choice("pqr"))}


def build_pk_aggregation(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Aggregation (sum of BIGINT, DECIMAL and INT, max, min, and the default
    last_non_null_value), unpartitioned, 4 buckets, avro, 6 commits of +I/+U."""
    schema = pa.schema([not_null("id", pa.int32()), ("total", pa.int64()),
                        ("amount", pa.decimal128(20, 3)), ("hi", pa.int32()),
                        ("lo", pa.float64()), ("n", pa.int32()), ("last", pa.string()),
                        ("rk", pa.string())])
    functions = {f"fields.{c}.aggregate-function": f for c, f in _AGGREGATES.items()}
    return _build_pk(
        warehouse, catalog_options, "db.pk_aggregation", schema, keys=("id",),
        options={"bucket": "4", "file.format": "avro", "merge-engine": "aggregation"} | functions,
        pool=lambda rng: [(i,) for i in range(40)], make=_aggregated_values,
        counts=(30,) * 6, retract=False, aggregates=_AGGREGATES)


def _one_value(rng: random.Random) -> Row:
    return {"v": f"v{rng.randrange(1000)}"}


def build_pk_first_row(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """First-row with ignore-delete (pypaimon drops the -U/-D rows before writing),
    partitioned by STRING, 2 buckets, orc, 5 commits. Batch reads skip level 0."""
    schema = pa.schema([not_null("dt", pa.string()), not_null("id", pa.int32()),
                        ("v", pa.string()), ("rk", pa.string())])
    return _build_pk(
        warehouse, catalog_options, "db.pk_first_row", schema, keys=("dt", "id"),
        partition_keys=("dt",),
        options={"bucket": "2", "file.format": "orc", "merge-engine": "first-row",
                 "ignore-delete": "true"},
        pool=lambda rng: [(rng.choice(("2024-01-01", "2024-01-02")), i) for i in range(50)],
        make=_one_value, counts=(40, 30, 30, 30, 30), retract=True)


def build_pk_deletion_vectors(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Deduplicate with deletion-vectors.enabled, partitioned, 2 buckets, parquet, 5 commits
    with -U/+U/-D. pypaimon writes level 0 only and no index, so batch reads are empty."""
    schema = pa.schema([not_null("dt", pa.string()), not_null("id", pa.int32()),
                        ("v", pa.string()), ("rk", pa.string())])
    return _build_pk(
        warehouse, catalog_options, "db.pk_deletion_vectors", schema, keys=("dt", "id"),
        partition_keys=("dt",),
        options={"bucket": "2", "file.format": "parquet", "deletion-vectors.enabled": "true"},
        pool=lambda rng: [(rng.choice("xy"), i) for i in range(50)],
        make=_one_value, counts=(40, 30, 30, 30, 30), retract=True)


# ---- append tables ---------------------------------------------------------------------


def build_append_unaware(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Append, bucket -1 (unaware), partitioned by STRING and INT with NULLs, parquet,
    5 commits."""
    schema = pa.schema([("dt", pa.string()), ("hr", pa.int32()), not_null("id", pa.int64()),
                        ("msg", pa.string()), ("tags", pa.list_(pa.string()))])
    w = TableWriter(catalog_for(warehouse, catalog_options), "db.append_unaware", schema,
                partition_keys=("dt", "hr"), options={"bucket": "-1", "file.format": "parquet"})
    rng, rows = seeded_rng("append_unaware"), []
    for commit in range(5):
        batch = [{"dt": rng.choice(["2024-01-01", "2024-01-02", None]),
                  "hr": rng.choice([0, 23, None]), "id": commit * 1000 + i,
                  "msg": rng.choice(["m", None, "a longer message"]),
                  "tags": rng.choice([None, [], ["a"], ["b", None, "c"]])} for i in range(40)]
        w.commit(batch)
        rows += batch
    return w.spec(rows)


def build_append_fixed_bucket(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Append with 4 fixed buckets on `bucket-key` id, partitioned by DATE, avro, 5 commits."""
    schema = pa.schema([("day", pa.date32()), not_null("id", pa.int32()),
                        ("v", pa.float64()), ("note", pa.string())])
    w = TableWriter(catalog_for(warehouse, catalog_options), "db.append_fixed_bucket", schema,
                partition_keys=("day",),
                options={"bucket": "4", "bucket-key": "id", "file.format": "avro"})
    rng, rows = seeded_rng("append_fixed_bucket"), []
    for commit in range(5):
        batch = [{"day": rng.choice(_DAYS), "id": commit * 100 + i, "v": rng.randrange(99) / 4,
                  "note": rng.choice([None, "n"])} for i in range(30)]
        w.commit(batch)
        rows += batch
    return w.spec(rows)


def build_append_deletion_vectors(warehouse: str,
                                  catalog_options: Options = None) -> TableSpec:
    """Data-evolution append table (row tracking, deletion vectors), partitioned, parquet:
    3 commits of one partition each, then 2 `delete_by_row_id` commits that write DV index
    files and an index manifest. Each commit writes one file, so row ids follow input order."""
    schema = pa.schema([("dt", pa.string()), not_null("id", pa.int32()), ("v", pa.string())])
    w = TableWriter(catalog_for(warehouse, catalog_options), "db.append_deletion_vectors", schema,
                partition_keys=("dt",),
                options={"bucket": "-1", "file.format": "parquet", "row-tracking.enabled": "true",
                         "data-evolution.enabled": "true", "deletion-vectors.enabled": "true"})
    rng, rows = seeded_rng("append_deletion_vectors"), []
    for dt_value in ("a", "b", "a"):
        batch = [{"dt": dt_value, "id": len(rows) + i, "v": f"v{rng.randrange(100)}"}
                 for i in range(30)]
        w.commit(batch)
        rows += batch
    deleted: set[int] = set()
    for count in (12, 8):
        row_ids = sorted(rng.sample([r for r in range(len(rows)) if r not in deleted], count))
        w.delete_row_ids(row_ids)
        deleted |= set(row_ids)
    return w.spec(r for i, r in enumerate(rows) if i not in deleted)


# ---- every data type -------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)
Generator = Callable[[random.Random], Any]


def _timestamp(rng: random.Random, unit_us: int) -> dt.datetime:
    micros = rng.randrange(-(10**15), 4 * 10**15) // unit_us * unit_us
    return _EPOCH + dt.timedelta(microseconds=micros)


def _timestamp_ns(rng: random.Random) -> int:
    return rng.randrange(-(10**18), 4 * 10**18)


def _decimal(digits: int, scale: int) -> Generator:
    return lambda r: Decimal(r.randrange(-(10**digits), 10**digits)).scaleb(-scale)


def _date(rng: random.Random) -> dt.date:
    return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randrange(-30000, 40000))


def _time(rng: random.Random) -> dt.time:
    return (_EPOCH + dt.timedelta(milliseconds=rng.randrange(86_400_000))).time()


# (column suffix, arrow type, Paimon type where not the arrow default, value generator)
ATOMIC_TYPES: tuple[tuple[str, pa.DataType, str | None, Generator], ...] = (
    ("boolean", pa.bool_(), None, lambda r: r.random() < 0.5),
    ("tinyint", pa.int8(), None, lambda r: r.randint(-128, 127)),
    ("smallint", pa.int16(), None, lambda r: r.randint(-(2**15), 2**15 - 1)),
    ("int", pa.int32(), None, lambda r: r.randint(-(2**31), 2**31 - 1)),
    ("bigint", pa.int64(), None, lambda r: r.randint(-(2**63), 2**63 - 1)),
    ("float", pa.float32(), None, lambda r: r.randrange(-4000, 4000) / 8),
    ("double", pa.float64(), None, lambda r: r.randrange(-(10**9), 10**9) / 64),
    ("decimal_10_2", pa.decimal128(10, 2), None, _decimal(9, 2)),
    ("decimal_38_4", pa.decimal128(38, 4), None, _decimal(33, 4)),
    ("char", pa.string(), "CHAR(5)", lambda r: "".join(r.choices("abcé/ =", k=5))),
    ("varchar", pa.string(), "VARCHAR(20)", lambda r: "v" * r.randrange(0, 20)),
    ("string", pa.string(), None, lambda r: r.choice(["", "short", "naïve ünïcödé €", "x" * 40])),
    ("binary", pa.binary(), "BINARY(4)", lambda r: r.randbytes(4)),
    ("varbinary", pa.binary(), "VARBINARY(16)", lambda r: r.randbytes(r.randrange(17))),
    ("bytes", pa.binary(), None, lambda r: r.randbytes(r.randrange(30))),
    ("date", pa.date32(), None, _date),
    ("time", pa.time32("ms"), "TIME(3)", _time),
    ("timestamp_0", pa.timestamp("s"), None, lambda r: _timestamp(r, 10**6)),
    ("timestamp_3", pa.timestamp("ms"), None, lambda r: _timestamp(r, 1000)),
    ("timestamp_6", pa.timestamp("us"), None, lambda r: _timestamp(r, 1)),
    ("timestamp_9", pa.timestamp("ns"), None, _timestamp_ns),
    ("timestamp_ltz_3", pa.timestamp("ms", tz="UTC"), None,
     lambda r: _timestamp(r, 1000).replace(tzinfo=UTC)),
    ("timestamp_ltz_6", pa.timestamp("us", tz="UTC"), None,
     lambda r: _timestamp(r, 1).replace(tzinfo=UTC)),
    ("timestamp_ltz_9", pa.timestamp("ns", tz="UTC"), None, _timestamp_ns),
)
# pypaimon turns partition values, and every row of a merge read, into Python datetimes,
# which drop nanoseconds (its raw reads and all data files keep them). Tables that need
# pypaimon to read back exactly use whole microseconds in TIMESTAMP(9) columns.
_MICROS_ONLY: dict[str, Generator] = {
    "timestamp_9": lambda r: _timestamp(r, 1),
    "timestamp_ltz_9": lambda r: _timestamp(r, 1).replace(tzinfo=UTC)}
NESTED_TYPES: tuple[tuple[str, pa.DataType, Generator], ...] = (
    ("array_int", pa.list_(pa.int32()),
     lambda r: [r.choice([None, r.randrange(99)]) for _ in range(r.randrange(4))]),
    ("array_array_string", pa.list_(pa.list_(pa.string())),
     lambda r: [["a", None], [], None][: r.randrange(4)]),
    ("map_string_bigint", pa.map_(pa.string(), pa.int64()),
     lambda r: [(f"k{i}", r.choice([None, i])) for i in range(r.randrange(3))]),
    ("row", pa.struct([("x", pa.int32()), ("y", pa.string()), ("z", pa.list_(pa.float64()))]),
     lambda r: {"x": r.randrange(9), "y": r.choice([None, "y"]), "z": [0.5, r.randrange(9) / 2]}),
)


def _type_overrides(prefix: str) -> dict[str, str]:
    return {f"{prefix}{name}": paimon for name, _, paimon, _ in ATOMIC_TYPES if paimon}


def _value_fields() -> list[pa.Field]:
    atomic = [pa.field(f"v_{n}", t) for n, t, _, _ in ATOMIC_TYPES]
    return atomic + [pa.field(f"v_{n}", t) for n, t, _ in NESTED_TYPES]


def _generators(*, micros_only: bool) -> dict[str, Generator]:
    generators = {n: g for n, _, _, g in ATOMIC_TYPES}
    return generators | _MICROS_ONLY if micros_only else generators


def _values(rng: random.Random, *, micros_only: bool) -> Row:
    generators = _generators(micros_only=micros_only)
    row = {f"v_{n}": None if rng.random() < 0.2 else g(rng) for n, g in generators.items()}
    return row | {f"v_{n}": None if rng.random() < 0.2 else g(rng) for n, _, g in NESTED_TYPES}


def build_all_types_pk(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Every atomic type in the primary key (partitioned by its DATE and BOOLEAN), every
    type incl. nested as nullable values; deduplicate, 2 buckets, parquet, 5 commits.
    TIMESTAMP(9) values are whole microseconds (see `_MICROS_ONLY`)."""
    keys = tuple(f"k_{n}" for n, _, _, _ in ATOMIC_TYPES)
    schema = pa.schema([not_null(f"k_{n}", t) for n, t, _, _ in ATOMIC_TYPES]
                       + _value_fields())
    w = TableWriter(catalog_for(warehouse, catalog_options), "db.all_types_pk", schema,
                primary_keys=keys, partition_keys=("k_date", "k_boolean"),
                options={"bucket": "2", "file.format": "parquet"},
                type_overrides=_type_overrides("k_") | _type_overrides("v_"))
    rng, model = seeded_rng("all_types_pk"), MergeModel("deduplicate", keys)
    generators = {f"k_{n}": g for n, g in _generators(micros_only=True).items()}
    days = [generators["k_date"](rng) for _ in range(2)]
    generators |= {"k_date": lambda r: r.choice(days)}
    pool = [tuple(generators[k](rng) for k in keys) for _ in range(40)]
    for count in (30, 20, 20, 20, 20):
        batch = [dict(zip(keys, key, strict=False)) | _values(rng, micros_only=True)
                 for key in rng.sample(pool, count)]
        for row in batch:
            model.apply(row)
        w.commit(batch)
    return w.spec(model.rows())


def _build_partitioned(warehouse: str, catalog_options: Options, name: str,
                       types: Sequence[str], commits: int) -> TableSpec:
    """Append, bucket -1, partitioned by `p_<type>` for each of `types`, two partitions of
    values and one all-NULL; every type as values; parquet, 20 rows per commit."""
    arrow_types = {n: t for n, t, _, _ in ATOMIC_TYPES}
    schema = pa.schema([pa.field(f"p_{n}", arrow_types[n]) for n in types]
                       + [not_null("id", pa.int32())] + _value_fields())
    w = TableWriter(catalog_for(warehouse, catalog_options), name, schema,
                partition_keys=tuple(f"p_{n}" for n in types), options={"bucket": "-1"},
                type_overrides=_type_overrides("p_") | _type_overrides("v_"))
    rng, rows, generators = seeded_rng(name), [], _generators(micros_only=True)
    partitions = [{f"p_{n}": generators[n](rng) for n in types} for _ in range(2)]
    partitions.append({f"p_{n}": None for n in types})
    for commit in range(commits):
        batch = [rng.choice(partitions) | {"id": commit * 100 + i}
                 | _values(rng, micros_only=False) for i in range(20)]
        w.commit(batch)
        rows += batch
    return w.spec(rows)


# pypaimon-rust 0.4.0 rejects FLOAT, DOUBLE, BINARY, VARBINARY and BYTES partition keys
# ("type is not supported as partition key"); those live in tables of their own.
_RUST_PARTITION_TYPES = tuple(n for n, t, _, _ in ATOMIC_TYPES
                              if not pa.types.is_binary(t) and not pa.types.is_floating(t))


def build_all_types_partitioned(warehouse: str,
                                catalog_options: Options = None) -> TableSpec:
    """Partitioned by every atomic type except FLOAT, DOUBLE and the binary ones, 5 commits;
    TIMESTAMP(9) values keep their nanoseconds (raw reads keep them)."""
    return _build_partitioned(warehouse, catalog_options, "db.all_types_partitioned",
                              _RUST_PARTITION_TYPES, 5)


def build_float_partitions(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Partitioned by FLOAT and DOUBLE (pypaimon-rust cannot read it), 2 commits."""
    return _build_partitioned(warehouse, catalog_options, "db.float_partitions",
                              ("float", "double"), 2)


def build_binary_partition(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Append partitioned by BYTES (pypaimon-rust cannot read it). pypaimon names the
    directory after the Python repr of the value (`p=b%27abc%27`), which Java would not."""
    schema = pa.schema([("p", pa.binary()), not_null("id", pa.int32())])
    w = TableWriter(catalog_for(warehouse, catalog_options), "db.binary_partition", schema,
                partition_keys=("p",), options={"bucket": "-1"})
    rows: list[Row] = []
    for commit in range(2):
        batch = [{"p": (b"abc", b"\x00\xff/", None)[i % 3], "id": commit * 10 + i}
                 for i in range(6)]
        w.commit(batch)
        rows += batch
    return w.spec(rows)


BUILDERS: dict[str, Callable[[str, Options], TableSpec]] = {
    "db.pk_deduplicate": build_pk_deduplicate,
    "db.pk_deduplicate_orc": build_pk_deduplicate_orc,
    "db.pk_partial_update": build_pk_partial_update,
    "db.pk_aggregation": build_pk_aggregation,
    "db.pk_first_row": build_pk_first_row,
    "db.pk_deletion_vectors": build_pk_deletion_vectors,
    "db.append_unaware": build_append_unaware,
    "db.append_fixed_bucket": build_append_fixed_bucket,
    "db.append_deletion_vectors": build_append_deletion_vectors,
    "db.all_types_pk": build_all_types_pk,
    "db.all_types_partitioned": build_all_types_partitioned,
    "db.float_partitions": build_float_partitions,
    "db.binary_partition": build_binary_partition,
}


def build_all(warehouse: str, catalog_options: Options = None) -> list[TableSpec]:
    """Write every table into `warehouse`, which must not hold them yet."""
    return [build(warehouse, catalog_options) for build in BUILDERS.values()]


# ---- tables paimond refuses to compact (table/options/semantic.py) -----------------------


def build_pk_listagg(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Aggregation with `listagg` on `tags` and `sum` on `total`, and
    `sequence.snapshot-ordering=true` (paimond refuses that one), 2 buckets, parquet, 3 commits
    of +I where later commits revisit earlier keys. The compacted rows model listagg (values
    joined by ',' in commit order)."""
    schema = pa.schema([not_null("id", pa.int32()), ("tags", pa.string()),
                        ("total", pa.int64())])
    options = {"bucket": "2", "file.format": "parquet", "merge-engine": "aggregation",
               "fields.tags.aggregate-function": "listagg",
               "fields.total.aggregate-function": "sum", "sequence.snapshot-ordering": "true"}
    w = TableWriter(catalog_for(warehouse, catalog_options), "db.pk_listagg", schema,
                primary_keys=("id",), options=options)
    state: dict[int, Row] = {}
    for commit, keys in enumerate((range(0, 20), range(10, 30), range(5, 25, 2))):
        rows = [{"id": k, "tags": f"t{commit}_{k % 3}", "total": k * 10 + commit} for k in keys]
        w.commit(rows)
        for row in rows:
            old = state.get(row["id"])
            state[row["id"]] = row if old is None else {
                "id": row["id"], "tags": f"{old['tags']},{row['tags']}",
                "total": old["total"] + row["total"]}
    return w.spec(state.values())


def build_pk_clustering_override(warehouse: str, catalog_options: Options = None) -> TableSpec:
    """Deduplicate with `pk-clustering-override=true` clustered by `v`, 1 bucket, parquet,
    3 commits of +I/+U."""
    schema = pa.schema([not_null("id", pa.int32()), ("v", pa.string())])
    options = {"bucket": "1", "file.format": "parquet", "pk-clustering-override": "true",
               "clustering.columns": "v"}
    w = TableWriter(catalog_for(warehouse, catalog_options), "db.pk_clustering_override", schema,
                primary_keys=("id",), options=options)
    state: dict[int, Row] = {}
    for commit in range(3):
        rows = [{"id": k, "v": f"v{(k * 7 + commit) % 11}"} for k in range(commit * 5, 20)]
        w.commit(rows)
        state.update((row["id"], row) for row in rows)
    return w.spec(state.values())
