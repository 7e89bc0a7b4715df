"""Apache Paimon's own Java writer and dedicated compaction, the reference of the differential
tests (tests/interop/test_java_differential.py).

`tests/support/java/PaimonMaintainer.java` is compiled against the newest Java Paimon release
the suite has (`java_paimon.REFERENCE`) and serves requests on one JVM: `write` commits rows
with `write-only=true`, as a writer that leaves maintenance to paimond does; `compact` runs
Java's dedicated compaction (`write-only=false`, `TableWrite.compact` of every bucket, as
Paimon's compact action and procedure do). The `java_maintainer` fixture skips without a JDK
or Maven, and fails under `CI=true`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.java_paimon import JavaUnavailable, classpath, classpath_text, stop_serving

SOURCE = Path(__file__).parent / "java" / "PaimonMaintainer.java"
REFERENCE = "2.0"  # the newest Java Paimon Maven Central serves (java_paimon.py)
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.statusLoggerLevel=OFF")


class JavaMaintenanceError(RuntimeError):
    """Java's write or compaction failed; the message is its stack trace."""


@dataclass
class JavaMaintainer:
    release: str
    jars: list[Path]
    classes: Path
    log_dir: Path
    _process: subprocess.Popen | None = field(default=None, repr=False)
    _stderr: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _start(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._stderr = tempfile.TemporaryFile(dir=self.log_dir)
            self._process = subprocess.Popen(
                ["java", *JVM_FLAGS, "-cp", classpath_text(self.jars, self.classes),
                 "PaimonMaintainer"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, text=True, encoding="utf-8", bufsize=1)
        return self._process

    def _ask(self, *request: str) -> int:
        with self._lock:
            process = self._start()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("\t".join(request) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
            if not line:
                process.wait()
                self._stderr.seek(0)
                raise JavaMaintenanceError(f"the JVM exited ({process.returncode}):\n"
                                           + self._stderr.read().decode("utf-8", "replace"))
            if line.startswith("#ERROR "):
                raise JavaMaintenanceError(json.loads(line[len("#ERROR "):]))
            assert line.startswith("#OK "), line
            return int(line[len("#OK "):])

    def write(self, table_path: str | os.PathLike[str], rows: Sequence[Sequence[Any]], *,
              assigner: str | None = None) -> int:
        """One write-only batch commit of ``rows`` (each ``[kind, *values]``); the latest
        snapshot id after it. ``assigner`` names the dynamic-bucket assigner that copies of
        one table share (default: one per path)."""
        return self._ask("write", os.fspath(table_path),
                         json.dumps(rows, separators=(",", ":"), ensure_ascii=False),
                         assigner or os.fspath(table_path))

    def compact(self, table_path: str | os.PathLike[str], *, full: bool) -> int:
        """Java's dedicated compaction of every bucket; the latest snapshot id after it."""
        return self._ask("compact", os.fspath(table_path), "true" if full else "false")

    def expire(self, table_path: str | os.PathLike[str], keep: int) -> int:
        """Java's ExpireSnapshots keeping ``keep`` snapshots, whatever their age."""
        return self._ask("expire", os.fspath(table_path), str(keep))

    def tag(self, table_path: str | os.PathLike[str], name: str, snapshot_id: int) -> int:
        return self._ask("tag", os.fspath(table_path), name, str(snapshot_id))

    def create_branch(self, table_path: str | os.PathLike[str], branch: str,
                      tag: str | None = None) -> int:
        """Java's ``createBranch`` (from ``tag``, else empty); the branch's latest snapshot id
        (0: none). A branch's path for the other requests: ``f"{table_path}$branch_{branch}"``."""
        return self._ask("create-branch", os.fspath(table_path), branch, tag or "")

    def fast_forward(self, table_path: str | os.PathLike[str], branch: str) -> int:
        """Java's ``fastForward`` of the main branch to ``branch``; the latest snapshot id."""
        return self._ask("fast-forward", os.fspath(table_path), branch)

    def watermark_search(self, table_path: str | os.PathLike[str], watermark: int, *,
                         later: bool) -> int | None:
        """Java's ``SnapshotManager.laterOrEqualWatermark`` (``later``) or
        ``earlierOrEqualWatermark``: the snapshot id found, None for none."""
        request = "later-or-equal-watermark" if later else "earlier-or-equal-watermark"
        return self._ask(request, os.fspath(table_path), str(watermark)) or None

    def expire_partitions(self, table_path: str | os.PathLike[str]) -> int:
        """The partition expiration a Java writer's commit runs (the table's options, the
        check interval waived); the latest snapshot id of the table after it."""
        return self._ask("expire-partitions", os.fspath(table_path))

    def jdbc_write(self, uri: str, warehouse: str | os.PathLike[str], table: str,
                   rows: Sequence[Sequence[Any]]) -> int:
        """A write-only commit of ``rows`` (``[kind, id, v]``) into ``table`` of the JDBC
        catalog ``uri`` (``lock.enabled``: under its lock), created first if absent; the
        table's latest snapshot id."""
        return self._ask("jdbc-write", uri, os.fspath(warehouse), table,
                         json.dumps(rows, separators=(",", ":")))

    def catalog_write(self, options: Mapping[str, str], table: str,
                      rows: Sequence[Sequence[Any]]) -> int:
        """A write-only commit of ``rows`` (``[kind, id, v]``) into ``table`` of the catalog
        ``options`` (Paimon's catalog options), created first if absent; the table's latest
        snapshot id as the catalog answers it."""
        return self._ask("catalog-write", json.dumps(dict(options)), table,
                         json.dumps(rows, separators=(",", ":")))

    def catalog_latest(self, options: Mapping[str, str], table: str) -> int:
        """The latest snapshot id of ``table`` as its catalog answers it (0: none)."""
        return self._ask("catalog-latest", json.dumps(dict(options)), table)

    def catalog_count(self, options: Mapping[str, str], table: str) -> int:
        """The number of rows Java's batch read of ``table`` (through its catalog) returns."""
        return self._ask("catalog-count", json.dumps(dict(options)), table)

    def catalog_create_partitioned(self, options: Mapping[str, str], table: str,
                                   table_options: Mapping[str, str]) -> None:
        """Create ``table`` (dt STRING, id INT, v STRING; primary key (dt, id), partitioned by
        dt, 1 bucket) through the catalog ``options``."""
        self._ask("catalog-create-partitioned", json.dumps(dict(options)), table,
                  json.dumps(dict(table_options)))

    def catalog_metastore_partitions(self, options: Mapping[str, str], table: str,
                                     value: str = "*") -> int:
        """How many partitions a Hive catalog's metastore lists for ``table`` whose first value
        is ``value`` (``*``: all)."""
        return self._ask("catalog-metastore-partitions", json.dumps(dict(options)), table,
                         value)

    def merge_branch(self, table_path: str | os.PathLike[str], source: str,
                     target: str = "main") -> int:
        """Java's ``mergeBranch``; the target branch's latest snapshot id."""
        return self._ask("merge-branch", os.fspath(table_path), source, target)

    def rename_branch(self, table_path: str | os.PathLike[str], branch: str, to: str) -> int:
        """Java's ``renameBranch``; the renamed branch's latest snapshot id (0: none)."""
        return self._ask("rename-branch", os.fspath(table_path), branch, to)

    def remove_unexisting_files(self, table_path: str | os.PathLike[str]) -> int:
        """Java's remove_unexisting_files (one commit of every partition's missing data
        files); the latest snapshot id after it."""
        return self._ask("remove-unexisting-files", os.fspath(table_path))

    def mark_partition_done(self, table_path: str | os.PathLike[str], partition: str) -> int:
        """Java's ``mark_partition_done`` of one partition path (``dt=2024-01-01/``) with the
        table's ``partition.mark-done-action``."""
        return self._ask("mark-partition-done", os.fspath(table_path), partition)

    def close(self) -> None:
        stop_serving(self._process)
        self._process = None


def start_maintainer(release: str, root: Path, extra_jars: Sequence[Path] = ()
                     ) -> JavaMaintainer:
    """A maintainer of Java Paimon ``release`` (compiled under ``root``), ``extra_jars`` on its
    classpath (a file system, a JDBC driver); JavaUnavailable without a JDK, Maven or a jar."""
    jars = [*classpath(release), *extra_jars]
    classes = root / "classes"
    result = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp",
                             classpath_text(jars), str(SOURCE)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise JavaMaintenanceError(f"javac failed:\n{result.stdout}\n{result.stderr}")
    return JavaMaintainer(release, jars, classes, root)


def unavailable(what: str, error: JavaUnavailable) -> None:
    """Skip, or fail under ``CI=true``."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} unavailable under CI: {error}")
    pytest.skip(f"{what}: {error}")


@pytest.fixture(scope="session", name="java_maintainer")
def java_maintainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaMaintainer]:
    """Java Paimon's writer and compaction (the reference release), one JVM (conftest
    re-exports it)."""
    try:
        maintainer = start_maintainer(REFERENCE, tmp_path_factory.mktemp("java_maintainer"))
    except JavaUnavailable as e:
        unavailable(f"Java Paimon {REFERENCE}", e)
    try:
        yield maintainer
    finally:
        maintainer.close()
