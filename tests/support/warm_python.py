"""``python -m ...`` and ``python -c ...`` without a Python start each: the kill campaigns'
job processes, forked from a warm server.

A crash campaign runs a job hundreds of times in a process of its own, to be killed at a crash
point (``paimond.faults``: ``os._exit``, as abrupt as a SIGKILL). Most of such a process's
second is the interpreter's start and its imports (pyarrow, pandas, paimond), the same each
time. :func:`run` gives what ``subprocess.run([sys.executable, *args], env=env,
capture_output=True, text=True, timeout=timeout)`` gives, but the process is forked from a
server that has made those imports once: a separate process all the same (its own memory, its
own exit, nothing shared with the test's process or with the next job), started as
``python -m``/``python -c`` would start it: ``sys.argv`` as Python sets it, ``__main__`` as the
run name, ``env`` as the whole environment, and ``paimond.faults`` loaded again so that it reads
``PAIMOND_CRASH_AT`` and ``PAIMOND_CRASH_TRACE`` at import, as a new process does. The
interpreter's own variables (``PYTHON*``) are the server's.

The server runs no Python thread but its own (a fork copies only the forking thread) and only imports and
forks: it never runs a job itself. One server per concurrent caller (a thread pool's two
threads get two), each started at its first use and ended when the test process exits.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# What the server imports before it forks: what a job's process spends its start on.
PRELOAD = ("pyarrow", "pyarrow.parquet", "pyarrow.compute", "pyarrow.fs", "pandas",
           "paimond.cli.main", "paimond.maintenance.jobs")

SERVER = r"""
import importlib, json, os, pkgutil, select, signal, sys, threading, traceback, warnings

# numpy's OpenBLAS and pyarrow's jemalloc start a native thread each at import; both libraries
# prepare for fork (pthread_atfork), as multiprocessing's fork start method needs of them.
warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)

preload = sys.argv[1:]
for name in preload:
    importlib.import_module(name)
import paimond
for module in pkgutil.walk_packages(paimond.__path__, "paimond."):
    if module.name.split(".")[1] in ("tests", "bench", "examples", "spark", "docs"):
        continue
    try:
        importlib.import_module(module.name)
    except Exception:  # a module needing an optional dependency: the job imports it, or fails
        pass
assert threading.active_count() == 1, threading.enumerate()


def child(request):
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(request["env"])
    code = 0
    try:
        import paimond.faults
        importlib.reload(paimond.faults)  # reads PAIMOND_CRASH_AT/TRACE as a new process does
        args = request["args"]
        if args[0] == "-m":
            import runpy
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            assert args[0] == "-c", args
            sys.argv = ["-c", *args[2:]]
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()
        import atexit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([pidfd], [], [], request["timeout"])
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    answer = {"returncode": os.waitstatus_to_exitcode(status), "timed_out": not ready}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"""


class _Server:
    def __init__(self) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIMOND_CRASH")}
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, *PRELOAD], env=clean,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)

    def run(self, args: list[str], env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess[str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        with tempfile.TemporaryDirectory(prefix="warm-python-") as scratch:
            out, err = Path(scratch) / "stdout", Path(scratch) / "stderr"
            request = {"args": args, "env": env, "stdout": str(out), "stderr": str(err),
                       "timeout": timeout}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the warm Python server ended ({self.process.wait()})")
            answer = json.loads(line)
            command = [sys.executable, *args]
            stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        if answer["timed_out"]:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, answer["returncode"], stdout, stderr)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


_lock = threading.Lock()
_idle: list[_Server] = []
_all: list[_Server] = []


def run(args: list[str], env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python *args`` (``-m module ...`` or ``-c code ...``) in a process of its own with
    ``env`` (default: this process's) as its environment; stdout and stderr captured as text."""
    assert args and args[0] in ("-m", "-c"), args
    with _lock:
        server = _idle.pop() if _idle else None
    if server is None:
        server = _Server()
        with _lock:
            _all.append(server)
    try:
        return server.run(args, dict(os.environ) if env is None else env, timeout)
    finally:
        with _lock:
            _idle.append(server)


@atexit.register
def _close_all() -> None:
    for server in _all:
        server.close()
