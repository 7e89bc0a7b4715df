"""Apache Paimon's own Java batch read, as a test oracle next to pypaimon.

`tests/support/java/PaimonReader.java` is compiled once per session and Java Paimon release
with `javac` against that release's jars (`java_paimon.py`: 1.0 from the `paimon-python-ali`
wheel, 1.4 and 2.0 from Maven Central; only the jars are used, the wheel's Python API is never
imported). The `java_reader` fixture is parametrized by release, so every test that reads with
Java reads with each of them. One JVM per release (`PaimonReader --serve`) serves every read
of the session, one request a line on stdin, so a read costs its I/O and decoding, not a JVM
start (~1.5 s).

Rows on both sides are put in one canonical form (`canonical_rows` for Arrow tables from
pypaimon, `JavaRead.rows` for Java's output): each row a JSON array string of its values:
numbers, DECIMAL as a plain string, binary as hex, DATE as epoch days, TIME as millis of
day, TIMESTAMP/TIMESTAMP_LTZ as [epoch millis, nanos of milli], ARRAY and ROW as arrays,
MAP as {"map": [[k, v], ...]} sorted, NULL as null. Compare them as multisets
(`collections.Counter`).

The `java_reader` fixture skips when no JDK or jar is here, and fails under `CI=true`.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from support.java_paimon import (
    RELEASES,
    JavaUnavailable,
    classpath,
    classpath_text,
    jdk_missing,
    stop_serving,
    wheel_jar,
)

SOURCE = Path(__file__).parent / "java" / "PaimonReader.java"
# Paimon logs through slf4j/log4j without a backend; keep the JVM quiet and small.
JVM_FLAGS = ("-Xshare:auto", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dlog4j2.statusLoggerLevel=OFF")


class JavaReadError(RuntimeError):
    """The Java read failed; the message is its stack trace."""


def find_jar() -> Path | None:
    """The 1.0 wheel's jar (the golden tests compile their helpers against it)."""
    return wheel_jar()


def unavailable_reason() -> str | None:
    """Why the 1.0 jar cannot run here, or None."""
    missing = jdk_missing()
    if missing is not None:
        return missing
    if wheel_jar() is None:
        return "paimon-python-ali's jar is not installed"
    return None


def compile_reader(out_dir: Path, jars: list[Path]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["javac", "-nowarn", "-d", str(out_dir), "-cp", classpath_text(jars),
                             str(SOURCE)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise JavaReadError(f"javac failed:\n{result.stdout}\n{result.stderr}")
    return out_dir


@dataclass
class JavaRead:
    """One Java read: the printed columns, canonical rows, their row kinds and what the
    scan planned (`splits`: files, levels as {"level": count}, deletionFiles)."""

    columns: list[str]
    rows: list[str]
    row_kinds: list[str]
    splits: dict[str, Any]
    candidates: int  # rows the reader returned before the row-by-row filter
    seconds: float
    # check_buckets: {"checked": rows, "mismatched": rows not in Java's bucket for them}
    buckets: dict[str, int] | None = None

    def levels(self) -> dict[int, int]:
        return {int(k): v for k, v in self.splits["levels"].items()}


@dataclass
class JavaReader:
    """A `PaimonReader --serve` JVM of one Java Paimon `release` ("1.0", "1.4", "2.0");
    `read` sends one request and parses the answer."""

    release: str
    jars: list[Path]
    classes: Path
    log_dir: Path
    reads: int = 0
    read_seconds: float = 0.0
    _process: subprocess.Popen | None = field(default=None, repr=False)
    _stderr: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def command(self, *args: str) -> list[str]:
        return ["java", *JVM_FLAGS, "-cp", classpath_text(self.jars, self.classes),
                "PaimonReader", *args]

    def _start(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._stderr = tempfile.TemporaryFile(dir=self.log_dir)
            self._process = subprocess.Popen(
                self.command("--serve"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, text=True, encoding="utf-8", bufsize=1)
        return self._process

    def _stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    def close(self) -> None:
        stop_serving(self._process)
        self._process = None

    def read(self, table_path: str | os.PathLike[str], *, snapshot_id: int | None = None,
             tag: str | None = None, projection: Sequence[str] | None = None,
             filters: Iterable[str] = (), incremental: tuple[int, int] | None = None,
             scan_mode: str | None = None, check_buckets: int | None = None) -> JavaRead:
        """``incremental``: what snapshots (FROM, TO] added; ``scan_mode="changelog"``
        reads their changelog files (row kinds in ``row_kinds``). ``check_buckets``: Java
        computes each row's bucket for that many buckets (``JavaRead.buckets``)."""
        args = [os.fspath(table_path)]
        if check_buckets is not None:
            args += ["--check-buckets", str(check_buckets)]
        if snapshot_id is not None:
            args += ["--snapshot", str(snapshot_id)]
        if incremental is not None:
            args += ["--incremental", f"{incremental[0]},{incremental[1]}"]
        if scan_mode is not None:
            args += ["--scan-mode", scan_mode]
        if tag is not None:
            args += ["--tag", tag]
        if projection is not None:
            args += ["--projection", ",".join(projection)]
        for expr in filters:
            args += ["--filter", expr]
        if any("\t" in a or "\n" in a for a in args):
            raise ValueError(f"tabs and newlines cannot be sent: {args}")
        with self._lock:
            start = time.perf_counter()
            process = self._start()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("\t".join(args) + "\n")
            process.stdin.flush()
            read = self._answer(process, args)
            read.seconds = time.perf_counter() - start
            self.reads += 1
            self.read_seconds += read.seconds
            return read

    def _answer(self, process: subprocess.Popen, args: list[str]) -> JavaRead:
        assert process.stdout is not None
        columns: list[str] = []
        splits: dict[str, Any] = {}
        rows: list[str] = []
        kinds: list[str] = []
        buckets: dict[str, int] | None = None
        while True:
            line = process.stdout.readline()
            if not line:
                process.wait()
                raise JavaReadError(f"the JVM exited ({process.returncode}) reading {args}:\n"
                                    + self._stderr_text())
            line = line.rstrip("\n")
            if line.startswith("#ERROR "):
                raise JavaReadError(json.loads(line[len("#ERROR "):]))
            if line.startswith("#SCHEMA "):
                columns = json.loads(line[len("#SCHEMA "):])
            elif line.startswith("#SPLITS "):
                splits = json.loads(line[len("#SPLITS "):])
            elif line.startswith("#BUCKETS "):
                buckets = json.loads(line[len("#BUCKETS "):])
            elif line.startswith("#END "):
                end = json.loads(line[len("#END "):])
                assert end["rows"] == len(rows)
                return JavaRead(columns, rows, kinds, splits, end["candidates"], 0.0, buckets)
            else:
                kind, values = line.split("\t", 1)
                kinds.append(kind)
                rows.append(_dump(_normalize(json.loads(values))))

    def read_rows(self, table_path: str | os.PathLike[str], snapshot_id: int | None = None,
                  tag: str | None = None, projection: Sequence[str] | None = None,
                  filters: Iterable[str] = ()) -> list[str]:
        return self.read(table_path, snapshot_id=snapshot_id, tag=tag, projection=projection,
                         filters=filters).rows


# ---- canonical rows ----------------------------------------------------------------------


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _normalize(value: Any) -> Any:
    """Maps' pairs sorted (a map has no order), recursively."""
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        pairs = [_normalize(p) for p in value["map"]]
        return {"map": sorted(pairs, key=_dump)}
    return value


_NANOS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def _timestamps(arr: pa.Array) -> list[Any]:
    scale = _NANOS_PER_UNIT[arr.type.unit]
    out = []
    for v in arr.cast(pa.int64()).to_pylist():
        if v is None:
            out.append(None)
        else:
            nanos = v * scale
            out.append([nanos // 10**6, nanos % 10**6])
    return out


def _times(arr: pa.Array) -> list[Any]:
    per_milli = {"s": None, "ms": 1, "us": 1000, "ns": 10**6}[arr.type.unit]
    raw = arr.cast(pa.int64() if pa.types.is_time64(arr.type) else pa.int32()).to_pylist()
    if per_milli is None:
        return [None if v is None else v * 1000 for v in raw]
    return [None if v is None else v // per_milli for v in raw]


def _lists(arr: pa.Array, values: list[Any]) -> list[Any]:
    offsets = arr.offsets.to_pylist()
    valid = arr.is_valid().to_pylist()
    return [values[offsets[i]:offsets[i + 1]] if valid[i] else None for i in range(len(arr))]


def canonical_values(arr: pa.Array) -> list[Any]:
    """The canonical value of each element of an Arrow array (see the module docstring)."""
    t = arr.type
    if pa.types.is_timestamp(t):
        return _timestamps(arr)
    if pa.types.is_date32(t):
        return arr.cast(pa.int32()).to_pylist()
    if pa.types.is_time(t):
        return _times(arr)
    if pa.types.is_decimal(t):
        return [None if v is None else format(v, "f") for v in arr.to_pylist()]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return [None if v is None else v.hex() for v in arr.to_pylist()]
    if pa.types.is_floating(t):
        return [None if v is None else float(v) for v in arr.to_pylist()]
    if pa.types.is_map(t):
        keys, items = arr.values.flatten()
        pairs = [list(p) for p in zip(canonical_values(keys), canonical_values(items), strict=True)]
        return [None if v is None else {"map": sorted(v, key=_dump)}
                for v in _lists(arr, pairs)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _lists(arr, canonical_values(arr.values))
    if pa.types.is_struct(t):
        children = [canonical_values(c) for c in arr.flatten()]
        valid = arr.is_valid().to_pylist()
        return [[c[i] for c in children] if valid[i] else None for i in range(len(arr))]
    if (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t)):
        return arr.to_pylist()
    raise TypeError(f"no canonical form for {t}")


def canonical_rows(table: pa.Table, columns: Sequence[str] | None = None) -> list[str]:
    """Each row of `table` (its `columns`, in that order) in the canonical form."""
    names = list(columns) if columns is not None else table.column_names
    table = table.select(names).combine_chunks()
    if table.num_rows == 0:
        return []
    values = [canonical_values(table.column(n).chunk(0)) if table.column(n).num_chunks
              else [] for n in names]
    return [_dump(list(row)) for row in zip(*values, strict=True)]


def multiset_diff(left: Sequence[str], right: Sequence[str], limit: int = 6) -> str:
    """A short account of how two multisets of canonical rows differ ('' when equal)."""
    a, b = collections.Counter(left), collections.Counter(right)
    only_a, only_b = list((a - b).elements()), list((b - a).elements())
    if not only_a and not only_b:
        return ""
    return (f"{len(left)} vs {len(right)} rows; only left ({len(only_a)}): "
            f"{sorted(only_a)[:limit]}; only right ({len(only_b)}): {sorted(only_b)[:limit]}")


# ---- fixture -----------------------------------------------------------------------------


@dataclass
class JavaReaders:
    """One reader per Java Paimon release, each started when first asked for."""

    tmp_path_factory: pytest.TempPathFactory
    _readers: dict[str, JavaReader] = field(default_factory=dict)

    def get(self, release: str) -> JavaReader:
        """The reader of `release`; raises JavaUnavailable when it cannot run here."""
        if release not in self._readers:
            jars = classpath(release)
            root = self.tmp_path_factory.mktemp(f"java_reader_{release}")
            self._readers[release] = JavaReader(
                release, jars, compile_reader(root / "classes", jars), root)
        return self._readers[release]

    def every(self) -> list[JavaReader]:
        """A reader of each release (oldest first); skips the test when one cannot run here,
        fails it under CI=true."""
        return [available(self, release) for release in RELEASES]

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()


def available(readers: JavaReaders, release: str) -> JavaReader:
    try:
        return readers.get(release)
    except JavaUnavailable as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Java Paimon {release} unavailable under CI: {e}")
        pytest.skip(f"Java Paimon {release}: {e}")


@pytest.fixture(scope="session", name="java_readers")
def java_readers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaReaders]:
    """The session's readers, one JVM per release (conftest re-exports it)."""
    readers = JavaReaders(tmp_path_factory)
    try:
        yield readers
    finally:
        readers.close()


@pytest.fixture(name="java_readers_here")
def java_readers_here(request: pytest.FixtureRequest) -> list[JavaReader]:
    """A Java reader of each release where Java can run (always under CI=true, where a
    missing one fails); none where there is no JDK (conftest re-exports it)."""
    if unavailable_reason() is not None and os.environ.get("CI", "").lower() != "true":
        return []
    readers: JavaReaders = request.getfixturevalue("java_readers")
    return readers.every()


@pytest.fixture(scope="session", name="java_reader", params=RELEASES, ids=lambda r: f"java{r}")
def java_reader(java_readers: JavaReaders, request: pytest.FixtureRequest) -> JavaReader:
    """The reader of each Java Paimon release in turn: a test that takes it runs once per
    release (conftest re-exports it)."""
    return available(java_readers, request.param)
