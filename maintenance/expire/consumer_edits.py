"""Consumers by hand: Java's ``reset_consumer`` and ``clear_consumers`` procedures over
``ConsumerManager.resetConsumer`` / ``deleteConsumer`` / ``clearConsumers`` (apache/paimon
release-2.0.0).

``reset_consumer`` with a next snapshot (which must be a live snapshot, as Java loads it)
overwrites ``consumer/consumer-<id>`` with Java's ``Consumer.toJson``: Jackson's default
pretty printer, ``{\\n  "nextSnapshot" : N\\n}``; without one it deletes the consumer (a
missing one is not an error). ``clear_consumers`` deletes every consumer file whose id fully
matches ``including`` (blank: every id) and does not fully match ``excluding`` (blank: none
excluded), as Java's ``Matcher.matches``; the patterns are Python regular expressions, which
agree with Java's on the usual constructs. A file that does not parse is a consumer all the
same (Java lists files, it does not read them). Both act on the table's branch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from paimond.errors import ConfigError, MissingFileError
from paimond.maintenance.expire.consumers import list_consumers
from paimond.table.catalog import Table
from paimond.table.layout import CONSUMER_DIR, CONSUMER_PREFIX


def encode_consumer(next_snapshot: int) -> bytes:
    """Java ``Consumer.toJson`` (Jackson's default pretty printer)."""
    return f'{{\n  "nextSnapshot" : {next_snapshot}\n}}'.encode()


def _decode_next(data: bytes) -> int | None:
    try:
        value = json.loads(data)["nextSnapshot"]
    except (ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_consumer_id(consumer_id: str) -> str:
    """A consumer id Java accepts that is also one file name."""
    if not consumer_id or not consumer_id.strip():
        raise ConfigError("consumer", "a consumer id must not be blank")
    if "/" in consumer_id or "\\" in consumer_id or consumer_id in (".", ".."):
        raise ConfigError("consumer", f"{consumer_id!r} is not a file name")
    return consumer_id


def consumer_path(table: Table, consumer_id: str) -> str:
    return table.meta_file_path(CONSUMER_DIR, CONSUMER_PREFIX + check_consumer_id(consumer_id))


@dataclass(frozen=True, slots=True)
class ConsumerResetResult:
    table_name: str
    consumer_id: str
    existed: bool
    previous_next_snapshot: int | None  # None: no file, or one that does not parse
    next_snapshot: int | None  # None: the consumer is deleted
    dry_run: bool = False

    def describe(self) -> str:
        before = (f"next snapshot {self.previous_next_snapshot}" if self.existed
                  else "no consumer")
        if self.next_snapshot is not None:
            verb = "would reset" if self.dry_run else "reset"
            return (f"{self.table_name}: {verb} consumer {self.consumer_id!r} to next snapshot "
                    f"{self.next_snapshot} (was: {before})")
        if not self.existed:
            return f"{self.table_name}: consumer {self.consumer_id!r} does not exist; nothing to do"
        verb = "would delete" if self.dry_run else "deleted"
        return f"{self.table_name}: {verb} consumer {self.consumer_id!r} (was: {before})"


def reset_consumer(table: Table, *, consumer_id: str, next_snapshot: int | None = None,
                   dry_run: bool = False) -> ConsumerResetResult:
    """Point the consumer at ``next_snapshot`` (a live snapshot; ConfigError naming it when it
    is not), or delete it when None."""
    path = consumer_path(table, consumer_id)
    if next_snapshot is not None and not table.snapshots.exists(next_snapshot):
        raise ConfigError("next_snapshot", f"snapshot {next_snapshot} of {table.name} does "
                                           "not exist")
    storage = table.storage
    try:
        previous: int | None = _decode_next(storage.read_bytes(path))
        existed = True
    except MissingFileError:
        previous, existed = None, False
    result = ConsumerResetResult(table.name, consumer_id, existed, previous, next_snapshot,
                                 dry_run)
    if dry_run:
        return result
    if next_snapshot is None:
        storage.delete(path)
    else:
        storage.write_bytes(path, encode_consumer(next_snapshot))
    return result


@dataclass(frozen=True, slots=True)
class ConsumerClearResult:
    table_name: str
    including: str  # the pattern ids must match ('.*' when none was given)
    excluding: str | None
    consumers: tuple[str, ...]  # every consumer id found
    cleared: tuple[str, ...]  # those matched: deleted (or would be)
    dry_run: bool = False

    def describe(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        head = f"{self.table_name}: {len(self.consumers)} consumers, {verb} {len(self.cleared)}"
        kept = [c for c in self.consumers if c not in set(self.cleared)]
        return "\n".join([head] + [f"  {verb} {c}" for c in self.cleared]
                         + [f"  kept {c}" for c in kept])


def _pattern(text: str | None, key: str) -> re.Pattern[str] | None:
    if text is None or not text.strip():
        return None
    try:
        return re.compile(text)
    except re.error as error:
        raise ConfigError(key, f"{text!r} is not a regular expression: {error}") from None


def clear_consumers(table: Table, *, including: str | None = None,
                    excluding: str | None = None, dry_run: bool = False) -> ConsumerClearResult:
    """Delete the consumers ``including`` matches and ``excluding`` does not (whole ids)."""
    include = _pattern(including, "including") or re.compile(".*")
    exclude = _pattern(excluding, "excluding")
    found = list_consumers(table)
    cleared = tuple(c.consumer_id for c in found
                    if include.fullmatch(c.consumer_id)
                    and not (exclude is not None and exclude.fullmatch(c.consumer_id)))
    if not dry_run:
        paths = {c.consumer_id: c.path for c in found}
        for consumer_id in cleared:
            table.storage.delete(paths[consumer_id])
    return ConsumerClearResult(table.name, include.pattern,
                               None if exclude is None else exclude.pattern,
                               tuple(c.consumer_id for c in found), cleared, dry_run)
