"""Where compaction's bucket tasks run: the local pool (``CompactJob``'s own) or Spark; and,
with Spark, the other jobs' tasks (``map_tasks``) and a sort's shuffle (``shuffle_tasks``),
see ``paimond.maintenance.distributed``.

With Spark, as with Java's Spark ``CompactProcedure`` (apache/paimon 5dacde516b,
``paimon-spark-common/.../spark/procedure/CompactProcedure.java``), the driver plans and
commits once; each bucket task is one Spark task that opens its own storage, runs
``execute_compaction`` and returns the picklable ``CompactResult``.

- paimond's own code reaches the executors as a zip of the imported package
  (``SparkContext.addPyFile``); its dependencies (pyarrow, fastavro, ...) must be installed
  where the executors run, as for any PySpark job.
- Spark retries a failed task (``spark.task.maxFailures``; ``local[N,F]`` in local mode).
  The last attempt returns its error instead of raising, so a bucket that cannot succeed
  fails alone and the others still commit.
- Storage credentials are not shipped to cluster executors (``local-cluster`` included):
  they read their own environment (``AWS_*`` variables set with ``spark.executorEnv.*``,
  instance roles). Local-mode executors (``local[N]``) get the options as they are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import io
import marshal
import os
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from structlog import get_logger

import paimond
from paimond.errors import ConfigError, CorruptFileError
from paimond.lsm.task import CompactResult, CompactTask
from paimond.maintenance.execution import BucketFailure, Progress, TaskExecutor, TaskRunner
from paimond.table.storage.interface import StorageLocation
from paimond.table.storage.values import CREDENTIAL_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = get_logger(__name__)

EXECUTORS = ("local", "spark")
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")
_Dest = TypeVar("_Dest")
_shipped: dict[str, str] = {}  # Spark application id -> zip path added to it
_ship_lock = threading.Lock()


def package_zip(directory: str | None = None) -> str:
    """A zip of the imported ``paimond`` package (its Python files only), named by content.

    Works for an installed package and for a checkout whose root is the package: only the
    root's modules and the folders that are packages (hold ``__init__.py``) go in. Each module
    also goes in compiled by this interpreter (``module.pyc`` beside ``module.py``, where
    zipimport looks; it cannot write a cache into a zip): an executor Python worker of the same
    version imports without compiling paimond (a third of a second per new worker, and Spark
    starts a new one after every failed task); another version's zipimport finds the magic
    number wrong and compiles the source as before."""
    root = Path(paimond.__file__).parent
    members: list[tuple[str, Path]] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        for path in sorted(folder.iterdir()):
            if path.is_dir() and (path / "__init__.py").is_file() and path.name != "tests":
                pending.append(path)
            elif path.suffix == ".py" or path.name == "py.typed":
                members.append((Path("paimond", path.relative_to(root)).as_posix(), path))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in sorted(members):
            source = path.read_bytes()
            archive.writestr(_member(name), source, zipfile.ZIP_DEFLATED)
            if name.endswith(".py"):
                archive.writestr(_member(name + "c"), _bytecode(name, source),
                                 zipfile.ZIP_DEFLATED)
    data = buffer.getvalue()
    name = f"paimond-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    target = os.path.join(directory or tempfile.mkdtemp(prefix="paimond-spark-"), name)
    with open(target, "wb") as out:
        out.write(data)
    return target


def ship_package(spark: SparkSession) -> str:
    """Add the package zip to the session's jobs, once per Spark application; on a master
    whose executors run on this machine, their Python workers run this interpreter."""
    context = spark.sparkContext
    _workers_run_this_python(context)
    with _ship_lock:
        app_id = context.applicationId
        if app_id not in _shipped:
            _shipped[app_id] = package_zip()
            context.addPyFile(_shipped[app_id])
        return _shipped[app_id]


def _member(name: str) -> zipfile.ZipInfo:
    return zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # fixed: named by content


def _bytecode(name: str, source: bytes) -> bytes:
    """A hash-based, unchecked ``.pyc`` (PEP 552) of ``source``: its header is the magic
    number, the flags and the source's hash, no timestamp, so the zip stays named by content.
    Unchecked: the zip holds the source it came from and is never edited."""
    code = compile(source, name, "exec", dont_inherit=True)
    return (importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


_PLAIN_SESSION_PYTHON = "python3"  # PySpark's pythonExec when PYSPARK_PYTHON is unset


def _workers_run_this_python(context: Any) -> None:
    """Spark's Python workers start ``context.pythonExec``, fixed when the context started
    (``PYSPARK_PYTHON``, else ``python3`` on PATH): from a plain SparkSession that is another
    interpreter than the driver's, which cannot import paimond's dependencies (every
    bucket failed with "No module named 'fastavro'"). On ``local`` and ``local-cluster``
    masters the executors run on this machine, so the tasks paimond submits use this
    interpreter, unless the session named one (``PYSPARK_PYTHON``: a packed environment, say,
    is kept). On a cluster the executors need an interpreter with paimond installed,
    named by ``spark.pyspark.python`` (README, Spark)."""
    master = context.master or ""
    if master.startswith("local") and context.pythonExec == _PLAIN_SESSION_PYTHON:
        log.info("spark_python_workers", was=context.pythonExec, now=sys.executable)
        context.pythonExec = sys.executable


def _task_attempts(spark: SparkSession) -> int:
    """How many times Spark runs a failing task (1 in ``local[N]``, F in ``local[N,F]``)."""
    context = spark.sparkContext
    try:
        return int(context._jsc.sc().taskScheduler().maxTaskFailures())
    except Exception:  # py4j can't reach the scheduler: Spark's documented defaults
        master = context.master or ""
        if master.startswith("local"):
            fields = master.removeprefix("local").strip("[]").split(",")
            return int(fields[1]) if len(fields) == 2 else 1
        return int(context.getConf().get("spark.task.maxFailures", "4") or 4)


def _run_attempt(runner: TaskRunner, attempts: int,
                 items: Iterator[tuple[int, CompactTask]]
                 ) -> Iterator[tuple[int, CompactResult | str]]:
    """A Spark task: raise so Spark retries, except on the last attempt, which reports."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = (context.attemptNumber() if context is not None else 0) + 1
    for index, task in items:
        try:
            yield index, runner(task)
        except CorruptFileError as error:  # never retried: the same bytes fail again
            yield index, f"{type(error).__name__}: {error}"
        except Exception as error:
            if attempt < attempts:
                raise
            yield index, f"{type(error).__name__}: {error} (attempt {attempt} of {attempts})"


@dataclasses.dataclass
class SparkExecutor:
    """Bucket tasks as Spark tasks of the given session, one task per bucket."""

    spark: SparkSession

    def execute(self, tasks: Sequence[CompactTask], runner: TaskRunner, progress: Progress | None
                ) -> tuple[list[CompactResult], list[BucketFailure]]:
        if not tasks:
            return [], []
        context = self.spark.sparkContext
        ship_package(self.spark)
        if not in_driver_process(context.master):
            tasks = [_without_credentials(task) for task in tasks]
        attempts = _task_attempts(self.spark)
        context.setJobDescription(f"paimond compact {tasks[0].table_name}: {len(tasks)} buckets")
        rdd = context.parallelize(list(enumerate(tasks)), len(tasks))
        try:
            outcomes = dict(rdd.mapPartitions(
                functools.partial(_run_attempt, runner, attempts)).collect())
        except Exception as error:  # the Spark job itself failed: no bucket's result came back
            message = f"Spark job failed: {type(error).__name__}: {_first_line(error)}"
            cause = _python_error(error)
            if cause:
                message += f" (a task raised {cause})"
            log.error("spark_job_failed", table=tasks[0].table_name, error=message)
            return [], [BucketFailure(task, message) for task in tasks]
        finally:
            context.setJobDescription(None)  # type: ignore[arg-type]
        results: list[CompactResult] = []
        failures: list[BucketFailure] = []
        for done, (index, task) in enumerate(enumerate(tasks), start=1):
            outcome = outcomes[index]
            if isinstance(outcome, str):
                failures.append(BucketFailure(task, outcome))
            else:
                results.append(outcome)
            if progress is not None:
                progress(done, len(tasks), task)
        return results, failures

    def map_tasks(self, function: Callable[[_Item], _Result], items: Sequence[_Item],
                  description: str) -> list[_Result]:
        """``function`` on each item, one Spark task per item (``maintenance.distributed``'s
        file tasks); a task Spark cannot finish within its retries raises here."""
        if not items:
            return []
        context = self.spark.sparkContext
        ship_package(self.spark)
        if not in_driver_process(context.master):
            items = [_item_without_credentials(item) for item in items]
        context.setJobDescription(description)
        try:
            rdd = context.parallelize(list(enumerate(items)), len(items))
            outcomes = dict(rdd.mapPartitions(
                functools.partial(_map_partition, function)).collect())
        finally:
            context.setJobDescription(None)  # type: ignore[arg-type]
        return [outcomes[index] for index in range(len(items))]

    def shuffle_tasks(self, produce: Callable[[_Item], Iterable[tuple[int, bytes]]],
                      items: Sequence[_Item], consume: Callable[[_Dest, Iterator[bytes]], _Result],
                      destinations: Sequence[_Dest], description: str) -> list[_Result]:
        """One Spark task per item runs ``produce``; Spark's shuffle (``partitionBy``, the
        executors' local disks) takes each blob to the task of its destination, which runs
        ``consume``; a task Spark cannot finish within its retries raises here."""
        if not destinations:
            return []
        context = self.spark.sparkContext
        ship_package(self.spark)
        if not in_driver_process(context.master):
            items = [_item_without_credentials(item) for item in items]
            destinations = [_item_without_credentials(d) for d in destinations]
        context.setJobDescription(description)
        try:
            pairs = context.parallelize(list(items), max(1, len(items))).flatMap(produce)
            shuffled = pairs.partitionBy(len(destinations), _destination)
            outcomes = dict(shuffled.mapPartitionsWithIndex(
                functools.partial(_consume_partition, consume, list(destinations))).collect())
        finally:
            context.setJobDescription(None)  # type: ignore[arg-type]
        return [outcomes[index] for index in range(len(destinations))]


def _destination(key: int) -> int:
    """Spark's partitioner for ``shuffle_tasks``: a blob's destination is its partition."""
    return key


def _consume_partition(consume: Callable[[_Dest, Iterator[bytes]], _Result],
                       destinations: Sequence[_Dest], index: int,
                       pairs: Iterator[tuple[int, bytes]]) -> Iterator[tuple[int, _Result]]:
    yield index, consume(destinations[index], (blob for _, blob in pairs))


def in_driver_process(master: str | None) -> bool:
    """Whether the executors run in the driver's own JVM and environment: ``local``,
    ``local[N]``, ``local[N,F]`` (not ``local-cluster[...]``, whose executors are separate
    processes, as on a cluster)."""
    return master is not None and (master == "local" or master.startswith("local["))


def _item_without_credentials(item: _Item) -> _Item:
    """A file task (``maintenance.distributed``): its storage location without credentials."""
    location = getattr(item, "location", None)
    if isinstance(location, StorageLocation):
        return dataclasses.replace(item, location=location.without_options(CREDENTIAL_OPTIONS))  # type: ignore[type-var]
    return item


def _map_partition(function: Callable[[_Item], _Result], items: Iterator[tuple[int, _Item]]
                   ) -> Iterator[tuple[int, _Result]]:
    for index, item in items:
        yield index, function(item)


def _without_credentials(task: CompactTask) -> CompactTask:
    """Executors find credentials themselves (their environment, instance roles): none ship,
    but a REST catalog's data token (``StorageLocation.vended``), which only the driver gets."""
    location = task.table.location.without_options(CREDENTIAL_OPTIONS)
    return dataclasses.replace(task, table=dataclasses.replace(task.table, location=location))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def _python_error(error: BaseException) -> str:
    """The last line of the first Python traceback in a failed Spark job's error, e.g.
    ``ModuleNotFoundError: No module named 'pyarrow'`` (an executor missing a dependency)."""
    text = str(error)
    start = text.find("Traceback (most recent call last):")
    if start < 0:
        return ""
    lines = [line for line in text[start:].splitlines()[1:] if line.strip()]
    for line in lines:
        if not line.startswith((" ", "\t")):
            return line.strip()
    return ""


def _spark_running() -> bool:
    try:
        from pyspark import SparkContext
    except ImportError:
        raise ConfigError("executor", "spark needs PySpark: pip install 'paimond[spark]'") from None
    return SparkContext._active_spark_context is not None


def spark_session(master: str | None = None, app_name: str = "paimond") -> SparkSession:
    """The running Spark session, else a new one on ``master`` (default: spark-submit's, else
    ``local[*]``). A local one stays on the loopback interface, without a UI, and its Python
    workers run this interpreter."""
    running = _spark_running()
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    if running:
        return SparkSession.builder.getOrCreate()
    master = master or SparkConf().get("spark.master") or "local[*]"
    builder = SparkSession.builder.appName(app_name).master(master)
    if master.startswith("local"):
        # Python workers start PYSPARK_PYTHON (default: python3 on PATH), not this venv;
        # without SPARK_LOCAL_IP Spark names the first network interface's address.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false"))
    return builder.getOrCreate()


@contextlib.contextmanager
def open_executor(name: str, *, spark_master: str | None = None) -> Iterator[TaskExecutor | None]:
    """The executor called ``name``: None for the local pool, or Spark on the running session,
    else on a new one (see :func:`spark_session`) that is stopped on exit."""
    if name == "local":
        yield None
        return
    if name != "spark":
        raise ValueError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}")
    running = _spark_running()
    spark = spark_session(spark_master, "paimond compact")
    try:
        yield SparkExecutor(spark)
    finally:
        if not running:
            spark.stop()


def daemon_executor(name: str) -> TaskExecutor | None:
    """The daemon's executor: None (its local pool) or Spark on the process's one session,
    started at the first Spark compaction and kept for the process's life."""
    if name == "local":
        return None
    with _ship_lock:
        return SparkExecutor(spark_session(app_name="paimond daemon"))
