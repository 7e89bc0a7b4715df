"""Benchmark: requests paimond sends to an object store per operation (issue #22, goal 6).

Runs on moto's S3 server on loopback behind a request log (tests/support/s3_requests.py).
A pypaimon-written table (``--commits`` writer commits, primary key, 1 bucket) is uploaded,
then each operation is counted alone. Counts are deterministic; each line names its goal.

    .venv/bin/python bench/s3_requests.py [--commits 20]
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

from s3_requests import (  # noqa: E402
    FAKE_AWS_ENV,
    CountingEndpoint,
    Request,
    counting_endpoint,
    kinds,
    write_pk_table,
)


def _count(endpoint: CountingEndpoint, action: Callable[[], Any]) -> list[Request]:
    with endpoint.log.counting() as requests:
        action()
    return list(requests)


def _line(name: str, requests: list[Request], goal: str) -> None:
    detail = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds(requests).items()))
    print(f"{name:<44} {len(requests):>5}  goal {goal:<14} ({detail})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--verbose", action="store_true", help="print every request")
    args = parser.parse_args()
    os.environ.update(FAKE_AWS_ENV)
    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.jobs import JOBS, JobContext
    from paimond.maintenance.status import table_status
    from paimond.table.catalog import list_tables, open_table
    from paimond.table.storage import open_storage

    with tempfile.TemporaryDirectory(prefix="paimond-s3req-") as scratch, \
            counting_endpoint() as endpoint:
        local = Path(scratch) / "wh"
        write_pk_table(str(local), args.commits)
        uri = endpoint.make_bucket("bench") + "/wh"
        endpoint.upload(str(local), uri)
        storage = open_storage(uri, endpoint.storage_options)
        table = open_table(storage, storage.root, "db.t")
        print(f"one primary-key table, {args.commits} writer commits, on moto S3 (loopback)")
        results: dict[str, list[Request]] = {}

        def run(job: str, **settings: Any) -> None:
            spec = JOBS[job]
            spec.run(open_table(storage, storage.root, "db.t"), spec.settings(**settings),
                     JobContext(SYSTEM_CLOCK))

        results["idle check: latest snapshot id"] = _count(
            endpoint, lambda: table.snapshots.latest_id())
        results["discovery (list tables)"] = _count(
            endpoint, lambda: list_tables(storage, storage.root))
        results["status (--no-verify)"] = _count(
            endpoint, lambda: table_status(open_table(storage, storage.root, "db.t"),
                                           verify_files=False))
        results["merge-manifests"] = _count(endpoint, lambda: run("merge_manifests"))
        results["expire-snapshots (retain 5)"] = _count(
            endpoint, lambda: run("expire", retain_max=5, retain_min=1))
        goals = {"idle check: latest snapshot id": "1", "status (--no-verify)": "<= 5",
                 "discovery (list tables)": "-", "merge-manifests": "-",
                 "expire-snapshots (retain 5)": "batched"}
        for name, requests in results.items():
            _line(name, requests, goals[name])
            if args.verbose:
                for r in requests:
                    print(f"    {r.kind:<12} {r.key} {r.query}")


if __name__ == "__main__":
    main()
