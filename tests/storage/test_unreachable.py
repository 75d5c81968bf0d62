"""Storage that cannot be reached when a dataset opens: a NetworkError naming the URI, the endpoint and the fix.

Real unreachable endpoints, no mocks: a loopback port held bound but not
listening (a connection is refused at once) and a host name under
``.invalid`` (RFC 6761: never resolves). Both clients are covered: pyarrow's
own S3 client (a URI without ``storage_options``; the endpoint comes from
the URI's ``endpoint_override`` or from ``AWS_ENDPOINT_URL``) and fsspec's
(with ``storage_options``). Before, pyarrow's client gave a raw ``OSError
... curlCode: 6`` (or a ``StorageError`` that was not a ``NetworkError``), and
neither named the endpoint nor the setting that fixes it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import streamfeed as sf
from streamfeed.cli import main
from streamfeed.errors import NetworkError, StorageError, StreamfeedError

READERS = {"parquet": sf.read_parquet, "csv": sf.read_csv}
SRC = str(Path(sf.__file__).resolve().parent.parent)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound but never listening: every connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


@pytest.fixture(autouse=True)
def _no_aws_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AWS_") and name != "AWS_CA_BUNDLE":
            monkeypatch.delenv(name)


def _says_how_to_fix(message: str, endpoint: str) -> None:
    assert "s3://bucket/clicks" in message, message
    assert endpoint in message, message
    fix = message.rsplit("Fix: ", 1)[1]
    assert "endpoint_url" in fix and "key" in fix and "secret" in fix, message


@pytest.mark.parametrize("kind", sorted(READERS))
def test_a_refused_endpoint_in_the_uri_is_a_network_error(kind, closed_port):
    endpoint = f"127.0.0.1:{closed_port}"
    with pytest.raises(NetworkError) as raised:
        READERS[kind](f"s3://bucket/clicks/?endpoint_override={endpoint}&scheme=http")
    _says_how_to_fix(str(raised.value), endpoint)


def test_an_unresolvable_endpoint_from_the_environment_is_a_network_error(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://nonexistent.invalid:8333")
    with pytest.raises(NetworkError) as raised:
        sf.read_parquet("s3://bucket/clicks/")
    message = str(raised.value)
    _says_how_to_fix(message, "http://nonexistent.invalid:8333")
    assert "AWS_ENDPOINT_URL" in message


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "nonexistent.invalid:8333"])
def test_with_storage_options_an_unreachable_endpoint_is_named_with_its_setting(host, closed_port):
    endpoint = "http://" + host.format(port=closed_port)
    options = {"endpoint_url": endpoint, "key": "k", "secret": "s", "deadline": 0.5}
    with pytest.raises(NetworkError) as raised:
        sf.read_parquet("s3://bucket/clicks/", storage_options=options)
    message = str(raised.value)
    _says_how_to_fix(message, endpoint)
    assert "deadline of 0.5 s" in message  # the retries' own account is kept


def test_the_default_endpoint_is_a_streamfeed_error_naming_it():
    """The issue's own call: no endpoint anywhere, so pyarrow asks AWS for the bucket's region when it opens.

    Offline that fails to resolve the host (curlCode 6: a NetworkError); where
    AWS answers, the bucket is refused or missing: a StreamfeedError either way,
    never pyarrow's raw OSError. In a subprocess: pyarrow's S3 client reads the
    environment (emptied of AWS_* settings) when it starts.
    """
    code = (
        "import streamfeed as sf\n"
        "from streamfeed.errors import NetworkError, StreamfeedError\n"
        "try:\n"
        "    sf.read_parquet('s3://bucket/clicks/')\n"
        "except NetworkError as e:\n"
        "    print('network', e)\n"
        "except StreamfeedError as e:\n"
        "    print('streamfeed', type(e).__name__, e)\n"
        "except Exception as e:\n"
        "    print('raw', type(e).__name__, e)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") or k == "AWS_CA_BUNDLE"}
    env["PYTHONPATH"] = SRC
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    said = done.stdout.strip()
    assert said.startswith(("network", "streamfeed")), said + done.stderr[-2000:]
    assert "s3://bucket/clicks" in said, said
    if said.startswith("network"):
        assert "amazonaws.com" in said and "endpoint_url" in said, said


def test_the_cli_says_the_environment_variables(closed_port, capsys):
    endpoint = f"127.0.0.1:{closed_port}"
    code = main(["inspect", f"s3://bucket/clicks/?endpoint_override={endpoint}&scheme=http", "--format", "parquet"],
                catch=True)  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    fix = err.split("fix: ", 1)[1]
    assert "AWS_ENDPOINT_URL" in fix and "AWS_ACCESS_KEY_ID" in fix, err
    assert "storage_options" not in fix, err
    assert issubclass(NetworkError, StreamfeedError)


def test_missing_credentials_are_a_storage_error_naming_the_keys(closed_port):
    """No key anywhere (storage_options, AWS_* variables): botocore's raw NoCredentialsError before."""
    endpoint = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(StorageError) as raised:
        sf.read_parquet("s3://bucket/clicks/", storage_options={"endpoint_url": endpoint, "deadline": 0.5})
    message = str(raised.value)
    assert "s3://bucket/clicks" in message and endpoint in message, message
    fix = message.rsplit("Fix: ", 1)[1]
    assert "'key'" in fix and "'secret'" in fix and "anon" in fix, message
    assert "AWS_ACCESS_KEY_ID" in (raised.value.cli_fix or ""), raised.value.cli_fix


def test_a_real_server_behind_a_cut_network_is_a_network_error_naming_it(seaweed, bucket, proxy, tmp_path, monkeypatch):
    """SeaweedFS behind the loopback proxy: read once, then the proxy refuses connections (an outage) at open."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from _storage_data import storage_options

    local = tmp_path / "part-0.parquet"
    pq.write_table(pa.table({"x": list(range(100))}), local)
    seaweed.client().put_object(Bucket=bucket, Key="clicks/part-0.parquet", Body=local.read_bytes())
    uri = f"s3://{bucket}/clicks/"
    options = storage_options(proxy.endpoint, deadline=0.5)
    native = f"{uri}?endpoint_override={proxy.endpoint.split('://', 1)[1]}&scheme=http"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options["secret"])
    assert sf.read_parquet(uri, storage_options=options).num_rows() == 100  # reachable: the endpoint is right
    assert sf.read_parquet(native).num_rows() == 100
    proxy.outage(600)  # every connection refused until the test ends (the proxy closes with it)
    for read in (lambda: sf.read_parquet(uri, storage_options=options), lambda: sf.read_parquet(native)):
        with pytest.raises(NetworkError) as raised:
            read()
        message = str(raised.value)
        assert f"s3://{bucket}/clicks" in message and proxy.endpoint.split("://", 1)[1] in message, message
        assert "endpoint_url" in message.rsplit("Fix: ", 1)[1], message
