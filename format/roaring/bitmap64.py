"""Java RoaringBitmap's ``Roaring64Bitmap`` serialized form, as Paimon's ``RoaringBitmap64``
writes it (RoaringBitmap 1.2's ``HighLowContainer.serialize``; not the portable 64-bit format
of the RoaringFormatSpec, which pyroaring's ``BitMap64`` uses), and the union Paimon's
``FieldRoaringBitmap64Agg`` computes: deserialize both, ``or`` the second into the first,
``runOptimize``, serialize. Written from the layout, not Java's code.

The layout: a tag byte (0: empty, nothing follows); the ART of the 48-bit high parts (key
count, then the nodes depth first: a header of type, child count, prefix; a body of keys or
child index; leaves hold the 6 key bytes and their container index); then the container
arrays (each with its spare capacity and NULL slots) and the next free index. Node layouts,
the insertion into the tree, where a new container goes, and each container type a union
and ``runOptimize`` produce follow Java, so the bytes equal Java's. The tree is in
``roaring64_art``, the containers in ``roaring64_containers``; reading and the bitmap here.
"""

from __future__ import annotations

import struct

import numpy as np

from paimond.errors import CodecError
from paimond.format.roaring.art64 import EMPTY_SLOT, LEAF, N4, N16, N48, Node, insert, leaves, write_node
from paimond.format.roaring.containers64 import (
    ARRAY,
    ARRAY_MAX,
    BITMAP,
    BITMAP_BYTES,
    RUN,
    Container,
    payload,
    run_optimized,
    union_of,
)

# ---- reading --------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at, self.end = data, 0, len(data)

    def take(self, size: int) -> bytes:
        if self.at + size > self.end:
            raise CodecError(f"Roaring64Bitmap: the bytes end early at byte {self.at}")
        out = self.data[self.at:self.at + size]
        self.at += size
        return out

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        if self.at + layout.size > self.end:
            raise CodecError(f"Roaring64Bitmap: the bytes end early at byte {self.at}")
        out = layout.unpack_from(self.data, self.at)
        self.at += layout.size
        return out


_HEADER, _LONG, _BYTE, _SHORT, _INT = (struct.Struct(f) for f in ("<bhb", "<q", "<b", "<H", "<i"))
_PAIR, _TAIL = struct.Struct("<bi"), struct.Struct("<qii")


def _read_node(reader: _Reader) -> Node:
    kind, count, prefix_length = reader.unpack(_HEADER)
    if not 0 <= kind <= LEAF or not 0 <= prefix_length <= 6:
        raise CodecError(f"Roaring64Bitmap: node type {kind} / prefix {prefix_length}")
    node = Node(kind, count, reader.take(prefix_length) if prefix_length > 0 else b"")
    if kind == LEAF:
        node.high, (node.index,) = reader.take(6), reader.unpack(_LONG)
        return node
    if kind == N4:
        node.keys = bytearray(reader.take(4)[::-1])
        node.children = [None] * 4
    elif kind == N16:
        body = reader.take(16)
        node.keys = bytearray(body[7::-1] + body[15:7:-1])
        node.children = [None] * 16
    elif kind == N48:
        body = reader.take(256)
        node.keys = bytearray(b"".join(body[i:i + 8][::-1] for i in range(0, 256, 8)))
        node.children = [None] * 48
    else:
        mask = int.from_bytes(reader.take(32), "little")
        node.children = [None] * 256
    if not 0 < count <= len(node.children):
        raise CodecError(f"Roaring64Bitmap: {count} children in a node of type {kind}")
    read = [_read_node(reader) for _ in range(count)]
    if kind in (N4, N16):
        node.children[:count] = read
    elif kind == N48:
        index = node.keys
        assert index is not None
        slots = [k for k in range(256) if index[k] != EMPTY_SLOT]
        if len(slots) != count or any(index[k] >= 48 for k in slots):
            raise CodecError("Roaring64Bitmap: a Node48's index and child count differ")
        for key, child in zip(slots, read, strict=True):
            node.children[index[key]] = child
    else:
        present = [k for k in range(256) if mask >> k & 1]
        if len(present) != count:
            raise CodecError("Roaring64Bitmap: a Node256's mask and child count differ")
        for key, child in zip(present, read, strict=True):
            node.children[key] = child
    return node


def _read_container(reader: _Reader) -> Container:
    kind, card = reader.unpack(_PAIR)
    if kind == RUN:
        (runs,) = reader.unpack(_SHORT)
        body = reader.take(4 * runs)
        pairs = np.frombuffer(body, "<u2").reshape(-1, 2).astype(np.int64)
        values = (np.concatenate([np.arange(s, s + n + 1) for s, n in pairs])
                  if runs else np.empty(0, np.int64))
        raw = struct.pack("<H", runs) + body
    elif kind == BITMAP:
        raw = reader.take(BITMAP_BYTES)
        values = np.flatnonzero(np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little"))
    elif kind == ARRAY:
        raw = reader.take(2 * card)
        values = np.frombuffer(raw, "<u2")
    else:
        raise CodecError(f"Roaring64Bitmap: container type {kind}")
    if not len(values):
        raise CodecError("Roaring64Bitmap: an empty container (Java drops them on reading)")
    return Container(kind, values.astype(np.uint16), raw)


class Roaring64:
    """A deserialized ``Roaring64Bitmap`` with Java's structure: the tree, the container
    arrays as laid out, and their bookkeeping."""

    def __init__(self) -> None:
        self.root: Node | None = None
        self.key_count = 0
        self.arrays: list[list[Container | None]] = []
        self.size, self.first, self.second = 0, -1, 0
        self.by_key: dict[bytes, int] = {}

    @classmethod
    def decode(cls, data: bytes) -> Roaring64:
        out = cls()
        reader = _Reader(data)
        (tag,) = reader.unpack(_BYTE)
        if tag == 0:
            return out
        (out.key_count,) = reader.unpack(_LONG)
        out.root = _read_node(reader)
        (levels,) = reader.unpack(_INT)
        for _ in range(levels):
            _, slots = reader.unpack(_PAIR)
            array: list[Container | None] = []
            for _ in range(slots):
                (mark,) = reader.unpack(_BYTE)
                array.append(_read_container(reader) if mark else None)
            out.arrays.append(array)
        out.size, out.first, out.second = reader.unpack(_TAIL)
        if reader.at != len(data):
            raise CodecError(f"Roaring64Bitmap: {len(data) - reader.at} bytes after the bitmap")
        out.by_key = {leaf.high: leaf.index for leaf in leaves(out.root)}
        return out

    def container(self, index: int) -> Container:
        found = self.arrays[index >> 32][index & 0xFFFFFFFF]
        if found is None:
            raise CodecError(f"Roaring64Bitmap: a leaf names container {index}, which is NULL")
        return found

    def values(self) -> np.ndarray:
        """Every value, ascending (as uint64)."""
        parts = [(int.from_bytes(high, "big") << 16) + self.container(index).values.astype(
            np.uint64) for high, index in sorted(self.by_key.items())]
        return np.concatenate(parts).astype(np.uint64) if parts else np.empty(0, np.uint64)

    # ---- Java's or(), runOptimize() and serialize() ----------------------------------------

    def union(self, other: Roaring64) -> None:
        """``this.or(other)``: other's keys in tree order; a known key's container becomes
        the union of the pair (in Java's container type), a new one gets a copy."""
        for leaf in leaves(other.root):
            theirs = other.container(leaf.index)
            mine = self.by_key.get(leaf.high)
            if mine is None:
                self._put(leaf.high, Container(theirs.kind, theirs.values, theirs.raw))
            else:
                ours = self.container(mine)
                self.arrays[mine >> 32][mine & 0xFFFFFFFF] = union_of(ours, theirs)

    def add_all(self, values: np.ndarray) -> None:
        """Java ``add`` of each value in turn into an empty bitmap: containers and tree
        keys in the order their high parts first come; an array container turns into a
        bitmap past 4096 values."""
        assert self.root is None
        highs = values >> np.uint64(16)
        unique, first = np.unique(highs, return_index=True)
        for at in np.argsort(first, kind="stable").tolist():
            lows = np.unique((values[highs == unique[at]] & np.uint64(0xFFFF)).astype(np.uint16))
            self._put(int(unique[at]).to_bytes(6, "big"),
                      Container(ARRAY if len(lows) <= ARRAY_MAX else BITMAP, lows))

    def _put(self, high: bytes, box: Container) -> None:
        if self.first == -1:
            self.arrays.append([None])
            self.first, self.second = 0, 0
        else:
            self.second += 1
        array = self.arrays[self.first]
        if self.second + 1 > len(array):  # Java's ArrayList-style growth, 1.5x
            grown = len(array) + (len(array) >> 1)
            array.extend([None] * (max(grown, self.second + 1) - len(array)))
        array[self.second] = box
        self.size += 1
        index = (self.first << 32) | self.second
        self.by_key[high] = index
        self.root = insert(self.root, high, 0, index)
        self.key_count += 1

    def encode(self) -> bytes:
        """``runOptimize()`` then ``serialize()``; afterwards this bitmap is what decoding
        the bytes gives."""
        if self.root is None:
            return b"\x00"
        out = bytearray(b"\x01")
        out += struct.pack("<q", self.key_count)
        write_node(self.root, out)
        out += struct.pack("<i", len(self.arrays))
        for array in self.arrays:
            out += struct.pack("<bi", -2, len(array))
            for slot, box in enumerate(array):
                if box is None:
                    out += b"\x00"
                    continue
                box = array[slot] = run_optimized(box)  # in place, as Java's runOptimize
                out += struct.pack("<bbi", 1, box.kind, box.card) + payload(box)
        out += struct.pack("<qii", self.size, self.first, self.second)
        return bytes(out)


def union_bytes(left: bytes, right: bytes) -> bytes:
    """Paimon ``FieldRoaringBitmap64Agg.agg`` of two serialized bitmaps."""
    out = Roaring64.decode(left)
    out.union(Roaring64.decode(right))
    return out.encode()


def encode_values(values: np.ndarray) -> bytes:
    """The bytes of a Java ``Roaring64Bitmap`` after ``add`` of each value in order,
    ``runOptimize`` and ``serialize`` (Paimon's ``RoaringBitmap64.bitmapOf``)."""
    bitmap = Roaring64()
    bitmap.add_all(np.asarray(values, np.uint64))
    return bitmap.encode()
