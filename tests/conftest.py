"""Fixtures every test module may use: no cloud metadata probes, and an
S3-compatible server (moto's) on loopback for the object-store tests."""

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

BUCKET = "deepvm-team"


@pytest.fixture(autouse=True)
def _no_cloud_metadata(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    """Tests never probe link-local metadata addresses; the FLOP cache is per session."""
    monkeypatch.setenv("DEEPVM_METADATA", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.delenv("DEEPVM_STORE", raising=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server in a process of its own (delta-rs holds the GIL in some
    calls, so a server thread in the test's own process could not answer)."""
    pytest.importorskip("moto.server")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "moto did not start"
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, request) -> str:
    """A fresh prefix in the bucket; the environment a user's shell would have."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    boto3 = pytest.importorskip("boto3")
    client = boto3.client("s3")
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/{request.node.name}"
