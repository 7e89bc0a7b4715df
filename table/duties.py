"""A table's maintenance duties (what Java's committer or dedicated compaction job does for
it) and who performs each: paimond, the writers themselves (a duty Java's committer does
unless ``write-only=true``), nobody because paimond refuses it (the reason from
``semantic_options``), or nobody because the table does not need it. Derived from options
alone, so ``paimond status`` and tests read it without touching storage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from paimond.table.options.catalogue import undecided
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import refusals

Performer = Literal["paimond", "writers", "refused", "not needed"]


def _always(_: TableOptions) -> bool:
    return True


def _never(_: TableOptions) -> bool:
    return False


def _set(*keys: str) -> Callable[[TableOptions], bool]:
    return lambda o: any(o.text(k) for k in keys)


def _writers(options: TableOptions) -> bool:
    """Java's committer does it when writers are not write-only."""
    return not options.write_only


@dataclass(frozen=True, slots=True)
class Duty:
    name: str
    jobs: tuple[str, ...]  # the jobs (semantic_options names) that perform it
    needed: Callable[[TableOptions], bool]
    by_writers: Callable[[TableOptions], bool] = _never


DUTIES: tuple[Duty, ...] = (
    Duty("compaction", ("compact",), _always),
    Duty("snapshot expiry", ("expire",), _always),
    Duty("partition expiry", ("expire_partitions",), _set("partition.expiration-time"),
         _writers),
    Duty("tag creation", ("tags",),
         lambda o: (o.text("tag.automatic-creation") or "none").lower() != "none", _writers),
    Duty("tag expiry", ("tags", "expire_tags"),
         _set("tag.num-retained-max", "tag.default-time-retained"), _writers),
    Duty("consumer expiry", ("expire_consumers",), _set("consumer.expiration-time"), _writers),
    Duty("changelog expiry", ("expire",),
         lambda o: o.changelog_producer != "none" or _set(
             "changelog.num-retained.min", "changelog.num-retained.max",
             "changelog.time-retained")(o)),
    Duty("record-level expiry", ("compact",), _set("record-level.expire-time")),
    Duty("deletion-vector maintenance", ("compact",), lambda o: o.deletion_vectors_enabled),
    Duty("file indexes", ("compact", "rewrite_index"), lambda o: o.has_file_index),
    Duty("manifest merging", ("merge_manifests",), _always),
)


@dataclass(frozen=True, slots=True)
class DutyStatus:
    name: str
    performer: Performer
    detail: str = ""  # paimond: the jobs that perform it; refused: the refusals


def duties(options: TableOptions) -> tuple[DutyStatus, ...]:
    out = []
    for duty in DUTIES:
        if not duty.needed(options):
            out.append(DutyStatus(duty.name, "not needed"))
            continue
        if duty.by_writers(options):
            out.append(DutyStatus(duty.name, "writers"))
            continue
        # undecided keys are the status's own line (TableStatus.undecided_options): an
        # operator may accept them for compaction
        accepted = undecided(options.raw)
        found = [r for job in duty.jobs for r in refusals(options, job, accepted)]
        if found:
            detail = "; ".join(dict.fromkeys(f"{r.job}: {r.describe()}" for r in found))
            out.append(DutyStatus(duty.name, "refused", detail))
        else:
            out.append(DutyStatus(duty.name, "paimond", ", ".join(duty.jobs)))
    return tuple(out)
