"""Marking partitions done: Paimon's ``mark_partition_done`` procedure
(``MarkPartitionDoneProcedure``, ``PartitionMarkDoneAction``, release-2.0.0) with the table's
``partition.mark-done-action``.

Only ``success-file`` (``SuccessFileMarkDoneAction``) acts on a filesystem warehouse: it writes
``<table>/<partition path>/_SUCCESS``, Java's ``SuccessFile`` JSON (``creationTime``,
``modificationTime``, epoch milliseconds, Jackson's pretty printer), keeping the creation time
of a file already there. ``done-partition`` and ``mark-event`` act on a metastore (Java: "Cannot
mark done partition for table without metastore"), ``http-report`` and ``custom`` on a server or
a Java class: each is refused before anything is written, as Java creates every action first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from paimond.errors import ConfigError, CorruptFileError
from paimond.table.layout import escape_path_name

if TYPE_CHECKING:
    from paimond.clock import Clock
    from paimond.table.catalog import Table

ACTION_OPTION = "partition.mark-done-action"
SUCCESS_FILE_ACTION = "success-file"
SUCCESS_FILE_NAME = "_SUCCESS"
_REFUSED = {
    "done-partition": "adds a 'done' partition to a metastore, and paimond's warehouse has no "
                      "catalog (Paimon: cannot mark done partition for table without metastore)",
    "mark-event": "marks a partition event in a metastore, and paimond's warehouse has no "
                  "catalog (Paimon: cannot mark done partition for table without metastore)",
    "http-report": "reports to an HTTP server: not supported by paimond",
    "custom": "runs a Java class (partition.mark-done-action.custom.class): not supported by "
              "paimond",
}


@dataclass(frozen=True, slots=True)
class SuccessFile:
    """Java ``SuccessFile``: when the partition was first and last marked done (epoch ms)."""

    creation_time_ms: int
    modification_time_ms: int


def encode_success_file(success: SuccessFile) -> bytes:
    """Java's ``JsonSerdeUtil.toJson`` text: Jackson's default pretty printer."""
    return (f'{{\n  "creationTime" : {success.creation_time_ms},\n'
            f'  "modificationTime" : {success.modification_time_ms}\n}}').encode()


def decode_success_file(data: bytes, path: str) -> SuccessFile:
    """A ``_SUCCESS`` file's content (unknown fields ignored, as Java's
    ``@JsonIgnoreProperties(ignoreUnknown = true)``); CorruptFileError naming ``path``."""
    try:
        document = json.loads(data)
        return SuccessFile(int(document["creationTime"]), int(document["modificationTime"]))
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptFileError(path, f"invalid success file JSON: {error}") from None


@dataclass(frozen=True, slots=True)
class MarkedPartition:
    partition: str  # the partition's path under the table, ``dt=2024-01-01/``
    success_file: str
    creation_time_ms: int
    modification_time_ms: int
    existed: bool  # the success file was there: only its modification time moved


@dataclass(frozen=True, slots=True)
class PartitionDoneResult:
    table: str
    actions: tuple[str, ...]
    marked: tuple[MarkedPartition, ...]
    dry_run: bool

    def describe(self) -> str:
        verb = "would mark" if self.dry_run else "marked"
        lines = [f"{self.table}: {verb} {len(self.marked)} partition(s) done "
                 f"({', '.join(self.actions)})"]
        for m in self.marked:
            what = "updated" if m.existed else "created"
            lines.append(f"  {m.partition}: {m.success_file} {what} (creationTime "
                         f"{m.creation_time_ms}, modificationTime {m.modification_time_ms})")
        return "\n".join(lines)


def mark_done_actions(options: Mapping[str, str]) -> tuple[str, ...]:
    """The table's ``partition.mark-done-action`` list; ConfigError for any action paimond
    cannot take here, with the reason."""
    raw = options.get(ACTION_OPTION, SUCCESS_FILE_ACTION)
    actions = tuple(dict.fromkeys(a.strip().lower().replace("_", "-") for a in raw.split(",")))
    for action in actions:
        if action in _REFUSED:
            raise ConfigError(ACTION_OPTION, f"{action} {_REFUSED[action]}")
        if action != SUCCESS_FILE_ACTION:
            raise ConfigError(ACTION_OPTION, f"unknown action {action!r} (Paimon's: "
                                             f"{', '.join([SUCCESS_FILE_ACTION, *_REFUSED])})")
    return actions


def partition_dir(partition_keys: Sequence[str], spec: Mapping[str, str],
                  table: str = "the table") -> str:
    """Java ``PartitionPathUtils.generatePartitionPath``: ``k1=v1/k2=v2/`` in the table's key
    order, escaped. ``spec`` names the first keys (all, or a leading few: a parent directory);
    ConfigError for another key, a gap, or an empty value."""
    unknown = sorted(set(spec) - set(partition_keys))
    if unknown:
        raise ConfigError("--partition", f"{', '.join(unknown)} is not a partition key of "
                                          f"{table} (partition keys: {list(partition_keys)})")
    named = [k for k in partition_keys if k in spec]
    if not named or named != list(partition_keys[:len(named)]):
        raise ConfigError("--partition", f"name the leading partition keys "
                                          f"{list(partition_keys)}, got {sorted(spec)}")
    for key in named:
        if not spec[key]:
            raise ConfigError("--partition", f"{key}: an empty value cannot be a partition "
                                              "path component")
    return "".join(f"{escape_path_name(k)}={escape_path_name(spec[k])}/" for k in named)


def mark_partitions_done(table: Table, partitions: Sequence[Mapping[str, str]], clock: Clock,
                         *, dry_run: bool = False) -> PartitionDoneResult:
    """Run the table's mark-done actions on each partition, in order. Nothing is written when
    an action is refused or a partition spec is wrong (both checked first)."""
    schema = table.latest_schema()
    if not schema.partition_keys:
        raise ConfigError("--table", f"{table.name} is not partitioned")
    dirs = [partition_dir(schema.partition_keys, spec, table.name) for spec in partitions]
    actions = mark_done_actions(schema.options)
    marked = []
    for directory in dict.fromkeys(dirs):
        path = table.file_path(*directory.rstrip("/").split("/"), SUCCESS_FILE_NAME)
        now_ms = clock.wall_ms()
        existed = table.storage.exists(path)
        success = SuccessFile(now_ms, now_ms)
        if existed:
            old = decode_success_file(table.storage.read_bytes(path), path)
            success = SuccessFile(old.creation_time_ms, now_ms)
        if not dry_run:
            table.storage.write_bytes(path, encode_success_file(success))
        marked.append(MarkedPartition(directory, path, success.creation_time_ms,
                                      success.modification_time_ms, existed))
    return PartitionDoneResult(table.name, actions, tuple(marked), dry_run)
