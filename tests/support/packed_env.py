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
"""

from __future__ import annotations

import importlib.metadata as metadata
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
                if source.is_file():
                    _add(archive, f"{site}/{relative}", source.read_bytes(),
                         stat.S_IMODE(source.stat().st_mode))
    return target


def _add(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = (stat.S_IFREG | mode) << 16
    archive.writestr(info, data)


if __name__ == "__main__":  # python tests/support/packed_env.py OUT.zip [DIST ...]
    print(pack_environment(os.path.abspath(sys.argv[1]), sys.argv[2:]))
