"""The option catalogue: every key a Paimon table's options can hold, each decided once.

Every option key of Java ``CoreOptions`` (apache/paimon master, 2.1-SNAPSHOT, a superset of
2.0.0's), the per-column and per-index key patterns, the connector options (Flink's and Spark's)
and the format writers' passthroughs a table can carry, each one of:

``implemented``: paimond produces what Paimon would; ``where`` names the job(s) or module that
read it. ``irrelevant``: only writers, readers, scans, commits of writers or engines read it,
or it changes nothing a maintenance job produces; ``where`` says why. ``refused``: a job refuses
a table that sets it (or sets it to a value paimond does not implement); ``where`` is the reason,
and the refusal itself is the matching row of the semantic table (``semantic.py``), which keeps
conditional refusals (``merge-engine`` with an unknown value) conditional.

A key no row matches is undecided (a newer Paimon, a typo, a plugin's option): the compact job
refuses the table until an operator accepts the key (``[jobs.compact] allow_unknown_options``
or ``paimond compact --allow-unknown-option KEY``); the other jobs still run.

Key syntax: a row's ``keys`` are exact keys or patterns, ``<name>`` standing for one or more
characters (``fields.<c>.aggregate-function``) and a trailing ``*`` for any rest
(``parquet.*``). An exact key wins over a pattern; among patterns, the first row wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Decision = Literal["implemented", "irrelevant", "refused"]
DECISIONS: tuple[Decision, ...] = ("implemented", "irrelevant", "refused")


@dataclass(frozen=True, slots=True)
class OptionGroup:
    """Keys decided alike: ``where`` names the reading jobs/modules, why they are irrelevant,
    or the refusal's reason."""

    keys: tuple[str, ...]
    decision: Decision
    where: str


def _g(keys: str, decision: Decision, where: str) -> OptionGroup:
    return OptionGroup(tuple(keys.split()), decision, where)


_IMPL: Decision = "implemented"
_IRR: Decision = "irrelevant"
_REF: Decision = "refused"
_WRITERS = "writers' settings (memory, buffers, spilling, batching); maintenance writes by its own"
_SCAN = "readers' and streaming scans' settings; maintenance plans from the snapshots itself"
_LOOKUP = "lookup joins' caches and reads; compaction's lookups use the daemon's own cache"

OPTION_CATALOGUE: tuple[OptionGroup, ...] = (
    # ---- table identity and layout ----------------------------------------------------------
    _g("bucket", _IMPL, "compact (maintenance/compact/plan.py, append_plan.py): fixed, dynamic, "
       "cross-partition and unaware buckets; -2 (postpone) by maintenance/compact/postpone.py"),
    _g("postpone.default-bucket-num postpone.target-row-num-per-bucket "
       "postpone.target-size-per-bucket", _IMPL,
       "compact (maintenance/compact/postpone.py): the postpone bucket's files into real buckets"),
    _g("postpone.batch-write-fixed-bucket postpone.batch-write-fixed-bucket.max-parallelism "
       "postpone.batch-write-fixed-bucket.rescale-load-factor postpone.merge-on-read", _IRR,
       "batch writers' and readers' handling of a postpone table"),
    _g("primary-key partition path branch type", _IMPL,
       "every job: read from the schema and the table's location (primary-key, partition: "
       "the schema holds them; type: only Paimon tables have snapshots to maintain)"),
    _g("bucket-key bucket-function.type bucket-append-ordered primary-key.nullable", _IRR,
       "writers assign buckets and order appends; maintenance keeps every file in its bucket "
       "and merges keys as stored (null keys compare equal)"),
    _g("merge-engine", _IMPL, "compact (lsm/merge/engines.py): deduplicate, partial-update, "
       "aggregation, first-row; any other value refused (semantic table)"),
    _g("ignore-delete first-row.ignore-delete deduplicate.ignore-delete "
       "partial-update.ignore-delete partial-update.remove-record-on-delete "
       "partial-update.remove-record-on-sequence-group aggregation.remove-record-on-delete",
       _IMPL, "compact (lsm/merge/row_merge.py)"),
    _g("fields.default-aggregate-function fields.<c>.aggregate-function", _IMPL,
       "compact (lsm/merge/engines.py); functions paimond lacks refused (semantic table)"),
    _g("fields.<c>.ignore-retract fields.<c>.distinct fields.<c>.list-agg-delimiter "
       "fields.<c>.sequence-group fields.<c>.nested-key fields.<c>.nested-key-null-strategy "
       "fields.<c>.nested-sequence-field fields.<c>.count-limit fields.<c>.ts-field", _IMPL,
       "compact (lsm/merge/row_merge.py, lsm/merge/nested_aggregates.py)"),
    _g("fields.<c>.map.storage-layout", _REF, "shared-shredding: the MAP column stored as a "
       "row of shared columns; paimond reads and writes plain MAP columns (semantic table)"),
    _g("fields.<c>.map.shared-shredding.max-columns "
       "fields.<c>.map.shared-shredding.column-placement-policy", _IRR,
       "only with fields.<c>.map.storage-layout=shared-shredding, itself refused"),
    _g("fields.<c>.stats-mode", _IMPL, "compact (table/options/files.py): per-column statistics"),
    _g("sequence.field sequence.field.sort-order", _IMPL,
       "compact: versions ordered by the sequence fields, then the sequence number"),
    _g("sequence.snapshot-ordering", _REF, "ordering versions by commit snapshot is not "
       "implemented (semantic table)"),
    _g("rowkind.field ignore-update-before delete.force-produce-changelog", _IRR,
       "applied by writers to the records they write"),
    # ---- changelog ---------------------------------------------------------------------------
    _g("changelog-producer changelog-producer.row-deduplicate "
       "changelog-producer.row-deduplicate-ignore-fields changelog-file.prefix "
       "changelog-file.format changelog-file.compression changelog-file.stats-mode", _IMPL,
       "compact (lsm/merge/changelog.py, table/options/changelog.py); full-compaction with "
       "deletion vectors refused (semantic table)"),
    _g("lookup-compact lookup-compact.max-interval force-lookup", _IMPL,
       "compact (table/options/core.py compaction, lsm/picker.py)"),
    _g("lookup-wait changelog-producer.lookup-wait changelog-producer.compaction-interval "
       "precommit-compact changelog.precommit-compact.buffer-size "
       "changelog.precommit-compact.thread-num", _IRR,
       "writers' waits for and scheduling of their own compactions"),
    _g("changelog.num-retained.min changelog.num-retained.max changelog.time-retained "
       "consumer.changelog-only", _IMPL,
       "expire (maintenance/expire/changelogs.py, table/options/retention.py)"),
    # ---- deletion vectors, record expiry ----------------------------------------------------
    _g("deletion-vectors.enabled deletion-vectors.bitmap64 compaction.delete-ratio-threshold",
       _IMPL, "compact, rebuild_dv (table/indexes/, maintenance/regenerate/rebuild_dv.py); "
       "with merge-engine=first-row refused (semantic table)"),
    _g("deletion-vector.index-file.target-size deletion-vectors.modifiable "
       "deletion-vectors.merge-on-read", _IRR, "a size hint and readers'/writers' modes"),
    _g("record-level.expire-time record-level.time-field", _IMPL,
       "compact (lsm/merge/record_expire.py)"),
    # ---- compaction picking -----------------------------------------------------------------
    _g("num-sorted-run.compaction-trigger num-sorted-run.stop-trigger num-levels "
       "compaction.max-size-amplification-percent compaction.size-ratio "
       "compaction.optimization-interval compaction.total-size-threshold "
       "compaction.incremental-size-threshold compaction.offpeak.start.hour "
       "compaction.offpeak.end.hour compaction.offpeak-ratio compaction.force-up-level-0 "
       "compaction.force-rewrite-all-files compaction.small-file-ratio", _IMPL,
       "compact (lsm/picker.py, table/options/compaction.py, table/options/files.py)"),
    _g("compaction.min.file-num compaction.file-num-limit source.split.open-file-cost "
       "compaction.skip-expired-partitions full-compaction.delta-commits", _IMPL,
       "compact (maintenance/compact/append_windows.py, plan.py)"),
    _g("write-only", _IMPL, "status (table/duties.py): whether writers leave compaction and "
       "expiry to a maintainer"),
    _g("commit.force-compact", _IRR, "writers compact before each commit"),
    _g("write.compaction-skip", _IRR, "the older spelling of write-only (Java's fallback key); "
       "status reads write-only"),
    _g("pk-clustering-override", _REF, "data files sorted by clustering.columns; compacting in "
       "key order would undo the clustering (semantic table)"),
    _g("clustering.columns clustering.strategy clustering.incremental "
       "clustering.history-partition.idle-to-full-sort zorder.var-length-contribution", _IMPL,
       "compact (maintenance/compact/cluster_plan.py, sort_compact.py)"),
    _g("clustering.incremental.mode clustering.incremental.optimize-write "
       "clustering.history-partition.limit sort-compaction.range-strategy "
       "sort-compaction.local-sample.magnification", _IRR,
       "how Java distributes a sort over tasks; paimond sorts each task globally"),
    # ---- files ------------------------------------------------------------------------------
    _g("file.format file.format.per.level file.compression file.compression.per.level "
       "file.compression.zstd-level file.block-size file.suffix.include.compression "
       "metadata.stats-mode metadata.stats-mode.per.level metadata.stats-dense-store "
       "metadata.stats-keep-first-n-columns data-file.prefix data-file.path-directory "
       "data-file.thin-mode target-file-size", _IMPL,
       "compact, rewrite_index (table/options/files.py, table/data_files/); formats paimond "
       "lacks refused (semantic table)"),
    _g("target-file-row-num", _IRR, "writers roll new files by it; Java's compaction does not "
       "(key-value compaction writes without a row limit, append compaction by size)"),
    _g("data-file.external-paths data-file.external-paths.strategy "
       "data-file.external-paths.specific-fs data-file.external-paths.weights", _IMPL,
       "compact, remove_orphans (table/data_files/external_paths.py)"),
    _g("file-index.in-manifest-threshold file-index.<type>.columns "
       "file-index.<type>.<c>.<option>", _IMPL,
       "compact, rewrite_index (table/options/file_index.py)"),
    _g("file-index.read.enabled", _IRR, "readers' use of the file indexes"),
    _g("index-file-in-data-file-dir", _REF, "index files live in the bucket directories; "
       "paimond writes and finds them under index/ (semantic table)"),
    _g("parquet.enable.dictionary variant.shreddingSchema variant.inferShreddingSchema "
       "variant.shredding.inferenceMode variant.shredding.maxSchemaWidth "
       "variant.shredding.maxSchemaDepth variant.shredding.minFieldCardinalityRatio "
       "variant.shredding.maxInferBufferRow variant.shredding.adaptive.maxInferBufferRow "
       "variant.shredding.adaptive.retentionRatio", _IRR,
       "encodings of Java's format writers; files written without them read the same"),
    _g("parquet.* orc.* avro.* csv.* json.* text.* lance.*", _IRR,
       "passed to the format writer's library (Java FileFormat identifier prefix); encodings "
       "that readers read the same"),
    # ---- row tracking, data evolution, blob, vector, indexes --------------------------------
    _g("row-tracking.enabled", _IMPL, "compact (table/data_files/row_tracking.py)"),
    _g("row-tracking.partition-group-on-commit", _IRR,
       "how writers' commits assign new row ids; compaction keeps the ids it reads"),
    _g("data-evolution.enabled", _REF, "data files hold some columns only; paimond reads and "
       "rewrites whole rows (semantic table)"),
    _g("data-evolution.*", _IRR, "only with data-evolution.enabled, itself refused"),
    _g("blob-field blob-descriptor-field blob.stored-descriptor-fields blob-view-field", _REF,
       "blob columns live in .blob files paimond neither reads nor writes (semantic table)"),
    _g("blob-as-descriptor blob-compaction.enabled blob-view.resolve.enabled "
       "blob-write-null-on-missing-file blob-write-null-on-fetch-failure blob.copy-buffer-size "
       "blob.split-by-file-size blob.target-file-size blob-descriptor.source-table", _IRR,
       "only with a blob field, itself refused"),
    _g("vector-field", _REF, "vector columns live in files paimond neither reads nor writes "
       "(semantic table)"),
    _g("vector.file.format vector.target-file-size vector-index.search-mode "
       "vector-search.distribute.enabled vector-search.lateral-join.batch-size "
       "vector-search.lateral-join.parallelism", _IRR,
       "only with a vector field (itself refused) or vector searches"),
    _g("pk-vector.index.columns pk-btree.index.columns pk-bitmap.index.columns "
       "pk-multivalue.index.columns pk-full-text.index.columns", _REF,
       "primary-key indexes Paimon maintains with the data files; paimond does not write "
       "them (semantic table)"),
    _g("global-index.* scalar-index.search-mode full-text-index.search-mode bitmap-index.* "
       "multivalue-index.* btree-index.* sorted-index.*", _IRR,
       "global indexes: built by their own actions over row-tracking tables and read by "
       "searches; compaction keeps the row ids they address"),
    _g("metadata.iceberg.storage", _REF, "Iceberg metadata Java's commits keep beside the "
       "table; paimond's commits would leave it stale (semantic table)"),
    _g("metadata.iceberg.*", _IRR, "only with metadata.iceberg.storage, itself refused"),
    # ---- manifests and commits --------------------------------------------------------------
    _g("manifest.target-file-size manifest.merge-min-count "
       "manifest.full-compaction-threshold-size manifest.compression", _IMPL,
       "merge_manifests (table/commit/manifest_merge.py)"),
    _g("manifest.format", _REF, "manifests in a format other than avro (Paimon 2.0's option): "
       "paimond reads and writes avro manifests (semantic table)"),
    _g("manifest-sort.enabled manifest-sort.partition-field manifest-sort.max-rewrite-size "
       "manifest.merge-optimize.enabled manifest.delete-file-drop-stats", _IRR,
       "layout choices of Java's committer; manifests paimond writes stay valid"),
    _g("write.sequence-number-init-mode", _IMPL,
       "every commit (table/commit/committer.py merged_properties): the highest sequence "
       "number in the snapshot's properties, which snapshot-mode writers start from"),
    _g("commit.timeout commit.max-retries commit.min-retry-wait commit.max-retry-wait "
       "commit.user-prefix commit.discard-duplicate-files commit.strict-mode.last-safe-snapshot "
       "commit.force-create-snapshot snapshot.ignore-empty-commit overwrite-upgrade "
       "dynamic-partition-overwrite commit.custom-listeners", _IRR,
       "writers' commits; paimond's committer retries by its own settings"),
    _g("commit.callbacks commit.callback.<class>.param", _IRR,
       "writers' commit callbacks (Java CommitCallback); a compaction changes no row"),
    _g("visibility-callback.enabled visibility-callback.timeout "
       "visibility-callback.check-interval", _IRR, "writers wait for compaction after commit"),
    # ---- expiry and duties ------------------------------------------------------------------
    _g("snapshot.num-retained.min snapshot.num-retained.max snapshot.time-retained "
       "snapshot.expire.limit snapshot.clean-empty-directories "
       "snapshot.expire.clean-empty-directories", _IMPL,
       "expire (maintenance/expire/snapshots.py, table/options/retention.py)"),
    _g("snapshot.expire.execution-mode", _IRR, "whether Java's writers expire synchronously"),
    _g("partition.expiration-time partition.expiration-check-interval "
       "partition.expiration-max-num partition.expiration-batch-size "
       "partition.expiration-strategy partition.timestamp-formatter partition.timestamp-pattern "
       "partition.default-name partition.legacy-name metastore.partitioned-table "
       "chain-table.enabled", _IMPL,
       "expire_partitions (maintenance/expire/partitions.py), every job's partition paths"),
    _g("end-input.check-partition-expire partition.timestamp-format.strict "
       "partition.end-input-to-done partition.mark-done-action "
       "partition.mark-done-action.custom.class partition.mark-done-action.http.url "
       "partition.mark-done-action.http.params partition.mark-done-action.mode "
       "partition.mark-done.recover-from-state partition.idle-time-to-done "
       "partition.idle-time-to-report-statistic partition.time-interval "
       "partition.sink-strategy", _IRR, "writers' partition handling (mark-done, statistics)"),
    _g("chain-table.chain-partition-keys chain-table.streaming.merge-snapshot "
       "chain-table.split.key-range-enabled scan.fallback-snapshot-branch "
       "scan.fallback-delta-branch", _IRR, "chain tables' reads across branches"),
    _g("tag.automatic-creation tag.creation-period tag.creation-period-duration "
       "tag.creation-delay tag.period-formatter tag.automatic-completion "
       "tag.num-retained-max tag.default-time-retained tag.time-expire-enabled "
       "tag.batch.customized-name tag.callbacks tag.callback.<class>.param "
       "tag.create-success-file metastore.tag-to-partition sink.process-time-zone "
       "sink.watermark-time-zone", _IMPL,
       "tags, expire_tags (maintenance/tags/); callbacks, success files and tag-to-partition "
       "refused by the tags job"),
    _g("metastore.tag-to-partition.preview snapshot.watermark-idle-timeout", _IRR,
       "a Hive engine's preview of future tags; idle sources advancing writers' watermarks"),
    _g("auto-create", _IRR, "whether engines create a table's directory on first access"),
    _g("consumer.expiration-time", _IMPL, "expire_consumers (maintenance/expire/consumers.py)"),
    _g("consumer-id consumer.mode consumer.ignore-progress", _IRR,
       "streaming readers' consumers; expiry reads the consumer files they leave"),
    # ---- writers, readers, engines ----------------------------------------------------------
    _g("write-buffer-size write-buffer-spillable write-buffer-spill.max-disk-size "
       "write-buffer-for-append write-max-writers-to-spill write.batch-size write.batch-memory "
       "page-size cache-page-size local-sort.max-num-file-handles sort-engine "
       "sort-spill-threshold sort-spill-buffer-size spill-compression "
       "spill-compression.zstd-level local-merge-buffer-size async-file-write "
       "file-operation.thread-num delete-file.thread-num file-reader-async-threshold local-kv-db.block-size "
       "read.batch-size", _IRR, _WRITERS),
    _g("upsert-key", _IRR, "writers turn INSERT INTO an append table into MERGE INTO by it "
       "(Paimon 2.0); what they commit is compacted as any append table's"),
    _g("dynamic-bucket.target-row-num dynamic-bucket.initial-buckets dynamic-bucket.max-buckets "
       "dynamic-bucket.assigner-parallelism cross-partition-upsert.index-ttl "
       "cross-partition-upsert.bootstrap-parallelism", _IRR,
       "writers' bucket assignment; compaction keeps hash index files as they are"),
    _g("scan.* continuous.discovery-interval streaming.read.snapshot.delay "
       "streaming-read-overwrite streaming-read-append-overwrite stream-scan-mode "
       "batch-scan-mode incremental-between incremental-between-scan-mode "
       "incremental-between-timestamp incremental-to-auto-tag "
       "incremental-between-tag-to-snapshot source.* read.* table-read.sequence-number.enabled "
       "key-value.sequence_number.enabled log.scan log.scan.timestamp-millis", _IRR, _SCAN),
    _g("lookup.*", _IRR, _LOOKUP + "; lookup.remote-file.*: Java's compaction also writes "
       "remote lookup files, an accelerator lookups build locally without"),
    _g("sink.* end-input.watermark unaware-bucket.compaction.parallelism "
       "unaware-bucket.no-shuffle compaction.bucket-distribution-strategy "
       "filesystem.job-level-settings.enabled legacy-timestamp-mapping.enabled "
       "requiredSparkConfsCheck.enabled write.merge-schema write.merge-schema.explicit-cast "
       "write.merge-schema.type-widening write.use-v2-write "
       "write.hive-style-dynamic-partition.enabled "
       "write.data-evolution.update-conflict-retry.max-attempts "
       "write.data-evolution.update-conflict-retry.wait-ms", _IRR,
       "Flink's and Spark's job settings (FlinkConnectorOptions, SparkConnectorOptions)"),
    _g("fs.* s3.* s3a.* oss.* hadoop.* dlf.*", _IRR,
       "file system settings engines read; paimond's storage is configured by the daemon"),
    _g("format-table.*", _IRR, "format tables: plain files without snapshots, nothing to "
       "maintain"),
    _g("materialized-table.* query-auth.enabled alter-column-null-to-not-null.disabled "
       "disable-explicit-type-casting add-column-before-partition", _IRR,
       "catalog and schema-evolution settings; maintenance reads the schema as it is"),
)


def _pattern(key: str) -> re.Pattern[str]:
    star = key.endswith("*")
    parts = re.split(r"<[^>]+>", key[:-1] if star else key)
    return re.compile(".+".join(re.escape(p) for p in parts) + (".*" if star else ""),
                      re.DOTALL)


def _is_pattern(key: str) -> bool:
    return "<" in key or key.endswith("*")


_EXACT: dict[str, OptionGroup] = {}
for _group in OPTION_CATALOGUE:
    for _key in _group.keys:
        if not _is_pattern(_key):
            _EXACT.setdefault(_key, _group)
_PATTERNS: tuple[tuple[re.Pattern[str], OptionGroup], ...] = tuple(
    (_pattern(key), group) for group in OPTION_CATALOGUE for key in group.keys
    if _is_pattern(key))


def decide(key: str) -> OptionGroup | None:
    """The row deciding ``key``, or None when no row does (an undecided key)."""
    exact = _EXACT.get(key)
    if exact is not None:
        return exact
    return next((group for pattern, group in _PATTERNS if pattern.fullmatch(key)), None)


def undecided(keys: Iterable[str], accepted: Iterable[str] = ()) -> tuple[str, ...]:
    """The keys no row decides, in key order, less the ``accepted`` ones."""
    allowed = set(accepted)
    return tuple(sorted(k for k in set(keys) if k not in allowed and decide(k) is None))


def undecided_options(raw: Mapping[str, str], accepted: Iterable[str] = ()) -> tuple[str, ...]:
    return undecided(raw, accepted)


def counts() -> dict[Decision, int]:
    """Keys and patterns per decision."""
    out: dict[Decision, int] = dict.fromkeys(DECISIONS, 0)
    for group in OPTION_CATALOGUE:
        out[group.decision] += len(group.keys)
    return out


def markdown_table() -> str:
    """The catalogue as docs/table-options.md shows it (a test keeps the two equal)."""
    lines = ["| keys | decision | where / why |", "|---|---|---|"]
    for group in OPTION_CATALOGUE:
        keys = ", ".join(f"`{k}`" for k in group.keys)
        lines.append(f"| {keys} | {group.decision} | {group.where} |")
    return "\n".join(lines)
