"""Record-level expiry during compaction: Java ``RecordLevelExpire`` (apache/paimon 5dacde516b)
and its uses in ``MergeTreeCompactManagerFactory``, ``CompactStrategy.pickFullCompaction`` and
``MergeTreeCompactTask.upgrade``.

With ``record-level.expire-time`` and ``record-level.time-field`` set on a primary-key table,
every row a compaction reads is dropped when ``now_s > time_s + expire_time_s``, before the
merge (a dropped newest version lets an older one through, as in Java); a row whose time field
is null is kept. ``time_s`` is the field in epoch seconds: INT as is; BIGINT as is, or divided
by 1000 when it is at least 10^12 (milliseconds); TIMESTAMP and TIMESTAMP_LTZ as their epoch
millisecond divided by 1000 (Java's truncating division). ``expire_time_s`` is the duration's
whole seconds and ``now_s`` the plan's moment in whole seconds, fixed when the task is planned.
A file whose time field's min statistic is expired is rewritten rather than upgraded, and a
full compaction of a lone max-level run rewrites it. Paimon 0.9 had
``record-level.time-field-type``; 1.0 replaced it by the recognition above, which is what this
follows (the option is ignored, as Java 1.0+ ignores it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CodecError, ConfigError
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.manifest import DataFileMeta
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import BigIntType, IntType, LocalZonedTimestampType, TimestampType
from paimond.format.types.values import Timestamp
from paimond.table.options.core import TableOptions

MILLIS_THRESHOLD = 1_000_000_000_000  # Java: a BIGINT at least this large holds milliseconds
_MILLIS_PER_UNIT = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


@dataclass(frozen=True, slots=True)
class RecordExpiry:
    """Plain data a worker applies; ``now_s`` was read from the planner's clock."""

    field_id: int
    field_name: str
    kind: str  # "int", "bigint" or "timestamp"
    expire_time_s: int
    now_s: int

    def keep_mask(self, column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """True for the rows to keep (not expired, or a null time)."""
        seconds = self._seconds(column)
        alive = pc.less_equal(pa.scalar(self.now_s, pa.int64()),
                              pc.add(seconds, pa.scalar(self.expire_time_s, pa.int64())))
        return pc.fill_null(alive, True)

    def filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        mask = self.keep_mask(batch.column(self.field_name))
        if pc.all(mask).as_py():
            return batch
        return batch.filter(mask)

    def _seconds(self, column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        if self.kind == "int":
            return pc.cast(column, pa.int64())
        if self.kind == "bigint":
            return pc.if_else(pc.greater_equal(column, MILLIS_THRESHOLD),
                              pc.divide(column, 1000), column)
        unit = column.type.unit
        raw = pc.cast(column, pa.int64())
        times, per = _MILLIS_PER_UNIT[unit]
        millis = pc.multiply(raw, times) if times != 1 else _floor_divide(raw, per)
        return pc.divide(millis, 1000)  # Arrow's integer division truncates, as Java's

    def expires_file(self, meta: DataFileMeta, file_schema: TableSchema) -> bool:
        """Java ``isExpireFile``: the file's min time is expired. Stats that do not bound the
        field (absent, null, unreadable) say nothing, so the file is not picked for it."""
        minimum = self._min_of(meta, file_schema)
        if minimum is None:
            return False
        if isinstance(minimum, Timestamp):
            millis = minimum.millis
            seconds = millis // 1000 if millis >= 0 else -(-millis // 1000)  # Java truncates
        elif isinstance(minimum, int):
            seconds = minimum
            if self.kind == "bigint" and minimum >= MILLIS_THRESHOLD:
                seconds = minimum // 1000
        else:
            return False
        return self.now_s - self.expire_time_s > seconds

    def _min_of(self, meta: DataFileMeta, file_schema: TableSchema) -> object:
        field = next((f for f in file_schema.fields if f.id == self.field_id), None)
        if field is None:
            return None  # added after the file was written: all null
        if meta.value_stats_cols is None:
            fields = list(file_schema.fields)
        else:
            by_name = {f.name: f for f in file_schema.fields}
            if any(name not in by_name for name in meta.value_stats_cols):
                return None
            fields = [by_name[name] for name in meta.value_stats_cols]
        if field not in fields:
            return None
        try:
            values = decode_manifest_row(meta.value_stats.min_values, [f.type for f in fields])
        except (CodecError, struct.error, ValueError):
            return None
        return values[fields.index(field)]


def _floor_divide(values: pa.Array | pa.ChunkedArray, divisor: int) -> pa.Array | pa.ChunkedArray:
    """Floor division of int64 values (Paimon ``Timestamp`` millis are floored)."""
    quotient = pc.divide(values, divisor)
    remainder = pc.subtract(values, pc.multiply(quotient, divisor))
    return pc.if_else(pc.less(remainder, 0), pc.subtract(quotient, 1), quotient)


def record_expiry_of(schema: TableSchema, options: TableOptions, now_ms: int
                     ) -> RecordExpiry | None:
    """Java ``RecordLevelExpire.create`` for a plan made at ``now_ms`` (None: not enabled).
    ConfigError when the time field is missing, unknown or of another type."""
    expire_time_s = options.record_level_expire_time_s
    if expire_time_s is None:
        return None
    name = options.record_level_time_field
    if name is None:
        raise ConfigError("record-level.time-field",
                          "must be set when record-level.expire-time is set")
    field = next((f for f in schema.fields if f.name == name), None)
    if field is None:
        raise ConfigError("record-level.time-field", f"no field {name!r} in the table")
    if isinstance(field.type, IntType):
        kind = "int"
    elif isinstance(field.type, BigIntType):
        kind = "bigint"
    elif isinstance(field.type, TimestampType | LocalZonedTimestampType):
        kind = "timestamp"
    else:
        raise ConfigError("record-level.time-field", f"{name} is {field.type.sql()}; it must "
                          "be INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ")
    return RecordExpiry(field.id, name, kind, expire_time_s, now_ms // 1000)
