"""Whole rows of the Fory standard row format, and random access to one field.

Java: ``org.apache.fory.format.row.binary.BinaryRow`` (``pointTo``, ``isNullAt``, getters);
C++: ``fory::row::Row`` (apache/fory v1.6.1).

:class:`RowView` reads one field from the bytes of an encoded row without decoding the others:
the null bit, the 8-byte slot, and only for variable-width fields the value the slot points
at. Every access checks what it follows, as ``reader`` does.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa

from paimond.errors import CodecError
from paimond.format.fory_row.layout import U64, Node, bitmap_size, compile_schema, fixed_size
from paimond.format.fory_row.reader import Reader, fields_reader, reader
from paimond.format.fory_row.writer import writer

Buffer: TypeAlias = "bytes | bytearray | memoryview"


def encode_row(values: Sequence[Any] | Mapping[str, Any], schema: pa.Schema) -> bytes:
    """The row bytes of ``values`` (by position, or by field name with missing names null);
    raises TypeError/ValueError naming the field that does not fit."""
    return row_encoder(schema)(values)


def decode_row(buffer: Buffer, schema: pa.Schema) -> tuple[Any, ...]:
    """Field values of the row that fills ``buffer``; raises CodecError for malformed bytes."""
    return row_decoder(schema)(buffer)


def row_encoder(schema: pa.Schema) -> Callable[[Sequence[Any] | Mapping[str, Any]], bytes]:
    """``encode_row`` compiled for ``schema``: for many rows, it skips the schema lookup."""
    write = writer(compile_schema(schema))

    def encode(values: Sequence[Any] | Mapping[str, Any]) -> bytes:
        out = bytearray()
        write(out, values)
        return bytes(out)

    return encode


def row_decoder(schema: pa.Schema) -> Callable[[Buffer], tuple[Any, ...]]:
    """``decode_row`` compiled for ``schema``: for many rows, it skips the schema lookup."""
    read = fields_reader(compile_schema(schema))

    def decode(buffer: Buffer) -> tuple[Any, ...]:
        buf = buffer if isinstance(buffer, bytes) else bytes(buffer)
        return tuple(read(buf, 0, len(buf)))

    return decode


@dataclass(frozen=True, slots=True)
class _Access:
    """How to reach each field of a struct node without decoding the others."""

    bitmap_bytes: int
    fixed_bytes: int
    fixed: tuple[struct.Struct | None, ...]
    readers: tuple[Reader | None, ...]


@functools.lru_cache(maxsize=256)
def _access(node: Node) -> _Access:
    fixed = tuple(struct.Struct("<" + c.code) if c.code else None for c in node.children)
    readers = tuple(None if c.code else reader(c) for c in node.children)
    return _Access(bitmap_size(len(node.children)), fixed_size(node), fixed, readers)


class RowView:
    """One encoded row, read field by field.

    ``RowView(buffer, schema)`` views the row that fills ``buffer`` (or ``size`` bytes from
    ``offset``); it raises CodecError if those bytes cannot hold the row's fixed region. A
    field index out of range raises IndexError; malformed bytes raise CodecError.
    """

    __slots__ = ("_access", "_buf", "_node", "_size", "_start")

    def __init__(self, buffer: Buffer, schema: pa.Schema, offset: int = 0,
                 size: int | None = None) -> None:
        buf = buffer if isinstance(buffer, bytes) else bytes(buffer)
        size = len(buf) - offset if size is None else size
        if offset < 0 or size < 0 or offset + size > len(buf):
            raise CodecError(f"row of {size} bytes at offset {offset} is outside the "
                             f"{len(buf)}-byte buffer")
        self._init(buf, offset, size, compile_schema(schema))

    @classmethod
    def _nested(cls, buf: bytes, start: int, size: int, node: Node) -> RowView:
        view = cls.__new__(cls)
        view._init(buf, start, size, node)
        return view

    def _init(self, buf: bytes, start: int, size: int, node: Node) -> None:
        self._buf, self._start, self._size, self._node = buf, start, size, node
        self._access = _access(node)
        if size < self._access.fixed_bytes:
            raise CodecError(f"row of {size} bytes is shorter than the "
                             f"{self._access.fixed_bytes}-byte fixed region of its "
                             f"{len(node.children)} fields")
        if int.from_bytes(buf[start:start + self._access.bitmap_bytes], "little") >> len(node.children):
            raise CodecError(f"null bits set past the {len(node.children)} fields of a row")

    @property
    def names(self) -> tuple[str, ...]:
        return self._node.names

    @property
    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._node.children)

    def index(self, name: str) -> int:
        """Position of the field called ``name``; raises KeyError."""
        try:
            return self._node.names.index(name)
        except ValueError:
            raise KeyError(name) from None

    def is_null(self, i: int) -> bool:
        self._check_index(i)
        return bool(self._buf[self._start + (i >> 3)] >> (i & 7) & 1)

    def get(self, i: int) -> Any:
        """Field ``i`` as ``decode_row`` would return it (a struct as a dict), None if null."""
        if self.is_null(i):
            return None
        position = self._start + self._access.bitmap_bytes + 8 * i
        fixed = self._access.fixed[i]
        if fixed is not None:
            return fixed.unpack_from(self._buf, position)[0]
        start, length = self._target(i, position)
        read = self._access.readers[i]
        assert read is not None
        return read(self._buf, start, length)

    def struct(self, i: int) -> RowView | None:
        """A view of struct field ``i`` (None if null), to read its fields one by one."""
        child = self._node.children[i] if 0 <= i < len(self) else None
        if child is not None and child.kind != "struct":
            raise TypeError(f"field {self._node.names[i]!r} is a {child.kind}, not a struct")
        if self.is_null(i):
            return None
        assert child is not None
        start, length = self._target(i, self._start + self._access.bitmap_bytes + 8 * i)
        return RowView._nested(self._buf, start, length, child)

    def _target(self, i: int, position: int) -> tuple[int, int]:
        slot = U64.unpack_from(self._buf, position)[0]
        offset, length = slot >> 32, slot & 0xFFFFFFFF
        if offset < self._access.fixed_bytes or offset + length > self._size:
            raise CodecError(f"field {i} points at {length} bytes at offset {offset}, outside the "
                             f"variable region [{self._access.fixed_bytes}, {self._size}) of "
                             f"its row")
        return self._start + offset, length

    def _check_index(self, i: int) -> None:
        if not 0 <= i < len(self._node.children):
            raise IndexError(f"field {i} of a row of {len(self._node.children)} fields")
