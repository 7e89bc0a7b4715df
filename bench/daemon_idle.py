"""Benchmark: one daemon over a warehouse of idle tables: its CPU (under 1% of one core at
1,000 tables; 20,000 tables under 5%), memory and time to the first pass, growing at most
linearly with the tables.

For each N (default 1,000 then 4,000): builds N tables (one pypaimon-written table, hard-linked
N times: a local commit never rewrites a file in place, so the copies stay apart), starts
`paimond run` on them as a real process and reports

- start-up: from the process's start until it serves HTTP;
- first pass: from the process's start until every table's first compaction ended (the latest
  `jobs.compact.last_run_at` of ``/status``, recorded as each run ends; progress is followed
  from each table's lease directory in the warehouse, so polling costs the daemon nothing);
- idle CPU: after the first pass and a settle time, the process's CPU time over a window of idle
  running (default 120 s: two rounds of the 60 s compaction interval, whose no-op runs every
  idle table gets, besides the check every 10 s and discovery every 60 s), as % of one core,
  and per table check (the window's CPU over N x the window's check ticks: those of the
  interval less the ones APScheduler logs as skipped because the previous tick still ran);
- memory: peak RSS (VmHWM: until the bench's first ``/status`` request, then reset and read
  again at the window's end; that request's own cost is printed apart) and RSS at the window's
  end (VmRSS), with the marginal KB per table;
- duties: the tables whose other routine jobs (expire, tags...) ran at least once by then;

then each figure's growth per doubling of the tables. An unchanged table's periodic compaction
is skipped (daemon/tables/compact_skip.py) but still runs once an hour: the share of that,
estimated from the first pass's CPU per table, is printed besides (not in the window).
``--stacks`` samples the daemon's threads (10 Hz, ``sys._current_frames``) and prints where its
busy threads were in the first pass and in the idle window. ``--before DIR`` runs an older tree
(DIR/paimond, e.g. from ``git archive``) on the same tables, interleaved.

    .venv/bin/python bench/daemon_idle.py [--tables 1000 4000] [--window-s 120] [--settle-s 30]
        [--first-pass-timeout-s 7200] [--stacks] [--before DIR]

Building is seconds per 10,000 tables; the first pass is most of a run (its rate is printed
every minute while it lasts).
"""

from __future__ import annotations

import argparse
import collections
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
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pyarrow as pa

DUTIES = ("expire", "tags", "merge_manifests", "expire_consumers", "expire_partitions")
# The daemon's child with a stack sampler: phase k ends when the bench creates OUT.mark<k>;
# its samples are then written to OUT.<k> and the next phase starts afresh.
STACKS = """
import collections, importlib.util, json, os, runpy, sys, threading, time
OUT = sys.argv[1]
ROOT = os.path.dirname(importlib.util.find_spec("paimond").origin) + "/"  # paimond/ in names
IDLE = ("threading.py", "queue.py", "selectors.py", "socketserver.py", "thread.py")
BLOCKED = {"_serve"}  # Lifecycle._serve waits on its SimpleQueue (C) for a stop request
def sample():
    me, phase = threading.get_ident(), 0
    while True:
        leaves, inclusive, busy, total = collections.Counter(), collections.Counter(), 0, 0
        while not os.path.exists(f"{OUT}.mark{phase}"):
            time.sleep(0.1)
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                total += 1
                if frame.f_code.co_filename.endswith(IDLE) or frame.f_code.co_name in BLOCKED:
                    continue
                busy += 1
                seen, leaf = set(), None
                while frame is not None:
                    code = frame.f_code
                    path = code.co_filename.split("site-packages/")[-1].replace(ROOT, "paimond/", 1)
                    where = f"{path}:{code.co_name}"
                    if leaf is None:
                        leaf = f"{where}:{frame.f_lineno}"
                    if where not in seen:
                        seen.add(where)
                        inclusive[where] += 1
                    frame = frame.f_back
                leaves[leaf] += 1
        with open(f"{OUT}.{phase}.tmp", "w") as out:
            json.dump({"busy": busy, "total": total, "leaves": leaves.most_common(12),
                       "inclusive": inclusive.most_common(60)}, out)
        os.rename(f"{OUT}.{phase}.tmp", f"{OUT}.{phase}")
        phase += 1
threading.Thread(target=sample, daemon=True).start()
sys.argv = ["paimond", *sys.argv[2:]]
runpy.run_module("paimond.cli", run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True, slots=True)
class Figures:
    serving_s: float  # process start -> serving HTTP
    first_pass_s: float  # process start -> every table's first compaction ended
    share: float  # % of one core over the idle window
    check_cpu_us: float  # the window's CPU per table check
    peak_rss_mb: float  # VmHWM at the window's end
    end_rss_mb: float  # VmRSS at the window's end


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def _memory_mb(pid: int) -> dict[str, float]:
    """VmHWM (peak RSS) and VmRSS of a process, MB."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {line.split(":")[0]: int(line.split()[1]) / 1024 for line in lines
            if line.startswith(("VmHWM:", "VmRSS:"))}


def build_source(warehouse: Path) -> Path:
    """One pypaimon-written primary-key table (3 rows, 1 bucket); returns its directory."""
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
    return warehouse / "idle.db" / "t0"


def build(warehouse: Path, tables: int, source: Path) -> None:
    """``tables`` hard-linked copies of ``source`` as idle.t0..: the daemon replaces a file
    (a hint) by a new one renamed over it, never in place, so no copy sees another's change."""
    for i in range(tables):
        shutil.copytree(source, warehouse / "idle.db" / f"t{i}", copy_function=os.link)


def _load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def _status(url: str) -> dict[str, dict[str, object]]:
    with urllib.request.urlopen(f"{url}/status", timeout=600) as reply:
        return json.loads(reply.read())["tables"]  # type: ignore[no-any-return]


class Stderr(threading.Thread):
    """Drains the daemon's stderr (a full pipe would stall its logging): keeps its last lines
    and counts the check ticks APScheduler skipped because the previous one still ran."""

    def __init__(self, lines: IO[str]) -> None:
        super().__init__(daemon=True)
        self.lines = lines
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.skipped_ticks = 0

    def run(self) -> None:
        for line in self.lines:
            self.tail.append(line)
            if "Daemon.tick" in line and "maximum number of running instances" in line:
                self.skipped_ticks += 1


def _start(config: Path, stacks: Path | None, env: dict[str, str] | None
           ) -> tuple[subprocess.Popen[str], str, float, Stderr]:
    """The daemon, its URL, seconds until it served, and its stderr."""
    argv = ([sys.executable, "-c", STACKS, str(stacks)] if stacks is not None
            else [sys.executable, "-m", "paimond.cli"])
    started = time.monotonic()
    process = subprocess.Popen([*argv, "run", "--config", str(config)], stderr=subprocess.PIPE,
                               text=True, env=env)
    assert process.stderr is not None
    match = None
    while match is None:
        line = process.stderr.readline()
        match = re.search(r"serving (http://\S+)/metrics", line)
        if match is None and process.poll() is not None:
            raise SystemExit(f"the daemon did not start: {line}{process.stderr.read()}")
    serving_s = time.monotonic() - started
    stderr = Stderr(process.stderr)
    stderr.start()
    return process, match.group(1), serving_s, stderr


def _timed_status(url: str, pid: int) -> dict[str, dict[str, object]]:
    """``/status``, printing what it cost the daemon: the reply's size and time, and how far
    it raised the daemon's peak RSS."""
    peak = _memory_mb(pid)["VmHWM"]
    started = time.monotonic()
    with urllib.request.urlopen(f"{url}/status", timeout=600) as reply:
        body = reply.read()
    print(f"  /status of {url}: {len(body) / 1e6:.1f} MB in {time.monotonic() - started:.1f} s, "
          f"daemon's peak RSS +{_memory_mb(pid)['VmHWM'] - peak:.0f} MB")
    return json.loads(body)["tables"]  # type: ignore[no-any-return]


def _first_pass(process: subprocess.Popen[str], url: str, warehouse: Path, tables: int,
                started_wall: float, timeout_s: float) -> tuple[float | None, float]:
    """Seconds from ``started_wall`` until every table's first compaction ended (None after
    ``timeout_s``), and the daemon's peak RSS until then, MB. Each run takes the table's lease
    (warehouse/_paimond/leases/<table>/) first: counting those directories follows the pass
    without asking the daemon; ``/status`` then says when each table's compaction ended (its
    cost is not in the peak)."""
    leases = warehouse / "_paimond" / "leases"
    waited, report_at, peak_mb = time.monotonic(), 60.0, 0.0
    while time.monotonic() - waited < timeout_s:
        if process.poll() is not None:
            raise SystemExit(f"the daemon exited ({process.returncode}) in its first pass")
        time.sleep(2)
        leased = len(os.listdir(leases)) if leases.exists() else 0
        elapsed = time.monotonic() - waited
        if elapsed >= report_at:
            report_at += 60
            memory = _memory_mb(process.pid)
            print(f"  first pass at {elapsed:.0f} s: {leased} of {tables} tables leased, "
                  f"{_cpu_seconds(process.pid):.0f} CPU s, RSS {memory['VmRSS']:.0f} MB; "
                  f"{_load()}", flush=True)
        if leased < tables:
            continue
        peak_mb = peak_mb or _memory_mb(process.pid)["VmHWM"]
        states = _timed_status(url, process.pid)
        ends = [t["jobs"]["compact"]["last_run_at"] for t in states.values()]  # type: ignore
        if len(states) == tables and None not in ends:
            failed = sum(t["jobs"]["compact"]["outcome"] != "success"  # type: ignore
                         for t in states.values())
            if failed:
                print(f"  {failed} tables' first compaction did not succeed")
            return max(ends) - started_wall, peak_mb
    return None, _memory_mb(process.pid)["VmHWM"]


def _print_stacks(path: Path, phase: int, title: str | None) -> None:
    """Ends a phase of the daemon's stack samples (``--stacks``) and prints its busy threads'
    functions (inclusive) and innermost lines, each by its share of the busy samples: running,
    in a system call, or waiting for the GIL (wall time, not CPU). ``title`` None: not shown."""
    Path(f"{path}.mark{phase}").touch()
    done = Path(f"{path}.{phase}")
    for _ in range(50):
        if done.exists():
            break
        time.sleep(0.2)
    else:
        print("  no stack samples written")
        return
    samples = json.loads(done.read_text())
    if title is None:
        return
    busy = max(samples["busy"], 1)
    print(f"  stacks, {title}: {samples['busy']} busy thread samples of {samples['total']}; "
          "functions by share of busy samples (inclusive):")
    for where, count in samples["inclusive"]:
        if not where.startswith(("<", "/")):  # paimond's and its dependencies' functions
            print(f"    {100 * count / busy:5.1f}%  {where}")
    print("  innermost lines:")
    for where, count in samples["leaves"]:
        print(f"    {100 * count / busy:5.1f}%  {where}")


def _duties(url: str, tables: int) -> str:
    """How many tables each routine duty ran on at least once."""
    states = _status(url)
    counts = {job: sum(job in t["last_run"] for t in states.values())  # type: ignore
              for job in DUTIES}
    return ", ".join(f"{job} {count}/{tables}" for job, count in counts.items())


def measure(scratch: Path, tables: int, args: argparse.Namespace, label: str = "",
            env: dict[str, str] | None = None) -> Figures:
    """One daemon watching ``tables`` idle tables: its first pass, CPU and memory."""
    warehouse = scratch / f"wh-{tables}"
    if not warehouse.exists():
        source = scratch / "source" / "idle.db" / "t0"
        if not source.exists():
            build_source(scratch / "source")
        started = time.monotonic()
        build(warehouse, tables, source)
        print(f"{tables} tables built in {time.monotonic() - started:.1f} s")
    name = f"{label}-{tables}" if label else str(tables)
    print(f"{label + ': ' if label else ''}{tables} tables; {_load()}", flush=True)
    config = scratch / f"paimond-{name}.toml"
    config.write_text(f'[[warehouses]]\nuri = "{warehouse}"\n[http]\nport = 0\n'
                      f"[daemon]\ncheck_interval_s = {args.check_interval_s}\n"
                      "discovery_interval_s = 60\n[limits]\nconcurrency = 2\n"
                      '[log]\nlevel = "warning"\nformat = "console"\n'
                      f"[jobs.compact]\ninterval_s = {args.compact_interval_s}\n")
    stacks = scratch / f"stacks-{name}.json" if args.stacks else None
    started_wall = time.time()
    process, url, serving_s, stderr = _start(config, stacks, env)
    try:
        first_pass_s, pass_peak_mb = _first_pass(process, url, warehouse, tables, started_wall,
                                                 args.first_pass_timeout_s)
        first_cpu = _cpu_seconds(process.pid)
        if stacks is not None:
            _print_stacks(stacks, 0, "first pass")
        if first_pass_s is None:
            raise SystemExit(f"no first pass over {tables} tables within "
                             f"{args.first_pass_timeout_s:.0f} s; the daemon's last lines: "
                             + "".join(stderr.tail))
        print(f"  serving after {serving_s:.1f} s; first pass over {tables} tables ended "
              f"{first_pass_s:.0f} s after the start ({first_cpu:.1f} CPU s, start-up included: "
              f"{100 * first_cpu / 3600:.2f}% of one core if repeated each hour); settling "
              f"{args.settle_s:.0f} s", flush=True)
        # the peak from here on: without the /status request above (clear_refs 5 resets VmHWM)
        Path(f"/proc/{process.pid}/clear_refs").write_text("5")
        time.sleep(args.settle_s)
        if stacks is not None:
            _print_stacks(stacks, 1, None)  # the settle time's samples: not shown
        cpu_before, wall_before = _cpu_seconds(process.pid), time.monotonic()
        skipped_before = stderr.skipped_ticks
        time.sleep(args.window_s)
        cpu = _cpu_seconds(process.pid) - cpu_before
        wall = time.monotonic() - wall_before
        skipped = stderr.skipped_ticks - skipped_before
        memory = _memory_mb(process.pid)
        if stacks is not None:
            _print_stacks(stacks, 2, "idle window")
        duties = _duties(url, tables)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)
    share = 100 * cpu / wall
    ticks = max(1.0, wall / args.check_interval_s - skipped)  # each checks every table
    checks = tables * ticks
    figures = Figures(serving_s, first_pass_s, share, 1e6 * cpu / checks,
                      max(pass_peak_mb, memory["VmHWM"]), memory["VmRSS"])
    print(f"  {label + ' ' if label else ''}idle watching of {tables} tables: {cpu:.2f} CPU s in "
          f"{wall:.0f} s = {share:.2f}% of one core = {figures.check_cpu_us:.0f} us per table "
          f"check ({ticks:.0f} ticks, {skipped} skipped as the previous one still ran; check "
          f"interval {args.check_interval_s} s, compaction interval "
          f"{args.compact_interval_s} s); peak RSS {pass_peak_mb:.0f} MB in the first pass, "
          f"{memory['VmHWM']:.0f} MB since, {figures.end_rss_mb:.0f} MB at the end; duties run "
          f"once by then: {duties}; {_load()}",
          flush=True)
    errors = [line for line in stderr.tail if "error" in line.lower()]
    if errors:
        print("  the daemon's last errors: " + "".join(errors))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--window-s", type=float, default=120.0)
    parser.add_argument("--settle-s", type=float, default=30.0)
    parser.add_argument("--first-pass-timeout-s", type=float, default=7200.0)
    parser.add_argument("--check-interval-s", type=float, default=10.0)
    parser.add_argument("--compact-interval-s", type=float, default=60.0,
                        help="[jobs.compact] interval_s (60 s, the default: every idle table "
                             "gets a no-op compaction run each minute)")
    parser.add_argument("--stacks", action="store_true",
                        help="sample the daemon's stacks in its first pass and the window")
    parser.add_argument("--before", type=Path, help="also run an older tree (DIR/paimond) on "
                        "the same tables, before each run of this one")
    args = parser.parse_args()
    runs: list[Figures] = []
    before: list[Figures] = []
    print(f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="paimond-idle-") as scratch:
        for tables in args.tables:
            if args.before is not None:
                env = {**os.environ, "PYTHONPATH": str(args.before.resolve())}
                before.append(measure(Path(scratch), tables, args, "before", env))
            runs.append(measure(Path(scratch), tables, args, "after" if before else ""))
    if before:
        _summary("before", args.tables, before)
    _summary("after" if before else "", args.tables, runs)


def _growth(tables: list[int], values: list[float]) -> str:
    """The factor per doubling between consecutive sizes (2.0 is linear)."""
    return ", ".join(
        f"{(b / max(a, 1e-9)) ** (1 / max(math.log2(tb / ta), 1e-9)):.2f}x"
        for (ta, a), (tb, b) in itertools.pairwise(zip(tables, values, strict=True)))


def _summary(label: str, tables: list[int], runs: list[Figures]) -> None:
    columns = (("start-up s", "serving_s", "{:.1f}"), ("first pass s", "first_pass_s", "{:.0f}"),
               ("idle % core", "share", "{:.2f}"), ("us/check", "check_cpu_us", "{:.0f}"),
               ("peak RSS MB", "peak_rss_mb", "{:.0f}"), ("end RSS MB", "end_rss_mb", "{:.0f}"))
    print(f"{label + ': ' if label else ''}idle daemon")
    print(f"{'tables':>14}" + "".join(f"{name:>14}" for name, _, _ in columns))
    for count, run in zip(tables, runs, strict=True):
        print(f"{count:>14}" + "".join(f"{fmt.format(getattr(run, attr)):>14}"
                                       for _, attr, fmt in columns))
    if len(tables) > 1:
        print(f"{'per doubling':>14}" + "".join(
            f"{_growth(tables, [getattr(r, attr) for r in runs]):>14}" for _, attr, _ in columns)
            + "   (goal <= 2.0x)")
        marginal = ", ".join(f"{1024 * (b.end_rss_mb - a.end_rss_mb) / (tb - ta):.0f}"
                             for (ta, a), (tb, b) in itertools.pairwise(zip(tables, runs,
                                                                            strict=True)))
        print(f"RSS at the window's end, KB per added table: {marginal}")
    shares = dict(zip(tables, (r.share for r in runs), strict=True))
    for count, goal in ((1000, 1.0), (20000, 5.0)):
        if count in shares:
            print(f"{count:,} tables: {shares[count]:.2f}% of one core (goal < {goal:g}%: "
                  f"{'ok' if shares[count] < goal else 'MISSED'})")


if __name__ == "__main__":
    main()
