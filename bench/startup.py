"""Benchmark: what a ``paimond`` command costs before it does any work.

Runs each command as a whole process and takes the CPU seconds (user + system) of the child,
the median of ``--runs`` runs, against the baseline ``python -c "import pyarrow.parquet"``
measured in the same run, interleaved (so a busy machine weighs on both alike). Goal: every
ratio within 1.5x. Also prints peak RSS and whether pandas was imported.

    .venv/bin/python bench/startup.py [--runs 7] [--pyc cached|none] [--before DIR]

``--before DIR`` also runs every paimond command from an older tree, interleaved (DIR holds its
package as paimond/: ``mkdir -p DIR/paimond && git archive REV | tar -x -C DIR/paimond``).

The no-op ``status`` is a warehouse without tables; ``status (1 table)`` reads one small
pypaimon-written table (pypaimon only builds it; the timed process never imports it).
``compact`` runs on a fresh copy of a small primary-key table (3 commits of 3 rows, 1 bucket)
each time: ``--dry-run`` (start-up, imports, the plan) and ``--full`` (and the merge, the
commit).

Python byte code: an installed paimond (pip, uv, the container image) has its modules and its
dependencies' compiled to ``.pyc`` at install time, while this checkout runs with
``PYTHONDONTWRITEBYTECODE=1`` and has none, so each process compiles every module it imports.
``--pyc cached`` (the default) gives every command, the baseline too, a byte-code cache in the
scratch directory (``PYTHONPYCACHEPREFIX``, filled by an untimed first round); ``--pyc none``
compiles in every process as the checkout does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GOAL_RATIO = 1.5
PANDAS_PROBE = ("import atexit, sys; atexit.register(lambda: sys.stderr.write("
                "'PANDAS=%d\\n' % ('pandas' in sys.modules)))")


def environment(pyc: str, scratch: Path, tree: Path | None = None) -> dict[str, str]:
    """The commands' environment: ``tree`` first on the path; with ``pyc`` "cached", a
    byte-code cache under ``scratch`` (else no ``.pyc`` is read or written)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    if pyc == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def _measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, bool]:
    """CPU seconds, peak RSS in MB, and whether pandas was imported, of one process."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=env)
    assert process.stderr is not None
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({process.returncode}): {stderr}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, "PANDAS=1" in stderr


def _command(*args: str) -> list[str]:
    """``paimond ARGS`` as the console script runs it, with the pandas probe first."""
    code = f"{PANDAS_PROBE}; import sys; from paimond.cli.main import main; sys.exit(main())"
    return [sys.executable, "-c", code, *args]


def _one_table(warehouse: Path, commits: int = 1) -> None:
    """Runs in a child process: the parent stays small, so a child's peak RSS is its own
    (a forked child's high-water mark starts at its parent's)."""
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("db", True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1"}), True)
    for number in range(commits):
        builder = catalog.get_table("db.t").new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"id": [1, 2, 3], "v": [f"{v}{number}" for v in "abc"]},
                                   schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


class _FreshCopy:
    """``compact`` changes its table: each run gets a fresh copy (made before the timing)."""

    def __init__(self, source: Path, copy: Path) -> None:
        self.source, self.copy = source, copy

    def __call__(self) -> None:
        shutil.rmtree(self.copy, ignore_errors=True)
        shutil.copytree(self.source, self.copy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--pyc", choices=("cached", "none"), default="cached",
                        help="byte code: cached as installed (default), or none (compile "
                             "every module in every process, PYTHONDONTWRITEBYTECODE)")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="an older tree (DIR/paimond) to run alike, interleaved")
    parser.add_argument("--build", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--commits", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        _one_table(Path(args.build), args.commits)
        return
    with tempfile.TemporaryDirectory(prefix="paimond-startup-") as scratch:
        empty, one = Path(scratch) / "empty", Path(scratch) / "one"
        small, copy = Path(scratch) / "small", Path(scratch) / "copy"
        empty.mkdir()
        subprocess.run([sys.executable, __file__, "--build", str(one)], check=True)
        subprocess.run([sys.executable, __file__, "--build", str(small), "--commits", "3"],
                       check=True)
        fresh = _FreshCopy(small, copy)
        env = environment(args.pyc, Path(scratch))
        before_env = (None if args.before is None
                      else environment(args.pyc, Path(scratch), args.before))
        cases: dict[str, tuple[list[str], bool, dict[str, str]]] = {
            "baseline: import pyarrow.parquet": (
                [sys.executable, "-c", f"{PANDAS_PROBE}; import pyarrow.parquet"], False, env),
            "paimond --version": (_command("--version"), True, env),
            "paimond --help": (_command("--help"), True, env),
            "paimond status (no tables)": (_command("status", str(empty)), True, env),
            "paimond status (1 table)": (_command("status", str(one)), False, env),
            "paimond compact --dry-run (small)": (
                _command("compact", str(copy), "--table", "db.t", "--full", "--dry-run"), False,
                env),
            "paimond compact --full (small)": (
                _command("compact", str(copy), "--table", "db.t", "--full"), False, env),
        }
        if before_env is not None:
            cases.update({f"before: {name[len('paimond '):]}": (argv, goal, before_env)
                          for name, (argv, goal, _) in list(cases.items())
                          if name.startswith("paimond")})
        samples: dict[str, list[tuple[float, float, bool]]] = {name: [] for name in cases}
        for rnd in range(args.runs + 1):  # interleaved: each round measures every case once
            for name, (argv, _goal, case_env) in cases.items():
                if "compact" in name:
                    fresh()
                measured = _measure(argv, case_env)
                if rnd:  # the first round only fills the byte-code cache
                    samples[name].append(measured)
    base = statistics.median(cpu for cpu, _, _ in samples["baseline: import pyarrow.parquet"])
    print(f"{args.runs} runs each, medians; {os.cpu_count()} CPUs; python {sys.version.split()[0]}"
          f"; byte code {args.pyc}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<36} {'CPU s':>7} {'ratio':>6} {'goal':>6} {'RSS MB':>7} pandas")
    for name, (_, goal, _env) in cases.items():
        cpu = statistics.median(s[0] for s in samples[name])
        rss = statistics.median(s[1] for s in samples[name])
        pandas = any(s[2] for s in samples[name])
        ratio = cpu / base
        verdict = (f"{GOAL_RATIO:.1f}x {'ok' if ratio <= GOAL_RATIO else 'MISSED'}" if goal
                   else "-")
        print(f"{name:<36} {cpu:7.3f} {ratio:5.2f}x {verdict:>9} {rss:7.0f} "
              f"{'yes' if pandas else 'no'}")


if __name__ == "__main__":
    main()
