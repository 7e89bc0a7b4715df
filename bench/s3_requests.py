"""Benchmark: requests paimond sends to an object store per operation.

Runs on moto's S3 server on loopback behind a request log (tests/support/s3_requests.py).
A pypaimon-written table (``--commits`` writer commits, primary key, 1 bucket) is uploaded,
then each operation is counted alone. Counts are deterministic; each line names its goal.
A second table (``--large-rows`` rows of barely compressible values in 4 commits) is compacted
in full, so that its one output file is larger than an upload part: it goes up by multipart
upload. The commit lines count what a job's commit asks (its conflict check reads only the
snapshots committed since the plan's, reusing the plan's scan).

    .venv/bin/python bench/s3_requests.py [--commits 20] [--large-rows 250000] [--tables DIR]

The tables are written by pypaimon; ``--tables DIR`` keeps them in DIR for a later run under
an interpreter without pypaimon (the newest s3fs, say), which reuses them. The first line names
the s3fs version counted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from pk_table_writes import write_large_pk_table, write_pk_table  # noqa: E402
from s3_requests import (  # noqa: E402
    FAKE_AWS_ENV,
    CountingEndpoint,
    Request,
    counting_endpoint,
    kinds,
)


def _count(endpoint: CountingEndpoint, action: Callable[[], Any]) -> list[Request]:
    with endpoint.log.counting() as requests:
        action()
    return list(requests)


def _line(name: str, requests: list[Request], goal: str, per: int = 1) -> None:
    detail = ", ".join(f"{kind} {n / per:.3g}" for kind, n in sorted(kinds(requests).items()))
    outside = [r for r in requests if "/manifest/" not in r.key]
    manifests = f"; {len(outside) / per:.3g} besides manifests" if len(outside) < len(requests) \
        else ""
    print(f"{name:<48} {len(requests) / per:>6.3g}  goal {goal:<8} ({detail}{manifests})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--large-rows", type=int, default=250_000)
    parser.add_argument("--verbose", action="store_true", help="print every request")
    parser.add_argument("--tables", help="a local warehouse of an earlier run to reuse (else "
                                         "written there)")
    args = parser.parse_args()
    os.environ.update(FAKE_AWS_ENV)
    import s3fs

    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.jobs import JOBS, JobContext
    from paimond.table.catalog import WATCH_FULL_CHECK_EVERY, list_tables, open_table
    from paimond.table.status.report import table_status
    from paimond.table.storage.interface import open_storage

    with tempfile.TemporaryDirectory(prefix="paimond-s3req-") as scratch, \
            counting_endpoint() as endpoint:
        local = Path(args.tables or scratch) / "wh"
        if not (local / "db.db" / "big").exists():
            write_pk_table(str(local), args.commits)
            write_large_pk_table(str(local), args.large_rows, 4)
        print(f"s3fs {s3fs.__version__}")
        uri = endpoint.make_bucket("bench") + "/wh"
        endpoint.upload(str(local), uri)
        storage = open_storage(uri, endpoint.storage_options)
        table = open_table(storage, storage.root, "db.t")
        print(f"one primary-key table, {args.commits} writer commits, on moto S3 (loopback); "
              f"compaction: {args.large_rows:,} rows")
        results: dict[str, list[Request]] = {}

        def run(job: str, table: str = "db.t", **settings: Any) -> None:
            spec = JOBS[job]
            spec.run(open_table(storage, storage.root, table), spec.settings(**settings),
                     JobContext(SYSTEM_CLOCK))

        results["latest snapshot id (Java's hint check)"] = _count(
            endpoint, lambda: table.snapshots.latest_id())
        watched = list_tables(storage, storage.root)[0]
        checks = WATCH_FULL_CHECK_EVERY
        results[f"idle daemon check, per check ({checks} checks)"] = _count(
            endpoint, lambda: [watched.watched_latest_id() for _ in range(checks)])
        results["discovery (list tables)"] = _count(
            endpoint, lambda: list_tables(storage, storage.root))
        results["discovery, next pass (table known)"] = _count(
            endpoint, lambda: list_tables(storage, storage.root, known={"db.t"}))
        listed = list_tables(storage, storage.root)[0]  # as `paimond status WAREHOUSE` does
        results["status of a listed table (--no-verify)"] = _count(
            endpoint, lambda: table_status(listed, verify_files=False))
        results["merge-manifests"] = _count(endpoint, lambda: run("merge_manifests"))
        results["expire-snapshots (retain 5)"] = _count(
            endpoint, lambda: run("expire", retain_max=5, retain_min=1))
        runs = 66
        for name, table_name, gap_s in (
                (f"lease: {runs} table runs (3 jobs each), per run", "db.t", 0.0),
                (f"lease: {runs} runs a minute apart, per run", "db.u", 60.0)):
            results[name] = _count(endpoint, _lease_runs(storage, table_name, runs, gap_s))
        results.update(_compaction(endpoint, storage, run))
        fresh = endpoint.make_bucket("fresh") + "/wh"  # the commit lines: a table not merged
        endpoint.upload(str(local / "db.db" / "t"), fresh + "/db.db/t")
        results.update(_commits(endpoint, open_storage(fresh, endpoint.storage_options)))
        goals = {"latest snapshot id (Java's hint check)": "-",
                 f"idle daemon check, per check ({checks} checks)": "1",
                 "status of a listed table (--no-verify)": "<= 5",
                 "discovery (list tables)": "-", "discovery, next pass (table known)": "-",
                 "merge-manifests": "-",
                 "expire-snapshots (retain 5)": "batched",
                 **{name: "<= 3" for name in results if name.startswith("lease")},
                 **{name: "multipart" if name.startswith("compact large table in") else "-"
                    for name in results
                    if name.startswith(("compact", "commit"))}}
        compaction = next(r for n, r in results.items() if n.startswith("compact large table in"))
        fetched = [r.key for r in compaction if r.kind == "GET" and "/manifest/manifest-" in r.key
                   and "manifest-list" not in r.key]
        name = f"compaction: manifest GETs per manifest ({len(set(fetched))} manifests)"
        results[name], goals[name] = [], "1"
        for name, requests in results.items():
            if name.startswith("compaction: manifest GETs"):
                print(f"{name:<48} {len(fetched) / max(1, len(set(fetched))):>6.3g}  goal 1")
                continue
            per = runs if name.startswith("lease") else checks if name.startswith("idle") else 1
            _line(name, requests, goals[name], per)
            if args.verbose:
                for r in requests:
                    print(f"    {r.kind:<12} {r.key} {r.query}")


def _lease_runs(storage: Any, table: str, runs: int, gap_s: float) -> Callable[[], None]:
    """``runs`` table runs of three jobs each (acquire, a renewal after each job, release),
    ``gap_s`` apart on the lease's clock, as the daemon's runner holds a table's lease."""
    from paimond.daemon.lease import Leases

    now = [1000.0]
    leases = Leases(storage, storage.root, "bench", 600.0, lambda: now[0])

    def run() -> None:
        for _ in range(runs):
            assert leases.acquire(table)
            for _ in range(3):
                leases.renew(table)
            leases.release(table)
            now[0] += gap_s
    return run


def _in_commits(endpoint: CountingEndpoint, action: Callable[[], Any]
                ) -> tuple[list[Request], list[Request]]:
    """All requests of ``action``, and those sent inside ``Committer.commit``."""
    from paimond.table.commit.committer import Committer

    inner: list[Request] = []
    original = Committer.commit

    def counted(self: Committer, changes: Any) -> Any:
        start = len(endpoint.log.requests)
        try:
            return original(self, changes)
        finally:
            inner.extend(endpoint.log.requests[start:])

    Committer.commit = counted  # type: ignore[method-assign]
    try:
        return _count(endpoint, action), inner
    finally:
        Committer.commit = original  # type: ignore[method-assign]


def _compaction(endpoint: CountingEndpoint, storage: Any, run: Callable[..., Any]
                ) -> dict[str, list[Request]]:
    """A full compaction of the large table (one output file above the part size)."""
    from paimond.table.storage.fsspec_storage import _UPLOAD_PART_BYTES

    everything, commit = _in_commits(endpoint, lambda: run("compact", full=True, table="db.big"))
    written = sum(1 for r in everything if r.kind in ("PUT", "MPU-COMPLETE")
                  and "/bucket-" in r.key)
    name = (f"compact large table in full ({written} data file(s); part "
            f"{_UPLOAD_PART_BYTES >> 20} MiB)")
    return {name: everything, "compact large table: its commit": commit}


def _commits(endpoint: CountingEndpoint, storage: Any) -> dict[str, list[Request]]:
    """A compaction-like commit (a level-0 file moved up) planned from the latest snapshot,
    committed at once, then one planned before a concurrent writer's append, on a table of
    one manifest per writer commit (nothing merged them yet)."""
    from dataclasses import replace

    from paimond.clock import SYSTEM_CLOCK
    from paimond.table.catalog import open_table
    from paimond.table.commit.committer import CommitChanges, Committer
    from paimond.table.scan.snapshot_scan import scan_snapshot

    table = open_table(storage, storage.root, "db.t")

    def planned(level: int) -> CommitChanges:
        latest = table.snapshots.latest()
        assert latest is not None
        scan = scan_snapshot(table, latest)
        entry = [f.entry for f in scan.files if f.entry.file.level == 0][0]
        moved = replace(entry, file=replace(entry.file, level=level))
        return CommitChanges(deleted=[entry], added=[moved], base=scan)

    def commit(changes: CommitChanges) -> None:
        Committer(table, clock=SYSTEM_CLOCK).commit(changes)

    changes = planned(4)
    results = {"commit, nothing committed since the plan": _count(
        endpoint, lambda: commit(changes))}
    changes = planned(3)
    appended = replace(changes.deleted[0], file=replace(changes.deleted[0].file,
                                                         file_name="data-concurrent-0.parquet"))
    Committer(table, clock=SYSTEM_CLOCK, commit_kind="APPEND").commit(
        CommitChanges(added=[appended]))
    results["commit after a concurrent append"] = _count(endpoint, lambda: commit(changes))
    return results


if __name__ == "__main__":
    main()
