"""A Java ``Roaring64Bitmap``'s containers of 16-bit low parts (RoaringBitmap's run, bitmap
and array containers): the container type Java's ``ior`` and ``runOptimize`` give, and each
type's serialized payload (format/roaring/bitmap64.py reads them). Written from the layout, not Java's
code.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

RUN, BITMAP, ARRAY = 0, 1, 2
ARRAY_MAX = 4096
FULL = 1 << 16
BITMAP_BYTES = 8192


@dataclass(slots=True)
class Container:
    kind: int
    values: np.ndarray  # sorted uint16
    raw: bytes | None = None  # the payload as read, kept while the container is unchanged

    @property
    def card(self) -> int:
        return len(self.values)


# ---- containers (Java Container.ior and runOptimize) ---------------------------------------


def _runs(values: np.ndarray) -> int:
    if len(values) < 32:  # numpy's overhead dwarfs small containers
        listed = values.tolist()
        return sum(1 for i, v in enumerate(listed) if i == 0 or v != listed[i - 1] + 1)
    return 1 + int(np.count_nonzero(np.diff(values.astype(np.int32)) != 1))


def _efficient(values: np.ndarray) -> int:
    """RunContainer.toEfficientContainer's choice."""
    card = len(values)
    if 2 + 4 * _runs(values) <= min(BITMAP_BYTES, 2 * card + 2):
        return RUN
    return ARRAY if card <= ARRAY_MAX else BITMAP


def union_of(ours: Container, theirs: Container) -> Container:
    """``ours.ior(theirs)``'s result, with the container type Java's gives."""
    if ours.kind == RUN and ours.card == FULL:
        return ours
    values = np.union1d(ours.values, theirs.values).astype(np.uint16)
    card = len(values)
    pair = (ours.kind, theirs.kind)
    if pair == (ARRAY, ARRAY):
        kind = ARRAY if card <= ARRAY_MAX else (RUN if card == FULL else BITMAP)
    elif pair == (BITMAP, ARRAY):
        kind = BITMAP
    elif BITMAP in pair:  # a bitmap, or the full run
        kind = RUN if card == FULL else BITMAP
    else:  # run with array or run: RunContainer's merge, then toEfficientContainer
        kind = _efficient(values)
    return Container(kind, values)


def run_optimized(box: Container) -> Container:
    """Roaring64Bitmap.runOptimize: a container becomes a run container when Java's
    runOptimize of its type says so; run containers stay."""
    if box.kind == RUN:
        return box
    size = 2 * box.card if box.kind == ARRAY else BITMAP_BYTES
    if size > 2 + 4 * _runs(box.values):
        return Container(RUN, box.values)
    return box


def payload(box: Container) -> bytes:
    if box.raw is not None:
        return box.raw
    if box.kind == ARRAY:
        return box.values.astype("<u2").tobytes()
    if box.kind == BITMAP:
        bits = np.zeros(FULL, np.uint8)
        bits[box.values] = 1
        return np.packbits(bits, bitorder="little").tobytes()
    values = box.values.astype(np.int32)
    starts = np.flatnonzero(np.diff(values, prepend=-2) != 1)
    ends = np.append(starts[1:], len(values)) - 1
    pairs = np.stack([values[starts], values[ends] - values[starts]], axis=1)
    return struct.pack("<H", len(pairs)) + pairs.astype("<u2").tobytes()
