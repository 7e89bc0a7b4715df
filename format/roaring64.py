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
and ``runOptimize`` produce follow Java, so the bytes equal Java's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from paimond.errors import CodecError

_N4, _N16, _N48, _N256, _LEAF = range(5)
_RUN, _BITMAP, _ARRAY = 0, 1, 2
_EMPTY_SLOT = 0xFF
_ARRAY_MAX = 4096
_FULL = 1 << 16
_BITMAP_BYTES = 8192


@dataclass(eq=False, slots=True)
class _Node:
    kind: int
    count: int = 0
    prefix: bytes = b""
    keys: bytearray | None = None  # Node4 / Node16 key bytes (sorted, unused ones kept); Node48 index
    children: list[_Node | None] | None = None
    high: bytes = b""  # a leaf's 6 key bytes
    index: int = 0  # a leaf's container index


@dataclass(slots=True)
class _Container:
    kind: int
    values: np.ndarray  # sorted uint16
    raw: bytes | None = None  # the payload as read, kept while the container is unchanged

    @property
    def card(self) -> int:
        return len(self.values)


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


def _read_node(reader: _Reader) -> _Node:
    kind, count, prefix_length = reader.unpack(_HEADER)
    if not 0 <= kind <= _LEAF or not 0 <= prefix_length <= 6:
        raise CodecError(f"Roaring64Bitmap: node type {kind} / prefix {prefix_length}")
    node = _Node(kind, count, reader.take(prefix_length) if prefix_length > 0 else b"")
    if kind == _LEAF:
        node.high, (node.index,) = reader.take(6), reader.unpack(_LONG)
        return node
    if kind == _N4:
        node.keys = bytearray(reader.take(4)[::-1])
        node.children = [None] * 4
    elif kind == _N16:
        body = reader.take(16)
        node.keys = bytearray(body[7::-1] + body[15:7:-1])
        node.children = [None] * 16
    elif kind == _N48:
        body = reader.take(256)
        node.keys = bytearray(b"".join(body[i:i + 8][::-1] for i in range(0, 256, 8)))
        node.children = [None] * 48
    else:
        mask = int.from_bytes(reader.take(32), "little")
        node.children = [None] * 256
    if not 0 < count <= len(node.children):
        raise CodecError(f"Roaring64Bitmap: {count} children in a node of type {kind}")
    read = [_read_node(reader) for _ in range(count)]
    if kind in (_N4, _N16):
        node.children[:count] = read
    elif kind == _N48:
        index = node.keys
        assert index is not None
        slots = [k for k in range(256) if index[k] != _EMPTY_SLOT]
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


def _read_container(reader: _Reader) -> _Container:
    kind, card = reader.unpack(_PAIR)
    if kind == _RUN:
        (runs,) = reader.unpack(_SHORT)
        body = reader.take(4 * runs)
        pairs = np.frombuffer(body, "<u2").reshape(-1, 2).astype(np.int64)
        values = (np.concatenate([np.arange(s, s + n + 1) for s, n in pairs])
                  if runs else np.empty(0, np.int64))
        raw = struct.pack("<H", runs) + body
    elif kind == _BITMAP:
        raw = reader.take(_BITMAP_BYTES)
        values = np.flatnonzero(np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little"))
    elif kind == _ARRAY:
        raw = reader.take(2 * card)
        values = np.frombuffer(raw, "<u2")
    else:
        raise CodecError(f"Roaring64Bitmap: container type {kind}")
    if not len(values):
        raise CodecError("Roaring64Bitmap: an empty container (Java drops them on reading)")
    return _Container(kind, values.astype(np.uint16), raw)


class Roaring64:
    """A deserialized ``Roaring64Bitmap`` with Java's structure: the tree, the container
    arrays as laid out, and their bookkeeping."""

    def __init__(self) -> None:
        self.root: _Node | None = None
        self.key_count = 0
        self.arrays: list[list[_Container | None]] = []
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
            array: list[_Container | None] = []
            for _ in range(slots):
                (mark,) = reader.unpack(_BYTE)
                array.append(_read_container(reader) if mark else None)
            out.arrays.append(array)
        out.size, out.first, out.second = reader.unpack(_TAIL)
        if reader.at != len(data):
            raise CodecError(f"Roaring64Bitmap: {len(data) - reader.at} bytes after the bitmap")
        out.by_key = {leaf.high: leaf.index for leaf in _leaves(out.root)}
        return out

    def container(self, index: int) -> _Container:
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
        for leaf in _leaves(other.root):
            theirs = other.container(leaf.index)
            mine = self.by_key.get(leaf.high)
            if mine is None:
                self._put(leaf.high, _Container(theirs.kind, theirs.values, theirs.raw))
            else:
                ours = self.container(mine)
                self.arrays[mine >> 32][mine & 0xFFFFFFFF] = _or(ours, theirs)

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
                      _Container(_ARRAY if len(lows) <= _ARRAY_MAX else _BITMAP, lows))

    def _put(self, high: bytes, box: _Container) -> None:
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
        self.root = _insert(self.root, high, 0, index)
        self.key_count += 1

    def encode(self) -> bytes:
        """``runOptimize()`` then ``serialize()``; afterwards this bitmap is what decoding
        the bytes gives."""
        if self.root is None:
            return b"\x00"
        out = bytearray(b"\x01")
        out += struct.pack("<q", self.key_count)
        _write_node(self.root, out)
        out += struct.pack("<i", len(self.arrays))
        for array in self.arrays:
            out += struct.pack("<bi", -2, len(array))
            for slot, box in enumerate(array):
                if box is None:
                    out += b"\x00"
                    continue
                box = array[slot] = _run_optimized(box)  # in place, as Java's runOptimize
                out += struct.pack("<bbi", 1, box.kind, box.card) + _payload(box)
        out += struct.pack("<qii", self.size, self.first, self.second)
        return bytes(out)


def _leaves(node: _Node | None) -> Iterator[_Node]:
    if node is None:
        return
    if node.kind == _LEAF:
        yield node
        return
    for child in _ordered_children(node):
        yield from _leaves(child)


def _ordered_children(node: _Node) -> list[_Node]:
    assert node.children is not None
    if node.kind in (_N4, _N16):
        return [c for c in node.children[:node.count] if c is not None]
    if node.kind == _N48:
        assert node.keys is not None
        return [c for k in range(256) if node.keys[k] != _EMPTY_SLOT
                and (c := node.children[node.keys[k]]) is not None]
    return [c for c in node.children if c is not None]


# ---- the tree (Java Art.insert and the node types' insert / grow) --------------------------


def _insert(node: _Node | None, key: bytes, depth: int, index: int) -> _Node:
    if node is None:
        return _Node(_LEAF, high=key, index=index)
    if node.kind == _LEAF:
        common = 0
        while depth + common < 6 and node.high[depth + common] == key[depth + common]:
            common += 1
        if depth + common == 6:
            raise CodecError("Roaring64Bitmap: a key inserted twice")
        node.prefix = b""  # Java resets a leaf's prefix here
        fresh = _Node(_N4, prefix=key[depth:depth + common], keys=bytearray(4),
                      children=[None] * 4)
        fresh = _add_child(fresh, node, node.high[depth + common])
        return _add_child(fresh, _Node(_LEAF, high=key, index=index), key[depth + common])
    if node.prefix:
        mismatch = 0
        while mismatch < len(node.prefix) and node.prefix[mismatch] == key[depth + mismatch]:
            mismatch += 1
        if mismatch != len(node.prefix):
            fresh = _Node(_N4, prefix=node.prefix[:mismatch], keys=bytearray(4),
                          children=[None] * 4)
            fresh = _add_child(fresh, node, node.prefix[mismatch])
            node.prefix = node.prefix[mismatch + 1:]
            return _add_child(fresh, _Node(_LEAF, high=key, index=index), key[depth + mismatch])
        depth += len(node.prefix)
    position = _child_position(node, key[depth])
    if position is not None:
        assert node.children is not None
        child = node.children[position]
        fresh_child = _insert(child, key, depth + 1, index)
        node.children[position] = fresh_child
        return node
    return _add_child(node, _Node(_LEAF, high=key, index=index), key[depth])


def _child_position(node: _Node, byte: int) -> int | None:
    """The slot of ``children`` holding the child for ``byte``."""
    assert node.keys is not None or node.kind == _N256
    if node.kind in (_N4, _N16):
        assert node.keys is not None
        return next((i for i in range(node.count) if node.keys[i] == byte), None)
    if node.kind == _N48:
        assert node.keys is not None
        slot = node.keys[byte]
        return None if slot == _EMPTY_SLOT else slot
    assert node.children is not None
    return byte if node.children[byte] is not None else None


def _add_child(node: _Node, child: _Node, byte: int) -> _Node:
    assert node.children is not None
    if node.kind in (_N4, _N16):
        assert node.keys is not None
        capacity = 4 if node.kind == _N4 else 16
        if node.count < capacity:
            node.keys[node.count], node.children[node.count] = byte, child
            _sort_last(node.keys, node.children, node.count)
            node.count += 1
            return node
        if node.kind == _N4:
            grown = _Node(_N16, node.count, node.prefix, node.keys + bytearray(12),
                          node.children + [None] * 12)
            return _add_child(grown, child, byte)
        index = bytearray([_EMPTY_SLOT]) * 256
        for i in range(node.count):
            index[node.keys[i]] = i
        grown = _Node(_N48, node.count, node.prefix, index, node.children + [None] * 32)
        return _add_child(grown, child, byte)
    if node.kind == _N48:
        assert node.keys is not None
        if node.count < 48:
            slot = node.count
            if node.children[slot] is not None:
                slot = node.children.index(None)
            node.children[slot] = child
            node.keys[byte] = slot
            node.count += 1
            return node
        children: list[_Node | None] = [None] * 256
        for k in range(256):
            if node.keys[k] != _EMPTY_SLOT:
                children[k] = node.children[node.keys[k]]
        grown = _Node(_N256, node.count, node.prefix, None, children)
        return _add_child(grown, child, byte)
    node.children[byte] = child
    node.count += 1
    return node


def _sort_last(keys: bytearray, children: list[_Node | None], last: int) -> None:
    """Java's insertion sort of the first ``last + 1`` keys (unsigned), children alongside."""
    for i in range(last):
        byte, child, j = keys[i + 1], children[i + 1], i
        while j >= 0 and byte < keys[j]:
            keys[j + 1], children[j + 1] = keys[j], children[j]
            j -= 1
        keys[j + 1], children[j + 1] = byte, child


def _write_node(node: _Node, out: bytearray) -> None:
    out += struct.pack("<bhb", node.kind, node.count, len(node.prefix)) + node.prefix
    if node.kind == _LEAF:
        out += node.high + struct.pack("<q", node.index)
        return
    assert node.children is not None
    if node.kind == _N4:
        assert node.keys is not None
        out += bytes(node.keys[3::-1])
    elif node.kind == _N16:
        assert node.keys is not None
        out += bytes(node.keys[7::-1]) + bytes(node.keys[15:7:-1])
    elif node.kind == _N48:
        assert node.keys is not None
        out += b"".join(bytes(node.keys[i:i + 8][::-1]) for i in range(0, 256, 8))
    else:
        out += sum(1 << k for k in range(256) if node.children[k] is not None).to_bytes(
            32, "little")
    for child in _ordered_children(node):
        _write_node(child, out)


# ---- containers (Java Container.ior and runOptimize) ---------------------------------------


def _runs(values: np.ndarray) -> int:
    if len(values) < 32:  # numpy's overhead dwarfs small containers
        listed = values.tolist()
        return sum(1 for i, v in enumerate(listed) if i == 0 or v != listed[i - 1] + 1)
    return 1 + int(np.count_nonzero(np.diff(values.astype(np.int32)) != 1))


def _efficient(values: np.ndarray) -> int:
    """RunContainer.toEfficientContainer's choice."""
    card = len(values)
    if 2 + 4 * _runs(values) <= min(_BITMAP_BYTES, 2 * card + 2):
        return _RUN
    return _ARRAY if card <= _ARRAY_MAX else _BITMAP


def _or(ours: _Container, theirs: _Container) -> _Container:
    """``ours.ior(theirs)``'s result, with the container type Java's gives."""
    if ours.kind == _RUN and ours.card == _FULL:
        return ours
    values = np.union1d(ours.values, theirs.values).astype(np.uint16)
    card = len(values)
    pair = (ours.kind, theirs.kind)
    if pair == (_ARRAY, _ARRAY):
        kind = _ARRAY if card <= _ARRAY_MAX else (_RUN if card == _FULL else _BITMAP)
    elif pair == (_BITMAP, _ARRAY):
        kind = _BITMAP
    elif _BITMAP in pair:  # a bitmap, or the full run
        kind = _RUN if card == _FULL else _BITMAP
    else:  # run with array or run: RunContainer's merge, then toEfficientContainer
        kind = _efficient(values)
    return _Container(kind, values)


def _run_optimized(box: _Container) -> _Container:
    """Roaring64Bitmap.runOptimize: a container becomes a run container when Java's
    runOptimize of its type says so; run containers stay."""
    if box.kind == _RUN:
        return box
    size = 2 * box.card if box.kind == _ARRAY else _BITMAP_BYTES
    if size > 2 + 4 * _runs(box.values):
        return _Container(_RUN, box.values)
    return box


def _payload(box: _Container) -> bytes:
    if box.raw is not None:
        return box.raw
    if box.kind == _ARRAY:
        return box.values.astype("<u2").tobytes()
    if box.kind == _BITMAP:
        bits = np.zeros(_FULL, np.uint8)
        bits[box.values] = 1
        return np.packbits(bits, bitorder="little").tobytes()
    values = box.values.astype(np.int32)
    starts = np.flatnonzero(np.diff(values, prepend=-2) != 1)
    ends = np.append(starts[1:], len(values)) - 1
    pairs = np.stack([values[starts], values[ends] - values[starts]], axis=1)
    return struct.pack("<H", len(pairs)) + pairs.astype("<u2").tobytes()


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
