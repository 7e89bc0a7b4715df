"""Benchmark: CPU the daemon spends watching idle tables (goal: under 5% of one core).

Builds N tables (default 1,000: one pypaimon-written table, copied), starts `paimond run` on
them as a real process, lets the first full pass finish, then samples the process's CPU time
over a window of idle watching. Prints CPU seconds per wall second, as % of one core.

    .venv/bin/python bench/daemon_idle.py [--tables 1000] [--window-s 60]
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument("--check-interval-s", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paimond-idle-") as scratch:
        warehouse = Path(scratch) / "wh"
        started = time.monotonic()
        build(warehouse, args.tables)
        print(f"{args.tables} tables built in {time.monotonic() - started:.1f} s")
        config = Path(scratch) / "paimond.toml"
        config.write_text(f'[[warehouses]]\nuri = "{warehouse}"\n[http]\nport = 0\n'
                          f"[daemon]\ncheck_interval_s = {args.check_interval_s}\n"
                          "discovery_interval_s = 60\n[limits]\nconcurrency = 2\n"
                          '[log]\nlevel = "warning"\n')
        process = subprocess.Popen([sys.executable, "-m", "paimond.cli", "run",
                                    "--config", str(config)], stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        match = None
        while match is None:
            match = re.search(r"serving (http://\S+)/metrics", process.stderr.readline())
            if match is None and process.poll() is not None:
                raise SystemExit("the daemon did not start")
        # The first pass evaluates and maintains every table; wait until all have run.
        settle_started = time.monotonic()
        while time.monotonic() - settle_started < 900:
            time.sleep(2)
            tables = json.loads(urllib.request.urlopen(f"{match.group(1)}/status").read())["tables"]
            done = sum(1 for t in tables.values() if "compact" in t["last_run"])
            if len(tables) == args.tables and done == args.tables:
                break
        print(f"first pass over {done} tables done after {time.monotonic() - settle_started:.0f} s "
              f"({_cpu_seconds(process.pid):.1f} CPU s)")
        cpu_before, wall_before = _cpu_seconds(process.pid), time.monotonic()
        time.sleep(args.window_s)
        cpu = _cpu_seconds(process.pid) - cpu_before
        wall = time.monotonic() - wall_before
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        print(f"idle watching of {args.tables} tables: {cpu:.2f} CPU s in {wall:.0f} s = "
              f"{100 * cpu / wall:.2f}% of one core (goal < 5%), check interval "
              f"{args.check_interval_s} s")


if __name__ == "__main__":
    main()
