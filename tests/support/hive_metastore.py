"""A real Hive metastore on 127.0.0.1: Apache Hive's standalone metastore 3.1.3 from Maven
Central (``java_paimon.HIVE_METASTORE``, resolved with its dependencies), Derby-backed, started
by ``tests/support/java/HiveMetastoreServe.java``. One per session (``hive_metastore``);
tests keep apart by database names. It needs a JDK and Maven, skips without them and fails
under ``CI=true``.

Java Paimon reaches it through Paimon's ``HiveCatalog`` (``hive_java_maintainer``: release
"2.0", whose jar carries the Hive catalog, with the metastore's client classes), paimond with
the same catalog options.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.java_maintainer import JavaMaintainer, start_maintainer, unavailable
from support.java_paimon import (
    HIVE_METASTORE,
    JavaUnavailable,
    classpath_text,
    resolved_classpath,
)

SOURCE = Path(__file__).parent / "java" / "HiveMetastoreServe.java"
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx512m")
START_TIMEOUT_S = 120

_SITE = """<configuration>
<property><name>javax.jdo.option.ConnectionURL</name>
  <value>jdbc:derby:;databaseName={db};create=true</value></property>
<property><name>javax.jdo.option.ConnectionDriverName</name>
  <value>org.apache.derby.jdbc.EmbeddedDriver</value></property>
<property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
<property><name>metastore.schema.verification</name><value>false</value></property>
<property><name>metastore.warehouse.dir</name><value>file://{warehouse}</value></property>
<property><name>metastore.expression.proxy</name>
  <value>org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy</value></property>
<property><name>metastore.task.threads.always</name>
  <value>org.apache.hadoop.hive.metastore.events.EventCleanerTask</value></property>
</configuration>
"""


@dataclass(frozen=True, slots=True)
class HiveMetastore:
    uri: str  # thrift://127.0.0.1:<port>

    def options(self, warehouse: Path, **more: str) -> dict[str, str]:
        """Paimon's Hive catalog options for a warehouse directory."""
        return {"metastore": "hive", "uri": self.uri, "warehouse": str(warehouse), **more}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _metastore_jars() -> list[Path]:
    try:
        return resolved_classpath(HIVE_METASTORE)
    except JavaUnavailable as e:
        unavailable("a Hive metastore", e)
        raise


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveMetastore]:
    jars = _metastore_jars()
    root = tmp_path_factory.mktemp("hive_metastore")
    classes, conf = root / "classes", root / "conf"
    conf.mkdir()
    (conf / "metastore-site.xml").write_text(_SITE.format(db=root / "derby",
                                                          warehouse=root / "warehouse"))
    result = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", classpath_text(jars),
                             str(SOURCE)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"javac failed:\n{result.stdout}\n{result.stderr}")
    port = _free_port()
    log = tempfile.TemporaryFile(dir=root)
    process = subprocess.Popen(
        ["java", *JVM_FLAGS, "-cp", classpath_text([conf, classes, *jars]),
         "HiveMetastoreServe", "-p", str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError("the Hive metastore did not start:\n"
                                   + log.read().decode("utf-8", "replace")[-5000:])
            time.sleep(0.3)
        yield HiveMetastore(f"thrift://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="session")
def hive_java_maintainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaMaintainer]:
    """Java Paimon 2.0 with Paimon's Hive catalog and the metastore's client classes."""
    try:
        maintainer = start_maintainer("2.0", tmp_path_factory.mktemp("hive_java"),
                                      resolved_classpath(HIVE_METASTORE))
    except JavaUnavailable as e:
        unavailable("Java Paimon's Hive catalog", e)
        raise
    try:
        yield maintainer
    finally:
        maintainer.close()
