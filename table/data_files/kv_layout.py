"""The physical columns of data files: Java ``KeyValue.schema`` and ``SpecialFields``
(apache/paimon 5dacde516b, ``paimon-core/.../KeyValue.java``, ``paimon-api/.../SpecialFields.java``).

A primary-key table's file holds ``_KEY_<k>`` for each trimmed primary-key field (field id
+ 1073741823), ``_SEQUENCE_NUMBER`` (BIGINT NOT NULL, id 2147483646), ``_VALUE_KIND``
(TINYINT NOT NULL, id 2147483645: +I 0, -U 1, +U 2, -D 3), then every table column. The
sequence number comes first, whatever the docs say. With ``data-file.thin-mode`` the
``_KEY_*`` columns are left out, and readers take the keys from the value columns with the
same field ids. An append table's file holds the table columns only, except the files
compaction writes for a ``row-tracking.enabled`` table: they end with ``_ROW_ID`` (BIGINT NOT
NULL, id 2147483642) and ``_SEQUENCE_NUMBER`` (Java ``SpecialFields.rowTypeWithRowTracking``),
and list every column in ``_WRITE_COLS``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CodecError
from paimond.format.meta.schema import TableSchema
from paimond.format.types.arrow_types import FIELD_ID_KEY, to_arrow_type
from paimond.format.types.data_types import (
    ArrayType,
    BigIntType,
    DataField,
    DataType,
    IntType,
    MapType,
    MultisetType,
    RowType,
    TinyIntType,
)
from paimond.format.types.row_kind import RowKind
from paimond.table.options.core import TableOptions

KEY_FIELD_PREFIX = "_KEY_"
KEY_FIELD_ID_START = 2147483647 // 2
SEQUENCE_NUMBER = DataField(2147483646, "_SEQUENCE_NUMBER", BigIntType(nullable=False))
VALUE_KIND = DataField(2147483645, "_VALUE_KIND", TinyIntType(nullable=False))
ROW_ID = DataField(2147483642, "_ROW_ID", BigIntType(nullable=False))
ROW_TRACKING_NAMES = (ROW_ID.name, SEQUENCE_NUMBER.name)
SYSTEM_FIELD_NAMES = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "rowkind", "_ROW_ID"})
"""Java ``SpecialFields.SYSTEM_FIELD_NAMES`` (``rowkind`` too, so a user column of that name
gets system-column statistics in Java as well)."""

_STRUCTURED_ID_BASE = 2147483647 // 4
_DEPTH_LIMIT = 1 << 10


def is_system_field(name: str) -> bool:
    return name.startswith(KEY_FIELD_PREFIX) or name in SYSTEM_FIELD_NAMES


def key_fields(schema: TableSchema) -> tuple[DataField, ...]:
    """The ``_KEY_*`` fields of the trimmed primary key, with their file field ids."""
    return tuple(DataField(f.id + KEY_FIELD_ID_START, KEY_FIELD_PREFIX + f.name, f.type)
                 for f in schema.key_type.fields)


def thin_mode(schema: TableSchema, options: TableOptions) -> bool:
    """Whether new files of this primary-key table leave out the ``_KEY_*`` columns (Java
    ``supportsThinMode``: every key field is also a value field, always so for one schema)."""
    return options.data_file_thin_mode and bool(schema.primary_keys)


def physical_row_type(schema: TableSchema, *, key_value: bool, thin: bool = False,
                      row_tracking: bool = False, tracking_nullable: bool = False) -> RowType:
    """The columns of a data file written under ``schema``, in file order (``row_tracking``:
    an append file that holds its rows' ids and sequence numbers; ``tracking_nullable``: as
    read, where a file without them reads them as null)."""
    if not key_value:
        if not row_tracking:
            return schema.row_type
        tracking = (ROW_ID, SEQUENCE_NUMBER)
        if tracking_nullable:
            tracking = (DataField(ROW_ID.id, ROW_ID.name, BigIntType(nullable=True)),
                        DataField(SEQUENCE_NUMBER.id, SEQUENCE_NUMBER.name, BigIntType(nullable=True)))
        return RowType(fields=(*schema.fields, *tracking))
    keys = () if thin else key_fields(schema)
    return RowType(fields=(*keys, SEQUENCE_NUMBER, VALUE_KIND, *schema.fields))


def physical_arrow_schema(row_type: RowType) -> pa.Schema:
    """Arrow schema of a data file: Parquet field ids on every field, nested ones numbered
    as Java's ``ParquetSchemaConverter`` does (``SpecialFields.get*FieldId``)."""
    return pa.schema([_arrow_field(f.name, f.type, f.id, f.id, 0) for f in row_type.fields])


def _int32(value: int) -> int:
    """Java int arithmetic wraps around."""
    return (value + 2**31) % 2**32 - 2**31


def _arrow_field(name: str, data_type: DataType, own_id: int, field_id: int, depth: int) -> pa.Field:
    """``own_id`` goes on this field; nested ids derive from the top field's ``field_id``."""
    return pa.field(name, _arrow_type(data_type, field_id, depth), nullable=data_type.nullable,
                    metadata={FIELD_ID_KEY: str(own_id).encode()})


def _arrow_type(data_type: DataType, field_id: int, depth: int) -> pa.DataType:
    nested_id = _int32(_STRUCTURED_ID_BASE + field_id * _DEPTH_LIMIT + depth + 1)
    if isinstance(data_type, ArrayType):
        return pa.list_(_arrow_field("element", data_type.element, nested_id, field_id, depth + 1))
    if isinstance(data_type, (MapType, MultisetType)):
        # MULTISET<T> is stored as MAP<T, INT NOT NULL>; Parquet map keys are never null.
        key_type, value_type = ((data_type.key, data_type.value) if isinstance(data_type, MapType)
                                else (data_type.element, IntType(nullable=False)))
        key_id = _int32(_STRUCTURED_ID_BASE - field_id * _DEPTH_LIMIT - depth - 1)
        return pa.map_(_arrow_field("key", key_type.copy(nullable=False), key_id, field_id, depth + 1),
                       _arrow_field("value", value_type, nested_id, field_id, depth + 1))
    if isinstance(data_type, RowType):
        return pa.struct([_arrow_field(f.name, f.type, f.id, f.id, 0) for f in data_type.fields])
    return to_arrow_type(data_type)


def to_key_value_batch(values: pa.RecordBatch, schema: TableSchema, sequence_numbers: pa.Array,
                       value_kinds: pa.Array, *, thin: bool = False) -> pa.RecordBatch:
    """The physical batch of a primary-key file from table rows plus their sequence
    numbers and value kinds (``_KEY_*`` copied from the key columns)."""
    row_type = physical_row_type(schema, key_value=True, thin=thin)
    keys = [] if thin else [values.column(k) for k in schema.trimmed_primary_keys]
    columns = [*keys, sequence_numbers.cast(pa.int64()), value_kinds.cast(pa.int8()),
               *(values.column(f.name) for f in schema.fields)]
    arrow_schema = physical_arrow_schema(row_type)
    try:
        return pa.RecordBatch.from_arrays(
            [conform(c, f.type) for c, f in zip(columns, arrow_schema, strict=True)],
            schema=arrow_schema)
    except CodecError as error:
        raise ValueError(f"rows do not fit schema {schema.id}: {error.reason}") from None


def value_batch(batch: pa.RecordBatch, schema: TableSchema) -> pa.RecordBatch:
    """The table columns of a physical primary-key batch (system columns dropped)."""
    return batch.select([f.name for f in schema.fields])


def retract_mask(value_kinds: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """True where a row is a retraction (-U or -D), as Java ``RowKind.isRetract``."""
    return pc.or_(pc.equal(value_kinds, RowKind.UPDATE_BEFORE),
                  pc.equal(value_kinds, RowKind.DELETE))


def relaxed_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with every field nullable and without metadata (map keys stay NOT NULL)."""
    if pa.types.is_list(arrow_type):
        return pa.list_(pa.field(arrow_type.value_field.name, relaxed_type(arrow_type.value_type)))
    if pa.types.is_map(arrow_type):
        return pa.map_(pa.field(arrow_type.key_field.name, relaxed_type(arrow_type.key_type),
                                nullable=False),
                       pa.field(arrow_type.item_field.name, relaxed_type(arrow_type.item_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(f.name, relaxed_type(f.type)) for f in arrow_type])
    return arrow_type


def conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target``: a cast where values change representation (e.g. a Parquet
    TIMESTAMP(0) read back as millis, an ORC TIME read back as INT), else a zero-copy view
    that only renames fields or changes their nullability. Raises CodecError."""
    if array.type.equals(target, check_metadata=True):
        return array
    relaxed = relaxed_type(target)
    if not relaxed_type(array.type).equals(relaxed):
        try:
            array = array.cast(relaxed)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise CodecError(f"a column of type {array.type} does not read as {target}: "
                             f"{error}") from None
    return array.view(target)
