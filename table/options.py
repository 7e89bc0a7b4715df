"""Table options with Paimon's defaults: the subset of Java ``CoreOptions`` paimond reads.

Schema files hold only the options a user set; every default lives here, named after the
Java option key. Values are parsed lazily so that one bad option only fails what reads it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from paimond.errors import ConfigError, UnsupportedError
from paimond.format.schema import TableSchema
from paimond.table.compaction_options import CompactionOptions
from paimond.table.partition_time import PartitionTimeExtractor, compile_java_format

if TYPE_CHECKING:  # the index codecs (numpy, pyarrow) load when an index is asked for
    from paimond.format.file_index.columns import ColumnIndexes

BUCKET_POSTPONE = -2
BUCKET_DYNAMIC = -1
INT_MAX = 2**31 - 1

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "bytes": 1}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory_size(text: str) -> int:
    """Parse Paimon's MemorySize strings (``128 mb``, ``64kb``, ``1024``) into bytes."""
    match = _SIZE.match(text)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"not a memory size: {text!r}")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


_DURATION = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")
_DURATION_UNITS_MS = {
    "": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}


def parse_duration_millis(text: str) -> int:
    """Paimon ``TimeUtils.parseDuration`` forms: ``30 min``, ``1h``, ``500ms``, ``2 d``."""
    match = _DURATION.match(text)
    if not match or match.group(2).lower() not in _DURATION_UNITS_MS:
        raise ValueError(f"not a duration: {text!r}")
    return int(match.group(1)) * _DURATION_UNITS_MS[match.group(2).lower()]


@dataclass(frozen=True, slots=True)
class TableOptions:
    """Typed, defaulted access to a schema's options (and its compatibility rules)."""

    raw: Mapping[str, str]
    schema_version: int = 3
    has_primary_key: bool = False

    @classmethod
    def of(cls, schema: TableSchema) -> TableOptions:
        return cls(dict(schema.options), schema.version, bool(schema.primary_keys))

    def _int(self, key: str, default: int) -> int:
        value = self.raw.get(key)
        if value is None:
            return default
        try:
            return int(value.strip())
        except ValueError:
            raise UnsupportedError(f"option {key}={value!r} is not an integer") from None

    def _text(self, key: str) -> str | None:
        value = self.raw.get(key)
        return None if value is None else value.strip()

    def _optional(self, key: str, parse: Callable[[str], int], what: str,
                  error: type[Exception] = UnsupportedError) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError:
            if error is ConfigError:
                raise ConfigError(key, f"{value!r} is not {what}") from None
            raise UnsupportedError(f"option {key}={value!r} is not {what}") from None

    def _bool(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        return default if value is None else value.strip().lower() == "true"

    def _size(self, key: str, default: int) -> int:
        value = self.raw.get(key)
        if value is None:
            return default
        try:
            return parse_memory_size(value)
        except ValueError:
            raise UnsupportedError(f"option {key}={value!r} is not a memory size") from None

    @property
    def bucket(self) -> int:
        # Schemas of version <= 1 without a bucket option meant one bucket.
        return self._int("bucket", 1 if self.schema_version <= 1 else BUCKET_DYNAMIC)

    @property
    def merge_engine(self) -> str:
        return (self.raw.get("merge-engine") or "deduplicate").strip().lower()

    @property
    def file_format(self) -> str:
        # Schemas of version <= 2 without file.format were written as ORC.
        default = "orc" if self.schema_version <= 2 else "parquet"
        return (self.raw.get("file.format") or default).strip().lower()

    @property
    def num_sorted_run_compaction_trigger(self) -> int:
        return self._int("num-sorted-run.compaction-trigger", 5)

    @property
    def num_sorted_run_stop_trigger(self) -> int:
        return self._int("num-sorted-run.stop-trigger", self.num_sorted_run_compaction_trigger + 3)

    @property
    def num_levels(self) -> int:
        return self._int("num-levels", self.num_sorted_run_compaction_trigger + 1)

    @property
    def deletion_vectors_enabled(self) -> bool:
        return self._bool("deletion-vectors.enabled", False)

    @property
    def deletion_vectors_bitmap64(self) -> bool:
        return self._bool("deletion-vectors.bitmap64", False)

    # ---- merge engine (Java CoreOptions: *.ignore-delete, sequence.field, fields.<c>.*) ----

    @property
    def ignore_delete(self) -> bool:
        return any(self._bool(f"{prefix}ignore-delete", False)
                   for prefix in ("", "first-row.", "deduplicate.", "partial-update."))

    @property
    def partial_update_remove_record_on_delete(self) -> bool:
        return self._bool("partial-update.remove-record-on-delete", False)

    @property
    def has_sequence_groups(self) -> bool:
        return any(key.endswith(".sequence-group") for key in self.raw)

    @property
    def sequence_fields(self) -> tuple[str, ...]:
        return tuple(s.strip() for s in self.raw.get("sequence.field", "").split(",") if s.strip())

    @property
    def sequence_descending(self) -> bool:
        return self.raw.get("sequence.field.sort-order", "ascending").lower() == "descending"

    @property
    def default_aggregate_function(self) -> str:
        return self.raw.get("fields.default-aggregate-function", "last_non_null_value")

    def field_aggregate_function(self, field_name: str, default: str) -> str:
        return self.raw.get(f"fields.{field_name}.aggregate-function", default)

    def field_ignore_retract(self, field_name: str) -> bool:
        return self._bool(f"fields.{field_name}.ignore-retract", False)

    @property
    def sequence_groups(self) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
        """Java ``PartialUpdateMergeFunction``: every ``fields.<s1,s2>.sequence-group`` key as
        (sequence fields, protected fields), in key order."""
        groups = []
        for key in sorted(self.raw):
            if key.startswith("fields.") and key.endswith(".sequence-group"):
                sequence = key[len("fields."):-len(".sequence-group")].split(",")
                groups.append((tuple(sequence), tuple(self.raw[key].split(","))))
        return tuple(groups)

    @property
    def raw_default_aggregate_function(self) -> str | None:
        """``fields.default-aggregate-function`` as set (partial-update has no default)."""
        return self.raw.get("fields.default-aggregate-function")

    @property
    def partial_update_remove_record_on_sequence_group(self) -> tuple[str, ...]:
        value = self.raw.get("partial-update.remove-record-on-sequence-group")
        return tuple(value.split(",")) if value else ()

    @property
    def aggregation_remove_record_on_delete(self) -> bool:
        return self._bool("aggregation.remove-record-on-delete", False)

    def field_list_agg_delimiter(self, field_name: str) -> str:
        return self.raw.get(f"fields.{field_name}.list-agg-delimiter", ",")

    def field_distinct(self, field_name: str) -> bool:
        return self._bool(f"fields.{field_name}.distinct", False)

    @property
    def partition_default_name(self) -> str:
        return self.raw.get("partition.default-name") or "__DEFAULT_PARTITION__"

    @property
    def partition_legacy_name(self) -> bool:
        return self._bool("partition.legacy-name", True)

    @property
    def changelog_producer(self) -> str:
        return (self.raw.get("changelog-producer") or "none").strip().lower()

    @property
    def data_file_path_directory(self) -> str | None:
        return self.raw.get("data-file.path-directory")

    @property
    def target_file_size_bytes(self) -> int:
        return self._size("target-file-size", (128 if self.has_primary_key else 256) << 20)

    @property
    def manifest_target_file_size_bytes(self) -> int:
        return self._size("manifest.target-file-size", 8 << 20)

    @property
    def manifest_merge_min_count(self) -> int:
        return self._int("manifest.merge-min-count", 30)

    @property
    def manifest_full_compaction_threshold_bytes(self) -> int:
        return self._size("manifest.full-compaction-threshold-size", 16 << 20)

    @property
    def manifest_compression(self) -> str:
        return self.raw.get("manifest.compression", "zstd")

    # ---- snapshot and changelog expiration (Java CoreOptions: snapshot.*, changelog.*) ----

    def _expire_int(self, key: str) -> int | None:
        return self._optional(key, lambda v: int(v.strip()), "an integer", ConfigError)

    def _expire_duration_ms(self, key: str) -> int | None:
        return self._optional(key, parse_duration_millis, "a duration", ConfigError)

    @property
    def snapshot_num_retained_min(self) -> int:
        value = self._expire_int("snapshot.num-retained.min")
        return 10 if value is None else value

    @property
    def snapshot_num_retained_max(self) -> int:
        value = self._expire_int("snapshot.num-retained.max")
        return INT_MAX if value is None else value

    @property
    def snapshot_time_retained_ms(self) -> int:
        value = self._expire_duration_ms("snapshot.time-retained")
        return 3_600_000 if value is None else value

    @property
    def snapshot_expire_limit(self) -> int:
        value = self._expire_int("snapshot.expire.limit")
        return 50 if value is None else value

    @property
    def snapshot_clean_empty_directories(self) -> bool:
        """``snapshot.clean-empty-directories`` (fallback key ``snapshot.expire.clean-empty-directories``)."""
        value = self.raw.get("snapshot.clean-empty-directories",
                             self.raw.get("snapshot.expire.clean-empty-directories"))
        return (value or "false").strip().lower() == "true"

    @property
    def changelog_num_retained_min(self) -> int | None:
        return self._expire_int("changelog.num-retained.min")

    @property
    def changelog_num_retained_max(self) -> int | None:
        return self._expire_int("changelog.num-retained.max")

    @property
    def changelog_time_retained_ms(self) -> int | None:
        return self._expire_duration_ms("changelog.time-retained")

    @property
    def consumer_changelog_only(self) -> bool:
        """``consumer.changelog-only``: consumers hold changelogs, not snapshots (Java applies
        it only with a decoupled changelog)."""
        return self._bool("consumer.changelog-only", False)

    # ---- consumers (Java CoreOptions: consumer.*) ----

    @property
    def consumer_expiration_time_ms(self) -> int | None:
        """``consumer.expiration-time``: a consumer file not modified for this long expires
        (no default: consumers never expire)."""
        return self._expire_duration_ms("consumer.expiration-time")

    # ---- tags (Java CoreOptions: tag.*, sink.*-time-zone) ----

    def _enum(self, key: str, default: str, values: tuple[str, ...]) -> str:
        """A Java enum option: one of its values in any case (Java ``convertToEnum``)."""
        value = self.raw.get(key)
        if value is None:
            return default
        text = value.strip().lower()
        if text in values:
            return text
        raise ConfigError(key, f"{value!r} is not one of {', '.join(values)}")

    @property
    def tag_automatic_creation(self) -> str:
        """``tag.automatic-creation``: none, process-time, watermark or batch."""
        return self._enum("tag.automatic-creation", "none",
                          ("none", "process-time", "watermark", "batch"))

    @property
    def tag_creation_period(self) -> str:
        return self._enum("tag.creation-period", "daily", ("daily", "hourly", "two-hours"))

    @property
    def tag_creation_period_duration_ms(self) -> int | None:
        """``tag.creation-period-duration``; when set it replaces ``tag.creation-period``."""
        return self._expire_duration_ms("tag.creation-period-duration")

    @property
    def tag_creation_delay_ms(self) -> int:
        value = self._expire_duration_ms("tag.creation-delay")
        return 0 if value is None else value

    @property
    def tag_period_formatter(self) -> str:
        return self._enum("tag.period-formatter", "with_dashes",
                          ("with_dashes", "without_dashes", "without_dashes_and_spaces"))

    @property
    def tag_num_retained_max(self) -> int | None:
        return self._expire_int("tag.num-retained-max")

    @property
    def tag_default_time_retained_ms(self) -> int | None:
        return self._expire_duration_ms("tag.default-time-retained")

    @property
    def tag_time_expire_enabled(self) -> bool:
        return self._bool("tag.time-expire-enabled", True)

    @property
    def tag_automatic_completion(self) -> bool:
        return self._bool("tag.automatic-completion", False)

    @property
    def tag_batch_customized_name(self) -> str | None:
        return self.raw.get("tag.batch.customized-name")

    @property
    def sink_process_time_zone(self) -> str | None:
        """``sink.process-time-zone``; None: the machine's zone (Java's JVM default)."""
        return self._text("sink.process-time-zone") or None

    @property
    def sink_watermark_time_zone(self) -> str:
        return self._text("sink.watermark-time-zone") or "UTC"

    # ---- record-level expiry (Java CoreOptions: record-level.*) ----

    @property
    def record_level_expire_time_s(self) -> int | None:
        """``record-level.expire-time`` in whole seconds (Java ``Duration.getSeconds``)."""
        value = self._expire_duration_ms("record-level.expire-time")
        return None if value is None else value // 1000

    @property
    def record_level_time_field(self) -> str | None:
        return self._text("record-level.time-field")

    # ---- compaction (Java CoreOptions: compaction.*, lookup-compact, num-sorted-run.*) ----

    @property
    def compaction(self) -> CompactionOptions:
        """Everything a picker needs, parsed once."""
        trigger = self.num_sorted_run_compaction_trigger
        needs_lookup = (self.merge_engine == "first-row" or self.changelog_producer == "lookup"
                        or self.deletion_vectors_enabled or self._bool("force-lookup", False))
        max_interval = None
        if (self._text("lookup-compact") or "radical").lower() == "gentle":
            max_interval = max(trigger, self._int("lookup-compact.max-interval", trigger * 2))
        return CompactionOptions(
            num_sorted_run_trigger=trigger,
            max_size_amp_percent=self._int("compaction.max-size-amplification-percent", 200),
            size_ratio=self._int("compaction.size-ratio", 1),
            optimization_interval_ms=self._optional(
                "compaction.optimization-interval", parse_duration_millis, "a duration"),
            total_size_threshold_bytes=self._optional(
                "compaction.total-size-threshold", parse_memory_size, "a memory size"),
            incremental_size_threshold_bytes=self._optional(
                "compaction.incremental-size-threshold", parse_memory_size, "a memory size"),
            offpeak_start_hour=self._int("compaction.offpeak.start.hour", -1),
            offpeak_end_hour=self._int("compaction.offpeak.end.hour", -1),
            offpeak_ratio=self._int("compaction.offpeak-ratio", 0),
            force_up_level0=self._bool("compaction.force-up-level-0", False),
            needs_lookup=needs_lookup,
            lookup_compact_max_interval=max_interval,
            force_rewrite_all_files=self.compaction_force_rewrite_all_files,
            num_levels=self.num_levels,
        )

    def bucket_mode(self, schema: TableSchema) -> str:
        """Java ``BucketMode``: HASH_FIXED, HASH_DYNAMIC, KEY_DYNAMIC, BUCKET_UNAWARE, POSTPONE_MODE."""
        bucket = self.bucket
        if bucket > 0:
            return "HASH_FIXED"
        if bucket == BUCKET_POSTPONE:
            return "POSTPONE_MODE"
        if not schema.primary_keys:
            return "BUCKET_UNAWARE"
        if set(schema.partition_keys) <= set(schema.primary_keys):
            return "HASH_DYNAMIC"
        return "KEY_DYNAMIC"

    # ---- data files (Java CoreOptions: file.*, metadata.stats-*, data-file.*) ----

    def _level_map(self, key: str) -> dict[int, str]:
        """A Java map option such as ``0:avro,3:parquet``, keyed by level."""
        value = self.raw.get(key)
        if not value or not value.strip():
            return {}
        result = {}
        for item in value.split(","):
            level, sep, setting = item.partition(":")
            try:
                if not sep:
                    raise ValueError(item)
                result[int(level.strip())] = setting.strip()
            except ValueError:
                raise UnsupportedError(f"option {key}={value!r} is not a map of level:value") from None
        return result

    @property
    def file_format_per_level(self) -> dict[int, str]:
        """``file.format.per.level``: level -> format (lower case); other levels use ``file_format``."""
        return {level: fmt.lower() for level, fmt in self._level_map("file.format.per.level").items()}

    @property
    def file_compression(self) -> str:
        return (self.raw.get("file.compression") or "zstd").strip().lower()

    @property
    def file_compression_per_level(self) -> dict[int, str]:
        return {level: c.lower() for level, c in self._level_map("file.compression.per.level").items()}

    @property
    def file_compression_zstd_level(self) -> int:
        return self._int("file.compression.zstd-level", 1)

    @property
    def file_block_size_bytes(self) -> int:
        """``file.block-size``; Java has no default, the ``.row`` format uses 64 KiB."""
        return self._size("file.block-size", 64 << 10)

    @property
    def file_suffix_include_compression(self) -> bool:
        return self._bool("file.suffix.include.compression", False)

    @property
    def data_file_prefix(self) -> str:
        return self.raw.get("data-file.prefix") or "data-"

    @property
    def data_file_thin_mode(self) -> bool:
        return self._bool("data-file.thin-mode", False)

    @property
    def stats_mode(self) -> str:
        return (self.raw.get("metadata.stats-mode") or "truncate(16)").strip()

    @property
    def stats_mode_per_level(self) -> dict[int, str]:
        return self._level_map("metadata.stats-mode.per.level")

    @property
    def stats_dense_store(self) -> bool:
        return self._bool("metadata.stats-dense-store", True)

    @property
    def stats_keep_first_n_columns(self) -> int:
        return self._int("metadata.stats-keep-first-n-columns", -1)

    # ---- file indexes (Java FileIndexOptions: file-index.*) ----

    @property
    def has_file_index(self) -> bool:
        """Any ``file-index.*`` option at all (cheap; nothing is parsed)."""
        from paimond.table.file_index_options import has_file_index_options

        return has_file_index_options(self.raw)

    @property
    def file_index_columns(self) -> ColumnIndexes:
        """The indexed columns and each index's typed settings, in Java's map orders."""
        from paimond.table.file_index_options import file_index_columns

        return file_index_columns(self.raw)

    @property
    def file_index_in_manifest_threshold_bytes(self) -> int:
        from paimond.table.file_index_options import in_manifest_threshold_bytes

        return in_manifest_threshold_bytes(self.raw)

    def field_stats_mode(self, field_name: str) -> str | None:
        """``fields.<c>.stats-mode``, when set."""
        return self.raw.get(f"fields.{field_name}.stats-mode")

    @property
    def avro_codec(self) -> str | None:
        """``avro.codec``: overrides ``file.compression`` for avro data files."""
        return self.raw.get("avro.codec")

    # ---- compaction's rewrite (Java CoreOptions: compaction.*) ----

    @property
    def compaction_small_file_ratio(self) -> float:
        """Files under this share of ``target-file-size`` are rewritten, never upgraded."""
        value = self.raw.get("compaction.small-file-ratio")
        if value is None:
            return 0.7
        try:
            return float(value.strip())
        except ValueError:
            raise UnsupportedError(f"option compaction.small-file-ratio={value!r} is not a "
                                   "number") from None

    @property
    def compaction_force_rewrite_all_files(self) -> bool:
        return self._bool("compaction.force-rewrite-all-files", False)

    # ---- append-table compaction (Java CoreOptions, read by AppendCompactCoordinator) ----

    @property
    def compaction_min_file_num(self) -> int:
        """``compaction.min.file-num``: files an append compaction needs at least."""
        return self._int("compaction.min.file-num", 5)

    @property
    def compaction_file_num_limit(self) -> int:
        """``compaction.file-num-limit``: files one bucket-unaware plan scans at most."""
        return self._int("compaction.file-num-limit", 100_000)

    @property
    def compaction_delete_ratio_threshold(self) -> float:
        """``compaction.delete-ratio-threshold``: a file whose deletion vector holds more
        than this share of its rows is compacted whatever its size."""
        value = self.raw.get("compaction.delete-ratio-threshold")
        if value is None:
            return 0.2
        try:
            return float(value.strip())
        except ValueError:
            raise UnsupportedError(f"option compaction.delete-ratio-threshold={value!r} is not "
                                   "a number") from None

    @property
    def source_split_open_file_cost_bytes(self) -> int:
        """``source.split.open-file-cost``: what the append coordinator adds per file."""
        return self._size("source.split.open-file-cost", 4 << 20)

    @property
    def compaction_file_size_bytes(self) -> int:
        """Java ``compactionFileSize``: files below it are small (target times the ratio)."""
        return int(self.target_file_size_bytes * self.compaction_small_file_ratio)

    @property
    def compaction_skip_expired_partitions(self) -> bool:
        """``compaction.skip-expired-partitions``: compaction leaves alone the partitions
        that ``partition.expiration-time`` (values-time strategy) has expired."""
        return self._bool("compaction.skip-expired-partitions", False)

    @property
    def full_compaction_delta_commits(self) -> int | None:
        """``full-compaction.delta-commits``: a full compaction after this many writer
        commits (Java's writers take at least 1)."""
        value = self._expire_int("full-compaction.delta-commits")
        return None if value is None else max(value, 1)

    # ---- partition expiration (Java CoreOptions: partition.expiration-*, timestamp-*) ----

    @property
    def partition_expiration_time_ms(self) -> int | None:
        """``partition.expiration-time``; None (the default): partitions never expire."""
        return self._expire_duration_ms("partition.expiration-time")

    @property
    def partition_expiration_check_interval_ms(self) -> int:
        value = self._expire_duration_ms("partition.expiration-check-interval")
        return 3_600_000 if value is None else value

    @property
    def partition_expiration_strategy(self) -> str:
        """``values-time`` (the time in the partition's values) or ``update-time`` (its
        newest file's creation time)."""
        value = (self.raw.get("partition.expiration-strategy") or "values-time").strip()
        if value not in ("values-time", "update-time"):
            raise ConfigError("partition.expiration-strategy",
                              f"{value!r} is not values-time or update-time")
        return value

    @property
    def partition_expiration_max_num(self) -> int:
        value = self._expire_int("partition.expiration-max-num")
        return 100 if value is None else value

    @property
    def partition_expiration_batch_size(self) -> int:
        """``partition.expiration-batch-size``: partitions per commit (default: max-num)."""
        value = self._expire_int("partition.expiration-batch-size")
        return self.partition_expiration_max_num if value is None else value

    @property
    def partition_timestamp_formatter(self) -> str | None:
        return self.raw.get("partition.timestamp-formatter")

    @property
    def partition_timestamp_pattern(self) -> str | None:
        return self.raw.get("partition.timestamp-pattern")

    @property
    def partition_time_extractor(self) -> PartitionTimeExtractor:
        """Java ``PartitionTimeExtractor`` from the two options; a formatter paimond cannot
        parse is a ConfigError naming it."""
        formatter = self.partition_timestamp_formatter
        compiled = None
        if formatter is not None:
            try:
                compiled = compile_java_format(formatter)
            except ValueError as error:
                raise ConfigError("partition.timestamp-formatter", str(error)) from None
        return PartitionTimeExtractor(self.partition_timestamp_pattern, compiled)

    @property
    def chain_table_enabled(self) -> bool:
        """``chain-table.enabled``: partitions expire by segments (Java
        ``ChainTablePartitionExpire``)."""
        return self._bool("chain-table.enabled", False)

    @property
    def metastore_partitioned_table(self) -> bool:
        """``metastore.partitioned-table``: partitions are dropped through the metastore."""
        return self._bool("metastore.partitioned-table", False)

    # ---- generic readers for the semantic-options table (table/semantic_options.py) ----

    @property
    def write_only(self) -> bool:
        """``write-only``: writers neither compact nor expire (nor create tags, expire
        partitions or consumers); a dedicated maintainer does."""
        return self._bool("write-only", False)

    def flag(self, key: str, default: bool = False) -> bool:
        """A boolean option as Java's ``Boolean.parseBoolean`` reads it."""
        return self._bool(key, default)

    def text(self, key: str) -> str | None:
        """An option's value without surrounding blanks; None when unset."""
        return self._text(key)

    def field_options(self, suffix: str) -> dict[str, str]:
        """``fields.<c>.<suffix>`` options: column -> value."""
        head, tail = "fields.", f".{suffix}"
        return {key[len(head):-len(tail)]: value.strip() for key, value in self.raw.items()
                if key.startswith(head) and key.endswith(tail) and len(key) > len(head + tail)}
