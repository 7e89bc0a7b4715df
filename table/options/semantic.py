"""The semantic options: every Paimon table option that changes what a maintenance job must
produce, with the jobs it affects and how paimond handles it (Java ``CoreOptions``, apache/paimon
5dacde516b, gone through key by key; options that only tune writers, readers, scans, commits
or sizes are not listed).

``implemented``: paimond produces what Paimon would. ``refused``: the job refuses a table that
sets it, at plan time, before writing anything, with the reason; the table's other jobs still
run. ``not affecting``: listed so the choice is visible (it only matters together with a refused
option, or only to writers and readers).

Jobs are the registry's names (``maintenance/jobs.py``) and the duties no job performs yet
(``expire_changelogs``): a row for one of these is refused until its job
exists; flipping its ``handling`` to ``implemented`` (and dropping its ``setting``) is all the
table needs then. Every job's plan calls
:func:`refuse` (or :func:`refusals`) first. Which keys exist at all, and which of them are
decided, is the option catalogue's (``catalogue.py``): compaction also refuses a key it lacks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from paimond.errors import RefusedError
from paimond.format.meta.schema import TableSchema
from paimond.table.data_files.file_formats import FORMATS
from paimond.table.options.catalogue import undecided
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions, invalid_options
from paimond.table.options.merge import ENGINES

Handling = Literal["implemented", "refused", "not affecting"]

# Aggregate functions lsm/merge/engines.py reduces exactly (a test keeps the two equal).
AGGREGATE_FUNCTIONS = frozenset({
    "last_value", "last_non_null_value", "primary-key", "first_value", "first_non_null_value",
    "first_not_null_value", "sum", "product", "min", "max", "bool_and", "bool_or",
    "listagg", "collect", "merge_map", "rbm32", "rbm64", "hll_sketch", "theta_sketch",
    "nested_update", "nested_partial_update", "merge_map_with_keytime"})

Setting = Callable[[TableOptions], str | None]


def _never(_: TableOptions) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class SemanticOption:
    """One row: ``setting`` returns the table's offending setting (``key=value``) when a
    ``refused`` row applies to it, else None."""

    option: str
    jobs: tuple[str, ...]
    handling: Handling
    note: str
    setting: Setting = _never


@dataclass(frozen=True, slots=True)
class Refusal:
    job: str
    option: str
    setting: str  # the table's own key=value that triggered it
    reason: str

    def describe(self) -> str:
        return f"{self.setting}: {self.reason}"


# ---- settings (what a table sets, as text) --------------------------------------------------


def _set(key: str) -> Setting:
    return lambda o: f"{key}={o.raw[key]}" if o.text(key) else None


def _true(key: str) -> Setting:
    return lambda o: f"{key}=true" if o.flag(key) else None


def _any_set(*keys: str) -> Setting:
    def setting(options: TableOptions) -> str | None:
        return next((s for s in (_set(k)(options) for k in keys) if s), None)
    return setting


def _pk(setting: Setting) -> Setting:
    return lambda o: setting(o) if o.has_primary_key else None


def _engine_unknown(options: TableOptions) -> str | None:
    engine = options.merge_engine
    return f"merge-engine={engine}" if engine not in ENGINES else None


def _aggregate_unknown(options: TableOptions) -> str | None:
    if options.merge_engine not in ("aggregation", "partial-update"):  # partial-update: in groups
        return None
    default = options.default_aggregate_function
    functions = {f"fields.{c}.aggregate-function": f
                 for c, f in sorted(options.field_options("aggregate-function").items())}
    if default not in AGGREGATE_FUNCTIONS:
        functions = {"fields.default-aggregate-function": default} | functions
    return next((f"{k}={f}" for k, f in functions.items() if f not in AGGREGATE_FUNCTIONS), None)


def _full_compaction_dv(options: TableOptions) -> str | None:
    return ("changelog-producer=full-compaction with deletion-vectors.enabled=true"
            if options.deletion_vectors_enabled and options.changelog_producer == "full-compaction"
            else None)


def _first_row_dv(options: TableOptions) -> str | None:
    return ("merge-engine=first-row with deletion-vectors.enabled=true"
            if options.deletion_vectors_enabled and options.merge_engine == "first-row" else None)


def _append(options: TableOptions) -> str | None:
    return None if options.has_primary_key else "no primary key (append table)"


def _postponed(options: TableOptions) -> bool:
    """``bucket = -2``, read without raising (an unreadable value is refused on its own)."""
    return options.text("bucket") == str(BUCKET_POSTPONE)


def _postpone_hive_buckets(options: TableOptions) -> str | None:
    kind = (options.text("bucket-function.type") or "default").lower()
    return (f"bucket=-2 with bucket-function.type={kind}"
            if _postponed(options) and kind not in ("default", "mod") else None)


def _map_layout(options: TableOptions) -> str | None:
    layouts = options.field_options("map.storage-layout")
    return next((f"fields.{c}.map.storage-layout={v}" for c, v in sorted(layouts.items())
                 if v.lower() != "default"), None)


def _iceberg(options: TableOptions) -> str | None:
    storage = options.text("metadata.iceberg.storage")
    return (f"metadata.iceberg.storage={storage}"
            if storage is not None and storage.lower() != "disabled" else None)


def _manifest_format(options: TableOptions) -> str | None:
    value = options.text("manifest.format")
    return f"manifest.format={value}" if value is not None and value.lower() != "avro" else None


def _file_format(options: TableOptions) -> str | None:
    formats = {options.file_format, *options.file_format_per_level.values()}
    return next((f"file.format={f}" for f in sorted(formats) if f not in FORMATS), None)


# ---- the table -----------------------------------------------------------------------------

COMPACT, EXPIRE, MANIFESTS, ORPHANS, INDEX, DV = (
    "compact", "expire", "merge_manifests", "remove_orphans", "rewrite_index", "rebuild_dv")
_NOT_WRITTEN = "paimond writes no such files"

SEMANTIC_OPTIONS: tuple[SemanticOption, ...] = (
    # merge engine and its settings
    SemanticOption("merge-engine (deduplicate, partial-update, aggregation, first-row)", (COMPACT,),
                   "implemented", "lsm/merge/engines.py"),
    SemanticOption("merge-engine (any other)", (COMPACT,), "refused",
                   "paimond merges with deduplicate, partial-update, aggregation and first-row "
                   "only", _pk(_engine_unknown)),
    SemanticOption("fields.<c>.aggregate-function, fields.default-aggregate-function", (COMPACT,),
                   "implemented", ", ".join(sorted(AGGREGATE_FUNCTIONS))),
    SemanticOption("fields.<c>.aggregate-function (any other: custom functions)", (COMPACT,),
                   "refused", "paimond does not implement this aggregate function; compacting "
                   "would merge the column differently from Paimon", _pk(_aggregate_unknown)),
    SemanticOption("fields.<c>.ignore-retract", (COMPACT,), "implemented",
                   "aggregation engine and partial-update sequence groups"),
    SemanticOption("fields.<c>.{distinct, list-agg-delimiter}", (COMPACT,), "implemented",
                   "listagg and collect (lsm/merge/row_merge.py)"),
    SemanticOption("fields.<c>.{nested-key, nested-key-null-strategy, nested-sequence-field, "
                   "count-limit, ts-field}", (COMPACT,), "implemented",
                   "nested_update, nested_partial_update, merge_map_with_keytime "
                   "(lsm/merge/nested_aggregates.py)"),
    SemanticOption("fields.<c>.sequence-group", (COMPACT,), "implemented",
                   "per key in Python (lsm/merge/row_merge.py, Java PartialUpdateMergeFunction): "
                   "several sequence fields, aggregate functions and retraction per group"),
    SemanticOption("partial-update.remove-record-on-delete", (COMPACT,), "implemented",
                   "a -D removes the row (lsm/merge/row_merge.py)"),
    SemanticOption("partial-update.remove-record-on-sequence-group", (COMPACT,), "implemented",
                   "a -D newer in the named groups removes the row (lsm/merge/row_merge.py)"),
    SemanticOption("aggregation.remove-record-on-delete", (COMPACT,), "implemented",
                   "a -D removes the row (lsm/merge/row_merge.py)"),
    SemanticOption("ignore-delete (and first-row., deduplicate., partial-update. prefixes)", (COMPACT,),
                   "implemented", "-U/-D records are dropped while merging"),
    SemanticOption("fields.<c>.map.storage-layout (shared-shredding)", (COMPACT, INDEX),
                   "refused", "the MAP column is stored as a shared-shredding row; paimond "
                   "reads and writes MAP columns in the plain key-value layout only", _map_layout),
    SemanticOption("sequence.field, sequence.field.sort-order", (COMPACT,), "implemented",
                   "versions ordered by the sequence fields, then the sequence number"),
    SemanticOption("sequence.snapshot-ordering", (COMPACT,), "refused",
                   "ordering versions by commit snapshot is not implemented",
                   _pk(_true("sequence.snapshot-ordering"))),
    SemanticOption("rowkind.field, ignore-update-before, delete.force-produce-changelog", (),
                   "not affecting", "applied by writers"),
    # changelog
    SemanticOption("changelog-producer (none, input)", (COMPACT,), "implemented",
                   "compaction produces no changelog, as Paimon's does not"),
    SemanticOption("changelog-producer (any)", (EXPIRE,), "implemented",
                   "expire deletes a snapshot's changelog files with it"),
    SemanticOption("changelog-producer (lookup, full-compaction)", (COMPACT,), "implemented",
                   "lsm/merge/changelog.py: changelog files from compactions of level-0 files "
                   "(lookup: every merge engine, with deletion vectors too) or into the max "
                   "level (full-compaction), in the COMPACT snapshot's changelog manifest list"),
    SemanticOption("changelog-producer=full-compaction with deletion-vectors.enabled", (COMPACT,),
                   "refused", "Java compacts such a table without maintaining its vectors; "
                   "paimond does not reproduce that", _pk(_full_compaction_dv)),
    SemanticOption("changelog-producer.row-deduplicate (and -ignore-fields), changelog-file.*",
                   (COMPACT,), "implemented",
                   "equal before/after values give no -U/+U; changelog files get "
                   "changelog-file.prefix, .format, .compression, .stats-mode"),
    SemanticOption("lookup-compact, lookup-compact.max-interval, changelog-producer.lookup-wait",
                   (COMPACT,), "implemented",
                   "tables that look level-0 keys up (lookup changelog, deletion vectors, "
                   "first-row) push level 0 up at every compaction (radical) or within the "
                   "interval (gentle); lookup-wait is a writer's wait for it, the daemon counts "
                   "changelog latency instead"),
    SemanticOption("force-lookup", (COMPACT,), "implemented",
                   "level-0 keys merged with their lowest higher version (Java "
                   "LookupMergeFunction, as readers merge such a table), no changelog"),
    SemanticOption("changelog.num-retained.min/max, changelog.time-retained (above the "
                   "snapshot settings: decoupled changelog), consumer.changelog-only", (EXPIRE,),
                   "implemented", "expire keeps expired snapshots as long-lived changelogs, "
                   "then expires those (Java ExpireChangelogImpl)"),
    # deletion vectors
    SemanticOption("deletion-vectors.enabled, deletion-vectors.bitmap64", (COMPACT, DV), "implemented",
                   "levels >= 1 keep one live row per key; vectors in the bucket's index file"),
    SemanticOption("deletion-vectors.enabled with merge-engine=first-row", (COMPACT,), "refused",
                   "Paimon refuses the combination", _pk(_first_row_dv)),
    SemanticOption("deletion-vector.index-file.target-size, deletion-vectors.modifiable, "
                   "deletion-vectors.merge-on-read", (), "not affecting",
                   "a size hint and reader/writer modes"),
    # record-level expiry
    SemanticOption("record-level.expire-time, record-level.time-field", (COMPACT,),
                   "implemented", "lsm/merge/record_expire.py (Java RecordLevelExpire): compaction "
                   "drops rows past their TTL"),
    # clustering
    SemanticOption("pk-clustering-override", (COMPACT, DV), "refused",
                   "data files are sorted by clustering.columns, not the primary key; "
                   "compacting in key order would undo the clustering",
                   _pk(_true("pk-clustering-override"))),
    SemanticOption("clustering.incremental, clustering.columns, clustering.strategy (append "
                   "tables)", (COMPACT,), "implemented",
                   "maintenance/compact/cluster_plan.py (Java IncrementalClusterManager): universal "
                   "picks per partition, rewritten in order/z-order/Hilbert order at the "
                   "output level"),
    SemanticOption("clustering.* (other)", (COMPACT,), "not affecting",
                   "clustering.incremental.mode: paimond sorts a task globally either way; "
                   "optimize-write: writers; history-partition: refused by the plan when "
                   "partitions are named"),
    # files and layout
    SemanticOption("file.format, file.format.per.level (parquet, orc, avro, row)", (COMPACT, INDEX),
                   "implemented", "with file.compression*, metadata.stats-*, data-file.prefix, "
                   "data-file.path-directory, data-file.thin-mode, target-file-size"),
    SemanticOption("file.format (any other)", (COMPACT,), "refused",
                   f"paimond writes {', '.join(FORMATS)} data files only", _file_format),
    SemanticOption("data-file.external-paths (and .strategy, .specific-fs, .weights)",
                   (COMPACT, ORPHANS), "implemented",
                   "table/data_files/external_paths.py (Java ExternalPathProvider): new data and changelog "
                   "files go to the external paths; orphan removal scans them"),
    SemanticOption("index-file-in-data-file-dir", (COMPACT, DV, ORPHANS), "refused",
                   "index files live in the bucket directories; paimond writes and finds them "
                   "under index/", _true("index-file-in-data-file-dir")),
    SemanticOption("file-index.*", (COMPACT, INDEX), "implemented",
                   "new data files get their indexes; rewrite-index rebuilds them"),
    # bucket modes
    SemanticOption("bucket (fixed, dynamic -1, cross-partition)", (COMPACT,), "implemented",
                   "compaction keeps every file in its bucket; hash index files are kept"),
    SemanticOption("bucket=-2 (postpone), postpone.default-bucket-num, "
                   "postpone.target-row-num-per-bucket, postpone.target-size-per-bucket",
                   (COMPACT,), "implemented",
                   "maintenance/compact/postpone.py: the postpone bucket's rows moved into "
                   "real buckets (Java's postpone compactor), then compacted"),
    SemanticOption("bucket-function.type=hive on a postpone table", (COMPACT,), "refused",
                   "paimond assigns postpone rows with the default and mod bucket functions "
                   "only", _postpone_hive_buckets),
    SemanticOption("primary-key (absent: append table)", (COMPACT,), "implemented",
                   "maintenance/compact/append_plan.py (Java AppendCompactCoordinator, "
                   "BucketedAppendCompactManager): small files concatenated, in order"),
    SemanticOption("compaction.min.file-num, compaction.file-num-limit, "
                   "source.split.open-file-cost", (COMPACT,),
                   "implemented", "append-table compaction picks as Paimon's"),
    SemanticOption("primary-key (absent: append table)", (DV,), "refused",
                   "append tables have no LSM tree; rebuild-dv serves primary-key tables",
                   _append),
    SemanticOption("deletion-vectors.enabled on append tables, compaction.delete-ratio-threshold",
                   (COMPACT,), "implemented", "inputs read through their vectors; the index "
                   "files that held them rewritten without them (Java AppendDeleteFileMaintainer)"),
    SemanticOption("bucket-key, bucket-function.type (default, mod)", (COMPACT,), "implemented",
                   "writers assign buckets and maintenance keeps them; a postpone table's rows "
                   "are assigned by table/bucketing.py"),
    # row tracking, data evolution, blob, vector, primary-key indexes
    SemanticOption("row-tracking.enabled", (COMPACT,), "implemented",
                   "table/data_files/row_tracking.py: compacted files hold each row's _ROW_ID and "
                   "_SEQUENCE_NUMBER and no firstRowId, as Java's; nextRowId unchanged"),
    SemanticOption("data-evolution.enabled", (COMPACT, INDEX), "refused",
                   "data files hold some columns only; paimond reads and rewrites whole rows",
                   _true("data-evolution.enabled")),
    SemanticOption("blob-field, blob-descriptor-field (blob.stored-descriptor-fields), "
                   "blob-view-field", (COMPACT, INDEX), "refused",
                   "blob columns live in .blob files paimond neither reads nor writes",
                   _any_set("blob-field", "blob-descriptor-field", "blob.stored-descriptor-fields",
                            "blob-view-field")),
    SemanticOption("vector-field, vector.file.format", (COMPACT, INDEX), "refused",
                   "vector columns live in files paimond neither reads nor writes",
                   _set("vector-field")),
    SemanticOption("pk-{vector,btree,bitmap,multivalue,full-text}.index.columns", (COMPACT,),
                   "refused", "primary-key indexes Paimon maintains with the data files; "
                   "paimond does not write them", _any_set(
                       "pk-vector.index.columns", "pk-btree.index.columns",
                       "pk-bitmap.index.columns", "pk-multivalue.index.columns",
                       "pk-full-text.index.columns")),
    SemanticOption("metadata.iceberg.storage (other than disabled)", (COMPACT,), "refused",
                   "Java's commits keep Iceberg metadata beside the table; paimond's commits "
                   "do not, so Iceberg readers would go on reading files compaction replaced "
                   "until expiry deletes them", _iceberg),
    SemanticOption("global-index.*", (), "not affecting",
                   "global indexes serve row-tracking tables, which paimond does not compact"),
    # manifests
    SemanticOption("manifest.target-file-size, manifest.merge-min-count, "
                   "manifest.full-compaction-threshold-size, manifest.compression", (MANIFESTS,),
                   "implemented", "Paimon's manifest merge"),
    SemanticOption("manifest.format (other than avro)", (COMPACT, MANIFESTS), "refused",
                   "paimond reads and writes avro manifests only", _manifest_format),
    SemanticOption("manifest-sort.*, manifest.merge-optimize.enabled", (MANIFESTS,), "not affecting",
                   "layout choices of Java's committer; merged manifests stay valid"),
    SemanticOption("compaction.skip-expired-partitions", (COMPACT,), "implemented",
                   "plans skip partitions partition.expiration-time has expired"),
    SemanticOption("full-compaction.delta-commits", (COMPACT,), "implemented",
                   "a full compaction once that many writer commits came since paimond's last "
                   "one (marked in its snapshot's properties)"),
    # snapshot expiry
    SemanticOption("snapshot.num-retained.min/max, snapshot.time-retained, "
                   "snapshot.expire.limit, snapshot.clean-empty-directories", (EXPIRE,),
                   "implemented", "tags, consumers and branches keep what they use"),
    # duties of a maintainer (write-only writers leave them; Java's committer does them else)
    SemanticOption("partition.expiration-time (and partition.expiration-*, "
                   "partition.timestamp-*)", ("expire_partitions",), "implemented",
                   "maintenance/expire/partitions.py (Java PartitionExpire)"),
    SemanticOption("tag.automatic-creation, tag.creation-*, tag.period-formatter, "
                   "tag.automatic-completion", ("tags",), "implemented",
                   "maintenance/tags/job.py (Java TagAutoCreation)"),
    SemanticOption("tag.num-retained-max, tag.default-time-retained", ("tags", "expire_tags"),
                   "implemented", "maintenance/tags/job.py (Java TagTimeExpire)"),
    SemanticOption("consumer.expiration-time", ("expire_consumers",), "implemented",
                   "maintenance/expire/consumers.py (Java ConsumerManager.expire)"),
)


UNDECIDED = "undecided option"


def undecided_reason(key: str) -> str:
    """Why compaction refuses an undecided key, and how an operator accepts it."""
    return (f"an option paimond has not decided (a newer Paimon's, a plugin's or a typo): "
            f"compacting could write what Paimon would not; accept it with [jobs.compact] "
            f"allow_unknown_options = [\"{key}\"] or paimond compact "
            f"--allow-unknown-option {key}")


def refusals(options: TableOptions, job: str, accepted: Iterable[str] = ()) -> list[Refusal]:
    """What makes ``job`` refuse a table with these options (empty: it may run): the refused
    rows that apply, and for compaction every option key the catalogue
    (table/options/catalogue.py) does not decide, less the ``accepted`` ones."""
    out = []
    for row in SEMANTIC_OPTIONS:
        if row.handling == "refused" and job in row.jobs:
            setting = row.setting(options)
            if setting is not None:
                out.append(Refusal(job, row.option, setting, row.note))
    if job == COMPACT:
        out += [Refusal(job, UNDECIDED, f"{key}={options.raw[key]}", undecided_reason(key))
                for key in undecided(options.raw, accepted)]
    return out


def fingerprint(schema: TableSchema) -> str:
    """The schema id and a digest of its options: a refusal holds while both stay."""
    digest = hashlib.sha256(json.dumps(dict(schema.options), sort_keys=True).encode())
    return f"{schema.id}:{digest.hexdigest()[:16]}"


def refuse(schema: TableSchema, job: str, path: str | None = None,
           accepted: Iterable[str] = ()) -> None:
    """Raise RefusedError naming every reason ``job`` refuses the table, if any: options it
    does not implement, undecided options compaction was not told to accept (``accepted``),
    and option values it cannot read (``invalid_options``)."""
    options = TableOptions.of(schema)
    reasons = [r.describe() for r in refusals(options, job, accepted)] + [
        f"invalid option value: {problem}" for problem in invalid_options(options)]
    if reasons:
        raise RefusedError(job, "; ".join(reasons), path, fingerprint(schema))


def markdown_table() -> str:
    """The table as README.md shows it (a test keeps the two equal)."""
    lines = ["| option | jobs | handling | note |", "|---|---|---|---|"]
    for row in SEMANTIC_OPTIONS:
        jobs = ", ".join(row.jobs) or "-"
        lines.append(f"| `{row.option}` | {jobs} | {row.handling} | {row.note} |")
    return "\n".join(lines)
