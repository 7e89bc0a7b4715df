"""Indexed columns of a data file: Java ``FileIndexOptions.Column`` (apache/paimon
``5dacde516b``), and the typed settings each index type takes. ``paimond.table`` reads them
from a table's ``file-index.*`` options; the writers here only take the typed values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from paimond.format.binary.java_order import int32, java_string_hash
from paimond.format.file_index.bitmap import BitmapSettings
from paimond.format.file_index.bloom import BloomFilterSettings
from paimond.format.file_index.range_bitmap import RangeBitmapSettings

# None: an index type without settings (``bsi``), or one the writers do not know.
IndexSettings: TypeAlias = BloomFilterSettings | BitmapSettings | RangeBitmapSettings | None


@dataclass(frozen=True, slots=True)
class IndexColumn:
    """``FileIndexOptions.Column``: a top-level column, or one key of a MAP column."""

    name: str
    nested_key: str | None = None

    @classmethod
    def parse(cls, text: str) -> IndexColumn:
        start = text.find("[")
        if start != -1 and text.endswith("]"):
            return cls(text[:start], text[start + 1:-1])
        return cls(text)

    def java_hash(self) -> int:
        """``Arrays.hashCode(new Object[] {name, nestedName, isNested})``."""
        h = 31 + java_string_hash(self.name)
        h = 31 * h + (0 if self.nested_key is None else java_string_hash(self.nested_key))
        return int32(31 * h + (1231 if self.nested_key is not None else 1237))

    @property
    def index_name(self) -> str:
        """The column name in the index container (``FileIndexCommon.toMapKey``)."""
        return self.name if self.nested_key is None else f"{self.name}[{self.nested_key}]"


# Column -> index type -> its settings, in the iteration order of Java's maps (which decides
# the order in which ``DataFileIndexWriter`` fills its own maps).
ColumnIndexes: TypeAlias = dict[IndexColumn, dict[str, IndexSettings]]
