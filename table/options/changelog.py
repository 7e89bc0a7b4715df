"""The options of changelog produced by compaction (Java ``CoreOptions``: ``changelog-producer``,
``changelog-producer.row-deduplicate`` and its ignore fields, ``changelog-file.*``; the file
settings as ``KeyValueFileWriterFactory`` applies them to a changelog ``WriteFormatKey``).

A changelog file is written like a data file of its level, except: named
``<changelog-file.prefix><uuid>-<n>.<format>``; ``changelog-file.format``,
``.compression`` and ``.stats-mode`` replace the table's (and their per-level settings) when
set; no file index (changelog is consumed sequentially).
"""

from __future__ import annotations

from dataclasses import dataclass

from paimond.format.meta.schema import TableSchema
from paimond.table.options.core import TableOptions

PRODUCERS = ("lookup", "full-compaction")  # the producers that write changelog files here


@dataclass(frozen=True, slots=True)
class ChangelogOptions:
    producer: str | None  # lookup, full-compaction, or None (compaction writes none)
    row_deduplicate: bool
    ignore_fields: tuple[str, ...]
    force_lookup: bool = False  # force-lookup: merged as lookup tables are, without changelog

    @classmethod
    def of(cls, options: TableOptions) -> ChangelogOptions:
        producer = options.changelog_producer
        ignore = options.raw.get("changelog-producer.row-deduplicate-ignore-fields")
        return cls(producer if producer in PRODUCERS else None,
                   (options.raw.get("changelog-producer.row-deduplicate") or "false")
                   .strip().lower() == "true",
                   tuple(ignore.split(",")) if ignore else (),
                   (options.raw.get("force-lookup") or "false").strip().lower() == "true")

    def compared_columns(self, schema: TableSchema) -> tuple[str, ...] | None:
        """The value columns row-deduplicate compares (None: it is off). Java splits the
        ignore list on commas without trimming, so ``a, b`` ignores ``a`` and `` b``."""
        if not self.row_deduplicate:
            return None
        return tuple(f.name for f in schema.fields if f.name not in self.ignore_fields)


def changelog_file_options(options: TableOptions) -> TableOptions:
    """The options a changelog file is written with (see the module doc)."""
    raw = dict(options.raw)
    raw["data-file.prefix"] = raw.get("changelog-file.prefix") or "changelog-"
    for setting, table_key in (("format", "file.format"), ("compression", "file.compression"),
                               ("stats-mode", "metadata.stats-mode")):
        value = raw.get(f"changelog-file.{setting}")
        if value:
            raw[table_key] = value
            raw.pop(f"{table_key}.per.level", None)
    for key in [k for k in raw if k.startswith("file-index.")]:
        del raw[key]
    return TableOptions(raw, options.schema_version, options.has_primary_key)
