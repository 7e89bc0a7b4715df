"""The tree of a Java ``Roaring64Bitmap``'s 48-bit high parts (RoaringBitmap 1.2's ``Art``,
the adaptive radix tree ``HighLowContainer`` keeps): node types, the depth-first order of the
leaves, insertion with Java's node growth, and a node's serialized form (format/roaring/bitmap64.py
reads it). Written from the layout, not Java's code.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from paimond.errors import CodecError

N4, N16, N48, N256, LEAF = range(5)
EMPTY_SLOT = 0xFF


@dataclass(eq=False, slots=True)
class Node:
    kind: int
    count: int = 0
    prefix: bytes = b""
    keys: bytearray | None = None  # Node4 / Node16 key bytes (sorted, unused ones kept); Node48 index
    children: list[Node | None] | None = None
    high: bytes = b""  # a leaf's 6 key bytes
    index: int = 0  # a leaf's container index


def leaves(node: Node | None) -> Iterator[Node]:
    if node is None:
        return
    if node.kind == LEAF:
        yield node
        return
    for child in _ordered_children(node):
        yield from leaves(child)


def _ordered_children(node: Node) -> list[Node]:
    assert node.children is not None
    if node.kind in (N4, N16):
        return [c for c in node.children[:node.count] if c is not None]
    if node.kind == N48:
        assert node.keys is not None
        return [c for k in range(256) if node.keys[k] != EMPTY_SLOT
                and (c := node.children[node.keys[k]]) is not None]
    return [c for c in node.children if c is not None]


# ---- the tree (Java Art.insert and the node types' insert / grow) --------------------------


def insert(node: Node | None, key: bytes, depth: int, index: int) -> Node:
    if node is None:
        return Node(LEAF, high=key, index=index)
    if node.kind == LEAF:
        common = 0
        while depth + common < 6 and node.high[depth + common] == key[depth + common]:
            common += 1
        if depth + common == 6:
            raise CodecError("Roaring64Bitmap: a key inserted twice")
        node.prefix = b""  # Java resets a leaf's prefix here
        fresh = Node(N4, prefix=key[depth:depth + common], keys=bytearray(4),
                      children=[None] * 4)
        fresh = _add_child(fresh, node, node.high[depth + common])
        return _add_child(fresh, Node(LEAF, high=key, index=index), key[depth + common])
    if node.prefix:
        mismatch = 0
        while mismatch < len(node.prefix) and node.prefix[mismatch] == key[depth + mismatch]:
            mismatch += 1
        if mismatch != len(node.prefix):
            fresh = Node(N4, prefix=node.prefix[:mismatch], keys=bytearray(4),
                          children=[None] * 4)
            fresh = _add_child(fresh, node, node.prefix[mismatch])
            node.prefix = node.prefix[mismatch + 1:]
            return _add_child(fresh, Node(LEAF, high=key, index=index), key[depth + mismatch])
        depth += len(node.prefix)
    position = _child_position(node, key[depth])
    if position is not None:
        assert node.children is not None
        child = node.children[position]
        fresh_child = insert(child, key, depth + 1, index)
        node.children[position] = fresh_child
        return node
    return _add_child(node, Node(LEAF, high=key, index=index), key[depth])


def _child_position(node: Node, byte: int) -> int | None:
    """The slot of ``children`` holding the child for ``byte``."""
    assert node.keys is not None or node.kind == N256
    if node.kind in (N4, N16):
        assert node.keys is not None
        return next((i for i in range(node.count) if node.keys[i] == byte), None)
    if node.kind == N48:
        assert node.keys is not None
        slot = node.keys[byte]
        return None if slot == EMPTY_SLOT else slot
    assert node.children is not None
    return byte if node.children[byte] is not None else None


def _add_child(node: Node, child: Node, byte: int) -> Node:
    assert node.children is not None
    if node.kind in (N4, N16):
        assert node.keys is not None
        capacity = 4 if node.kind == N4 else 16
        if node.count < capacity:
            node.keys[node.count], node.children[node.count] = byte, child
            _sort_last(node.keys, node.children, node.count)
            node.count += 1
            return node
        if node.kind == N4:
            grown = Node(N16, node.count, node.prefix, node.keys + bytearray(12),
                          node.children + [None] * 12)
            return _add_child(grown, child, byte)
        index = bytearray([EMPTY_SLOT]) * 256
        for i in range(node.count):
            index[node.keys[i]] = i
        grown = Node(N48, node.count, node.prefix, index, node.children + [None] * 32)
        return _add_child(grown, child, byte)
    if node.kind == N48:
        assert node.keys is not None
        if node.count < 48:
            slot = node.count
            if node.children[slot] is not None:
                slot = node.children.index(None)
            node.children[slot] = child
            node.keys[byte] = slot
            node.count += 1
            return node
        children: list[Node | None] = [None] * 256
        for k in range(256):
            if node.keys[k] != EMPTY_SLOT:
                children[k] = node.children[node.keys[k]]
        grown = Node(N256, node.count, node.prefix, None, children)
        return _add_child(grown, child, byte)
    node.children[byte] = child
    node.count += 1
    return node


def _sort_last(keys: bytearray, children: list[Node | None], last: int) -> None:
    """Java's insertion sort of the first ``last + 1`` keys (unsigned), children alongside."""
    for i in range(last):
        byte, child, j = keys[i + 1], children[i + 1], i
        while j >= 0 and byte < keys[j]:
            keys[j + 1], children[j + 1] = keys[j], children[j]
            j -= 1
        keys[j + 1], children[j + 1] = byte, child


def write_node(node: Node, out: bytearray) -> None:
    out += struct.pack("<bhb", node.kind, node.count, len(node.prefix)) + node.prefix
    if node.kind == LEAF:
        out += node.high + struct.pack("<q", node.index)
        return
    assert node.children is not None
    if node.kind == N4:
        assert node.keys is not None
        out += bytes(node.keys[3::-1])
    elif node.kind == N16:
        assert node.keys is not None
        out += bytes(node.keys[7::-1]) + bytes(node.keys[15:7:-1])
    elif node.kind == N48:
        assert node.keys is not None
        out += b"".join(bytes(node.keys[i:i + 8][::-1]) for i in range(0, 256, 8))
    else:
        out += sum(1 << k for k in range(256) if node.children[k] is not None).to_bytes(
            32, "little")
    for child in _ordered_children(node):
        write_node(child, out)
