"""The checkpoint tier and its client (issues 25, 34): versions visible only when
whole and verified, the newest k kept, capacity refused, corrupt versions never
used, a tier that is down never stops training, and a request without the tier's
token refused with nothing written. (End to end through `deepvm launch`, with a
worker SIGKILLed: tests/test_launch_run.py.)"""

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from deepvm import checkpoint
from deepvm.checkpoint._versions import CapacityError, CorruptVersion, VersionFolder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TOKEN = "the-launch-s-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def serve(folder: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[Any, str]:
    """A real tier (`deepvm checkpoint serve`) on loopback, with the token of the
    environment: the process and its URL."""
    port = free_port()
    args = [sys.executable, "-m", "deepvm", "checkpoint", "serve", "--dir", str(folder)]
    args += ["--host", "127.0.0.1", "--port", str(port), *extra]
    log = folder.with_suffix(".log")
    with open(log, "wb") as err:
        server = subprocess.Popen(args, stderr=err, env=env)
    url = f"http://127.0.0.1:{port}"
    if not up(url, server):
        server.kill()
        raise AssertionError(log.read_text())
    return server, url


@pytest.fixture
def tier(tmp_path):
    """A tier keeping 2 versions in 0.01 GB: its URL."""
    server, url = serve(tmp_path / "t", "--versions", "2", "--capacity-gb", "0.01")
    yield url
    server.terminate()
    server.wait(10)


def up(url: str, server: Any) -> bool:
    for _ in range(400):
        if server.poll() is not None:
            return False
        try:
            urllib.request.urlopen(urllib.request.Request(url + "/health", headers=AUTH), timeout=1)
            return True
        except urllib.error.HTTPError:
            return True  # it answers (401 without the right token)
        except OSError:
            time.sleep(0.05)
    return False


@pytest.fixture(autouse=True)
def local_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPVM_CHECKPOINT_DIR", str(tmp_path / "local"))
    monkeypatch.setenv("DEEPVM_CHECKPOINT_TOKEN", TOKEN)  # the tiers' and the client's
    monkeypatch.delenv("DEEPVM_CHECKPOINT_TIERS", raising=False)
    return tmp_path / "local"


def listed(url: str) -> list[int]:
    request = urllib.request.Request(url + "/versions", headers=AUTH)
    with urllib.request.urlopen(request) as response:
        return [v["step"] for v in json.loads(response.read())]


def put(url: str, step: int, body: bytes, sha: str, auth: dict | None = None) -> tuple[int, str]:
    headers = {"X-Deepvm-Sha256": sha, **(AUTH if auth is None else auth)}
    request = urllib.request.Request(
        f"{url}/versions/{step}", data=body, method="PUT", headers=headers
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_tier_keeps_k_versions_and_refuses_corrupt_and_oversized_ones(tier):
    for step in (1, 2, 3):
        saved = checkpoint.save({"w": torch.full((4,), float(step))}, step, tiers=[tier])
        assert saved.where == tier
    assert listed(tier) == [3, 2]  # --versions 2: the oldest is gone
    state, step = checkpoint.load(tiers=[tier])
    assert step == 3 and torch.equal(state["w"], torch.full((4,), 3.0))
    body = b"x" * 1000
    status, text = put(tier, 9, body, hashlib.sha256(b"y" * 1000).hexdigest())
    assert status == 422 and "SHA-256" in text
    assert listed(tier) == [3, 2]  # never visible
    big = b"z" * 20_000_000  # the tier holds 0.01 GB: refused before a byte moves
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(f"{tier}/room?size={len(big)}", headers=AUTH))
    text = refused.value.read().decode()
    assert refused.value.code == 507 and "does not fit" in text and "--capacity-gb" in text
    with pytest.warns(checkpoint.TierWarning, match=r"refused version 11: .*does not fit"):
        saved = checkpoint.save_bytes(big, 11, tiers=[tier])
    assert saved.where.endswith("local") and listed(tier) == [3, 2]
    # resuming takes the newest anywhere: the local fallback's 11
    assert checkpoint.load_bytes(tiers=[tier])[1] == 11


def test_an_unreachable_tier_falls_back_to_local_disk_and_resumes_from_it(local_folder):
    dead = f"http://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.warns(checkpoint.TierWarning, match="did not take version 5"):
        saved = checkpoint.save({"w": torch.ones(2)}, 5, tiers=[dead])
    assert time.monotonic() - began < 30  # bounded retries (3 tries, 0.6 s of backoff)
    assert saved.where == str(local_folder)
    with pytest.warns(checkpoint.TierWarning, match="unreachable"):
        state, step = checkpoint.load(tiers=[dead])
    assert step == 5 and torch.equal(state["w"], torch.ones(2))


def test_a_corrupt_version_is_passed_over_for_an_older_one(tier, local_folder):
    checkpoint.save({"w": torch.zeros(3)}, 1, tiers=[tier])
    folder = VersionFolder(local_folder, keep=2)
    folder.write(7, iter([b"old bytes"]), size=9, sha256=hashlib.sha256(b"old bytes").hexdigest())
    (local_folder / "000000000007.ckpt").write_bytes(b"new bytes")  # flipped at rest
    with pytest.warns(checkpoint.TierWarning, match="version 7 .* corrupt"):
        state, step = checkpoint.load(tiers=[tier])
    assert step == 1 and torch.equal(state["w"], torch.zeros(3))


def test_the_folder_publishes_only_whole_verified_versions(tmp_path):
    folder = VersionFolder(tmp_path, keep=3, capacity_bytes=100)
    digest = hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(CorruptVersion, match="2 bytes arrived of 3"):
        folder.write(1, iter([b"ab"]), size=3, sha256=digest)
    with pytest.raises(CorruptVersion, match="SHA-256"):
        folder.write(1, iter([b"abd"]), size=3, sha256=digest)
    assert folder.versions() == [] and not list(tmp_path.iterdir())
    folder.write(1, iter([b"a", b"bc"]), size=3, sha256=digest)
    assert [v.step for v in folder.versions()] == [1]
    with pytest.raises(CapacityError):
        folder.check_room(99)
    (tmp_path / ".incoming-5-dead").write_bytes(b"half")  # a writer that died
    assert [v.step for v in VersionFolder(tmp_path, keep=3).versions()] == [1]
    assert not (tmp_path / ".incoming-5-dead").exists()


def test_several_tiers_take_versions_in_turn(tier, tmp_path):
    second, other = serve(tmp_path / "t2", "--versions", "2")
    try:
        places = [checkpoint.save({"s": s}, s, tiers=[tier, other]).where for s in range(4)]
        assert sorted(places) == sorted([tier, other] * 2) and places[0] != places[1]
        assert sorted(listed(tier) + listed(other)) == [0, 1, 2, 3]
        assert checkpoint.load(tiers=[tier, other])[1] == 3
    finally:
        second.terminate()
        second.wait(10)


def test_a_request_without_the_token_is_refused_and_writes_nothing(tier, tmp_path):
    body = b"checkpoint bytes"
    digest = hashlib.sha256(body).hexdigest()
    for auth in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": TOKEN}):
        status, text = put(tier, 7, body, digest, auth=auth)
        assert status == 401 and "token" in text
        for path in ("/health", "/versions", "/versions/latest", "/room?size=1"):
            request = urllib.request.Request(tier + path, headers=auth)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request)
            assert refused.value.code == 401
            refused.value.close()
    # nothing was stored, not even a hidden upload
    assert listed(tier) == [] and not [p for p in (tmp_path / "t").iterdir()]
    # a client with another token keeps training: it warns and writes locally
    with pytest.warns(checkpoint.TierWarning, match="refused the token"):
        saved = checkpoint.save_bytes(body, 7, tiers=[tier], token="not-the-token")
    assert saved.where.endswith("local") and listed(tier) == []
    assert put(tier, 7, body, digest)[0] == 201 and listed(tier) == [7]


def test_a_tier_needs_a_token_or_says_it_serves_without_one(tmp_path, capsys):
    from deepvm.cli import main

    env = {k: v for k, v in os.environ.items() if k != "DEEPVM_CHECKPOINT_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "deepvm", "checkpoint", "serve", "--dir", str(tmp_path / "x")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "$DEEPVM_CHECKPOINT_TOKEN" in done.stderr
    assert "--no-token" in done.stderr and not (tmp_path / "x").exists()
    server, url = serve(tmp_path / "open", "--no-token", env=env)
    try:
        with urllib.request.urlopen(url + "/versions") as response:
            assert json.loads(response.read()) == []
    finally:
        server.terminate()
        server.wait(10)
    assert main(["checkpoint", "serve", "--help"]) == 0  # its help once ended in a traceback
    assert "80% of" in capsys.readouterr().out


def test_a_save_with_no_tier_says_it_goes_to_local_disk(local_folder, monkeypatch):
    from deepvm.checkpoint import client

    monkeypatch.setattr(client, "_said_no_tier", False)
    with pytest.warns(checkpoint.TierWarning, match="no checkpoint tier is configured"):
        saved = checkpoint.save_bytes(b"x", 1)
    assert saved.where == str(local_folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per process, not at every save
        checkpoint.save_bytes(b"y", 2)


def test_a_full_folder_takes_the_next_version_in_place_of_its_oldest(tmp_path):
    """Room is counted against the newest keep - 1 versions (the oldest goes once the
    new one is in): a folder sized for exactly `keep` versions never refuses one."""
    folder = VersionFolder(tmp_path, keep=2, capacity_bytes=20)
    for step in (1, 2, 3):
        data = f"version-{step:02d}".encode()  # 10 bytes
        folder.write(step, iter([data]), size=10, sha256=hashlib.sha256(data).hexdigest())
    assert [v.step for v in folder.versions()] == [3, 2]
    with pytest.raises(CapacityError):
        folder.check_room(11)


def test_tiers_together_keep_at_least_the_newest_k_versions():
    from deepvm.checkpoint.protocol import versions_per_tier

    for k in range(1, 9):
        for n in range(1, 5):
            each = versions_per_tier(k, n)
            assert each * n >= k and (each - 1) * n < max(k, n), (k, n)
    assert versions_per_tier(5, 2) == 3
