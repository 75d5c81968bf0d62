"""A loopback TCP proxy that counts HTTP requests and can take the network down.

It sits between a client and a server (SeaweedFS's S3 port): every
connection it accepts is relayed byte for byte by two threads. An outage
(:meth:`TcpProxy.outage`, or armed with :meth:`TcpProxy.outage_at` to start
when the N-th ``GET`` passes, so it lands mid-epoch whatever the timing)
resets every open connection (RST, as a dropped link does) and closes the
listening socket, so new connections are refused, for ``seconds``; then it
listens again on the same port. Requests are counted from their request
lines (``GET /bucket/key HTTP/1.1``), per method, and the lines are kept
(``request_lines``). A slow-loris endpoint
(:meth:`TcpProxy.trickle`) sends the server's answers one byte at a time,
a pause between bytes, until :meth:`TcpProxy.stop_trickle` or the end.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import struct
import threading
import time
from collections import Counter

_REQUEST_LINE = re.compile(rb"(GET|HEAD|PUT|POST|DELETE) /[^ \r\n]* HTTP/1\.[01]\r\n")


def _reset(sock: socket.socket) -> None:
    """Closes with RST instead of FIN (linger on, timeout 0)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _cut(sock: socket.socket) -> None:
    """Wakes the pump blocked reading ``sock`` (closing the socket from another thread would not),
    which then resets both sides; SHUT_RD sends the peer nothing, so the peer sees the RST."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.requests: Counter[str] = Counter()
        self.request_lines: list[str] = []  # "GET /path?query HTTP/1.1", in the order they passed
        self.outages = 0
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._down_until = 0.0
        self._armed: tuple[int, float] | None = None
        self._trickle: float | None = None
        self._stop = threading.Event()
        self._listener: socket.socket | None = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name="tcp-proxy-accept", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "TcpProxy":
        self._acceptor.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        return listener

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.request_lines.clear()

    def outage(self, seconds: float) -> None:
        """Resets every connection now and refuses new ones for ``seconds``."""
        with self._lock:
            self._down_until = time.monotonic() + seconds
            self.outages += 1
            connections, self._connections = list(self._connections), set()
        for sock in connections:
            _cut(sock)

    def outage_at(self, get_number: int, seconds: float) -> None:
        """Starts :meth:`outage` when the ``get_number``-th ``GET`` from now arrives (it is dropped)."""
        with self._lock:
            self._armed = (self.requests["GET"] + get_number, seconds)

    def trickle(self, pause: float) -> None:
        """From now on the server's bytes reach the client one at a time, ``pause`` seconds apart."""
        self._trickle = pause

    def stop_trickle(self) -> None:
        self._trickle = None

    def _send(self, sink: socket.socket, data: bytes, count: bool) -> None:
        """``data`` to ``sink``: at once, or (answers, while trickling) one byte per pause."""
        for offset in range(len(data)):
            pause = self._trickle
            if count or pause is None or self._stop.is_set():
                sink.sendall(data[offset:])
                return
            sink.sendall(data[offset : offset + 1])
            self._stop.wait(pause)

    def _down(self) -> bool:
        return time.monotonic() < self._down_until

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            if self._down():
                if self._listener is not None:
                    self._listener.close()  # connections are now refused
                    self._listener = None
                time.sleep(0.01)
                continue
            if self._listener is None:
                self._listener = self._listen(self.port)
            ready, _, _ = select.select([self._listener], [], [], 0.05)
            if not ready:
                continue
            client, _ = self._listener.accept()
            if self._down():  # it connected just before the outage closed the listener
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._connections.update((client, upstream))
            for source, sink, count in ((client, upstream, True), (upstream, client, False)):
                thread = threading.Thread(target=self._pump, args=(source, sink, count), daemon=True)
                self._threads.append(thread)
                thread.start()
        if self._listener is not None:
            self._listener.close()

    def _pump(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        tail = b""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if count:
                    window = tail + data
                    matches = list(_REQUEST_LINE.finditer(window))
                    methods = [match.group(1).decode() for match in matches]
                    with self._lock:
                        self.request_lines.extend(match.group(0).decode().strip() for match in matches)
                    tail = (window if not methods else window[window.rfind(b"\r\n") + 2 :])[-1024:]
                    if self._counted(methods):
                        self.outage(self._armed_seconds)
                        return
                self._send(sink, data, count)
        except OSError:
            pass
        finally:
            with self._lock:
                self._connections.discard(source)
                self._connections.discard(sink)
            _cut(sink)  # wakes the pump of the other direction, which closes ``sink``
            _reset(source)

    def _counted(self, methods: list[str]) -> bool:
        """Adds the requests seen; True when an armed outage is due."""
        with self._lock:
            self.requests.update(methods)
            if self._armed is not None and self.requests["GET"] >= self._armed[0]:
                self._armed_seconds = self._armed[1]
                self._armed = None
                return True
            return False

    def close(self) -> None:
        self._stop.set()
        if self._acceptor.is_alive():
            self._acceptor.join()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for sock in connections:
            _cut(sock)
        for thread in self._threads:
            thread.join()
