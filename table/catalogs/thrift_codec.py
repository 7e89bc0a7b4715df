"""Apache Thrift's binary protocol, as far as a Hive metastore client needs it: strict
``TBinaryProtocol`` messages over a plain socket (``TSocket`` with a buffered, unframed
transport: the metastore's default).

A call is a message header (``0x80010000 | CALL``, the method name, a sequence id) and the
arguments struct; the answer is a ``REPLY`` with the result struct (field 0 the return value,
fields 1.. the declared exceptions) or an ``EXCEPTION`` carrying a ``TApplicationException``
(1: message, 2: type). A struct is written as a list of :class:`Field` (id, wire type, value)
and read back generically, as ``{field id: value}`` with every nested struct the same, so a
caller picks the fields it knows by their ids in the IDL and newer servers' extra fields are
skipped without a schema.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.errors import CodecError

STOP, BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST = (
    0, 2, 3, 4, 6, 8, 10, 11, 12, 13, 14, 15)
CALL, REPLY, EXCEPTION = 1, 2, 3
_VERSION_1, _VERSION_MASK = 0x80010000, 0xFFFF0000
_FIXED = {BYTE: ">b", DOUBLE: ">d", I16: ">h", I32: ">i", I64: ">q"}


@dataclass(frozen=True, slots=True)
class Field:
    """One field to write: ``value`` is a str, int, bool or float for the scalar types; a
    sequence of Field for STRUCT; ``(element type, values)`` for LIST and SET;
    ``(key type, value type, dict)`` for MAP."""

    id: int
    type: int
    value: Any


class ThriftApplicationError(Exception):
    """The server answered a ``TApplicationException`` (unknown method, internal error)."""


def _write_value(out: bytearray, kind: int, value: Any) -> None:
    if kind == BOOL:
        out += b"\x01" if value else b"\x00"
    elif kind in _FIXED:
        out += struct.pack(_FIXED[kind], value)
    elif kind == STRING:
        data = value if isinstance(value, bytes) else str(value).encode("utf-8")
        out += struct.pack(">i", len(data)) + data
    elif kind == STRUCT:
        write_struct(out, value)
    elif kind in (LIST, SET):
        element, values = value
        out += struct.pack(">bi", element, len(values))
        for item in values:
            _write_value(out, element, item)
    elif kind == MAP:
        key_kind, value_kind, mapping = value
        out += struct.pack(">bbi", key_kind, value_kind, len(mapping))
        for key, item in mapping.items():
            _write_value(out, key_kind, key)
            _write_value(out, value_kind, item)
    else:
        raise CodecError(f"thrift: cannot write wire type {kind}")


def write_struct(out: bytearray, fields: Sequence[Field]) -> None:
    for item in fields:
        out += struct.pack(">bh", item.type, item.id)
        _write_value(out, item.type, item.value)
    out.append(STOP)


def encode_call(method: str, sequence_id: int, arguments: Sequence[Field]) -> bytes:
    """The bytes of a CALL of ``method`` with the arguments struct."""
    out = bytearray(struct.pack(">I", _VERSION_1 | CALL))
    _write_value(out, STRING, method)
    out += struct.pack(">i", sequence_id)
    write_struct(out, arguments)
    return bytes(out)


class _Reader:
    """Reads values from ``read_exact(n)`` (n bytes, or an error)."""

    def __init__(self, read_exact: Callable[[int], bytes]) -> None:
        self._read = read_exact

    def fixed(self, kind: int) -> Any:
        form = _FIXED[kind]
        return struct.unpack(form, self._read(struct.calcsize(form)))[0]

    def string(self) -> str:
        size = self.fixed(I32)
        if size < 0:
            raise CodecError(f"thrift: negative string length {size}")
        return self._read(size).decode("utf-8", "surrogateescape")

    def value(self, kind: int) -> Any:
        if kind == BOOL:
            return self._read(1) != b"\x00"
        if kind in _FIXED:
            return self.fixed(kind)
        if kind == STRING:
            return self.string()
        if kind == STRUCT:
            return self.struct()
        if kind in (LIST, SET):
            element, size = self.fixed(BYTE), self.fixed(I32)
            return [self.value(element) for _ in range(size)]
        if kind == MAP:
            key_kind, value_kind, size = self.fixed(BYTE), self.fixed(BYTE), self.fixed(I32)
            return {self.value(key_kind): self.value(value_kind) for _ in range(size)}
        raise CodecError(f"thrift: unknown wire type {kind}")

    def struct(self) -> dict[int, Any]:
        fields: dict[int, Any] = {}
        while True:
            kind = self.fixed(BYTE)
            if kind == STOP:
                return fields
            field_id = self.fixed(I16)
            fields[field_id] = self.value(kind)


def read_reply(read_exact: Callable[[int], bytes], method: str, sequence_id: int
               ) -> dict[int, Any]:
    """The result struct of the answer to ``method``'s call ``sequence_id``;
    ThriftApplicationError for an EXCEPTION answer, CodecError for anything else unexpected."""
    reader = _Reader(read_exact)
    header = reader.fixed(I32) & 0xFFFFFFFF
    if header & _VERSION_MASK != _VERSION_1:
        raise CodecError(f"thrift: not a strict binary protocol answer (0x{header:08x})")
    kind, name, answered = header & 0xFF, reader.string(), reader.fixed(I32)
    if name != method or answered != sequence_id:
        raise CodecError(f"thrift: answer to {name}#{answered}, expected {method}#{sequence_id}")
    result = reader.struct()
    if kind == EXCEPTION:
        raise ThriftApplicationError(f"{method}: {result.get(1, 'no message')} "
                                     f"(type {result.get(2)})")
    if kind != REPLY:
        raise CodecError(f"thrift: message type {kind} in answer to {method}")
    return result


class ThriftConnection:
    """One connection to a Thrift server: ``call`` sends a CALL and returns the result struct.
    OSError (connection refused, reset, timed out) reaches the caller."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self._socket = socket.create_connection((host, port), timeout=timeout_s)
        self._file = self._socket.makefile("rb")
        self._sequence = 0

    def _read_exact(self, size: int) -> bytes:
        data = self._file.read(size)
        if len(data) != size:
            raise ConnectionResetError("the thrift server closed the connection mid-answer")
        return data

    def call(self, method: str, *arguments: Field) -> dict[int, Any]:
        self._sequence += 1
        self._socket.sendall(encode_call(method, self._sequence, arguments))
        return read_reply(self._read_exact, method, self._sequence)

    def close(self) -> None:
        self._file.close()
        self._socket.close()
