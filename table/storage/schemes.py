"""The storages a warehouse URI may name, what each needs installed, and how paimond creates
a file atomically there (the step a commit rests on: Java's ``FileIO.tryToWriteAtomic`` in
``RenamingSnapshotCommit``, or a catalog lock where the store has no atomic create).

| scheme | fsspec implementation | install | atomic create |
|---|---|---|---|
| path, ``file://`` | none (``os``) | (core) | a hard link of a complete temp file |
| ``s3://``, ``s3a://`` | s3fs | (core) | a conditional PUT, ``If-None-Match: *`` |
| ``gs://``, ``gcs://`` | gcsfs | ``paimond[gcs]`` | a catalog lock, else read-only |
| ``oss://`` | ossfs | ``paimond[oss]`` | a catalog lock, else read-only |
| ``abfs://``, ``abfss://``, ``az://`` | adlfs | ``paimond[azure]`` | a Put Blob with ``If-None-Match: *`` |
| ``hdfs://``, ``viewfs://`` | pyarrow's Hadoop client | a Hadoop client | none yet: read-only |
| ``webhdfs://`` | fsspec's WebHDFS client | ``paimond[hdfs]`` | none yet: read-only |

"A catalog lock": a warehouse registered in a JDBC or Hive catalog with ``lock.enabled``
creates each file under the catalog's lock, checking that it does not exist first
(``table.catalogs.catalog_storage``), as Java's writers commit there. That needs a store
whose writes appear whole (an object store's PUT): HDFS shows a file while it is being
written, and paimond has no temporary-file-and-rename there yet. "Read-only": ``status``
reads the tables; every job that would commit or delete is refused before it
writes anything, because two committers (a Java writer and paimond) could then both believe
they created the same snapshot. ``memory://`` (fsspec's in-process store) is for tests.
Any other scheme is refused with its name.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from paimond.errors import ConfigError, UnsupportedError


@dataclass(frozen=True, slots=True)
class Scheme:
    names: tuple[str, ...]  # URI schemes ("" : a plain path)
    protocol: str  # the fsspec protocol it opens with ("file": paimond's own local files)
    module: str  # what must be importable
    install: str  # what to install when it is not
    atomic_create: str | None  # how a file is created exclusively; None: read-only
    whole_writes: bool = True  # a written file appears whole (a catalog lock can stand in)

    @property
    def name(self) -> str:
        return self.names[0] or "a local path"


SCHEMES = (
    Scheme(("", "file", "local"), "file", "os", "", "a hard link of a complete temp file"),
    Scheme(("s3", "s3a"), "s3", "s3fs", "", "a conditional PUT (If-None-Match: *)"),
    Scheme(("memory",), "memory", "fsspec", "", "a lock of this process (tests)"),
    Scheme(("gs", "gcs"), "gcs", "gcsfs", "paimond[gcs]", None),
    Scheme(("oss",), "oss", "ossfs", "paimond[oss]", None),
    Scheme(("abfs", "abfss", "az"), "abfs", "adlfs", "paimond[azure]",
           "a Put Blob with If-None-Match: *"),
    Scheme(("hdfs", "viewfs"), "hdfs", "pyarrow.fs",
           "a Hadoop client: libhdfs with JAVA_HOME, HADOOP_HOME and CLASSPATH set "
           "(or use webhdfs:// with paimond[hdfs])", None, whole_writes=False),
    Scheme(("webhdfs",), "webhdfs", "requests", "paimond[hdfs]", None, whole_writes=False),
)
_BY_NAME = {name: scheme for scheme in SCHEMES for name in scheme.names}


def scheme_of(uri: str) -> Scheme:
    """The storage ``uri`` names; ConfigError (naming the warehouse) for a scheme paimond does
    not know, or one whose implementation is not installed (naming what to install)."""
    name = uri.partition("://")[0].lower() if "://" in uri else ""
    if name == "" and uri.startswith("file:"):
        name = "file"
    scheme = _BY_NAME.get(name)
    if scheme is None:
        known = ", ".join(f"{n}://" for s in SCHEMES for n in s.names if n and n != "memory")
        raise ConfigError("warehouse", f"{uri}: paimond does not know the storage scheme "
                                       f"{name!r} (it reads local paths, {known})")
    if scheme.install and not _installed(scheme.module):
        raise ConfigError("warehouse", f"{uri}: {scheme.name}:// needs {scheme.install}; "
                                       f"install it (pip install '{scheme.install}')"
                          if scheme.install.startswith("paimond[")
                          else f"{uri}: {scheme.name}:// needs {scheme.install}")
    return scheme


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing
        return False


def check_writable(root: str) -> None:
    """UnsupportedError (naming the warehouse) when paimond has no atomic create on the
    storage at ``root``: a job that would commit or delete there is refused before it writes."""
    scheme = scheme_of(root)
    if scheme.atomic_create is None:
        remedy = ("without a catalog lock (a JDBC or Hive catalog with lock.enabled=true)"
                  if scheme.whole_writes else "(paimond has no temporary-file-and-rename there "
                                              "yet)")
        raise UnsupportedError(f"{scheme.name}:// has no atomic create, so paimond cannot "
                               f"commit safely beside other writers {remedy}: only status "
                               "reads it", root)
