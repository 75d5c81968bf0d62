"""A real HTTP server on loopback for the HTTP(S) tests: byte ranges, validators and injected faults.

Run as a subprocess (``python _http_server.py ROOT``; it binds a free
loopback port and prints it), started and stopped by pid through
:class:`HttpServer`. It serves the files under ``ROOT`` as a static web
server does: ``HEAD`` and ``GET`` with one ``Range``, a strong ``ETag``
(the content's hash) and ``Last-Modified``, and it honours ``If-Match``
and ``If-Unmodified-Since`` with 412. Each request reads the file anew,
so a test that rewrites a file changes what the next request serves.

Faults and settings are set over ``POST /_control`` (JSON) and every
request is logged (``GET /_control/log``): its method, path, ``Range`` and
conditions, and whether it was authorized (never a header's value):

* ``faults``: a list of ``{"kind", "on", "after", "count", "seconds"}``:
  ``kind`` ``"503"`` (or any status), ``"drop"`` (the connection closed
  with no answer), ``"slow"`` (``seconds`` before answering),
  ``"trickle"`` (the body a byte every ``seconds``); ``on`` ``"GET"``,
  ``"HEAD"`` or ``"any"``; the first ``after`` matching requests pass,
  then ``count`` of them get the fault (``count`` ``-1``: all, for
  ``seconds`` when ``kind`` is ``"drop"``: an outage);
* ``etag`` / ``last_modified``: False to leave the header out;
  ``ignore_conditions``: True to serve whatever the file holds now;
  ``ranges``: False to answer a ``Range`` with the whole file (200);
* ``token``: requests must carry ``Authorization: Bearer <token>`` (else 401).

Given a certificate and its key (``python _http_server.py ROOT CERT KEY``),
it serves HTTPS.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settings: dict[str, Any] = {}
        self.faults: list[dict[str, Any]] = []
        self.seen: list[int] = []  # matching requests seen by each fault
        self.outage_until: list[float] = []
        self.log: list[dict[str, Any]] = []

    def configure(self, settings: dict[str, Any]) -> None:
        with self.lock:
            self.faults = list(settings.pop("faults", []))
            self.seen = [0] * len(self.faults)
            self.outage_until = [0.0] * len(self.faults)
            self.settings = settings
            self.log = []

    def fault_for(self, method: str) -> dict[str, Any] | None:
        with self.lock:
            for index, fault in enumerate(self.faults):
                if fault.get("on", "any") not in ("any", method):
                    continue
                if self.outage_until[index] and time.monotonic() < self.outage_until[index]:
                    return fault
                self.seen[index] += 1
                after, count = int(fault.get("after", 0)), int(fault.get("count", 1))
                if self.seen[index] <= after:
                    continue
                if count == -1 and fault["kind"] == "drop":
                    if not self.outage_until[index]:
                        self.outage_until[index] = time.monotonic() + float(fault["seconds"])
                        fault["outages"] = fault.get("outages", 0) + 1
                    if time.monotonic() < self.outage_until[index]:
                        return fault
                    continue
                if count == -1 or self.seen[index] <= after + count:
                    fault["hits"] = fault.get("hits", 0) + 1
                    return fault
            return None


STATE = _State()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as aiohttp expects

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: the log is /_control/log
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/_control":
            STATE.configure(json.loads(body or b"{}"))
        self._answer(200, b"ok")

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/_control/log":
            with STATE.lock:
                data = json.dumps({"log": STATE.log, "faults": STATE.faults}).encode()
            self._answer(200, data)
            return
        self._serve(head=False)

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None, head: bool = False) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _serve(self, head: bool) -> None:
        settings = STATE.settings
        token = settings.get("token")
        authorized = token is None or self.headers.get("Authorization") == f"Bearer {token}"
        with STATE.lock:
            STATE.log.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "range": self.headers.get("Range"),
                    "if_match": self.headers.get("If-Match"),
                    "if_unmodified_since": self.headers.get("If-Unmodified-Since"),
                    "authorized": authorized,
                }
            )
        fault = STATE.fault_for(self.command)
        if fault is not None and fault["kind"] == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None and fault["kind"] == "slow":
            time.sleep(float(fault["seconds"]))
        if fault is not None and fault["kind"].isdigit():
            self._answer(int(fault["kind"]), b"injected", head=head)
            return
        if not authorized:
            self._answer(401, b"unauthorized", head=head)
            return
        file = Path(self.server.root) / self.path.split("?", 1)[0].lstrip("/")  # type: ignore[attr-defined]
        try:
            data = file.read_bytes()
            modified = file.stat().st_mtime
        except OSError:
            self._answer(404, b"not found", head=head)
            return
        etag = '"' + hashlib.sha1(data).hexdigest()[:20] + '"'  # noqa: S324 - a version tag, not security
        last_modified = email.utils.formatdate(modified, usegmt=True)
        headers = {"Accept-Ranges": "bytes"}
        if settings.get("etag", True):
            headers["ETag"] = etag
        if settings.get("last_modified", True):
            headers["Last-Modified"] = last_modified
        if not settings.get("ignore_conditions"):
            if_match = self.headers.get("If-Match")
            if if_match is not None and if_match not in ("*", etag):
                self._answer(412, b"precondition failed", headers, head)
                return
            since = self.headers.get("If-Unmodified-Since")
            if since is not None and int(modified) > email.utils.parsedate_to_datetime(since).timestamp():
                self._answer(412, b"precondition failed", headers, head)
                return
        status, body = 200, data
        wanted = self.headers.get("Range")
        if wanted and settings.get("ranges", True) and not head:
            first, last = wanted.removeprefix("bytes=").split("-")
            start, end = int(first), min(len(data), int(last) + 1)
            if start >= len(data):
                self._answer(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            status, body = 206, data[start:end]
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
        if fault is not None and fault["kind"] == "trickle":
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for index in range(len(body)):
                self.wfile.write(body[index : index + 1])
                self.wfile.flush()
                time.sleep(float(fault["seconds"]))
            return
        self._answer(status, body, headers, head)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (a try cut by its timeout): expected here, not news


def _serve(root: str, certificate: str | None = None, key: str | None = None) -> None:
    server = _Server(("127.0.0.1", 0), _Handler)
    if certificate is not None:  # HTTPS: the same server behind TLS
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    server.root = root  # type: ignore[attr-defined]
    print(server.server_address[1], flush=True)
    server.serve_forever()


class HttpServer:
    """The server above in its own process (group), started by :meth:`start`, stopped by pid."""

    def __init__(self, root: Path, tls: tuple[Path, Path] | None = None) -> None:
        self.root = Path(root)
        self.tls = tls  # (certificate, key): serve HTTPS
        self.root.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - this very file, by path
            [sys.executable, __file__, str(self.root), *map(str, self.tls or ())],
            stdout=subprocess.PIPE,
            start_new_session=True,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def configure(self, **settings: Any) -> None:
        """Replaces the faults and settings (and empties the log): see the module's docstring."""
        request = urllib.request.Request(f"{self.url}/_control", data=json.dumps(settings).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10, context=self._trust()) as answer:  # noqa: S310 - loopback
            answer.read()

    def log(self) -> list[dict[str, Any]]:
        return self._control()["log"]

    def faults(self) -> list[dict[str, Any]]:
        """The faults as configured, with ``hits`` (and ``outages``) counted."""
        return self._control()["faults"]

    def _trust(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(self.tls[0])) if self.tls else None

    def _control(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/_control/log", timeout=10, context=self._trust()) as answer:  # noqa: S310
            return json.loads(answer.read())


if __name__ == "__main__":
    _serve(*sys.argv[1:])
