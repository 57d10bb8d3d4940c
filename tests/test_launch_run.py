"""deepvm launch against stand-in sky and aws executables (tests/standins.py): the
order of the calls, the environment each task gets (tier addresses, token,
MASTER_ADDR), the pinned zone, --down tearing everything down, and each fault a
launch can meet. The stand-in `sky launch` runs each task's run script for real on
a loopback address per node, so the tiers really serve (with the token) and the
launch really waits for their /health."""

from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import skypilot_schema
import standins

from deepvm.cli import main


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    """The stand-ins on PATH (and nothing else that could be a real sky or aws); the
    launch manifests under tmp_path/home. Yields the stand-ins' state folder."""
    bin_dir, state = tmp_path / "bin", tmp_path / "sky"
    state.mkdir()
    standins.install(bin_dir)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_SKY_STATE", str(state))
    monkeypatch.setenv("DEEPVM_HOME", str(tmp_path / "home"))
    for name in ("DEEPVM_CHECKPOINT_TOKEN", "DEEPVM_CHECKPOINT_TIERS", "FAKE_SKY_FAIL"):
        monkeypatch.delenv(name, raising=False)
    yield state
    standins.stop_all(state)
    for manifest in (tmp_path / "home" / "launches").glob("*/manifest.json"):
        shutil.rmtree(f"/dev/shm/deepvm-checkpoints/{manifest.parent.name}", ignore_errors=True)


def manifest_of(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / "home" / "launches" / name / "manifest.json").read_text())


def sequence(state: Path) -> list[str]:
    """Each call as 'tool verb target' (a launch's target is its cluster)."""
    out = []
    for c in standins.calls(state):
        argv = c["argv"]
        if c["tool"] == "sky" and argv[0] == "launch":
            out.append(f"sky launch {argv[argv.index('--cluster') + 1]}")
        elif c["tool"] == "sky":
            out.append(f"sky {argv[0]} {argv[-1]}")
        elif c["tool"] == "aws":
            out.append(f"aws zone {argv[argv.index('--zone-ids') + 1]}")
        else:
            out.append(f"torchrun rank {c['env']['SKYPILOT_NODE_RANK']}")
    return out


def launched_tasks(state: Path) -> dict[str, dict]:
    return {
        c["argv"][c["argv"].index("--cluster") + 1]: c
        for c in standins.calls(state, "sky")
        if c["argv"][0] == "launch"
    }


def health(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url + "/health", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def wait_for(predicate, what: str, seconds: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {seconds:g} s"
        time.sleep(0.1)


def test_tiering_launches_the_tier_first_then_the_workers_wired_to_it(cloud, tmp_path, capsys):
    assert main(["launch", "--budget", "10", "--name", "tiering-test", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "up" and "token" in shown and shown["token"] != ""
    manifest = manifest_of(tmp_path, "tiering-test")
    token = manifest["token"]
    assert shown["token"] != token  # --json never prints the secret
    # the tier's cluster first, its address read back, the workers last
    wait_for(lambda: len(standins.calls(cloud, "torchrun")) == 2, "both workers ran torchrun")
    steps = sequence(cloud)
    assert steps[:5] == [
        "sky check aws",
        "aws zone use1-az1",
        "sky launch tiering-test-remote-0",
        "sky status tiering-test-remote-0",
        "sky launch tiering-test-workers",
    ]
    assert sorted(steps[5:]) == ["torchrun rank 0", "torchrun rank 1"]
    tasks = launched_tasks(cloud)
    tier, workers = tasks["tiering-test-remote-0"], tasks["tiering-test-workers"]
    tier_ip = manifest["clusters"][0]["address"]
    url = f"http://{tier_ip}:8470"
    assert workers["task"]["envs"]["DEEPVM_CHECKPOINT_TIERS"] == url
    # every task pinned to this account's name of the priced zone ID
    for task in (tier["task"], workers["task"]):
        assert task["resources"]["zone"] == "us-east-1b"
    assert tier["task"]["resources"]["use_spot"] is False
    assert workers["task"]["resources"]["use_spot"] is True
    # the token travels as a secret from the environment, never on a command line
    for call in (tier, workers):
        assert call["given"] == {"DEEPVM_CHECKPOINT_TOKEN": token}
        assert token not in " ".join(call["argv"])
    # the workers' torchrun: rank 0 is the workers' own first node, the tier and token set
    ranks = {c["env"]["SKYPILOT_NODE_RANK"]: c["env"] for c in standins.calls(cloud, "torchrun")}
    first = "127.0.0.11"  # the workers' nodes follow the tier's 127.0.0.10
    for env in ranks.values():
        assert env["MASTER_ADDR"] == first and env["DEEPVM_CHECKPOINT_TIERS"] == url
        assert env["DEEPVM_CHECKPOINT_TOKEN"] == token and env["DEEPVM_NODES"] == "2"
    # the files the launch ran are tasks SkyPilot accepts, pinned where they were priced
    verdicts = skypilot_schema.validate(
        [Path(c["task_file"]) for c in manifest["clusters"]], tmp_path / "skypilot"
    )
    assert [v.get("error") for v in verdicts.values()] == [None, None]
    assert {v["zone"] for v in verdicts.values()} == {"us-east-1b"}
    # the tier is real: it answers with the token and refuses without it
    assert health(url, token) == 200
    assert health(url, None) == 401 and health(url, "not-the-token") == 401

    # --down: the workers first, the tier last, and nothing answers after
    assert main(["launch", "--down", "tiering-test"]) == 0
    assert sequence(cloud)[-2:] == [
        "sky down tiering-test-workers",
        "sky down tiering-test-remote-0",
    ]
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/health", timeout=2)
    assert manifest_of(tmp_path, "tiering-test")["state"] == "down"


def test_single_anchor_is_rank_0_and_keeps_the_tier_on_its_disk(cloud, tmp_path, capsys):
    argv = ["launch", "--budget", "20", "--cloud", "azure", "--name", "anchor-test", "--json"]
    assert main(argv) == 0
    manifest = manifest_of(tmp_path, "anchor-test")
    rec = manifest["cluster"]
    assert rec["architecture"] == "single_anchor" and rec["cloud"] == "azure"
    wait_for(
        lambda: len(standins.calls(cloud, "torchrun")) == rec["n_workers"],
        "every node ran torchrun",
    )
    steps = [s for s in sequence(cloud) if not s.startswith("torchrun")]
    # no zone on Azure (priced per region): no aws call
    assert steps == [
        "sky check azure",
        "sky launch anchor-test-anchor",
        "sky status anchor-test-anchor",
        "sky launch anchor-test-workers",
    ]
    tasks = launched_tasks(cloud)
    anchor_ip = manifest["clusters"][0]["address"]
    workers = tasks["anchor-test-workers"]["task"]
    assert "zone" not in workers["resources"] and workers["num_nodes"] == rec["n_spot"]
    assert tasks["anchor-test-anchor"]["task"]["resources"]["use_spot"] is False
    assert workers["envs"]["MASTER_ADDR"] == anchor_ip
    assert workers["envs"]["DEEPVM_CHECKPOINT_TIERS"] == f"http://{anchor_ip}:8470"
    runs = standins.calls(cloud, "torchrun")
    # one torchrun world over both clusters: the anchor is rank 0, the workers 1..n-1
    world = sorted(
        int(a.split("=", 1)[1]) for c in runs for a in c["argv"] if a.startswith("--node-rank=")
    )
    assert world == list(range(rec["n_workers"]))
    assert {c["env"]["MASTER_ADDR"] for c in runs} == {anchor_ip}
    assert health(f"http://{anchor_ip}:8470", manifest["token"]) == 200
