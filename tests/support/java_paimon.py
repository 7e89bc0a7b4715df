"""Apache Paimon's Java classes as test oracles, several releases side by side.

The one place that pins them. `classpath(release)` gives the jars of one release:

- "1.0": the jar inside the `paimon-python-ali==0.1.1` wheel (Apache Paimon 1.0-SNAPSHOT, 2024,
  with its own Hadoop classes): the oldest live reader.
- "1.4": `paimon-bundle` 1.4.2 from Maven Central, with Hadoop's shaded client jars.
- "2.0": Paimon 2.0.0. Maven Central serves no `paimon-bundle` 2.x (nor any 2.1 artifact) and
  not `paimon-common` 2.0.0 on its own; it serves the Flink 2.0 connector jar, which bundles
  every class of `paimon-bundle` (core, common, formats) shaded as the bundle ships them. Only
  those classes are used; Flink's are never loaded.

Maven fetches a jar once (`mvn dependency:get -Dtransitive=false`) into its local repository
(`~/.m2/repository`, or `$MAVEN_REPO_LOCAL`), which is the cache: a jar already there costs
no Maven start. Fetches hold a file lock there, so parallel test workers fetch a jar once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Hadoop's configuration and file-system classes, which Paimon's parquet and ORC readers use
# unshaded, plus the compression codecs and logging API the bundle declares as dependencies.
HADOOP_AND_CODECS = (
    "org.apache.hadoop:hadoop-client-api:3.3.6",
    "org.apache.hadoop:hadoop-client-runtime:3.3.6",
    "org.xerial.snappy:snappy-java:1.1.10.8",
    "at.yawk.lz4:lz4-java:1.10.4",
    "org.slf4j:slf4j-api:1.7.32",
    "commons-logging:commons-logging:1.1.3",
)
MAVEN_RELEASES = {
    "1.4": ("org.apache.paimon:paimon-bundle:1.4.2", *HADOOP_AND_CODECS),
    # sqlite-jdbc: the driver of the JDBC catalog tests (tests/interop/test_java_jdbc_catalog)
    "2.0": ("org.apache.paimon:paimon-flink-2.0:2.0.0", *HADOOP_AND_CODECS,
            "org.xerial:sqlite-jdbc:3.50.3.0"),
}
# Paimon's own REST catalog server (RESTCatalogServer, in paimon-core's published test jar,
# serving through OkHttp's MockWebServer), run beside release "2.0"'s classes.
REST_SERVER = ("org.apache.paimon:paimon-core:2.0.0:jar:tests",
               "com.squareup.okhttp3:mockwebserver:4.12.0", "com.squareup.okhttp3:okhttp:4.12.0",
               "com.squareup.okio:okio-jvm:3.6.0", "org.jetbrains.kotlin:kotlin-stdlib:1.8.21",
               # MockWebServer is a JUnit 4 rule (ExternalResource)
               "junit:junit:4.13.2")
WHEEL_RELEASE = "1.0"
# Oldest first. Every Java oracle test runs once per release.
RELEASES = (WHEEL_RELEASE, *MAVEN_RELEASES)
WHEEL_JAR = "paimon-python-java-bridge.jar"


class JavaUnavailable(RuntimeError):
    """A JDK, Maven or a jar is missing; the message says which."""


def wheel_jar() -> Path | None:
    """The paimon-python-ali wheel's jar, located without importing the package."""
    spec = importlib.util.find_spec("paimon_python_java")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jar = Path(location) / "java_dependencies" / WHEEL_JAR
        if jar.is_file():
            return jar
    return None


def maven_repository() -> Path:
    return Path(os.environ.get("MAVEN_REPO_LOCAL", Path.home() / ".m2" / "repository"))


def _artifact_path(coordinates: str) -> Path:
    """``group:artifact:version`` or ``group:artifact:version:jar:classifier``."""
    group, artifact, version, *rest = coordinates.split(":")
    classifier = f"-{rest[1]}" if len(rest) == 2 else ""
    return (maven_repository() / group.replace(".", "/") / artifact / version
            / f"{artifact}-{version}{classifier}.jar")


@contextlib.contextmanager
def _fetching() -> Iterator[None]:
    """One Maven fetch at a time across processes (pytest-xdist workers start their oracles
    together): a lock file in the local repository, held while a jar is fetched."""
    lock = maven_repository() / ".paimond-tests-fetch.lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fetch(coordinates: str) -> Path:
    path = _artifact_path(coordinates)
    if path.is_file():
        return path
    with _fetching():
        return _fetch_unlocked(coordinates, path)


def _fetch_unlocked(coordinates: str, path: Path) -> Path:
    if path.is_file():  # another worker fetched it while this one waited
        return path
    if shutil.which("mvn") is None:
        raise JavaUnavailable(f"no Maven (mvn) on PATH to fetch {coordinates}")
    result = subprocess.run(
        ["mvn", "-q", "-B", f"-Dmaven.repo.local={maven_repository()}",
         "org.apache.maven.plugins:maven-dependency-plugin:2.8:get", "-Dtransitive=false",
         f"-Dartifact={coordinates}"],
        capture_output=True, text=True, check=False, cwd=maven_repository().parent)
    if result.returncode != 0 or not path.is_file():
        raise JavaUnavailable(f"Maven could not fetch {coordinates}:\n"
                              f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return path


def jdk_missing() -> str | None:
    if shutil.which("java") is None or shutil.which("javac") is None:
        return "no JDK (java/javac) on PATH"
    return None


def classpath(release: str) -> list[Path]:
    """The jars of one Java Paimon release, fetched if need be."""
    missing = jdk_missing()
    if missing is not None:
        raise JavaUnavailable(missing)
    if release == WHEEL_RELEASE:
        jar = wheel_jar()
        if jar is None:
            raise JavaUnavailable(f"paimon-python-ali's {WHEEL_JAR} is not installed")
        return [jar]
    if release not in MAVEN_RELEASES:
        raise ValueError(f"unknown Java Paimon release {release!r}; known: {RELEASES}")
    maven_repository().mkdir(parents=True, exist_ok=True)
    return [_fetch(c) for c in MAVEN_RELEASES[release]]


# Java Paimon 1.4 on S3 (paimon-s3: Hadoop's S3A, shaded) with a PostgreSQL JDBC catalog:
# Maven Central serves no paimon-s3 2.x.
S3_AND_POSTGRES = ("org.apache.paimon:paimon-s3:1.4.2", "org.postgresql:postgresql:42.7.4")


def fetch_jars(coordinates: tuple[str, ...]) -> list[Path]:
    """Jars beside a release's (``group:artifact:version``), fetched if need be."""
    maven_repository().mkdir(parents=True, exist_ok=True)
    return [_fetch(c) for c in coordinates]


def rest_server_classpath() -> list[Path]:
    """Release "2.0"'s jars and those of Paimon's REST catalog server, fetched if need be."""
    return [*classpath("2.0"), *fetch_jars(REST_SERVER)]


# A standalone Hive metastore (Derby-backed) and its client classes, with their dependencies:
# resolved transitively (`resolved_classpath`), unlike the jars above. Paimon's Hive catalog
# (HiveCatalog, HiveCatalogLock) is in release "2.0"'s jar: the client classes are all it needs.
HIVE_METASTORE = ("org.apache.hive:hive-standalone-metastore:3.1.3",
                  "org.apache.hive:hive-common:3.1.3",  # HiveConf, for Paimon's HiveCatalog
                  "org.apache.hive:hive-serde:3.1.3",  # its type conversions
                  "org.apache.hadoop:hadoop-common:3.3.6",
                  "org.apache.hadoop:hadoop-mapreduce-client-core:3.3.6")

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>paimond.tests</groupId><artifactId>classpath</artifactId><version>1</version>
<dependencies>{}</dependencies></project>"""


def resolved_classpath(coordinates: tuple[str, ...]) -> list[Path]:
    """The jars of ``coordinates`` and everything they depend on, as Maven resolves them
    (``dependency:build-classpath``), fetched once: the list is kept beside the local
    repository, keyed by the coordinates."""
    missing = jdk_missing()
    if missing is not None:
        raise JavaUnavailable(missing)
    maven_repository().mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256("\n".join(coordinates).encode()).hexdigest()[:16]
    listing = maven_repository() / f".paimond-tests-classpath-{key}.txt"
    jars = _listed(listing)
    if jars is not None:
        return jars
    with _fetching():
        jars = _listed(listing)
        if jars is not None:
            return jars
        if shutil.which("mvn") is None:
            raise JavaUnavailable(f"no Maven (mvn) on PATH to resolve {coordinates}")
        dependencies = "".join(
            f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
            f"<version>{v}</version></dependency>"
            for g, a, v in (c.split(":") for c in coordinates))
        with tempfile.TemporaryDirectory() as project:
            Path(project, "pom.xml").write_text(_POM.format(dependencies))
            output = Path(project) / "classpath.txt"
            result = subprocess.run(
                ["mvn", "-q", "-B", f"-Dmaven.repo.local={maven_repository()}",
                 "dependency:build-classpath", f"-Dmdep.outputFile={output}"],
                capture_output=True, text=True, check=False, cwd=project)
            if result.returncode != 0 or not output.is_file():
                raise JavaUnavailable(f"Maven could not resolve {coordinates}:\n"
                                      f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
            listing.write_text(output.read_text())
    jars = _listed(listing)
    assert jars is not None
    return jars


def _listed(listing: Path) -> list[Path] | None:
    """The jars a kept classpath lists, or None when it is missing or a jar is gone."""
    if not listing.is_file():
        return None
    jars = [Path(p) for p in listing.read_text().strip().split(os.pathsep) if p]
    return jars if jars and all(p.is_file() for p in jars) else None


def classpath_text(jars: list[Path], *more: Path) -> str:
    return os.pathsep.join(str(p) for p in [*jars, *more])


def stop_serving(process: subprocess.Popen[str] | None) -> None:
    """End a ``--serve`` JVM: its stdin closed, it exits; killed after 30 s."""
    if process is None or process.poll() is not None:
        return
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
