"""Crash safety at every step (DESIGN.md, Invariants): every ``crash_point("...")`` in the
package is killed at, and after each kill the table is as a reader needs it.

Each job runs once in a process of its own (forked from a warm one: ``support.warm_python``)
with ``PAIMOND_CRASH_TRACE`` to list the crash points it passes and how often; then, for each
(point, pass) pair (long loops sampled: always the first and the last pass), a fresh copy of
the table runs the job with ``PAIMOND_CRASH_AT`` and must die with exit code 137. Afterwards
pypaimon's latest read is the content before the job or the content a clean run leaves, every
snapshot from EARLIEST to LATEST reads, no file that a snapshot references is missing, and a
rerun of the job (no crash) completes and reads what a clean run reads. Expiration is proven
the same way by its own test.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
from support import warm_python
from support.chain_tables import build_chain_table
from support.consumer_tables import make_table, write_consumers
from support.daily_partitions import daily_table
from support.dv_layered import enable_vectors, layered
from support.dv_scenarios import SCENARIOS, Live
from support.postpone_tables import postpone_table
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import (
    TableSpec,
    build_append_fixed_bucket,
    build_append_unaware,
    build_pk_deduplicate,
    catalog_for,
    set_options,
)
from support.table_garbage import unreferenced_files
from support.tag_tables import DAILY, TIMES, Writer, utc_ms

import paimond
from paimond.cli.main import main
from paimond.daemon.lease import Leases
from paimond.faults import EXIT_CODE
from paimond.maintenance.expire.references import referencing_snapshots, used_files
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

PACKAGE = Path(paimond.__file__).resolve().parent
NOT_PACKAGE = {"tests", "bench", "examples", "deploy", "spark"} | {
    p.name for p in PACKAGE.iterdir() if p.name.startswith(".")}
BLOOM = {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.items": "2000"}

# Which campaign crashes at each point; a point no campaign reaches needs a reason here.
CRASHED_BY: dict[str, tuple[str, ...]] = {
    "commit.manifests_written": ("compact", "compact_dv", "rewrite_index", "rebuild_dv",
                                 "expire_partitions", "compact_append_unaware",
                                 "compact_append_bucketed"),
    "commit.manifest_list_written": ("compact", "compact_dv", "rewrite_index", "rebuild_dv",
                                     "expire_partitions", "compact_changelog"),
    "commit.index_manifest_written": ("compact_dv", "rebuild_dv"),
    "commit.snapshot_created": ("compact", "compact_dv", "merge_manifests", "rewrite_index",
                                "rebuild_dv", "expire_partitions"),
    "commit.latest_hint_written": ("compact", "compact_dv", "merge_manifests", "rewrite_index",
                                   "rebuild_dv", "expire_partitions"),
    "commit.manifests_compacted": ("merge_manifests",),
    "commit.compacted_manifest_list_written": ("merge_manifests",),
    "data_files.file_written": ("compact", "compact_dv", "compact_append_unaware",
                                "compact_append_bucketed", "compact_changelog"),
    "file_index.file_written": ("compact", "rewrite_index"),
    "deletion_vectors.index_file_written": ("compact_dv", "rebuild_dv"),
    "orphans.file_deleted": ("remove_orphans",),
    "compact.conflict_file_deleted": ("conflict_compact",),
    "rewrite_index.conflict_file_deleted": ("conflict_rewrite_index",),
    "rebuild_dv.conflict_file_deleted": ("conflict_rebuild_dv",),
    "lease.epoch_created": ("lease",),
    "lease.old_epoch_deleted": ("lease",),
    "partition_expire.batch_committed": ("expire_partitions",),
    "tags.tag_created": ("tags",),
    "tags.tag_deleted": ("tags",),
    "tags.tag_copied": ("rename_tag",),
    "expire_consumers.consumer_deleted": ("expire_consumers",),
    **dict.fromkeys(("rollback.recorded", "rollback.latest_hint_written",
                     "rollback.snapshot_deleted", "rollback.tag_deleted",
                     "rollback.file_deleted", "rollback.record_removed"), ("rollback",)),
    **dict.fromkeys(("rename_branch.file_copied", "rename_branch.file_deleted"),
                    ("rename_branch",)),
    **dict.fromkeys(("fast_forward.snapshot_deleted", "fast_forward.tag_deleted",
                     "fast_forward.schema_copied", "fast_forward.snapshot_copied"),
                    ("fast_forward",)),
}
NOT_CRASHED: dict[str, str] = {  # point -> why no campaign here kills at it
    "fast_forward.schema_deleted": "passed only when the main branch's schema evolved after "
                                   "the branch's first snapshot; a crash there leaves "
                                   "schemas no remaining snapshot names",
    "tags.tag_withdrawn": "passed only when expiry deletes the tagged snapshot between the "
                          "tag's write and its check; test_tags covers the withdrawal",
    **dict.fromkeys(("tags.deletion_noted", "tags.file_deleted", "tags.directories_removed"),
                    "passed when a deleted tag's snapshot has expired; test_tag_deletion's "
                    "crash campaign kills at each"),
    **dict.fromkeys(("rollback.snapshot_restored", "rollback.earliest_hint_written"),
                    "passed when the tag rolled back to has expired, where one step has the "
                    "written-back snapshot and the oldest newer one (a gap this campaign's "
                    "contiguity check refuses); test_rollback kills at each"),
    **dict.fromkeys(("rollback.changelog_hint_written", "rollback.changelog_deleted"),
                    "passed when long-lived changelogs are newer than the target; "
                    "test_rollback kills at each"),
}
# expiration's own crash tests (test_expire_crash, test_changelog_expire)
OTHER_CAMPAIGNS = ("expire.", "expire_changelog.")


def crash_points_in_source() -> dict[str, list[str]]:
    """Every ``crash_point("<name>")`` call in the package: name -> where (file:line)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in NOT_PACKAGE or relative.name == "faults.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name != "crash_point":
                continue
            where = f"{relative}:{node.lineno}"
            assert len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str), f"{where}: a crash point needs a literal name"
            found.setdefault(node.args[0].value, []).append(where)
    return found


def test_every_crash_point_is_crashed_at_or_excused() -> None:
    points = crash_points_in_source()
    ours = {p for p in points if not p.startswith(OTHER_CAMPAIGNS)}
    assert ours - set(CRASHED_BY) - set(NOT_CRASHED) == set(), \
        "crash points no campaign kills at (add one, or a reason to NOT_CRASHED)"
    assert set(CRASHED_BY) - ours == set(), "campaigns claim points that are gone"
    assert set(NOT_CRASHED) - ours == set()


# ---- the campaign ------------------------------------------------------------------------


@dataclass
class Job:
    """One job on one table: ``argv`` the CLI command (``{wh}`` is the warehouse), or
    ``driver`` a Python program run with the warehouse as its argument."""

    name: str
    table: str
    warehouse: Path  # pristine, never changed
    argv: list[str] = field(default_factory=list)
    driver: str | None = None
    only: tuple[str, ...] = ()  # crash only at these points (the rest: other campaigns)
    passes_through: tuple[int, ...] = ()  # snapshots of the pristine table a crash may leave

    def command(self, warehouse: str) -> list[str]:
        """What follows ``python``."""
        if self.driver is not None:
            return ["-c", self.driver, warehouse, self.table, *self.argv]
        return ["-m", "paimond.cli", *[a.replace("{wh}", warehouse) for a in self.argv]]

    def rerun(self, warehouse: str) -> bool:
        """The job once more, uninterrupted: the command line in this process, or the
        driver in its own; True if it succeeded."""
        if self.driver is None:
            return main([a.replace("{wh}", warehouse) for a in self.argv]) == 0
        return _run(self, warehouse, {}).returncode == 0


def _run(job: Job, warehouse: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIMOND_CRASH")}
    return warm_python.run(job.command(warehouse), clean | env)


def sample(passes: int) -> list[int]:
    """The passes to crash at: first, last and one between."""
    return sorted({1, (passes + 1) // 2, passes})


def _content(warehouse: str, table: str) -> pa.Table:
    return read_rows(warehouse, table)


def check_table(warehouse: str, table_name: str, allowed: list[pa.Table], what: str, *,
                every_snapshot: bool = True, no_garbage: bool = False) -> None:
    """Readable, content allowed, every snapshot reads, nothing referenced is missing; with
    ``no_garbage``, no file is left that nothing references."""
    assert any(_content(warehouse, table_name).equals(c) for c in allowed), \
        f"{what}: the latest read is neither the content before the job nor after it"
    table = open_table(open_storage(warehouse), warehouse, table_name)
    ids = table.snapshots.list_ids()
    assert ids == list(range(ids[0], ids[-1] + 1)), f"{what}: snapshot ids {ids}"
    latest = catalog_for(warehouse).get_table(table_name).snapshot_manager().get_latest_snapshot()
    assert latest.id == ids[-1], f"{what}: pypaimon's latest is {latest.id}, not {ids[-1]}"
    for snapshot_id in ids if every_snapshot else ():
        read_rows(warehouse, table_name, snapshot_id=snapshot_id)
    used = used_files(table, referencing_snapshots(table)).all
    on_disk = {p.name for p in Path(warehouse).rglob("*") if p.is_file()}
    assert used <= on_disk, f"{what}: referenced files missing: {sorted(used - on_disk)}"
    if no_garbage:
        assert unreferenced_files(warehouse, table_name) == [], f"{what}: files left behind"
        # a temp file the killed process left (a snapshot or hint being linked, a job
        # record's job.json) is swept by the rerun
        temps = sorted(str(p.relative_to(warehouse)) for p in Path(warehouse).rglob(".*.tmp"))
        assert temps == [], f"{what}: temp files left behind: {temps}"


def run_campaign(job: Job, tmp_path: Path) -> list[tuple[str, int]]:
    """Trace, then crash at each sampled (point, pass); returns the pairs killed at."""
    before = _content(str(job.warehouse), job.table)
    traced = tmp_path / "traced"
    shutil.copytree(job.warehouse, traced)
    trace = tmp_path / "trace.txt"
    result = _run(job, str(traced), {"PAIMOND_CRASH_TRACE": str(trace)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert unreferenced_files(str(traced), job.table) == [], f"{job.name}: an uninterrupted " \
        "run left files behind"
    after = _content(str(traced), job.table)
    # a job that commits more than once (partition drops in batches) may stop between commits
    first_new = catalog_for(str(job.warehouse)).get_table(job.table).snapshot_manager() \
        .get_latest_snapshot().id + 1
    last = open_table(open_storage(str(traced)), str(traced), job.table).snapshots.latest_id()
    between = [read_rows(str(traced), job.table, snapshot_id=i)
               for i in range(first_new, (last or 0))]
    between += [read_rows(str(job.warehouse), job.table, snapshot_id=i) for i in job.passes_through]
    passes = Counter(trace.read_text().split()) if trace.exists() else Counter()
    claimed = {p for p, jobs in CRASHED_BY.items() if job.name in jobs}
    assert claimed <= set(passes), f"{job.name} never passes {sorted(claimed - set(passes))}"
    targets = sorted(p for p in passes if not job.only or p in job.only)
    cases = [(point, n) for point in targets for n in sample(passes[point])]

    def crash(case: tuple[str, int]) -> None:
        point, n = case
        what = f"{job.name} killed at {point}:{n}"
        warehouse = str(tmp_path / f"{point}-{n}")
        shutil.copytree(job.warehouse, warehouse)
        died = _run(job, warehouse, {"PAIMOND_CRASH_AT": f"{point}:{n}"})
        assert died.returncode == EXIT_CODE, \
            f"{what}: exited {died.returncode}\n{died.stdout}{died.stderr}"
        check_table(warehouse, job.table, [before, *between, after], what)
        assert job.rerun(warehouse), f"{what}: the rerun failed"
        check_table(warehouse, job.table, [after], f"{what}, then rerun", every_snapshot=False,
                    no_garbage=True)

    with ThreadPoolExecutor(max_workers=2) as pool:  # one job process, one check at a time
        list(pool.map(crash, cases))
    print(f"\ncrash campaign {job.name}: {len(cases)} cases: "
          + ", ".join(f"{p}:{n}" for p, n in cases))
    return cases


# ---- the tables --------------------------------------------------------------------------


def _deduplicate(root: Path, options: dict[str, str] | None = None) -> tuple[Path, str]:
    warehouse = root / "wh"
    name = build_pk_deduplicate(str(warehouse)).name
    if options:
        set_options(str(warehouse), name, options)
    return warehouse, name


def _dv(root: Path) -> tuple[Path, str]:
    """A deletion-vector table with a compacted level and new level-0 files on top: the
    next compaction looks their keys up and writes vectors and an index manifest."""
    live = Live(SCENARIOS[0], str(root / "wh"))
    live.write(60)
    live.compact(full=True)
    live.write(30)
    return root / "wh", live.name


def _rebuild(root: Path) -> tuple[Path, str]:
    live = layered(root)
    enable_vectors(live)
    return root / "wh", live.name


def _with_orphans(root: Path) -> tuple[Path, str]:
    """Leftovers of a compaction killed before its snapshot, every file two hours old. The
    job's record goes: it names the files by absolute path, so a copy's cleanup would delete
    them here, and these are orphans of a writer that left none."""
    warehouse, name = _deduplicate(root, BLOOM)
    job = Job("compact", name, warehouse, ["compact", "{wh}", "--table", name, "--full",
                                           "--parallelism", "1"])
    died = _run(job, str(warehouse), {"PAIMOND_CRASH_AT": "commit.manifest_list_written"})
    assert died.returncode == EXIT_CODE, died.stderr
    for records in warehouse.rglob(".paimond"):
        shutil.rmtree(records)
    old = time.time() - 7200
    for path in warehouse.rglob("*"):
        os.utime(path, (old, old))
    return warehouse, name


def _built(root: Path, build: Callable[[str], TableSpec]) -> tuple[Path, str]:
    return root / "wh", build(str(root / "wh")).name


def _daily_partitions(root: Path) -> tuple[Path, str]:
    """Nine dated partitions, all long expired under `3 d`, dropped three per commit."""
    daily_table(str(root / "wh"), "db.daily", **{"partition.expiration-batch-size": "3"})
    return root / "wh", "db.daily"


def _tagged(root: Path) -> tuple[Path, str]:
    """Daily process-time tags, two kept: the run creates four and deletes two."""
    writer = Writer(root / "wh", {**DAILY, "tag.num-retained-max": "2"})
    for moment in TIMES:
        writer.commit(utc_ms(moment))
    return root / "wh", writer.table.name


def _idle_consumers(root: Path) -> tuple[Path, str]:
    """Two consumers idle for two days, one just now; the window is one day."""
    table = make_table(root / "wh", {"consumer.expiration-time": "1 d"})
    now_ms = int(time.time() * 1000)
    write_consumers(table, {"a": (2, now_ms - 2 * 86_400_000), "b": (3, now_ms - 2 * 86_400_000),
                             "c": (4, now_ms)})
    return root / "wh", table.name


def _renamable(root: Path) -> tuple[Path, str]:
    """A tag 'a' of the latest snapshot, to be renamed 'b'."""
    warehouse, name = _deduplicate(root)
    assert main(["create-tag", str(warehouse), "--table", name, "--tag", "a"]) == 0
    return warehouse, name


# The tags job at a fixed moment (the commit times above are in 2024).
TAGS_DRIVER = f"""
import sys
from paimond.clock import Clock
from paimond.maintenance.tags.job import TagsJob
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
warehouse, name = sys.argv[1], sys.argv[2]
TagsJob(open_table(open_storage(warehouse), warehouse, name),
        clock=Clock(fixed_ms={utc_ms("2024-01-06 06:00")})).run()
"""

# A concurrent full compaction commits just before the job's first commit: the job's commit
# conflicts and it deletes what its attempt wrote, then re-plans.
CONFLICT_DRIVER = """
import sys
from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.commit.committer import Committer
from paimond.table.storage.interface import open_storage

warehouse, name, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
original, raced = Committer.commit, []

def commit(self, changes):
    if not raced:
        raced.append(True)
        table = open_table(open_storage(warehouse), warehouse, name)
        CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
    return original(self, changes)

Committer.commit = commit
sys.exit(main([a.replace("{wh}", warehouse) for a in argv]))
"""


def _conflict(job: Job, point: str) -> Job:
    return Job(f"conflict_{job.name}", job.table, job.warehouse, job.argv,
               CONFLICT_DRIVER, (point,))


def _postponed(root: Path) -> tuple[Path, str]:
    """Rows of three commits in the postpone bucket of two partitions, none visible yet."""
    return postpone_table(root)


def _postponed_moved(root: Path) -> tuple[Path, str]:
    """The same table after paimond moved its rows into two buckets per partition."""
    warehouse, name = postpone_table(root)
    assert main(["compact", str(warehouse), "--table", name, "--parallelism", "1"]) == 0
    return warehouse, name


def _rolled_back(root: Path) -> Job:
    """Six snapshots and a tag of the fifth; rolled back to the third, the table passes
    through the fifth and the fourth (newest first, ids contiguous)."""
    warehouse, name = _deduplicate(root)
    assert main(["create-tag", str(warehouse), "--table", name, "--tag", "t5",
                 "--snapshot", "5"]) == 0
    return Job("rollback", name, warehouse, ["rollback", "{wh}", "--table", name,
                                             "--to-snapshot", "3", "--yes"],
               passes_through=(5, 4))


def _compacted_branch(root: Path) -> tuple[Path, str]:
    """Six snapshots; branch ``b`` from a tag of the sixth, compacted (its seventh)."""
    warehouse, name = _deduplicate(root)
    wh = str(warehouse)
    assert main(["create-tag", wh, "--table", name, "--tag", "t6", "--snapshot", "6"]) == 0
    assert main(["create-branch", wh, "--table", name, "--branch", "b", "--tag", "t6"]) == 0
    assert main(["compact", wh, "--table", name, "--branch", "b", "--full"]) == 0
    return warehouse, name


def _fast_forwarded(root: Path) -> Job:
    """Six snapshots; a branch from a tag of the sixth, compacted (its seventh). Fast-forward
    replaces the main branch's sixth with the branch's sixth and seventh: a crash leaves the
    main branch at its fifth (the sixth deleted), at the sixth or at the seventh."""
    warehouse, name = _compacted_branch(root)
    return Job("fast_forward", name, warehouse, ["fast-forward", "{wh}", "--table", name,
                                                 "--branch", "b", "--yes"],
               passes_through=(5,))


def _renamed(root: Path) -> Job:
    """A branch from a tag, compacted (its own snapshot), renamed: the main branch's content
    never changes; each killed run completes the rename when run again."""
    warehouse, name = _compacted_branch(root)
    return Job("rename_branch", name, warehouse, ["rename-branch", "{wh}", "--table", name,
                                                  "--branch", "b", "--to", "c"])


def _chained(root: Path) -> Job:
    """A chain table pypaimon wrote into both branches; compact-chain-table writes one
    partition into the snapshot branch (one APPEND commit), the job's table."""
    warehouse = root / "wh"
    name = build_chain_table(str(warehouse))
    return Job("compact_chain_table", f"{name}$branch_snapshot", warehouse,
               ["compact-chain-table", "{wh}", "--table", name, "--partition", "dt=20250811"])


def _missing_file(root: Path) -> tuple[Path, str]:
    """A data file of the latest snapshot deleted by hand: no reader reads the table."""
    warehouse, name = _deduplicate(root)
    table = open_table(open_storage(str(warehouse)), str(warehouse), name)
    missing = sorted(Path(table.path).rglob("data-*.parquet"))[0]
    missing.unlink()
    return warehouse, name


def _jobs(root: Path) -> dict[str, Callable[[], Job]]:
    def job(name: str, build: Callable[[Path], tuple[Path, str]], *argv: str) -> Job:
        warehouse, table = build(root / name)
        return Job(name, table, warehouse, [argv[0], "{wh}", "--table", table, *argv[1:]])

    def compact() -> Job:
        return job("compact", lambda r: _deduplicate(r, BLOOM), "compact", "--full",
                   "--parallelism", "1")

    def rewrite_index() -> Job:
        return job("rewrite_index", lambda r: _deduplicate(r, BLOOM), "rewrite-index",
                   "--parallelism", "1")

    def rebuild_dv() -> Job:
        return job("rebuild_dv", _rebuild, "rebuild-dv")

    return {
        "compact": compact,
        "compact_dv": lambda: job("compact_dv", _dv, "compact", "--parallelism", "1"),
        # data and changelog files (changelog-producer=lookup) written by one task
        "compact_changelog": lambda: job(
            "compact_changelog", lambda r: _deduplicate(r, {"changelog-producer": "lookup"}),
            "compact", "--parallelism", "1"),
        "merge_manifests": lambda: job("merge_manifests", _deduplicate, "merge-manifests"),
        "remove_orphans": lambda: job("remove_orphans", _with_orphans, "remove-orphans",
                                      "--older-than", "1 s", "--force"),
        "rewrite_index": rewrite_index,
        "rebuild_dv": rebuild_dv,
        "compact_append_unaware": lambda: job(
            "compact_append_unaware", lambda r: _built(r, build_append_unaware), "compact",
            "--parallelism", "1"),
        "compact_append_bucketed": lambda: job(
            "compact_append_bucketed", lambda r: _built(r, build_append_fixed_bucket), "compact",
            "--full", "--parallelism", "1"),
        "expire_partitions": lambda: job("expire_partitions", _daily_partitions,
                                         "expire-partitions"),
        "tags": lambda: Job("tags", *reversed(_tagged(root / "tags")), driver=TAGS_DRIVER),
        "expire_consumers": lambda: job("expire_consumers", _idle_consumers, "expire-consumers"),
        "rename_tag": lambda: job("rename_tag", _renamable, "rename-tag", "--tag", "a", "--to", "b"),
        # the postpone rows moved (one commit), then the buckets compacted (another)
        "compact_postpone": lambda: job("compact_postpone", _postponed, "compact",
                                        "--parallelism", "1"),
        "rescale": lambda: job("rescale", _postponed_moved, "rescale", "--bucket-num", "3"),
        # not in JOBS: its table reads only after the job (test_a_crash_removing_...)
        "remove_unexisting_files": lambda: job("remove_unexisting_files", _missing_file,
                                               "remove-unexisting-files", "--yes"),
        "conflict_compact": lambda: _conflict(compact(), "compact.conflict_file_deleted"),
        "conflict_rewrite_index": lambda: _conflict(rewrite_index(),
                                                    "rewrite_index.conflict_file_deleted"),
        "conflict_rebuild_dv": lambda: _conflict(rebuild_dv(), "rebuild_dv.conflict_file_deleted"),
        "rollback": lambda: _rolled_back(root / "rollback"),
        "fast_forward": lambda: _fast_forwarded(root / "fast_forward"),
        "compact_chain_table": lambda: _chained(root / "compact_chain_table"),
        "rename_branch": lambda: _renamed(root / "rename_branch"),
    }


JOBS = ["compact", "compact_dv", "compact_changelog", "merge_manifests", "remove_orphans", "rewrite_index",
        "rebuild_dv", "compact_append_unaware", "compact_append_bucketed", "expire_partitions",
        "tags", "expire_consumers", "rename_tag", "compact_postpone", "rescale", "conflict_compact",
        "conflict_rewrite_index", "conflict_rebuild_dv", "rollback", "fast_forward",
        "compact_chain_table", "rename_branch"]


@pytest.mark.crash_campaign
@pytest.mark.parametrize("name", JOBS)
def test_a_crash_at_every_point_leaves_the_table_readable(name: str, tmp_path: Path) -> None:
    job = _jobs(tmp_path)[name]()
    cases = run_campaign(job, tmp_path)
    assert cases, f"{name} passes no crash point"


@pytest.mark.crash_campaign
def test_a_crash_removing_unexisting_files_commits_all_or_nothing(tmp_path: Path) -> None:
    """The table lacks a data file, so no reader reads it before the job. Killed at any
    point, either nothing is committed (the latest snapshot is the one planned from, and
    reading still fails) or the drop is (the latest reads what a clean run reads); a rerun
    converges on the clean run's table and leaves nothing behind."""
    job = _jobs(tmp_path)["remove_unexisting_files"]()
    pristine = str(job.warehouse)
    base = open_table(open_storage(pristine), pristine, job.table).snapshots.latest_id()
    assert base is not None
    traced = tmp_path / "traced"
    shutil.copytree(job.warehouse, traced)
    trace = tmp_path / "trace.txt"
    result = _run(job, str(traced), {"PAIMOND_CRASH_TRACE": str(trace)})
    assert result.returncode == 0, result.stdout + result.stderr
    after = _content(str(traced), job.table)
    passes = Counter(trace.read_text().split())
    cases = [(point, n) for point in sorted(passes) for n in sample(passes[point])]
    assert cases

    def check(warehouse: str, what: str, allowed: tuple[int, ...]) -> None:
        table = open_table(open_storage(warehouse), warehouse, job.table)
        ids = table.snapshots.list_ids()
        assert ids == list(range(1, ids[-1] + 1)) and ids[-1] in allowed, f"{what}: {ids}"
        latest = catalog_for(warehouse).get_table(job.table).snapshot_manager()
        assert latest.get_latest_snapshot().id == ids[-1], what
        if ids[-1] == base:
            with pytest.raises(FileNotFoundError):
                _content(warehouse, job.table)
        else:
            assert _content(warehouse, job.table).equals(after), what

    def crash(case: tuple[str, int]) -> None:
        point, n = case
        what = f"remove_unexisting_files killed at {point}:{n}"
        warehouse = str(tmp_path / f"{point}-{n}")
        shutil.copytree(job.warehouse, warehouse)
        died = _run(job, warehouse, {"PAIMOND_CRASH_AT": f"{point}:{n}"})
        assert died.returncode == EXIT_CODE, f"{what}: exited {died.returncode}\n{died.stderr}"
        check(warehouse, what, (base, base + 1))
        assert job.rerun(warehouse), f"{what}: the rerun failed"
        check(warehouse, f"{what}, then rerun", (base + 1,))
        assert unreferenced_files(warehouse, job.table) == [], f"{what}: files left behind"
        assert not list(Path(warehouse).rglob(".*.tmp")), f"{what}: temp files left behind"

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(crash, cases))
    print(f"\ncrash campaign remove_unexisting_files: {len(cases)} cases: "
          + ", ".join(f"{p}:{n}" for p, n in cases))


# ---- leases ------------------------------------------------------------------------------

LEASE_DRIVER = """
import sys
from paimond.daemon.lease import Leases
from paimond.table.storage.interface import open_storage

warehouse = sys.argv[1]
now = [0.0]
leases = Leases(open_storage(warehouse), warehouse, "a", 60.0, lambda: now[0])
for cycle in range(7):  # enough aged epochs for one batched cleanup of the old ones
    now[0] = cycle * 400.0  # past the LIST-free window: this acquisition lists
    assert leases.acquire("db.t")
    now[0] += 31  # past half the TTL: the renewal writes the next epoch
    assert leases.renew("db.t")
    leases.release("db.t")
    assert leases.acquire("db.t")  # right after our release: no LIST
    leases.release("db.t")
"""


@pytest.mark.crash_campaign
def test_a_crash_while_taking_a_lease_leaves_it_to_be_taken(tmp_path: Path) -> None:
    """Acquire, renew, release, acquire again without listing, release (seven times, minutes
    apart: old epochs get deleted once listed long enough ago): killed at any step,
    the lease still reads, its owner takes it again, and another owner once it expired."""
    job = Job("lease", "db.t", tmp_path / "unused", driver=LEASE_DRIVER)
    trace = tmp_path / "trace.txt"
    assert _run(job, str(tmp_path / "traced"), {"PAIMOND_CRASH_TRACE": str(trace)}).returncode == 0
    passes = Counter(trace.read_text().split())
    assert set(passes) == {p for p, jobs in CRASHED_BY.items() if "lease" in jobs}
    cases = [(point, n) for point in sorted(passes) for n in sample(passes[point])]
    for point, n in cases:
        warehouse = str(tmp_path / f"{point}-{n}")
        died = _run(job, warehouse, {"PAIMOND_CRASH_AT": f"{point}:{n}"})
        assert died.returncode == EXIT_CODE, died.stderr
        storage = open_storage(warehouse)
        assert Leases(storage, warehouse, "b", 60.0, lambda: 0.0).current("db.t") is not None
        assert Leases(storage, warehouse, "a", 60.0, lambda: 5.0).acquire("db.t")
        assert Leases(storage, warehouse, "b", 60.0, lambda: 500.0).acquire("db.t")
    print(f"\ncrash campaign lease: {len(cases)} cases: "
          + ", ".join(f"{p}:{n}" for p, n in cases))
