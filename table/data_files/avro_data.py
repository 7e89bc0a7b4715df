"""Avro data files through fastavro (pyarrow has no Avro writer): Java ``AvroFileFormat``,
``AvroSchemaConverter`` and ``AvroRowDatumWriter`` (apache/paimon 5dacde516b,
``paimon-format/.../format/avro``).

The schema is Java's: top record ``org.apache.paimon.avro.generated.record``, a nested row
named ``<parent record>_<field>``, nullable types as the union ``["null", T]`` with default
null. TINYINT/SMALLINT/INT are ``int``; DECIMAL is ``bytes`` + ``decimal``; DATE ``date``;
TIME ``time-millis``; TIMESTAMP(p) ``timestamp-millis``/``-micros`` and TIMESTAMP_LTZ(p)
``local-timestamp-millis``/``-micros`` (p > 6 is not supported, as in Java); a MAP with
string keys is an Avro map, any other MAP or MULTISET an array of ``{key, value}`` records
with logical type ``map``. The codec is ``avro.codec`` if set, else ``file.compression``
(``zstd`` -> ``zstandard`` at ``file.compression.zstd-level``).

Avro is row oriented, so values pass through Python here, one block at a time.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import fastavro
import fastavro.write
import pyarrow as pa

from paimond.errors import UnsupportedError
from paimond.format.types.data_types import (
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

RECORD_NAME = "org.apache.paimon.avro.generated.record"
_PRIMITIVE: dict[type[DataType], str] = {
    BooleanType: "boolean", TinyIntType: "int", SmallIntType: "int", IntType: "int",
    BigIntType: "long", FloatType: "float", DoubleType: "double", CharType: "string",
    VarCharType: "string", BinaryType: "bytes", VarBinaryType: "bytes",
}
_CODECS = {"zstd": "zstandard", "zstandard": "zstandard", "none": "null", "null": "null",
           "uncompressed": "null", "snappy": "snappy", "deflate": "deflate", "bzip2": "bzip2",
           "xz": "xz"}
Converter = Callable[[Any], Any]


def avro_codec(compression: str, codec_option: str | None) -> str:
    """The fastavro codec of a data file (``avro.codec`` wins over ``file.compression``)."""
    name = (codec_option or compression).strip().lower()
    if name not in _CODECS:
        raise UnsupportedError(f"compression {name!r} for avro data files")
    return _CODECS[name]


def avro_schema(row_type: RowType) -> dict[str, Any]:
    """Java ``AvroSchemaConverter.convertToSchema`` of a file's row type (not nullable)."""
    return _record(row_type, RECORD_NAME)


def _record(row_type: RowType, name: str) -> dict[str, Any]:
    fields = []
    for f in row_type.fields:
        field: dict[str, Any] = {"name": f.name, "type": _schema(f.type, f"{name}_{f.name}")}
        if f.type.nullable:
            field["default"] = None
        fields.append(field)
    return {"type": "record", "name": name, "fields": fields}


def _schema(data_type: DataType, name: str) -> Any:
    schema = _non_null_schema(data_type, name)
    return ["null", schema] if data_type.nullable else schema


def _non_null_schema(data_type: DataType, name: str) -> Any:
    primitive = _PRIMITIVE.get(type(data_type))
    if primitive is not None:
        return primitive
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        if data_type.precision > 6:
            raise UnsupportedError(f"avro data files cannot hold {data_type} (precision > 6)")
        local = "local-" if isinstance(data_type, LocalZonedTimestampType) else ""
        unit = "millis" if data_type.precision <= 3 else "micros"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if isinstance(data_type, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, TimeType):
        if data_type.precision > 3:
            raise UnsupportedError(f"avro data files cannot hold {data_type} (precision > 3)")
        return {"type": "int", "logicalType": "time-millis"}
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": data_type.precision,
                "scale": data_type.scale}
    if isinstance(data_type, RowType):
        return _record(data_type, name)
    if isinstance(data_type, ArrayType):
        return {"type": "array", "items": _schema(data_type.element, name)}
    if isinstance(data_type, (MapType, MultisetType)):
        key, value = _map_types(data_type)
        if isinstance(key, (CharType, VarCharType)):
            return {"type": "map", "values": _schema(value, name)}
        entry = _record(RowType(fields=()), name)
        entry["fields"] = [{"name": "key", "type": _schema(key, f"{name}_key")},
                           {"name": "value", "type": _schema(value, f"{name}_value")}
                           | ({"default": None} if value.nullable else {})]
        return {"type": "array", "items": entry, "logicalType": "map"}
    raise UnsupportedError(f"avro data files cannot hold {data_type}")


def _map_types(data_type: MapType | MultisetType) -> tuple[DataType, DataType]:
    if isinstance(data_type, MapType):
        return data_type.key, data_type.value
    return data_type.element, IntType(nullable=False)


# ---------------------------------------------------------------- writing


def _storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """The Arrow type whose Python values fastavro writes unchanged: temporal values as the
    integers Avro stores (datetimes would go through the local time zone in fastavro)."""
    if pa.types.is_timestamp(arrow_type):
        return pa.int64()
    if pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type):
        return pa.int32()
    if pa.types.is_list(arrow_type):
        item = arrow_type.value_field
        return pa.list_(item.with_type(_storage_type(item.type)))
    if pa.types.is_map(arrow_type):
        return pa.map_(arrow_type.key_field.with_type(_storage_type(arrow_type.key_type)),
                       arrow_type.item_field.with_type(_storage_type(arrow_type.item_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_storage_type(f.type)) for f in arrow_type])
    return arrow_type


def _unit_type(arrow_type: pa.DataType, data_type: DataType) -> pa.DataType:
    """Timestamps in the unit Avro stores them (millis up to precision 3, else micros)."""
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        return pa.timestamp("ms" if data_type.precision <= 3 else "us", arrow_type.tz)
    if isinstance(data_type, ArrayType):
        item = arrow_type.value_field
        return pa.list_(item.with_type(_unit_type(item.type, data_type.element)))
    if isinstance(data_type, (MapType, MultisetType)):
        key, value = _map_types(data_type)
        return pa.map_(arrow_type.key_field.with_type(_unit_type(arrow_type.key_type, key)),
                       arrow_type.item_field.with_type(_unit_type(arrow_type.item_type, value)))
    if isinstance(data_type, RowType):
        return pa.struct([f.with_type(_unit_type(f.type, d.type))
                          for f, d in zip(arrow_type, data_type.fields, strict=True)])
    return arrow_type


def _map_writer(data_type: DataType) -> Converter | None:
    """Python-side conversion of values Arrow gives as lists of pairs (maps), if needed."""
    if isinstance(data_type, (MapType, MultisetType)):
        key, value = _map_types(data_type)
        inner_key, inner_value = _map_writer(key), _map_writer(value)
        fix_key = inner_key or (lambda v: v)
        fix_value = inner_value or (lambda v: v)
        if isinstance(key, (CharType, VarCharType)):
            return lambda pairs: None if pairs is None else {k: fix_value(v) for k, v in pairs}
        return lambda pairs: None if pairs is None else [
            {"key": fix_key(k), "value": fix_value(v)} for k, v in pairs]
    if isinstance(data_type, ArrayType):
        element = _map_writer(data_type.element)
        if element is not None:
            return lambda items: None if items is None else [element(i) for i in items]
    if isinstance(data_type, RowType):
        fields = [(f.name, _map_writer(f.type)) for f in data_type.fields]
        if any(c is not None for _, c in fields):
            return lambda row: None if row is None else {
                name: (c(row[name]) if c else row[name]) for name, c in fields}
    return None


class AvroDataWriter:
    """Writes batches of ``row_type`` as one Avro container file into ``sink``."""

    def __init__(self, sink: IO[bytes], row_type: RowType, *, codec: str, zstd_level: int) -> None:
        self._row_type = row_type
        options: dict[str, Any] = {"compression_level": zstd_level} if codec == "zstandard" else {}
        self._writer = fastavro.write.Writer(sink, fastavro.parse_schema(avro_schema(row_type)),
                                             codec=codec, **options)
        self._converters = [_map_writer(f.type) for f in row_type.fields]

    def write_batch(self, batch: pa.RecordBatch) -> None:
        columns = []
        for array, data_field, convert in zip(batch.columns, self._row_type.fields,
                                              self._converters, strict=True):
            unit_type = _unit_type(array.type, data_field.type)
            if not unit_type.equals(array.type):
                array = array.cast(unit_type)
            values = array.cast(_storage_type(array.type)).to_pylist()
            columns.append(values if convert is None else [convert(v) for v in values])
        names = self._row_type.field_names
        for values in zip(*columns, strict=True):
            self._writer.write(dict(zip(names, values, strict=True)))

    @property
    def buffered_bytes(self) -> int:
        """Encoded bytes of the block not yet flushed (before compression)."""
        io: Any = self._writer.io  # fastavro's MemoryIO of the open block
        return int(io.tell())

    def close(self) -> None:
        self._writer.flush()


# ---------------------------------------------------------------- reading


def _map_reader(data_type: DataType) -> Converter | None:
    """Python-side conversion of fastavro values into what ``pa.array`` takes."""
    if isinstance(data_type, (MapType, MultisetType)):
        key, value = _map_types(data_type)
        fix_key = _map_reader(key) or (lambda v: v)
        fix_value = _map_reader(value) or (lambda v: v)
        if isinstance(key, (CharType, VarCharType)):
            return lambda entries: None if entries is None else [
                (k, fix_value(v)) for k, v in entries.items()]
        return lambda entries: None if entries is None else [
            (fix_key(e["key"]), fix_value(e["value"])) for e in entries]
    if isinstance(data_type, ArrayType):
        element = _map_reader(data_type.element)
        if element is not None:
            return lambda items: None if items is None else [element(i) for i in items]
    if isinstance(data_type, RowType):
        fields = [(f.name, _map_reader(f.type)) for f in data_type.fields]
        if any(c is not None for _, c in fields):
            return lambda row: None if row is None else {
                name: (c(row.get(name)) if c else row.get(name)) for name, c in fields}
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        # timestamp-* decode to aware datetimes, local-timestamp-* to naive ones; Arrow takes
        # both (aware ones in UTC). A writer without the logical type leaves plain longs.
        micros_per_unit = 1000 if data_type.precision <= 3 else 1

        def timestamp(value: Any) -> Any:
            if isinstance(value, int):
                return _EPOCH + datetime.timedelta(microseconds=value * micros_per_unit)
            return value

        return timestamp
    return None


_EPOCH = datetime.datetime(1970, 1, 1)


def read_avro_batches(source: IO[bytes], row_type: RowType, schema: pa.Schema, *,
                      batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Batches of the ``row_type`` columns of an Avro data file (Arrow ``schema``), read a
    block at a time; a column the file lacks reads as nulls."""
    if not row_type.fields:
        raise ValueError("reading an avro data file needs at least one column")
    names = row_type.field_names
    converters = [_map_reader(f.type) for f in row_type.fields]
    columns: list[list[Any]] = [[] for _ in names]
    for block in fastavro.block_reader(source):
        records: list[dict[str, Any]] = list(block)  # type: ignore[arg-type]  # data files hold records
        for values, name in zip(columns, names, strict=True):
            values.extend([r.get(name) for r in records])
        while len(columns[0]) >= batch_rows:  # a block may hold many batches
            yield _to_batch([c[:batch_rows] for c in columns], converters, schema)
            columns = [c[batch_rows:] for c in columns]
    if columns[0]:
        yield _to_batch(columns, converters, schema)


def _to_batch(columns: Sequence[list[Any]], converters: Sequence[Converter | None],
              schema: pa.Schema) -> pa.RecordBatch:
    arrays = [pa.array(values if convert is None else [convert(v) for v in values], type=f.type)
              for values, convert, f in zip(columns, converters, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
