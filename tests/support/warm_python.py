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
from concurrent.futures import Future
from pathlib import Path
from typing import Any

# What the server imports before it forks: what a job's process spends its start on.
PRELOAD = ("pyarrow", "pyarrow.parquet", "pyarrow.compute", "pyarrow.fs", "pandas",
           "paimond.errors", "paimond.clock", "paimond.faults", "paimond.durations",
           "paimond.cli.main")
PACKAGES = ("paimond.config", "paimond.format", "paimond.table", "paimond.lsm",
            "paimond.maintenance", "paimond.cli")  # every module of these

SERVER = r"""
import importlib, json, os, pkgutil, select, signal, sys, threading, time, traceback, warnings

# numpy's OpenBLAS and pyarrow's jemalloc start a native thread each at import; both libraries
# prepare for fork (pthread_atfork), as multiprocessing's fork start method needs of them.
warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)

preload, packages = sys.argv[1].split(","), sys.argv[2].split(",")
for name in preload:
    importlib.import_module(name)
for package in packages:
    for module in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        try:
            importlib.import_module(module.name)
        except Exception:  # an optional dependency missing: the job imports it, or fails
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


def answer(pidfd, timed_out):
    request_id, pid = running.pop(pidfd)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(pidfd)
    deadlines.pop(pidfd)
    reply = {"id": request_id, "returncode": os.waitstatus_to_exitcode(status),
             "timed_out": timed_out}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


running, deadlines = {}, {}  # pidfd -> (request id, pid), pidfd -> deadline
stdin = sys.stdin.buffer.raw
pending, open_ = b"", True
while open_ or running:
    now = time.monotonic()
    timeout = max(0.0, min(deadlines.values()) - now) if deadlines else None
    ready, _, _ = select.select(([stdin] if open_ else []) + list(running), [], [], timeout)
    for pidfd in [fd for fd in ready if fd in running]:
        answer(pidfd, False)
    now = time.monotonic()
    for pidfd in [fd for fd, deadline in deadlines.items() if deadline <= now]:
        answer(pidfd, True)
    if stdin in ready:
        data = os.read(stdin.fileno(), 1 << 20)
        open_ = bool(data)
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                child(request)
            pidfd = os.pidfd_open(pid)
            running[pidfd] = (request["id"], pid)
            deadlines[pidfd] = now + request["timeout"]
"""


class _Server:
    """One server of this process: requests from any thread, each answered when its process
    ends."""

    def __init__(self) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIMOND_CRASH")}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, ",".join(PRELOAD), ",".join(PACKAGES)], env=clean,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        self.next_id = 0
        self.waiting: dict[int, Future[dict[str, Any]]] = {}
        self.reader = threading.Thread(target=self._read, name="warm-python", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            reply = json.loads(line)
            with self.lock:
                future = self.waiting.pop(reply["id"])
            future.set_result(reply)
        with self.lock:
            waiting, self.waiting = self.waiting, {}
        for future in waiting.values():
            future.set_exception(RuntimeError(
                f"the warm Python server ended ({self.process.wait()})"))

    def run(self, args: list[str], env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess[str]:
        assert self.process.stdin is not None
        with tempfile.TemporaryDirectory(prefix="warm-python-") as scratch:
            out, err = Path(scratch) / "stdout", Path(scratch) / "stderr"
            future: Future[dict[str, Any]] = Future()
            with self.lock:
                request_id, self.next_id = self.next_id, self.next_id + 1
                self.waiting[request_id] = future
                request = {"id": request_id, "args": args, "env": env, "stdout": str(out),
                           "stderr": str(err), "timeout": timeout}
                self.process.stdin.write(json.dumps(request) + "\n")
                self.process.stdin.flush()
            reply = future.result()
            command = [sys.executable, *args]
            stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, reply["returncode"], stdout, stderr)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=330)


_lock = threading.Lock()
_server: list[_Server] = []


def run(args: list[str], env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python *args`` (``-m module ...`` or ``-c code ...``) in a process of its own with
    ``env`` (default: this process's) as its environment; stdout and stderr captured as text."""
    assert args and args[0] in ("-m", "-c"), args
    with _lock:
        if not _server:
            _server.append(_Server())
        server = _server[0]
    return server.run(args, dict(os.environ) if env is None else env, timeout)


@atexit.register
def _close() -> None:
    for server in _server:
        server.close()
