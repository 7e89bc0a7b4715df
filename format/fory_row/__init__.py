"""The Apache Fory standard row format: encoder, checked decoder, random access, Arrow.

Spec: ``shared/seeds/fory-row-format-spec.txt`` ("Standard Row Format"). Java:
``org.apache.fory.format.row.binary.BinaryRow`` and ``writer.BinaryRowWriter``; C++:
``fory::row::RowWriter`` (apache/fory v1.6.1); checked against pyfory 1.7.7
(``pyfory.format``). It differs from Paimon's BinaryRow (``binary_row``) in the null bits (no
RowKind byte), strings (never inline), timestamps (int64 microseconds in the slot), decimals,
and array and map headers (8-byte counts and bitmap words).

Schemas are Arrow schemas of the types Fory has: bool, int8..int64, float32/64, date32,
timestamp[us], duration[us], string, binary, decimal128/256, list, map and struct, each
nullable anywhere. Python values: bool, int, float, str, bytes and ``decimal.Decimal`` as
usual; date32 is its int days, timestamp and duration their int microseconds (the encoded
numbers, as Arrow's storage); a list is a list, a map a list of ``(key, value)`` pairs (any
Mapping encodes too), a nested struct a dict by field name (a sequence by position encodes
too); NULL is None. A top-level row encodes from a sequence or a mapping and decodes to a tuple.

Modules: ``layout`` (Arrow types to slots), ``writer``, ``reader`` (bounds-checked),
``view`` (rows, :class:`RowView`), ``keys`` (sort keys for sorted key rows), ``arrow``.
"""

from paimond.format.fory_row.arrow import decode_rows, encode_batch, storage_type
from paimond.format.fory_row.keys import SortKey, sort_key_function
from paimond.format.fory_row.layout import array_header_size, bitmap_size
from paimond.format.fory_row.view import (
    Buffer,
    RowView,
    decode_row,
    encode_row,
    row_decoder,
    row_encoder,
)

__all__ = ["Buffer", "RowView", "SortKey", "array_header_size", "bitmap_size", "decode_row",
           "decode_rows", "encode_batch", "encode_row", "row_decoder", "row_encoder",
           "sort_key_function", "storage_type"]
