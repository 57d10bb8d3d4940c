"""deepvm launch against stand-in sky and aws executables (tests/standins.py): the
order of the calls, the environment each task gets (tier addresses, token,
MASTER_ADDR), the pinned zone, --down tearing everything down, and each fault a
launch can meet. The stand-in `sky launch` runs each task's run script for real on
a loopback address per node, so the tiers really serve (with the token) and the
launch really waits for their /health."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import skypilot_schema
import standins
from tests_paths import ROOT

from deepvm.cli import main


def stand_ins(tmp_path: Path, monkeypatch, *, torchrun: bool) -> Iterator[Path]:
    """The stand-ins on PATH (and nothing else that could be a real sky or aws); the
    launch manifests under tmp_path/home. Yields the stand-ins' state folder."""
    bin_dir, state = tmp_path / "bin", tmp_path / "sky"
    state.mkdir()
    standins.install(bin_dir, torchrun=torchrun)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"]))
    monkeypatch.setenv("FAKE_SKY_STATE", str(state))
    monkeypatch.setenv("DEEPVM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for name in ("DEEPVM_CHECKPOINT_TOKEN", "DEEPVM_CHECKPOINT_TIERS", "FAKE_SKY_FAIL"):
        monkeypatch.delenv(name, raising=False)
    yield state
    standins.stop_all(state)


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    """The stand-ins, torchrun's among them."""
    yield from stand_ins(tmp_path, monkeypatch, torchrun=True)


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


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_sky_not_installed_names_the_extra_and_touches_nothing(cloud, tmp_path, capsys):
    (tmp_path / "bin" / "sky").unlink()
    assert main(["launch", "--budget", "10", "-q"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "sky command (SkyPilot) is not installed" in line and "deepvm[launch]" in line
    assert standins.calls(cloud) == [] and not (tmp_path / "home").exists()


def test_a_cloud_skypilot_cannot_use_is_sky_checks_answer(cloud, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_SKY_DISABLED", "aws")
    assert main(["launch", "--budget", "10", "-q"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "SkyPilot cannot use AWS: AWS credentials are not set" in line
    assert sequence(cloud) == ["sky check aws"] and not (tmp_path / "home").exists()


def test_a_tier_that_fails_to_launch_launches_nothing_else(cloud, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_SKY_FAIL", "t-remote-0")
    assert main(["launch", "--budget", "10", "--name", "t", "-q"]) == 1
    line = one_line(capsys.readouterr().err)
    assert "sky launch of t-remote-0 failed: sky.exceptions.ResourcesUnavailableError" in line
    assert line.endswith("nothing of it runs")
    # asked for, so torn down (a failed launch may leave a half-made cluster); no workers
    assert sequence(cloud) == [
        "sky check aws", "aws zone use1-az1", "sky launch t-remote-0", "sky down t-remote-0",
    ]  # fmt: skip
    assert manifest_of(tmp_path, "t")["state"] == "failed"


@pytest.mark.parametrize("keep", [False, True])
def test_workers_that_fail_to_launch_take_the_tier_down_unless_kept(
    cloud, tmp_path, capsys, monkeypatch, keep
):
    monkeypatch.setenv("FAKE_SKY_FAIL", "w-workers")
    argv = ["launch", "--budget", "10", "--name", "w", "-q"] + (["--keep-tier"] if keep else [])
    assert main(argv) == 1
    line = one_line(capsys.readouterr().err)
    assert "sky launch of w-workers failed" in line
    steps = sequence(cloud)
    after = steps[steps.index("sky launch w-workers") + 1 :]
    assert after == ["sky down w-workers"] + ([] if keep else ["sky down w-remote-0"])
    url = f"http://{manifest_of(tmp_path, 'w')['clusters'][0]['address']}:8470"
    token = manifest_of(tmp_path, "w")["token"]
    if keep:
        assert "still running: w-remote-0 (tear down: deepvm launch --down w)" in line
        assert health(url, token) == 200
        assert main(["launch", "--down", "w", "-q"]) == 0
        assert sequence(cloud)[-1] == "sky down w-remote-0"
    else:
        assert line.endswith("nothing of it runs")
    wait_for(lambda: _refused(url), "the tier is gone", 10)


def _refused(url: str) -> bool:
    try:
        urllib.request.urlopen(url + "/health", timeout=1)
    except urllib.error.HTTPError:
        return False
    except OSError:
        return True
    return False


def test_a_tier_that_never_answers_health_is_torn_down(cloud, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_SKY_NORUN", "h-remote-0")
    assert main(["launch", "--budget", "10", "--name", "h", "--timeout", "1", "-q"]) == 1
    line = one_line(capsys.readouterr().err)
    assert "did not answer /health within 1 s" in line and "nothing of it runs" in line
    assert sequence(cloud)[-2:] == ["sky status h-remote-0", "sky down h-remote-0"]
    assert "sky launch h-workers" not in sequence(cloud)


@pytest.mark.parametrize(
    ("setup", "code", "message", "pinned"),
    [
        ({"FAKE_AWS_UNKNOWN": "use1-az1"}, 2, "this AWS account has no zone use1-az1", None),
        ({"FAKE_AWS": "fail"}, 0, "cannot pin zone use1-az1 (aws ec2", False),
        ({"FAKE_AWS": "fail", "require": "1"}, 1, "cannot pin zone use1-az1", None),
        ({"missing": "1"}, 0, "the AWS CLI (aws) is not installed", False),
        ({"missing": "1", "require": "1"}, 1, "the AWS CLI (aws) is not installed", None),
    ],
)
def test_the_zone_is_pinned_or_the_launch_says_why_not(
    cloud, tmp_path, capsys, monkeypatch, setup, code, message, pinned
):
    for key, value in setup.items():
        if key.startswith("FAKE"):
            monkeypatch.setenv(key, value)
    if "missing" in setup:
        (tmp_path / "bin" / "aws").unlink()
    argv = ["launch", "--budget", "10", "--name", "z"] + (
        ["--require-zone"] if "require" in setup else []
    )
    assert main(argv) == code
    err = capsys.readouterr().err
    assert message in err
    launches = [c for c in standins.calls(cloud, "sky") if c["argv"][0] == "launch"]
    if pinned is None:  # stopped before anything was launched
        assert launches == [] and "\n" not in err.strip().rsplit("deepvm: error: ", 1)[1]
    else:  # launched region-wide, with a warning that the price may differ
        assert "the spot price may differ" in err
        assert all("zone" not in c["task"]["resources"] for c in launches) and launches


def test_an_unknown_launch_name_lists_the_known_ones(cloud, capsys):
    assert main(["launch", "--budget", "10", "--name", "known", "-q"]) == 0
    assert main(["launch", "--down", "nope", "-q"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "no launch named 'nope'" in line and "known: known" in line


def test_a_dry_run_prints_every_command_and_file_and_runs_nothing(cloud, tmp_path, capsys):
    assert main(["launch", "--budget", "10", "--name", "dry", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert standins.calls(cloud) == [] and not (tmp_path / "home").exists()
    commands = [line for line in out.splitlines() if line.startswith("$ ")]
    assert commands == [
        "$ sky check aws",
        "$ aws ec2 describe-availability-zones --region us-east-1 --zone-ids use1-az1 "
        "--query 'AvailabilityZones[0].ZoneName' --output text",
        "$ sky launch --yes --detach-run --cluster dry-remote-0 --secret "
        f"DEEPVM_CHECKPOINT_TOKEN {tmp_path}/home/launches/dry/remote.yaml",
        "$ sky status --ip dry-remote-0",
        "$ sky launch --yes --detach-run --cluster dry-workers --secret "
        f"DEEPVM_CHECKPOINT_TOKEN {tmp_path}/home/launches/dry/workers.yaml",
    ]
    assert "# wait until GET http://<address of dry-remote-0>:8470/health" in out
    assert "DEEPVM_CHECKPOINT_TIERS: http://<address of dry-remote-0>:8470" in out
    assert "zone: <zone name of use1-az1>" in out and out.count("\nrun: |") == 2


# --- a registered job: its fleet plan, adopted; moved to the next night's plan ------------


@pytest.fixture
def store(tmp_path):
    uri = str(tmp_path / "store")
    assert main(["nightly", "--store", uri, "--date", "2026-12-01", "-q"]) == 0
    return uri


def test_a_registered_job_launches_its_fleet_cluster_and_is_adopted(cloud, store, capsys):
    from deepvm.store import Store

    assert main(["launch", "resnet50-3usd", "--store", store, "--name", "job", "-q"]) == 0
    running = Store.open(store).read("running")
    fleet = Store.open(store).read("fleet").set_index("scenario").loc["resnet50-3usd"]
    assert list(running["scenario"]) == ["resnet50-3usd"]
    assert running["worker_type"].iloc[0] == fleet["worker_type"]
    workers = launched_tasks(cloud)["job-workers"]["task"]
    assert workers["num_nodes"] == fleet["n_workers"]
    assert workers["resources"]["instance_type"] == fleet["worker_type"]


def test_a_plan_whose_type_left_the_catalog_is_refused(cloud, store, tmp_path, capsys):
    fleet_type = "p4d.24xlarge"  # resnet50-3usd's worker type in the shipped night
    lines = (ROOT / "datasets" / "catalog-aws.csv").read_text().splitlines()
    (tmp_path / "today.csv").write_text("\n".join(x for x in lines if fleet_type not in x))
    argv = ["launch", "resnet50-3usd", "--store", store, "--catalog", str(tmp_path / "today.csv")]
    assert main([*argv, "-q"]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"runs {fleet_type} in us-east-1, which the catalog" in line and "no longer has" in line
    assert standins.calls(cloud) == []


def next_night_moves(store: str, job: str) -> None:
    """A second night whose plan puts ``job`` on its deepvm #2 cluster."""
    from deepvm.model.cluster import Cluster
    from deepvm.store import Store

    opened = Store.open(store)
    fleet = opened.read("fleet")
    recs = opened.read("recommendations")
    second = recs[(recs["scenario"] == job) & (recs["policy"] == "deepvm") & (recs["rank"] == 2)]
    fields = Cluster.from_mapping(second.iloc[0].to_dict()).as_dict()
    for key, value in fields.items():
        fleet.loc[fleet["scenario"] == job, key] = value
    # the night's decision for the running job, as the fleet plan states it
    decision = {
        "running_cluster": "the launched cluster", "decision": "move", "gain": 0.2,
        "migration_h": 0.1, "migration_usd": 0.5, "break_even_h": 1.0,
        "decision_reason": "moving saves 20.0% of the remaining time net of the move",
    }  # fmt: skip
    for key, value in decision.items():
        fleet[key] = fleet[key].astype(object)
        fleet.loc[fleet["scenario"] == job, key] = value
    opened.write("fleet", fleet, partition="2026-12-02", name="fleet")


def test_moving_a_running_job_restores_its_checkpoint_on_the_new_tier(cloud, store, capsys):
    from deepvm.checkpoint.client import load_bytes, put_version
    from deepvm.model.cluster import Cluster
    from deepvm.store import Store

    job = "resnet50-3usd"
    assert main(["launch", job, "--store", store, "--name", "old", "-q"]) == 0
    old = manifest_of_home("old")
    old_tier = f"http://{old['clusters'][0]['address']}:8470"
    put_version(old_tier, 120, b"weights at step 120", token=old["token"])
    next_night_moves(store, job)
    before = len(standins.calls(cloud))
    # the dry run says the sequence and what the planner assumed the move costs
    assert main(["launch", job, "--store", store, "--move", "--name", "new", "--dry-run"]) == 0
    shown = capsys.readouterr()
    assert len(standins.calls(cloud)) == before
    assert "the planner assumed:" in shown.err and "paid back after" in shown.err
    assert f"# GET {old_tier}/versions" in shown.out and "# PUT http://<address of" in shown.out
    assert "$ sky down --yes old-workers" in shown.out

    assert main(["launch", job, "--store", store, "--move", "--name", "new", "-q"]) == 0
    steps = sequence(cloud)[before:]
    assert [s for s in steps if not s.startswith(("torchrun", "aws"))] == [
        "sky check aws", "sky launch new-remote-0", "sky status new-remote-0",
        "sky launch new-workers", "sky down old-workers", "sky down old-remote-0",
    ]  # fmt: skip
    new = manifest_of_home("new")
    new_tier = f"http://{new['clusters'][0]['address']}:8470"
    assert load_bytes(tiers=[new_tier], token=new["token"]) == (b"weights at step 120", 120)
    wait_for(lambda: _refused(old_tier), "the old tier gone", 10)
    assert manifest_of_home("old")["state"] == "down"
    # the store says the job now runs on the new cluster
    running = Store.open(store).read("running").sort_values("adopted_at")
    now = Cluster.from_mapping(running.iloc[-1].to_dict())
    assert now.identity() == Cluster.from_mapping(new["cluster"]).identity()
    assert now.identity() != Cluster.from_mapping(old["cluster"]).identity()


def manifest_of_home(name: str) -> dict:
    return json.loads(
        (Path(os.environ["DEEPVM_HOME"]) / "launches" / name / "manifest.json").read_text()
    )


# --- end to end on loopback: a tier and two gloo DDP workers, started by the launch -------


@pytest.fixture
def cloud_with_torchrun(tmp_path, monkeypatch):
    """As ``cloud``, but the workers run the real torchrun (gloo on the CPU)."""
    yield from stand_ins(tmp_path, monkeypatch, torchrun=False)


TWO_WORKERS = {
    "region": "us-east-1", "zone": None, "architecture": "tiering", "worker_type": "g5.xlarge",
    "n_workers": 2, "n_spot": 2, "n_on_demand": 0, "remote_type": "t3.xlarge", "n_remote": 1,
    "hourly_cost": 1.5, "throughput_flops": 1e14, "cloud": "aws",
}  # fmt: skip
STEPS = 40


def start(name: str, out: Path) -> dict:
    """Launch the two-worker Tiering cluster as `deepvm launch` does; its manifest."""
    from deepvm.launcher import LaunchOptions, Target, Tools, launch

    train = (
        f"-m deepvm.bench.train --workload tiny --steps {STEPS} --checkpoint-every 5 "
        f"--step-delay-s 0.1 --out {out}"
    )
    target = Target(rec=dict(TWO_WORKERS), workload="tiny", versions=2, source="test")
    options = LaunchOptions(name=name, train=train, timeout_s=120)
    manifest = launch(target, options, Tools(env=dict(os.environ)), echo=lambda _: None)
    return manifest_of_home(manifest.name)


def node_jobs(state: Path, cluster: str) -> list[int]:
    return json.loads((state / "clusters.json").read_text())["up"][cluster]["pids"]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def trainers(pid: int) -> list[int]:
    """The training processes (torchrun's workers) under ``pid``."""
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            todo.append(child)
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if cmdline[1:4] == [b"-u", b"-m", b"deepvm.bench.train"]:
                found.append(child)
    return found


def versions_on(url: str, token: str) -> list[int]:
    request = urllib.request.Request(
        url + "/versions", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return [v["step"] for v in json.loads(response.read())]


def finished(state: Path, cluster: str, seconds: float) -> None:
    wait_for(
        lambda: not any(alive(p) for p in node_jobs(state, cluster)), f"{cluster} ends", seconds
    )


def test_a_killed_worker_resumes_from_the_tier_to_the_same_weights(cloud_with_torchrun, tmp_path):
    import signal

    import torch

    state = cloud_with_torchrun
    reference = tmp_path / "reference.pt"
    start("ref", reference)
    finished(state, "ref-workers", 300)
    assert reference.exists(), (state / "ref-workers" / "node-0" / "run.log").read_text()[-3000:]

    resumed = tmp_path / "resumed.pt"
    manifest = start("kill", resumed)
    tier = f"http://{manifest['clusters'][0]['address']}:8470"
    wait_for(lambda: max(versions_on(tier, manifest["token"]), default=0) >= 10, "a version", 300)
    # node 1's training process: under torchrun's agent (bash runs the task's last
    # line, torchrun, in its own place)
    (worker,) = trainers(node_jobs(state, "kill-workers")[1])
    os.kill(worker, signal.SIGKILL)
    finished(state, "kill-workers", 300)  # the whole job ends (no elastic restarts)
    assert not resumed.exists()
    # restarted as after a preemption: every rank resumes from the tier's newest version
    assert main(["launch", "--restart", "kill", "-q"]) == 0
    finished(state, "kill-workers", 300)
    logs = [(state / "kill-workers" / f"node-{r}" / "run.log").read_text() for r in (0, 1)]
    assert resumed.exists(), logs[0][-3000:]
    steps = [
        int(x.rsplit(" ", 1)[1]) for log in logs for x in log.splitlines() if "resumed from" in x
    ]
    assert len(steps) == 2 and min(steps) >= 10 and len(set(steps)) == 1, logs
    want, got = torch.load(reference), torch.load(resumed)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert max(versions_on(tier, manifest["token"])) == STEPS
