"""Change kind of a row: Java ``org.apache.paimon.types.RowKind`` (apache/paimon 5dacde516b).

The byte value is what BinaryRow headers and the ``_VALUE_KIND`` column of primary-key data
files store.
"""

from __future__ import annotations

from enum import IntEnum


class RowKind(IntEnum):
    INSERT = 0  # +I
    UPDATE_BEFORE = 1  # -U
    UPDATE_AFTER = 2  # +U
    DELETE = 3  # -D
