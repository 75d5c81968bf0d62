"""https:// URLs: the HTTP tests' server behind TLS with a certificate made for the test, on loopback.

aiohttp verifies the server's certificate with the default trust store, so
the read runs in a child process whose ``SSL_CERT_FILE`` names the test's
certificate (as a user's trusted CA would be). A certificate nobody trusts
is a ``StorageError`` at once, naming the URL: not retried to the deadline
as a network failure (before, it was, then called unreachable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from _http_server import HttpServer
from test_http import ROWS, _write

import streamfeed as sf

SRC = str(Path(sf.__file__).resolve().parent.parent)
_READ = """
import json, sys
import numpy as np
import streamfeed as sf
data = sf.read_parquet(sys.argv[1:])
with data.shuffle(seed=3).batch(500).iter_epoch(0) as epoch:
    ids = np.concatenate([batch["id"] for batch in epoch])
print(json.dumps({"rows": data.num_rows(), "ids": sorted(ids.tolist()) == list(range(len(ids))), "n": len(ids)}))
"""


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    directory = tmp_path_factory.mktemp("https")
    certificate, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(  # noqa: S603
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(certificate),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    with HttpServer(directory / "root", tls=(certificate, key)) as server:
        yield server


def _urls(server: HttpServer) -> list[str]:
    directory = server.root / "data"
    if not directory.exists():
        directory.mkdir()
        _write("parquet", directory)
    return [f"{server.url}/data/part-{index}.parquet" for index in range(2)]


def test_https_urls_read_every_row_once_with_the_certificate_trusted(https_server):
    assert https_server.tls is not None
    urls = _urls(https_server)
    environment = {**os.environ, "SSL_CERT_FILE": str(https_server.tls[0]), "PYTHONPATH": SRC}
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", _READ, *urls], env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"rows": ROWS, "ids": True, "n": ROWS}
    gets = [entry for entry in https_server.log() if entry["method"] == "GET"]
    assert gets and all(entry["range"] and entry["if_match"] for entry in gets)


def test_an_untrusted_certificate_is_a_storage_error_at_once_naming_the_url(https_server):
    urls = _urls(https_server)
    started = time.monotonic()
    with pytest.raises(sf.StorageError) as raised:
        sf.read_parquet(urls, storage_options={"deadline": 30})
    assert time.monotonic() - started < 10  # not retried to the deadline
    assert not isinstance(raised.value, sf.NetworkError)
    message = str(raised.value)
    assert urls[0] in message and "certificate" in message.lower()
