"""What a table keeps and for how long, with Paimon's defaults (Java ``CoreOptions``): snapshot
and changelog expiration, consumers, tags, record-level expiry and partition expiration. One
family of ``TableOptions`` (table/options/core.py).
"""

from __future__ import annotations

from paimond.errors import ConfigError
from paimond.table.options.reader import INT_MAX, OptionReader
from paimond.table.partition_time import PartitionTimeExtractor, compile_java_format


class RetentionOptions(OptionReader):
    __slots__ = ()

    # ---- snapshot and changelog expiration (Java CoreOptions: snapshot.*, changelog.*) ----

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
