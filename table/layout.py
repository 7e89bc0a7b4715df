"""Where Paimon puts a table's files: every directory and file-name prefix of a table on
storage, and partition paths. Java ``FileStorePathFactory``, ``SnapshotManager``,
``SchemaManager``, ``TagManager``, ``ConsumerManager``, ``BranchManager``,
``PartitionPathUtils``, ``InternalRowPartitionComputer`` (Paimon 1.x/2.x).

A data file's location is implied by its partition values and bucket:
``<table>/[<data-file.path-directory>/]<k1=v1/k2=v2>/bucket-<b>/<file name>``; metadata lives
in ``<table>/{snapshot,changelog,schema,manifest,index,statistics,tag,consumer,branch}/``.
A branch keeps its own ``snapshot``, ``changelog``, ``schema``, ``tag`` and ``consumer``
folders under ``<table>/branch/branch-<name>/`` and shares the table's data files,
``manifest/``, ``index/`` and ``statistics/`` (Java ``BranchManager.branchPath``).
"""

from __future__ import annotations

import datetime
import math
import struct
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import (
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    LocalZonedTimestampType,
    TimestampType,
    TimeType,
)
from paimond.format.types.values import Timestamp
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions

if TYPE_CHECKING:
    from paimond.table.partition_filter import PartitionSelection

DB_SUFFIX = ".db"
SNAPSHOT_DIR, CHANGELOG_DIR, SCHEMA_DIR = "snapshot", "changelog", "schema"
MANIFEST_DIR, INDEX_DIR, STATISTICS_DIR = "manifest", "index", "statistics"
TAG_DIR, CONSUMER_DIR, BRANCH_DIR = "tag", "consumer", "branch"
SNAPSHOT_PREFIX, CHANGELOG_PREFIX, SCHEMA_PREFIX = "snapshot-", "changelog-", "schema-"
TAG_PREFIX, CONSUMER_PREFIX, BRANCH_PREFIX = "tag-", "consumer-", "branch-"
MAIN_BRANCH = "main"
BRANCH_SUFFIX = "$branch_"  # Paimon's name of a branch's table: db.t$branch_<name>
MANIFEST_PREFIX, MANIFEST_LIST_PREFIX = "manifest-", "manifest-list-"
INDEX_MANIFEST_PREFIX = "index-manifest-"
INDEX_FILE_PREFIX = "index-"  # deletion-vector index files under index/
BUCKET_DIR_PREFIX = "bucket-"
FILE_INDEX_SUFFIX = ".index"  # a data file's own file index: <data file>.index
EARLIEST_HINT, LATEST_HINT = "EARLIEST", "LATEST"
PAIMOND_DIR, JOBS_DIR = ".paimond", "jobs"  # paimond's own records in a table: .paimond/jobs/
EXPIRATIONS_DIR = "expirations"  # .paimond/expirations/: expirations in progress
ROLLBACKS_DIR = "rollbacks"  # .paimond/rollbacks/: rollbacks in progress

_ESCAPED = set(range(0x01, 0x20)) | {ord(c) for c in "\"#%'*/:=?\\{}[]^"} | {0x7F}
_EPOCH_DAY = datetime.date(1970, 1, 1)


def escape_path_name(text: str) -> str:
    """Escape a partition key or value the way Java ``PartitionPathUtils.escapePathName`` does."""
    return "".join(f"%{ord(ch):02X}" if ord(ch) in _ESCAPED else ch for ch in text)


def unescape_path_name(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and _is_hex(text[i + 1:i + 3]):
            out.append(chr(int(text[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _is_hex(pair: str) -> bool:
    return len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair)


def _java_local_date_time(ts: Timestamp) -> str:
    """Java ``LocalDateTime.toString()``: seconds and fraction only when non-zero."""
    seconds, milli = divmod(ts.millis, 1000)
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
    nanos = milli * 1_000_000 + ts.nano_of_milli
    text = moment.strftime("%Y-%m-%dT%H:%M")
    if moment.second or nanos:
        text += f":{moment.second:02d}"
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1000 == 0:
            text += f".{nanos // 1000:06d}"
        else:
            text += f".{nanos:09d}"
    return text


def _java_float(value: float, single: bool) -> str:
    """Java ``Float.toString``/``Double.toString``: shortest digits, plain notation for
    10^-3 <= |x| < 10^7, otherwise ``d.dddE<n>``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if single:
        value = struct.unpack("<f", struct.pack("<f", value))[0]
        digits_text = _shortest_float32(value)
    else:
        digits_text = repr(value)
    sign, digit_tuple, exp = Decimal(digits_text).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    exponent = len(digits) + int(exp) - 1  # value = 0.d1d2.. * 10^(exponent+1)
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            integer = (digits + "0" * (exponent + 1))[: exponent + 1]
            return f"{minus}{integer}.{digits[exponent + 1:] or '0'}"
        return f"{minus}0.{'0' * (-exponent - 1)}{digits}"
    return f"{minus}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _shortest_float32(value: float) -> str:
    """Fewest significant digits that still round-trip through float32."""
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == value:
                return text
        except OverflowError:  # rounded past float32's max: needs more digits
            continue
    return repr(value)


def partition_value_text(value: object, data_type: DataType, legacy_name: bool) -> str:
    """The text of one partition value before escaping (legacy: Java ``toString()`` of the
    internal value; otherwise a cast to string)."""
    if isinstance(data_type, BooleanType):
        return "true" if value else "false"
    if isinstance(data_type, (FloatType, DoubleType)) and isinstance(value, (int, float)):
        return _java_float(float(value), isinstance(data_type, FloatType))
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(data_type, DateType) and not legacy_name and isinstance(value, int):
        return (_EPOCH_DAY + datetime.timedelta(days=value)).isoformat()
    if isinstance(data_type, TimeType) and not legacy_name and isinstance(value, int):
        millis = value
        text = (datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=millis)).strftime("%H:%M:%S")
        return text if data_type.precision == 0 else f"{text}.{millis % 1000:03d}"
    if isinstance(value, Timestamp):
        if legacy_name:
            return _java_local_date_time(value)
        precision = data_type.precision if isinstance(
            data_type, (TimestampType, LocalZonedTimestampType)) else 6
        base = value.to_datetime().strftime("%Y-%m-%d %H:%M:%S")
        if precision == 0:
            return base
        fraction = f"{value.millis % 1000:03d}{value.nano_of_milli:06d}"[:precision]
        return f"{base}.{fraction}"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def partition_path(
    names: Sequence[str],
    types: Sequence[DataType],
    values: Sequence[object],
    *,
    default_name: str = "__DEFAULT_PARTITION__",
    legacy_name: bool = True,
) -> str:
    """``k1=v1/k2=v2`` for one partition; '' for an unpartitioned table."""
    parts = []
    for name, data_type, value in zip(names, types, values, strict=True):
        text = None if value is None else partition_value_text(value, data_type, legacy_name)
        if text is None or not text.strip():
            text = default_name
        parts.append(f"{escape_path_name(name)}={escape_path_name(text)}")
    return "/".join(parts)


def partition_text(schema: TableSchema, partition: bytes) -> str:
    """The relative path of a partition (``k1=v1/k2=v2``; '' when unpartitioned) from its
    manifest BinaryRow, with the table's naming options."""
    partition_type = schema.partition_type
    if not partition_type.fields:
        return ""
    options = TableOptions.of(schema)
    values = decode_manifest_row(partition, partition_type.field_types)
    return partition_path(partition_type.field_names, partition_type.field_types, values,
                          default_name=options.partition_default_name,
                          legacy_name=options.partition_legacy_name)


def bucket_dir_name(bucket: int) -> str:
    return f"{BUCKET_DIR_PREFIX}postpone" if bucket == BUCKET_POSTPONE else f"{BUCKET_DIR_PREFIX}{bucket}"


def partition_matches(partition_text: str, wanted: PartitionSelection) -> bool:
    """Whether a partition's path (``dt=2024-01-01/hr=3``) has every wanted value, or
    matches the wanted filter (``table.partition_filter``)."""
    if not isinstance(wanted, Mapping):
        return wanted.matches_path(partition_text)
    parts = dict(p.split("=", 1) for p in partition_text.split("/") if "=" in p)
    return all(parts.get(k) == v for k, v in wanted.items())
