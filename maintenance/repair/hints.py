"""``repair``: the ``EARLIEST`` and ``LATEST`` hints of ``snapshot/`` (and of ``changelog/``,
where long-lived changelogs are kept) rewritten to what the files present say. Java
``SnapshotManager`` / ``ChangelogManager`` with ``HintFileUtils`` (apache/paimon
release-2.0.0) read them; paimond's reading side is ``paimond.table.snapshots``.

What a wrong hint does to a Java reader: ``findLatest`` trusts ``LATEST`` whenever the next
id is absent, even if the snapshot it names is absent too (a hint beyond the last snapshot
makes readers open a snapshot that does not exist); ``findEarliest`` trusts ``EARLIEST``
whenever that snapshot exists (a hint above the first snapshot hides the older ones from
readers and from expiration). Otherwise, and when the hint is missing or is not a bare number
(Java's ``Long.parseLong``), readers list the directory, so such a hint only costs a listing.
A hint is right when its text is exactly the smallest (``EARLIEST``) or largest (``LATEST``)
id present, as Java's ``commitHint`` writes it; a directory with no snapshot file keeps no
hint.

No Java counterpart: Paimon's ``repair`` procedure syncs a Hive metastore's partitions (a
catalog feature). Snapshot files are only listed, never read, written or deleted. The
snapshot directory's ``EARLIEST`` is left as it is while an expiration record is pending
(``maintenance/expire/record.py`` moves it first; the next expiration finishes the record).
A commit or expiration running meanwhile may move a hint again: every reader verifies hints
as above.
"""

from __future__ import annotations

from dataclasses import dataclass

from paimond.errors import MissingFileError
from paimond.maintenance.expire.record import records_dir
from paimond.table.catalog import Table
from paimond.table.layout import (
    CHANGELOG_DIR,
    CHANGELOG_PREFIX,
    EARLIEST_HINT,
    LATEST_HINT,
    SNAPSHOT_DIR,
    SNAPSHOT_PREFIX,
)
from paimond.table.snapshots import Snapshots
from paimond.table.storage.interface import Storage

OK, MISSING, UNREADABLE, WRONG, EXTRA, PENDING = (
    "ok", "missing", "unreadable", "wrong", "extra", "pending-expiration")


@dataclass(frozen=True, slots=True)
class HintCheck:
    """One hint as found and as the files present say it should be."""

    directory: str  # ``snapshot`` or ``changelog``, under the branch's directory
    hint: str  # EARLIEST or LATEST
    found: str | None  # the hint's text (None: no hint file)
    expected: int | None  # the id it should name (None: no file present: no hint)
    state: str  # OK, MISSING, UNREADABLE (not a bare number), WRONG, EXTRA, PENDING
    repaired: bool

    @property
    def needs_repair(self) -> bool:
        return self.state in (MISSING, UNREADABLE, WRONG, EXTRA)

    def describe(self) -> str:
        where = f"{self.directory}/{self.hint}"
        found = repr(self.found) if self.found is not None else "no file"
        if self.state == OK:
            return f"{where}: {self.found} (right)" if self.found is not None else \
                f"{where}: none, and no {self.directory} file (right)"
        if self.state == PENDING:
            return (f"{where}: {found}, left alone: an expiration record is pending "
                    "(paimond expire-snapshots finishes it)")
        what = {MISSING: "missing (readers list the directory)",
                UNREADABLE: f"{found} is not a bare snapshot id",
                WRONG: f"{found} names the wrong id",
                EXTRA: f"{found}, but no {self.directory} file exists"}[self.state]
        fix = ("removed" if self.expected is None else f"set to {self.expected}") \
            if self.repaired else ("would be removed" if self.expected is None
                                   else f"would be set to {self.expected}")
        return f"{where}: {what}; {fix}"


@dataclass(frozen=True, slots=True)
class HintsResult:
    table_name: str
    hints: tuple[HintCheck, ...]
    dry_run: bool

    @property
    def wrong(self) -> int:
        return sum(1 for h in self.hints if h.needs_repair)

    def describe(self) -> str:
        verdict = ("every hint is right" if not self.wrong
                   else f"{self.wrong} hint(s) {'to repair (dry run)' if self.dry_run else 'repaired'}")
        return "\n".join([f"{self.table_name}: {verdict}",
                          *(f"  {h.describe()}" for h in self.hints)])


def repair_hints(table: Table, *, dry_run: bool = False) -> HintsResult:
    """Check, and unless ``dry_run`` rewrite, the hints of the branch's snapshot directory and
    of its changelog directory when that exists."""
    storage = table.storage
    pending = bool(storage.list_dir(records_dir(table)))
    checks: list[HintCheck] = []
    for directory, prefix in ((SNAPSHOT_DIR, SNAPSHOT_PREFIX), (CHANGELOG_DIR, CHANGELOG_PREFIX)):
        snapshots = Snapshots(storage, table.meta_path, directory=directory, prefix=prefix)
        listing = storage.list_dir(snapshots.directory)
        if not listing and directory == CHANGELOG_DIR:
            continue  # no long-lived changelogs
        ids = snapshots.list_ids()
        for hint, expected in ((EARLIEST_HINT, ids[0] if ids else None),
                               (LATEST_HINT, ids[-1] if ids else None)):
            held = pending and directory == SNAPSHOT_DIR and hint == EARLIEST_HINT
            checks.append(_check(storage, snapshots, directory, hint, expected,
                                 dry_run=dry_run, held=held))
    return HintsResult(table.name, tuple(checks), dry_run)


def _check(storage: Storage, snapshots: Snapshots, directory: str, hint: str,
           expected: int | None, *, dry_run: bool, held: bool) -> HintCheck:
    path = snapshots.hint_path(hint)
    found = _read(storage, path)
    if found is None:
        state = MISSING if expected is not None else OK
    elif expected is None:
        state = EXTRA
    elif not (found.isascii() and found.isdigit()):
        state = UNREADABLE
    else:
        state = OK if found == str(expected) else WRONG
    if held and state != OK:
        state = PENDING
    check = HintCheck(directory, hint, found, expected, state, repaired=False)
    if dry_run or not check.needs_repair:
        return check
    if expected is None:
        storage.delete(path)
    else:
        storage.write_bytes(path, str(expected).encode())
    return HintCheck(directory, hint, found, expected, state, repaired=True)


def _read(storage: Storage, path: str) -> str | None:
    """A hint's text as it is (None: no file); bytes that are not UTF-8 read as replaced."""
    try:
        return storage.read_bytes(path).decode("utf-8", errors="replace")
    except MissingFileError:
        return None
