"""What a process that only runs compaction sets up before its first task: no pandas, and
the allocator its Arrow buffers come from.

pyarrow imports pandas the first time it converts numpy data or an array to numpy, only to
learn whether pandas objects may be about (its Python shim, and again in C++ for pandas' null
sentinels): about 0.9 s of CPU and 60 MB in every process that runs a task, the command's own
and each pool worker's, though paimond never hands pyarrow a pandas object nor asks for one.
:func:`skip_pandas` makes ``import pandas`` fail in this process from then on, so pyarrow
takes its no-pandas paths (the same results for Arrow and numpy data). Only processes that
run nothing but paimond call it: the local pool's worker processes, and the ``paimond
compact`` command's own process (``main()`` without arguments, the local executor); never a
caller's process (``main(argv)``, ``CompactJob`` in a program, the daemon). A process that
already imported pandas is left as it is.

**The allocator** (:func:`use_compaction_allocator`, :func:`preferred_pool`): pyarrow's
default pool is mimalloc on Linux; the mimalloc that pyarrow 20 and later bundle keeps much
more memory than the one in pyarrow 19 under compaction's pattern (large buffers decoded on a
few threads, freed on another): 2M rows peaked at 373 MB against 269 MB
(``bench/compact_process.py``, docs/performance.md). On those versions the processes that run
compaction tasks allocate from jemalloc, which the Linux and macOS wheels also carry: 271 MB at
the same CPU. On pyarrow 19 and older mimalloc stays (jemalloc saved 8% of the memory there
but cost 7% of the CPU). ``ARROW_DEFAULT_MEMORY_POOL`` (``jemalloc``, ``mimalloc``,
``system``), when set, is Arrow's own choice and is left alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _NoPandas:
    """A meta path finder that answers ``import pandas`` with ImportError."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is kept out of a paimond compaction process",
                                      name=name)
        return None


def skip_pandas() -> bool:
    """Keep pandas out of this process (see the module doc); False when it is already in."""
    if "pandas" in sys.modules:
        return False
    if not any(isinstance(finder, _NoPandas) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
    return True


POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
JEMALLOC_FROM_PYARROW = 20  # the first pyarrow whose bundled mimalloc keeps far more


def preferred_pool() -> str | None:
    """The pool a compaction process should allocate from (``jemalloc`` on pyarrow >= 20),
    read from the installed version without importing pyarrow; None: pyarrow's default."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("pyarrow").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return None
    return "jemalloc" if major >= JEMALLOC_FROM_PYARROW else None


def use_compaction_allocator() -> str:
    """Allocate this process's Arrow buffers from :func:`preferred_pool` (see the module doc),
    unless ``ARROW_DEFAULT_MEMORY_POOL`` chose a pool, pyarrow's default is preferred, or this
    pyarrow has no jemalloc; returns the pool's backend name."""
    import pyarrow as pa

    current = str(pa.default_memory_pool().backend_name)
    if os.environ.get(POOL_ENV) or preferred_pool() is None or current == "jemalloc":
        return current
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a build without jemalloc (Windows wheels)
        return current
    pa.set_memory_pool(pool)
    return "jemalloc"

