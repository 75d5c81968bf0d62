"""A real PostgreSQL server for the tests: Debian's initdb + pg_ctl in a temporary directory, on loopback.

The cluster is made with password authentication (scram-sha-256) so that
the password in the connection string is really needed; run as the
``postgres`` user when the tests run as root (initdb refuses root). Stopped
by the postmaster's pid (SIGINT: PostgreSQL's fast shutdown), waited for.
Tables are loaded with ``psql -c "\\copy ... FROM ..."``, a real writer.
"""

from __future__ import annotations

import csv
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Sequence

USER = "streamfeed"
PASSWORD = "Pa55-w0rd_never-shown"  # the tests look for it in every surface


def _binary(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (apt-get install -y postgresql)")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One cluster: ``url`` (password included), ``psql(sql)``, ``load(table, columns, rows)``, ``stop()``."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="streamfeed-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        password_file = self.root / "pw"
        password_file.write_text(PASSWORD + "\n")
        if self._as:
            os.chown(password_file, pwd.getpwnam("postgres").pw_uid, -1)
        self._run(
            [_binary("initdb"), "-D", str(self.data), "-U", USER, "--auth=scram-sha-256", f"--pwfile={password_file}"]
        )
        self.pid = 0
        self.start()

    def _run(self, command: Sequence[str]) -> None:
        result = subprocess.run([*self._as, *command], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {result.stdout}\n{result.stderr}")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off -c max_connections=40"
        self._run([_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-o", options, "start"])
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    def psql(self, *commands: str) -> str:
        arguments = [_binary("psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port)]
        arguments += ["-U", USER, "-d", "postgres", "-At"]
        for command in commands:
            arguments += ["-c", command]
        result = subprocess.run(
            arguments, capture_output=True, text=True, timeout=60, env={**os.environ, "PGPASSWORD": PASSWORD}
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql failed: {result.stderr}")
        return result.stdout

    def load(self, table: str, ddl: str, rows: Iterable[Sequence[object]]) -> None:
        """Creates ``table`` (``ddl``: its column definitions) and copies ``rows`` in with psql's \\copy."""
        path = self.root / f"{table}.csv"
        with open(path, "w", newline="") as handle:
            csv.writer(handle).writerows(rows)
        self.psql(f"DROP TABLE IF EXISTS {table}", f"CREATE TABLE {table} ({ddl})")
        self.psql(f"\\copy {table} FROM '{path}' WITH (FORMAT csv)")

    def stop(self) -> None:
        """Fast shutdown by pid, waited for (at most 30 s, then SIGKILL)."""
        if not self.pid:
            return
        pid, self.pid = self.pid, 0
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


_SHARED: list[PostgresServer] = []


def shared() -> PostgresServer:
    """The one server of this test process, started on first use (the contract test's factories and the
    SQL tests share it: a cluster takes seconds to make); stopped by the session fixture, or at exit."""
    if not _SHARED:
        import atexit

        _SHARED.append(PostgresServer())
        atexit.register(_SHARED[0].remove)
    return _SHARED[0]


def release() -> None:
    """Stops and removes the shared server (a later ``shared()`` starts another)."""
    while _SHARED:
        _SHARED.pop().remove()
