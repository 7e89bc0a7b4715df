"""A table's data files, with Paimon's defaults (Java ``CoreOptions``, ``FileIndexOptions``):
formats, compression, statistics, file indexes, and which files compaction rewrites (the
append-table coordinator's options too). One family of ``TableOptions`` (table/options/core.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paimond.errors import UnsupportedError
from paimond.table.options.reader import OptionReader

if TYPE_CHECKING:  # the index codecs (numpy, pyarrow) load when an index is asked for
    from paimond.format.file_index.columns import ColumnIndexes

FILE_INDEX_PREFIX = "file-index."  # every Java FileIndexOptions key


class FileOptions(OptionReader):
    __slots__ = ()

    # ---- data files (Java CoreOptions: file.*, metadata.stats-*, data-file.*) ----

    @property
    def target_file_size_bytes(self) -> int:
        return self._size("target-file-size", (128 if self.has_primary_key else 256) << 20)

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
        """Any ``file-index.*`` option at all (cheap: nothing is parsed, no codec imported)."""
        return any(key.startswith(FILE_INDEX_PREFIX) for key in self.raw)

    @property
    def file_index_columns(self) -> ColumnIndexes:
        """The indexed columns and each index's typed settings, in Java's map orders; a
        bitmap index without a ``version`` option keeps the version the table's files use
        (``bitmap_version_in_use``, when a planner found one)."""
        from paimond.table.options.file_index import file_index_columns

        return file_index_columns(self.raw, self.bitmap_version_in_use)

    @property
    def file_index_in_manifest_threshold_bytes(self) -> int:
        from paimond.table.options.file_index import in_manifest_threshold_bytes

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
