"""The allocator of a compaction process (``maintenance.arrow_runtime``): on pyarrow >= 20
Arrow's buffers come from jemalloc in the ``paimond`` command and in the local pool's workers
(pyarrow's default, mimalloc, before), unless the operator chose a pool with
``ARROW_DEFAULT_MEMORY_POOL``; a caller's own process keeps its pool. CI runs these tests on
the lock's pyarrow 19 and on the newest (26)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from paimond.maintenance.arrow_runtime import preferred_pool

try:
    pa.jemalloc_memory_pool()
except NotImplementedError:  # a pyarrow build without jemalloc (Windows wheels)
    pytest.skip("this pyarrow has no jemalloc", allow_module_level=True)


def _printed(script: str, chosen: str | None = None) -> list[str]:
    """What ``script`` prints in a fresh interpreter; ``chosen``: the operator's pool."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), os.getcwd()],
                          env=env, capture_output=True, text=True, check=True)
    return done.stdout.split()


PREFERRED = preferred_pool()


def test_jemalloc_is_preferred_from_pyarrow_20() -> None:
    major = int(pa.__version__.split(".")[0])
    assert PREFERRED == ("jemalloc" if major >= 20 else None)


COMMAND = """
    import sys
    from paimond.cli.main import main
    sys.argv[1:] = ["status", sys.argv[1]]
    main()  # as the paimond command: arguments from sys.argv
    import pyarrow as pa
    print(pa.default_memory_pool().backend_name)
"""


@pytest.mark.parametrize("chosen,expected", [(None, PREFERRED), ("system", "system"),
                                             ("mimalloc", "mimalloc")])
def test_the_command_uses_the_preferred_pool_unless_the_operator_chose(
        chosen: str | None, expected: str | None) -> None:
    default = _printed("import pyarrow as pa; print(pa.default_memory_pool().backend_name)")[-1]
    assert _printed(COMMAND, chosen)[-1] == (expected or default)


def test_a_callers_process_keeps_its_pool() -> None:
    probe = """
        import sys
        import pyarrow as pa
        before = pa.default_memory_pool().backend_name
        from paimond.cli.main import main
        main(["status", sys.argv[1]])
        print(before, pa.default_memory_pool().backend_name)
    """
    before, after = _printed(probe)[-2:]
    assert before == after != "jemalloc"  # pyarrow's own default (mimalloc) stays


PROBE = """
    import pyarrow as pa
    from paimond.maintenance.execution import prepare_worker
    before = pa.default_memory_pool().backend_name
    prepare_worker()
    print(before, pa.default_memory_pool().backend_name)
"""


def test_pool_workers_switch_to_the_preferred_pool_unless_the_operator_chose() -> None:
    before, after = _printed(PROBE)
    assert before != "jemalloc" and after == (PREFERRED or before)
    assert _printed(PROBE, "system") == ["system", "system"]
