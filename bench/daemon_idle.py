"""Benchmark: CPU the daemon spends on idle tables (under 1% of one core at
1,000 tables, growing at most linearly with the tables).

For each N (default 1,000 then 4,000): builds N tables (one pypaimon-written table, copied),
starts `paimond run` on them as a real process, lets the first full pass finish and settle,
then samples the process's CPU time over a window of idle running (default 120 s: two rounds
of the 60 s compaction interval, whose no-op runs every idle table gets, besides the check
every 10 s and discovery every 60 s). Prints CPU seconds per wall second, as % of one core,
and the growth per doubling of the tables. An unchanged table's periodic compaction is skipped
(daemon/tables/compact_skip.py) but still runs once an hour: the share of that, estimated from the
first pass's CPU per table, is printed besides (not in the window). ``--before DIR`` runs an
older tree (DIR/paimond, e.g. from ``git archive``) on the same tables, interleaved.

    .venv/bin/python bench/daemon_idle.py [--tables 1000 4000] [--window-s 120] [--settle-s 30]
        [--before DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow as pa


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def build(warehouse: Path, tables: int) -> None:
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("idle", True)
    catalog.create_table("idle.t0", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1"}), True)
    table = catalog.get_table("idle.t0")
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
    source = warehouse / "idle.db" / "t0"
    for i in range(1, tables):
        shutil.copytree(source, warehouse / "idle.db" / f"t{i}")


def _load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def measure(scratch: Path, tables: int, args: argparse.Namespace, label: str = "",
            env: dict[str, str] | None = None) -> float:
    """% of one core the daemon spends over the window, idle watching ``tables`` tables."""
    warehouse = scratch / f"wh-{tables}"
    if not warehouse.exists():
        started = time.monotonic()
        build(warehouse, tables)
        print(f"{tables} tables built in {time.monotonic() - started:.1f} s")
    print(f"{label + ': ' if label else ''}{_load()}")
    config = scratch / f"paimond-{tables}.toml"
    config.write_text(f'[[warehouses]]\nuri = "{warehouse}"\n[http]\nport = 0\n'
                      f"[daemon]\ncheck_interval_s = {args.check_interval_s}\n"
                      "discovery_interval_s = 60\n[limits]\nconcurrency = 2\n"
                      '[log]\nlevel = "warning"\n'
                      f"[jobs.compact]\ninterval_s = {args.compact_interval_s}\n")
    process = subprocess.Popen([sys.executable, "-m", "paimond.cli", "run",
                                "--config", str(config)], stderr=subprocess.PIPE, text=True,
                               env=env)
    assert process.stderr is not None
    match = None
    while match is None:
        match = re.search(r"serving (http://\S+)/metrics", process.stderr.readline())
        if match is None and process.poll() is not None:
            raise SystemExit("the daemon did not start")
    # The first pass evaluates and maintains every table; wait until all have run.
    settle_started = time.monotonic()
    done = 0
    while time.monotonic() - settle_started < 900:
        time.sleep(2)
        states = json.loads(urllib.request.urlopen(f"{match.group(1)}/status").read())["tables"]
        done = sum(1 for t in states.values() if "compact" in t["last_run"])
        if len(states) == tables and done == tables:
            break
    first_cpu = _cpu_seconds(process.pid)
    print(f"first pass over {done} tables done after {time.monotonic() - settle_started:.0f} s "
          f"({first_cpu:.1f} CPU s, start-up included: {100 * first_cpu / 3600:.2f}% of one "
          f"core if repeated each hour); settling {args.settle_s:.0f} s")
    time.sleep(args.settle_s)
    cpu_before, wall_before = _cpu_seconds(process.pid), time.monotonic()
    time.sleep(args.window_s)
    cpu = _cpu_seconds(process.pid) - cpu_before
    wall = time.monotonic() - wall_before
    process.send_signal(signal.SIGTERM)
    process.wait(60)
    share = 100 * cpu / wall
    print(f"{label + ' ' if label else ''}idle watching of {tables} tables: {cpu:.2f} CPU s in "
          f"{wall:.0f} s = {share:.2f}% of one core, check interval {args.check_interval_s} s, compaction "
          f"interval {args.compact_interval_s} s; {_load()}")
    return share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--window-s", type=float, default=120.0)
    parser.add_argument("--settle-s", type=float, default=30.0)
    parser.add_argument("--check-interval-s", type=float, default=10.0)
    parser.add_argument("--compact-interval-s", type=float, default=60.0,
                        help="[jobs.compact] interval_s (60 s, the default: every idle table "
                             "gets a no-op compaction run each minute)")
    parser.add_argument("--before", type=Path, help="also run an older tree (DIR/paimond) on "
                        "the same tables, before each run of this one")
    args = parser.parse_args()
    shares, before = [], []
    with tempfile.TemporaryDirectory(prefix="paimond-idle-") as scratch:
        for tables in args.tables:
            if args.before is not None:
                env = {**os.environ, "PYTHONPATH": str(args.before.resolve())}
                before.append(measure(Path(scratch), tables, args, "before", env))
            shares.append(measure(Path(scratch), tables, args, "after" if before else ""))
    if before:
        _summary("before", args.tables, before)
    _summary("after" if before else "", args.tables, shares)


def _summary(label: str, tables: list[int], shares: list[float]) -> None:
    cells = "  ".join(f"{t}: {s:.2f}%" for t, s in zip(tables, shares, strict=True))
    growth = [(b / max(a, 1e-9)) ** (1 / max(math.log2(tb / ta), 1e-9))
              for (ta, a), (tb, b) in itertools.pairwise(zip(tables, shares, strict=True))]
    factors = ", ".join(f"{g:.2f}x" for g in growth)
    first = shares[0] if tables[0] == 1000 else None
    target = "" if first is None else (f"; 1,000 tables {first:.2f}% (goal < 1%: "
                                       f"{'ok' if first < 1 else 'MISSED'})")
    print(f"{label + ' ' if label else ''}idle daemon, % of one core  {cells}   per doubling {factors} "
          f"(goal <= 2.0x){target}")


if __name__ == "__main__":
    main()
