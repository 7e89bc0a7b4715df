"""Renders table statuses for people (aligned text) and machines (JSON)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a dry run's refusals need no status code (tests/cli/test_startup.py)
    from paimond.table.catalog import Table
    from paimond.table.options.semantic import Refusal
    from paimond.table.status.report import BucketStatus, TableStatus


@dataclass(frozen=True, slots=True)
class Refused:
    """A dry run's answer when the job refuses the table: nothing would be written."""

    table_name: str
    job: str
    refusals: tuple[Refusal, ...]

    def describe(self) -> str:
        return "\n".join([f"{self.table_name}: {self.job} refuses the table, nothing would be "
                          "written:", *(f"  {r.describe()}" for r in self.refusals)])


def dry_run_refusals(table: Table, job: str, accepted: Iterable[str] = ()) -> Refused | None:
    """``accepted``: undecided option keys the job accepts (compaction's)."""
    from paimond.table.options.semantic import refusals

    found = refusals(table.options(), job, accepted)
    return Refused(table.name, job, tuple(found)) if found else None


def format_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _time(millis: int | None) -> str:
    if millis is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _runs(bucket: BucketStatus, status: TableStatus) -> str:
    if not status.primary_keys:  # append tables have no LSM sorted runs: their small files
        return str(bucket.small_files)
    text = f"{bucket.sorted_runs}/{status.compaction_trigger}"
    if status.stop_trigger is not None and bucket.sorted_runs >= status.stop_trigger:
        return text + " STOP"
    if status.compaction_trigger is not None and bucket.sorted_runs > status.compaction_trigger:
        return text + " due"
    return text


def _levels(bucket: BucketStatus) -> str:
    return "  ".join(f"L{lv.level}:{lv.files}f/{format_bytes(lv.size_bytes)}"
                     for lv in bucket.levels)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _duty_lines(status: TableStatus) -> list[str]:
    """Who maintains what, then every job's refusals."""
    writers = ("write-only (paimond is the table's maintainer)" if status.write_only
               else "compact and expire themselves too (write-only=false)")
    lines = [f"  writers: {writers}"]
    rows = [[d.name, d.performer + (f": {d.detail}" if d.detail else "")]
            for d in status.duties if d.performer != "not needed"]
    if rows:
        lines.append("  duties:")
        lines.extend("  " + line for line in _table(rows))
    idle = [d.name for d in status.duties if d.performer == "not needed"]
    if idle:
        lines.append(f"  not needed: {', '.join(idle)}")
    for job, reasons in status.refusals.items():
        lines += [f"  refused by {job}: {reason}" for reason in reasons]
    if status.undecided_options:
        lines.append(f"  undecided options (compact refuses the table unless "
                     f"allow_unknown_options accepts them): "
                     f"{', '.join(status.undecided_options)}")
    return lines


def render_text(status: TableStatus) -> str:
    if status.error is not None:
        return f"{status.name}  UNREADABLE\n  {status.error}\n  at {status.path}"
    keys = ", ".join(status.primary_keys) or "none (append table)"
    parts = ", ".join(status.partition_keys) or "unpartitioned"
    engine = f"merge engine {status.merge_engine}; " if status.merge_engine else ""
    lines = [
        f"{status.name}  schema {status.schema_id}; primary key {keys}; partitioned by {parts}",
        f"  {engine}bucket mode {status.bucket_mode} (bucket={status.buckets_option}); "
        f"format {status.file_format}; deletion vectors {'on' if status.deletion_vectors else 'off'}",
        *_duty_lines(status),
    ]
    if status.latest_snapshot is None:
        lines.append("  no snapshots yet")
        return "\n".join(lines)
    lines.append(
        f"  snapshots {status.earliest_snapshot}..{status.latest_snapshot} "
        f"({status.snapshot_count} files); latest {status.latest_commit_kind} at "
        f"{_time(status.latest_time_millis)}, {status.total_record_count} records; "
        f"tags {len(status.tags)}; consumers {len(status.consumers)}")
    if status.manifests is not None:
        m = status.manifests
        index = ", ".join(f"{kind} {n}" for kind, n in sorted(m.index_files.items())) or "none"
        lines.append(
            f"  manifests: base {m.base_files} ({format_bytes(m.base_bytes)}), delta "
            f"{m.delta_files} ({format_bytes(m.delta_bytes)}); index files: {index}")
    if status.bucket_mode == "POSTPONE_MODE":
        oldest = status.postpone_oldest_millis
        lines.append(f"  postpone bucket: {status.postpone_rows} rows no reader sees until "
                     "compaction moves them into real buckets"
                     + (f" (oldest written {_time(oldest)})" if oldest is not None else ""))
    if status.primary_keys:
        lines.append(f"  sorted runs against compaction trigger {status.compaction_trigger}, "
                     f"stop trigger {status.stop_trigger}:")
    rows = [["partition", "bucket", "runs" if status.primary_keys else "small files", "files",
             "size", "dv files", "levels"]]
    for bucket in status.buckets:
        dv_files = str(bucket.files_with_dv)
        if bucket.dv_deleted_rows:
            dv_files += f" ({bucket.deleted_ratio:.1%} rows deleted)"
        rows.append([bucket.partition or "-", str(bucket.bucket), _runs(bucket, status),
                     str(bucket.files), format_bytes(bucket.size_bytes), dv_files,
                     _levels(bucket)])
    if len(rows) == 1:
        rows.append(["(no live files)", "", "", "", "", "", ""])
    lines.extend(_table(rows))
    return "\n".join(lines)


def render_json(statuses: Sequence[TableStatus]) -> str:
    return json.dumps({"tables": [s.to_json() for s in statuses]}, indent=2, default=str)
