"""The module stops of one compact request: which paimond modules ``paimond compact`` passes
through, in order, on a small primary-key table.

pypaimon writes a one-bucket deduplicate table in a few overlapping commits; the table is
copied, and ``paimond compact WAREHOUSE --table db.t --full`` runs once untraced on one copy (so
every module is already imported: import-time code is no stop) and once traced on the other.
A stop is a paimond module execution enters or returns to (``sys.setprofile`` on every
thread; frames outside ``paimond.`` are passed through, not stops); consecutive repeats
collapse into one. ``--depth 1`` names a stop by its layer (``table``, ``lsm``...), so the
count is how often the request crosses layers. ``--calls`` counts entries only (a return to
the caller is no stop). ``--from`` starts the sequence at the first frame of the named
function (``module:function``, e.g. ``paimond.maintenance.compact.plan:plan_compaction`` for
the plan alone) and ends it when that frame returns.

    .venv/bin/python bench/module_stops.py [--calls] [--from MODULE:FUNCTION] [--quiet]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

PREFIX = "paimond."


def write_table(warehouse: Path, commits: int = 3, rows: int = 200) -> None:
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("db", True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1"}), True)
    table = catalog.get_table("db.t")
    for commit_number in range(commits):
        ids = list(range(commit_number * rows // 2, commit_number * rows // 2 + rows))
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"id": ids, "name": [f"n{commit_number}-{i}" for i in ids]},
                                   schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def compact(warehouse: Path) -> int:
    from paimond.cli.main import main

    return main(["compact", str(warehouse), "--table", "db.t", "--full", "--parallelism", "1"])


class StopRecorder:
    """The modules entered (and, unless ``calls_only``, returned to), collapsed."""

    def __init__(self, calls_only: bool, start: tuple[str, str] | None, depth: int | None
                 ) -> None:
        self.calls_only = calls_only
        self.depth = depth
        self.start = start
        self.stops: list[str] = []
        self.active: FrameType | None = None  # the ``start`` frame, while it runs
        self.done = False
        self._lock = threading.Lock()

    def _stop(self, module: str) -> None:
        if self.depth is not None:  # paimond.table.scan.bucket_scan -> paimond.table (depth 1)
            module = ".".join(module.split(".")[:self.depth + 1])
        if not self.stops or self.stops[-1] != module:
            self.stops.append(module)

    def profile(self, frame: FrameType, event: str, _: Any) -> None:
        if event not in ("call", "return") or self.done:
            return
        module = frame.f_globals.get("__name__", "")
        with self._lock:
            if self.start is not None and self.active is None:
                if event == "call" and (module, frame.f_code.co_name) == self.start:
                    self.active = frame
                else:
                    return
            if event == "call":
                if module.startswith(PREFIX):
                    self._stop(module)
                return
            if frame is self.active and self.start is not None:
                self.done = True
                return
            if self.calls_only:
                return
            caller = frame.f_back
            while caller is not None and not caller.f_globals.get(
                    "__name__", "").startswith(PREFIX):
                caller = caller.f_back
            if caller is not None and module.startswith(PREFIX):
                self._stop(caller.f_globals["__name__"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", action="store_true", help="count entries only")
    parser.add_argument("--from", dest="start", metavar="MODULE:FUNCTION")
    parser.add_argument("--depth", type=int, metavar="N",
                        help="name stops by their first N package levels (1: the layer)")
    parser.add_argument("--quiet", action="store_true", help="print the count alone")
    args = parser.parse_args()
    start = None
    if args.start:
        module, _, function = args.start.partition(":")
        start = (module, function)
    with tempfile.TemporaryDirectory(prefix="module-stops-") as scratch:
        warm, traced = Path(scratch, "warm"), Path(scratch, "traced")
        write_table(warm)
        shutil.copytree(warm, traced)
        with contextlib.redirect_stdout(io.StringIO()):
            assert compact(warm) == 0
        recorder = StopRecorder(args.calls, start, args.depth)
        threading.setprofile_all_threads(recorder.profile)
        threading.setprofile(recorder.profile)
        sys.setprofile(recorder.profile)
        try:
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                code = compact(traced)
        finally:
            sys.setprofile(None)
            threading.setprofile_all_threads(None)
            threading.setprofile(None)
        assert code == 0 and "snapshot" in printed.getvalue(), printed.getvalue()
    if not args.quiet:
        for number, module in enumerate(recorder.stops, 1):
            print(f"{number:4d} {module.removeprefix(PREFIX)}")
    print(f"{len(recorder.stops)} stops, {len(set(recorder.stops))} modules")


if __name__ == "__main__":
    main()
