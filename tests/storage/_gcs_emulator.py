"""A GCS emulator on loopback: ``gcp-storage-emulator`` from PyPI, in memory, started and stopped by pid.

It speaks GCS's JSON API (what gcsfs uses) on one free loopback port, in
its own process group, so :meth:`GcsEmulator.stop` ends it with one signal.
It ignores ``generation=`` and ``ifGenerationMatch=`` on downloads and sends
no ``x-goog-generation`` (so the tests check that the reads ask for them,
not that it honours them). Ready in about 1 s.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from _seaweed import free_port, installed_script

BUCKET = "streamfeed-test"


class GcsEmulator:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.log_path = self.directory / "emulator.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        command = [
            installed_script("gcp-storage-emulator", "gcp-storage-emulator"),
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--in-memory",
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(  # noqa: S603 - the emulator PyPI installed
                [*command, "--default-bucket", BUCKET, "-q"],
                cwd=self.directory,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the GCS emulator exited: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the GCS emulator did not listen within {timeout} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)
        self.process = None

    def __enter__(self) -> GcsEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
