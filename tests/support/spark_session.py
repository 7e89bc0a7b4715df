"""The Spark session of the Spark tests: a real cluster's process boundaries on this machine.

``local-cluster[2,1,1024]`` (PySpark's own test master) starts a standalone master, two workers
and two executor JVMs, each with its own Python workers: tasks leave the driver's process.
Started once by the first test that asks for it, stopped at the end of the session.

As on a cluster, the executors share nothing with the driver but what the job ships:

- their Python is a packed environment (``packed_env.py``: paimond's runtime dependencies and
  the example's writer, pypaimon) that ``spark.archives`` unpacks next to each executor as
  ``./environment``, not the driver's venv; paimond itself reaches them as a zip
  (``SparkContext.addPyFile``, what ``--py-files`` does);
- S3 credentials come from their environment, set with ``spark.executorEnv.*`` (never in a
  task); the driver's own environment is set per test by ``s3_endpoint``.

A failed task runs up to 3 times (``spark.task.maxFailures``). Loopback only, no UI. Skips
when Spark cannot start here; fails under CI=true.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from support.packed_env import pack_environment
from support.s3_endpoint import ACCESS_KEY, REGION, SECRET_KEY

MASTER = "local-cluster[2,1,1024]"
ENVIRONMENT = "environment"  # the alias the archive unpacks as, in each executor's directory
EXECUTOR_PYTHON = f"./{ENVIRONMENT}/bin/python"
EXECUTOR_ENV = {  # what an instance role or a secret mounted as environment gives executors
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
EXTRA_DISTRIBUTIONS = ("pypaimon", "pandas")  # examples/spark_ingest.py writes in executors


def cluster_builder(archive: str, scratch: str, app_name: str = "paimond-tests") -> Any:
    """``scratch``: the driver JVM's temporary directory, where local-cluster's workers and
    executors live (unpacked archives included); pytest removes it with its other runs."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(MASTER).appName(app_name)
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.task.maxFailures", "3")
               .config("spark.archives", f"{archive}#{ENVIRONMENT}")
               # Test mode is what gives local-cluster's workers temporary directories, removed
               # at stop (else executors unpack the archive under pyspark's own folder).
               .config("spark.testing", "true")
               .config("spark.test.home", _spark_home())
               .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch}"))
    for name, value in EXECUTOR_ENV.items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    return builder


def _spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return str(_find_spark_home())


def _claim_the_cluster(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under pytest-xdist every Spark test runs on one worker (tests/conftest.py's scheduler
    groups tests/spark/): a second worker starting a cluster means that grouping broke, and
    two clusters would run side by side on the machine's cores."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return
    claim = tmp_path_factory.getbasetemp().parent / "spark-cluster-worker"
    try:
        with open(claim, "x") as file:
            file.write(worker)
    except FileExistsError:
        pytest.fail(f"a Spark cluster already runs on worker {claim.read_text()}, and {worker} "
                    "was given Spark tests: tests/conftest.py no longer groups them")


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _claim_the_cluster(tmp_path_factory)
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")}
    try:
        archive = pack_environment(str(tmp_path_factory.mktemp("spark-env") / "env.zip"),
                                   extra=EXTRA_DISTRIBUTIONS)
        # The executors' Python, read once when the context starts (spark-submit's
        # spark.pyspark.python); SPARK_LOCAL_IP, else Spark names the first interface's address.
        os.environ["PYSPARK_PYTHON"] = EXECUTOR_PYTHON
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        scratch = str(tmp_path_factory.mktemp("spark-tmp"))
        session = cluster_builder(archive, scratch).getOrCreate()
    except Exception as error:  # no pyspark, no Java, no loopback: Spark is the missing service
        message = f"Spark cannot start locally: {type(error).__name__}: {error}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    session.sparkContext.setLogLevel("ERROR")
    assert session.sparkContext.pythonExec == EXECUTOR_PYTHON
    yield session
    session.stop()
