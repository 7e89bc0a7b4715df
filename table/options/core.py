"""Table options with Paimon's defaults: the subset of Java ``CoreOptions`` paimond reads.

Schema files hold only the options a user set; every default lives here, named after the
Java option key. Values are parsed lazily so that one bad option only fails what reads it.
``TableOptions`` reads the table's own options (bucket, merge engine, manifests, compaction)
and inherits two families: retention (table/options/retention.py) and data files
(table/options/files.py), on the typed readers of table/options/reader.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from paimond.errors import PaimondError, UnsupportedError
from paimond.format.meta.schema import TableSchema
from paimond.table.options.compaction import CompactionOptions
from paimond.table.options.files import FileOptions
from paimond.table.options.reader import parse_duration_millis, parse_memory_size
from paimond.table.options.retention import RetentionOptions

BUCKET_POSTPONE = -2
BUCKET_DYNAMIC = -1


@dataclass(frozen=True, slots=True)
class TableOptions(RetentionOptions, FileOptions):
    """Typed, defaulted access to a schema's options (and its compatibility rules)."""

    raw: Mapping[str, str]
    schema_version: int = 3
    has_primary_key: bool = False
    # The bitmap file-index version the table's files use, where a planner looked
    # (table/indexes/file_index_versions.py); None: Java's default.
    bitmap_version_in_use: int | None = None

    @classmethod
    def of(cls, schema: TableSchema) -> TableOptions:
        return cls(dict(schema.options), schema.version, bool(schema.primary_keys))

    @property
    def bucket(self) -> int:
        # Schemas of version <= 1 without a bucket option meant one bucket.
        return self._int("bucket", 1 if self.schema_version <= 1 else BUCKET_DYNAMIC)

    @property
    def sequence_number_init_mode(self) -> str:
        """``write.sequence-number-init-mode``: ``scan`` (writers restore their bucket's
        highest) or ``snapshot`` (they start after the latest snapshot's property)."""
        return self._enum("write.sequence-number-init-mode", "scan", ("scan", "snapshot"))

    @property
    def postpone_default_bucket_num(self) -> int | None:
        """``postpone.default-bucket-num``: the buckets of a partition a postpone table moves
        rows into for the first time (None: estimated from the rows or bytes waiting)."""
        return self._positive("postpone.default-bucket-num")

    @property
    def postpone_target_row_num_per_bucket(self) -> int | None:
        """``postpone.target-row-num-per-bucket``: first-time buckets by rows waiting."""
        return self._positive("postpone.target-row-num-per-bucket")

    @property
    def postpone_target_size_per_bucket_bytes(self) -> int:
        """``postpone.target-size-per-bucket`` (1 GiB): first-time buckets by bytes waiting."""
        size = self._size("postpone.target-size-per-bucket", 1 << 30)
        if size <= 0:
            raise UnsupportedError(f"postpone.target-size-per-bucket must be positive, got {size}")
        return size

    def _positive(self, key: str) -> int | None:
        value = self._optional(key, lambda v: int(v.strip()), "an integer")
        if value is not None and value <= 0:
            raise UnsupportedError(f"{key} must be greater than 0, got {value}")
        return value

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
    def batch_scan_skips_level0(self) -> bool:
        """Whether a batch read leaves out level-0 files (Java ``batchScanSkipLevel0``):
        deletion vectors without ``deletion-vectors.merge-on-read``, or ``first-row``."""
        if self.deletion_vectors_enabled:
            return not self._bool("deletion-vectors.merge-on-read", False)
        return self.merge_engine == "first-row"

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

    # ---- generic readers for the semantic-options table (table/options/semantic.py) ----

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


def invalid_options(options: TableOptions) -> list[str]:
    """What is wrong with the values of the options paimond reads (every typed property of
    ``TableOptions``; the file-index ones only on a table with ``file-index.*`` options, as
    only they load the index codecs): a job refuses the table before writing rather than
    fail, or worse not notice, half way (``bucket = abc`` was compacted over)."""
    problems = []
    for name in _PROPERTIES:
        if name.startswith("file_index_") and not options.has_file_index:
            continue
        try:
            getattr(options, name)
        except (PaimondError, ValueError) as error:
            problems.append(str(error))
    return list(dict.fromkeys(problems))


_PROPERTIES = tuple(dict.fromkeys(
    name for cls in TableOptions.__mro__ for name, value in vars(cls).items()
    if isinstance(value, property)))
