"""A packed Python environment for Spark executors, as ``venv-pack`` makes one: a virtualenv
holding paimond's runtime dependencies (not paimond itself, not pyspark, not the test tools)
in one archive that ``spark.archives`` ships and unpacks next to each executor.

The venv is made from this interpreter's base: ``bin/python`` is a copy of its executable
(``venv --copies``), which loads the base installation's libpython and standard library, so
the executors' machines need that Python at the same path, as with venv-pack. It is filled
with the installed files of every distribution needed, read from their RECORDs, so nothing is
downloaded. A zip, stored: Spark 4 unpacks a tar without its files' modes (``bin/python``
would not run) and refuses links that leave the archive. Executors then run
``./<alias>/bin/python`` and import paimond from the zip the driver adds (``--py-files``).

Each module goes with its byte code where this venv has it compiled (``make install`` does), as
``venv-pack`` keeps ``__pycache__``: Spark starts a new Python worker after every failed task,
and one that finds no ``.pyc`` compiles pyarrow's, pandas' and pyspark's modules again (where
nothing may be written, ``PYTHONDONTWRITEBYTECODE=1``, none is ever saved). The ``.pyc`` goes in
hash-based and unchecked (PEP 552): an unpacked source's modification time is the unpacker's,
so a timestamp-based one would be judged stale.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import os
import re
import stat
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_distributions(roots: Iterable[str] = ("paimond",)) -> list[metadata.Distribution]:
    """The runtime requirements (no extras) of ``roots``, closed transitively; ``paimond``
    itself excluded (it ships as a zip), other roots included."""
    seen: dict[str, metadata.Distribution] = {}
    pending = list(roots)
    for name in pending:
        if _key(name) != "paimond":
            seen[_key(name)] = metadata.distribution(name)
    while pending:
        dist = metadata.distribution(pending.pop())
        for text in dist.requires or ():
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            if _key(requirement.name) not in seen:
                try:
                    seen[_key(requirement.name)] = metadata.distribution(requirement.name)
                except metadata.PackageNotFoundError:
                    continue  # not installed here: not needed by this Python
                pending.append(requirement.name)
    return [seen[k] for k in sorted(seen)]


def pack_environment(target: str, extra: Iterable[str] = ()) -> str:
    """Write to ``target`` the zip of a venv with paimond's runtime dependencies and the
    distributions ``extra`` names (with theirs)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = f"lib/{version}/site-packages"
    base = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    home = str(base.parent)
    config = (f"home = {home}\ninclude-system-site-packages = false\n"
              f"version = {sys.version_info.major}.{sys.version_info.minor}."
              f"{sys.version_info.micro}\n")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as archive:
        _add(archive, "pyvenv.cfg", config.encode(), 0o644)
        _add(archive, "bin/python", base.read_bytes(), 0o755)
        for dist in runtime_distributions(("paimond", *extra)):
            for file in dist.files or ():
                relative = file.as_posix()
                if relative.startswith("..") or "__pycache__" in relative:
                    continue  # scripts outside site-packages, bytecode caches
                source = Path(str(dist.locate_file(file)))
                if not source.is_file():
                    continue
                data = source.read_bytes()
                _add(archive, f"{site}/{relative}", data, stat.S_IMODE(source.stat().st_mode))
                if source.suffix == ".py":
                    compiled = _unchecked_pyc(source, data)
                    if compiled is not None:
                        cache = Path(importlib.util.cache_from_source(relative))
                        _add(archive, f"{site}/{cache.as_posix()}", compiled, 0o644)
    return target


def _unchecked_pyc(source: Path, data: bytes) -> bytes | None:
    """The byte code this venv holds for ``source`` (whose bytes are ``data``), as an unchecked
    hash-based ``.pyc``; None when there is none, or it was compiled from another version of
    the file (the timestamp-based header names the source's modification time and size)."""
    try:
        cached = Path(importlib.util.cache_from_source(str(source))).read_bytes()
    except OSError:
        return None
    if len(cached) < 16 or cached[:4] != importlib.util.MAGIC_NUMBER:
        return None
    flags = int.from_bytes(cached[4:8], "little")
    if flags == 0:  # timestamp-based: mtime and size as the source had them when compiled
        info = source.stat()
        if (int.from_bytes(cached[8:12], "little") != int(info.st_mtime) & 0xFFFFFFFF
                or int.from_bytes(cached[12:16], "little") != len(data) & 0xFFFFFFFF):
            return None
    elif cached[8:16] != importlib.util.source_hash(data):
        return None
    return (importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little")
            + importlib.util.source_hash(data) + cached[16:])


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = (stat.S_IFREG | mode) << 16
    archive.writestr(info, data)


if __name__ == "__main__":  # python tests/support/packed_env.py OUT.zip [DIST ...]
    print(pack_environment(os.path.abspath(sys.argv[1]), sys.argv[2:]))
