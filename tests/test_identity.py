"""Hardware identity against a local HTTP server that speaks IMDSv2."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

pytest.importorskip("torch")

from deepvm.bench._identity import aws_instance_type, cloud_instance_type, detect

TOKEN = "AQAEAtoken=="


class IMDSv2(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str]]] = []

    def log_message(self, *args):  # keep test output clean
        pass

    def do_PUT(self):
        self.seen.append(("PUT", self.path))
        if self.path == "/latest/api/token" and self.headers.get(
            "X-aws-ec2-metadata-token-ttl-seconds"
        ):
            self._reply(200, TOKEN)
        else:
            self._reply(400, "")

    def do_GET(self):
        self.seen.append(("GET", self.path))
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            self._reply(401, "")  # IMDSv2 refuses tokenless (v1) requests
        elif self.path == "/latest/meta-data/instance-type":
            self._reply(200, "g5.xlarge")
        else:
            self._reply(404, "")

    def _reply(self, code, body):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def imds(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), IMDSv2)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    IMDSv2.seen = []
    monkeypatch.setenv(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}"
    )
    monkeypatch.delenv("DEEPVM_METADATA", raising=False)
    # GCP/Azure probes go to a closed loopback port: refused at once
    monkeypatch.setenv("DEEPVM_GCP_METADATA_URL", "http://127.0.0.1:9/none")
    monkeypatch.setenv("DEEPVM_AZURE_METADATA_URL", "http://127.0.0.1:9/none")
    yield server
    server.shutdown()
    server.server_close()


def test_imdsv2_token_then_instance_type(imds):
    assert aws_instance_type() == "g5.xlarge"
    assert IMDSv2.seen == [("PUT", "/latest/api/token"), ("GET", "/latest/meta-data/instance-type")]
    hw = detect(None, "cpu")
    assert hw.instance_type == "g5.xlarge"
    assert hw.cpu_cores >= 1 and hw.torch_version


def test_flag_wins_over_metadata(imds):
    assert detect("p4d.24xlarge", "cpu").instance_type == "p4d.24xlarge"
    assert IMDSv2.seen == []


def test_no_metadata_falls_back_to_local(monkeypatch):
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("DEEPVM_GCP_METADATA_URL", "http://127.0.0.1:9/none")
    monkeypatch.setenv("DEEPVM_AZURE_METADATA_URL", "http://127.0.0.1:9/none")
    monkeypatch.delenv("DEEPVM_METADATA", raising=False)
    assert cloud_instance_type() is None
    assert detect(None, "cpu").instance_type.startswith("local:")


def test_disabled_metadata_probes_nothing(imds, monkeypatch):
    monkeypatch.setenv("DEEPVM_METADATA", "off")
    assert cloud_instance_type() is None
    assert IMDSv2.seen == []
