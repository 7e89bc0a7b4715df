"""A bounded HTTP/1.0 server for the daemon's one port: slow or idle clients cost no thread
each, so a few hundred of them cannot grow the daemon's threads.

One thread reads every connection without blocking (``selectors``) until its request is whole:
the head (at most ``MAX_HEAD_BYTES``) and a body of the announced length (at most
``max_body_bytes``; a longer or malformed one is left for the handler to refuse). A connection
that has not sent its whole request ``request_timeout_s`` after it was accepted is closed, and
beyond ``max_connections`` open ones the oldest is, so a slow or idle client costs a socket and
its bytes so far, never a thread. Whole requests go to a pool of ``workers`` threads, which
run the standard library's handler on the buffered bytes and write the reply with a timeout.
A client that went away meanwhile is let go quietly (no ``BrokenPipeError`` traceback).
"""

from __future__ import annotations

import io
import selectors
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

MAX_HEAD_BYTES = 64 * 1024 + 4096  # the stdlib handler refuses longer lines itself (431)
_READ_BYTES = 16 * 1024
_SELECT_S = 0.25
_CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


@dataclass
class _Pending:
    """A connection whose request is not whole yet."""

    sock: socket.socket
    address: Any
    accepted_at: float
    data: bytearray = field(default_factory=bytearray)
    body_end: int | None = None  # where the request ends once the head was read


class BufferedHandler(BaseHTTPRequestHandler):
    """The stdlib handler, run on a request already read whole (``request_bytes``)."""

    request_bytes = b""
    write_timeout_s = 10.0

    def setup(self) -> None:
        self.connection = self.request
        self.connection.settimeout(self.write_timeout_s)
        self.rfile = io.BytesIO(self.request_bytes)
        self.wfile = self.connection.makefile("wb")

    def finish(self) -> None:
        try:
            self.wfile.flush()
        except _CLIENT_GONE:
            pass
        finally:
            self.wfile.close()
            self.rfile.close()


class BoundedHttpServer:
    """``serve_forever`` / ``shutdown`` / ``server_close`` as ``socketserver`` has them."""

    def __init__(self, address: tuple[str, int], handler: type[BufferedHandler], *,
                 workers: int = 16, max_connections: int = 256, request_timeout_s: float = 10.0,
                 max_body_bytes: int = 64 * 1024) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self._listener = socket.create_server(address, family=family, backlog=128)
        self._listener.setblocking(False)
        self.server_address = self._listener.getsockname()
        self._handler = handler
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="paimond-http")
        self._max_connections, self._timeout_s = max_connections, request_timeout_s
        self._max_body_bytes = max_body_bytes
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._serving = False

    def serve_forever(self) -> None:
        self._serving = True
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        pending: dict[socket.socket, _Pending] = {}
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(_SELECT_S):
                    if key.fileobj is self._listener:
                        self._accept(selector, pending)
                    else:
                        self._read(selector, pending, pending[key.fileobj])  # type: ignore[index]
                self._expire(selector, pending)
        finally:
            for conn in list(pending.values()):
                self._drop(selector, pending, conn)
            selector.close()
            self._stopped.set()

    def _accept(self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending]
                ) -> None:
        try:
            sock, address = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        if len(pending) >= self._max_connections:  # the oldest waits the longest: it goes
            oldest = min(pending.values(), key=lambda c: c.accepted_at)
            self._drop(selector, pending, oldest)
        pending[sock] = _Pending(sock, address, time.monotonic())
        selector.register(sock, selectors.EVENT_READ)

    def _read(self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending],
              conn: _Pending) -> None:
        try:
            chunk = conn.sock.recv(_READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:  # the client closed before its request was whole
            self._drop(selector, pending, conn)
            return
        conn.data += chunk
        if conn.body_end is None:
            head_end = conn.data.find(b"\r\n\r\n")
            if head_end < 0:
                if len(conn.data) > MAX_HEAD_BYTES:  # the handler answers 431 on what it has
                    self._dispatch(selector, pending, conn)
                return
            conn.body_end = head_end + 4 + self._body_length(bytes(conn.data[:head_end]))
        if len(conn.data) >= conn.body_end:
            self._dispatch(selector, pending, conn)

    def _body_length(self, head: bytes) -> int:
        """The body to wait for: the announced length, unless the handler will refuse it
        unread (malformed, negative or above the limit)."""
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    return 0
                return length if 0 <= length <= self._max_body_bytes else 0
        return 0

    def _dispatch(self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending],
                  conn: _Pending) -> None:
        selector.unregister(conn.sock)
        del pending[conn.sock]
        conn.sock.setblocking(True)
        self._workers.submit(self._handle, conn.sock, conn.address, bytes(conn.data))

    def _handle(self, sock: socket.socket, address: Any, data: bytes) -> None:
        handler: Callable[..., BufferedHandler] = type(
            "Request", (self._handler,), {"request_bytes": data})
        try:
            handler(sock, address, self)
        except OSError:  # the client went away (reset, broken pipe, write timeout)
            pass
        finally:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _expire(self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending]
                ) -> None:
        deadline = time.monotonic() - self._timeout_s
        for conn in [c for c in pending.values() if c.accepted_at < deadline]:
            self._drop(selector, pending, conn)

    def _drop(self, selector: selectors.BaseSelector, pending: dict[socket.socket, _Pending],
              conn: _Pending) -> None:
        selector.unregister(conn.sock)
        del pending[conn.sock]
        conn.sock.close()

    def shutdown(self) -> None:
        """Stop serving; returns once the loop ended (requests being handled finish)."""
        self._stop.set()
        if self._serving:
            self._stopped.wait(5)
        self._workers.shutdown(wait=False, cancel_futures=True)

    def server_close(self) -> None:
        self._listener.close()
