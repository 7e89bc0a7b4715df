"""File-index table options: Java ``FileIndexOptions`` and ``MemorySize`` parsing (apache/paimon
``5dacde516b``), read into the typed settings ``paimond.format.file_index`` writes with.

- ``file-index.<type>.columns = c1,c2`` declares an index of ``<type>`` on each column
  (``c[k]`` indexes key ``k`` of MAP column ``c``);
- ``file-index.<type>.<column>.<option>`` sets one of its options (``items``, ``fpp``,
  ``version``, ``index-block-size``, ``chunk-size``); an option for an undeclared column is
  an error, any other ``file-index.*`` key with other than three dotted parts is ignored;
- ``file-index.in-manifest-threshold`` (default 500 B): indexes up to this size are embedded
  in the manifest, larger ones go to a ``<data-file>.index`` file.

The columns come back in the iteration order of Java's maps, which decides the order in
which ``DataFileIndexWriter`` fills its own maps. ``TableOptions`` hands these out; the
functions here take the raw options so that the reader stays lazy per option.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from paimond.errors import UnsupportedError
from paimond.format.binary.java_order import java_hashmap_order, java_string_hash
from paimond.format.file_index.bitmap import BITMAP, VERSION_2, BitmapSettings
from paimond.format.file_index.bloom import (
    BLOOM_FILTER,
    DEFAULT_FPP,
    DEFAULT_ITEMS,
    BloomFilterSettings,
)
from paimond.format.file_index.columns import ColumnIndexes, IndexColumn, IndexSettings
from paimond.format.file_index.range_bitmap import RANGE_BITMAP, RangeBitmapSettings
from paimond.table.options.files import FILE_INDEX_PREFIX

COLUMNS_SUFFIX = ".columns"
IN_MANIFEST_THRESHOLD = "file-index.in-manifest-threshold"
DEFAULT_IN_MANIFEST_THRESHOLD_BYTES = 500

_UNITS = {"b": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "kibibytes": 1 << 10,
          "m": 1 << 20, "mb": 1 << 20, "mebibytes": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
          "gibibytes": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tebibytes": 1 << 40}
_SIZE = re.compile(r"(\d+)(.*)")


def parse_memory_size(text: str) -> int:
    """Bytes of a Java ``MemorySize`` string (``16kb``, ``64b``, ``1 mb``, ``1024``).

    Raises ValueError for anything ``MemorySize.parse`` rejects."""
    match = _SIZE.fullmatch(text.strip())
    unit = match.group(2).strip().lower() if match else ""
    if not match or (unit and unit not in _UNITS):
        raise ValueError(f"not a memory size: {text!r}")
    value = int(match.group(1)) * _UNITS.get(unit, 1)
    if value >= 1 << 63:
        raise ValueError(f"memory size {text!r} overflows a long")
    return value


def _int(options: Mapping[str, str], key: str, default: int) -> int:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        return _bad(key, raw, "an int")
    return value if -(2**31) <= value < 2**31 else _bad(key, raw, "an int")


def _float(options: Mapping[str, str], key: str, default: float) -> float:
    raw = options.get(key)
    try:
        return default if raw is None else float(raw.strip())
    except ValueError:
        return _bad(key, raw or "", "a number")


def _size(options: Mapping[str, str], key: str, default: str) -> int:
    raw = options.get(key, default)
    try:
        return parse_memory_size(raw)
    except ValueError:
        return _bad(key, raw, "a memory size")


def _bad(key: str, raw: str, what: str) -> int:
    raise UnsupportedError(f"file index option {key}={raw!r} is not {what}")


def index_settings(index_type: str, options: Mapping[str, str],
                   bitmap_version: int = VERSION_2) -> IndexSettings:
    """The typed settings of one index from its ``<option> -> value`` map (Java's defaults
    for what is not set; ``bitmap_version`` is the bitmap ``version`` when the map has none).
    Raises UnsupportedError for a value Java would not parse."""
    if index_type == BLOOM_FILTER:
        return BloomFilterSettings(_int(options, "items", DEFAULT_ITEMS),
                                   _float(options, "fpp", DEFAULT_FPP))
    if index_type == BITMAP:
        return BitmapSettings(_int(options, "version", bitmap_version),
                              _size(options, "index-block-size", "16kb"))
    if index_type == RANGE_BITMAP:
        chunk = options.get("chunk-size")
        return RangeBitmapSettings(None if chunk is None else _size(options, "chunk-size", chunk))
    return None


def file_index_columns(table_options: Mapping[str, str],
                       bitmap_version: int | None = None) -> ColumnIndexes:
    """Column -> index type -> that index's settings, in Java's map orders. A key of a MAP
    column also takes the options set on the whole column (its own win). A bitmap index
    without a ``version`` option is written in ``bitmap_version`` (the version the table's
    files already use, table/indexes/file_index_versions.py), else in Java's default, version 2.

    Raises UnsupportedError where ``FileIndexOptions`` throws (an empty column name, an
    option for a column its index type does not declare)."""
    keys = java_hashmap_order(table_options, java_string_hash)  # Options is a HashMap
    declared: list[tuple[IndexColumn, str]] = []
    for key in keys:
        if key.startswith(FILE_INDEX_PREFIX) and key.endswith(COLUMNS_SUFFIX):
            index_type = key[len(FILE_INDEX_PREFIX):len(key) - len(COLUMNS_SUFFIX)]
            for name in table_options[key].split(","):
                if not name.strip():
                    raise UnsupportedError(f"Wrong option in {key}, should not have empty column")
                declared.append((IndexColumn.parse(name.strip()), index_type))
    order = java_hashmap_order((c for c, _ in declared), IndexColumn.java_hash,
                               compute_if_absent=True)
    columns: dict[IndexColumn, dict[str, dict[str, str]]] = {c: {} for c in order}
    for column in order:
        types = [t for c, t in declared if c == column]
        for index_type in java_hashmap_order(types, java_string_hash, compute_if_absent=True):
            columns[column][index_type] = {}
    _fill_options(table_options, keys, columns)
    typed: ColumnIndexes = {}
    for column, index_types in columns.items():
        typed[column] = {}
        for index_type, options in index_types.items():
            if column.nested_key is not None:
                options = {**_map_column_options(table_options, column.name, index_type),
                           **options}
            typed[column][index_type] = index_settings(index_type, options,
                                                       bitmap_version or VERSION_2)
    return typed


def _fill_options(table_options: Mapping[str, str], keys: list[str],
                  columns: dict[IndexColumn, dict[str, dict[str, str]]]) -> None:
    map_columns = {(c.name, t) for c, types in columns.items() if c.nested_key is not None
                   for t in types}
    for key in keys:
        if not key.startswith(FILE_INDEX_PREFIX) or key.endswith(COLUMNS_SUFFIX):
            continue
        parts = key[len(FILE_INDEX_PREFIX):].split(".")
        if len(parts) != 3:
            continue  # Java ignores options it does not expect
        index_type, name, option = parts
        target = columns.get(IndexColumn.parse(name), {}).get(index_type)
        if target is None and (name, index_type) in map_columns:
            continue  # options of a whole MAP column apply to every indexed key of it
        if target is None:
            raise UnsupportedError(
                f"Wrong file index option '{key}': column '{name}' is not declared in "
                f"'{FILE_INDEX_PREFIX}{index_type}{COLUMNS_SUFFIX}'")
        target[option] = table_options[key]


def _map_column_options(table_options: Mapping[str, str], column: str,
                        index_type: str) -> dict[str, str]:
    """Options set on a whole MAP column (``file-index.<type>.<column>.<option>``)."""
    prefix = f"{FILE_INDEX_PREFIX}{index_type}.{column}."
    return {k[len(prefix):]: v for k, v in table_options.items()
            if k.startswith(prefix) and "." not in k[len(prefix):]}


def in_manifest_threshold_bytes(table_options: Mapping[str, str]) -> int:
    """Indexes of at most this many bytes are embedded in the manifest entry."""
    raw = table_options.get(IN_MANIFEST_THRESHOLD)
    return DEFAULT_IN_MANIFEST_THRESHOLD_BYTES if raw is None else _size(
        table_options, IN_MANIFEST_THRESHOLD, raw)
