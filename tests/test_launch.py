"""--sky-yaml: the SkyPilot tasks of the chosen cluster, the same tasks `deepvm
launch` runs (deepvm.render.launch): deepvm shipped as a wheel beside them (no package
index), every value only a launch knows left null so that SkyPilot refuses to
launch without it, and every file accepted by SkyPilot's own task schema
(tests/skypilot_schema.py, the pinned skypilot test dependency)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import skypilot_schema
import yaml
from tests_paths import ROOT

from deepvm.cli import main


def tasks(path: Path) -> dict[str, dict]:
    found = {}
    for file in sorted(path.parent.glob(f"{path.stem}*.yaml")):
        text = file.read_text()
        task = yaml.safe_load(text)
        role = next(line for line in text.splitlines() if line.startswith("# this task: "))
        found[role.split(": ")[1]] = task
        # no placeholder and no package index: the launch's own values or null
        assert "<" not in text and "pip install deepvm" not in text
        ((remote, local),) = task["file_mounts"].items()
        wheel = Path(local)
        assert wheel.parent == path.parent.resolve() and wheel.exists()
        assert remote.endswith(wheel.name) and f'pip install "{remote}[checkpoint' in task["setup"]
        with zipfile.ZipFile(wheel) as built:  # deepvm as this machine runs it
            assert "deepvm/render/launch.py" in built.namelist()
    return found


def recommend(tmp_path: Path, capsys, *argv: str) -> tuple[dict, dict[str, dict]]:
    path = tmp_path / "plan.yaml"
    assert main(["recommend", *argv, "--json", "--sky-yaml", str(path)]) == 0
    first = json.loads(capsys.readouterr().out)["recommendations"][0]
    return first, tasks(path)


def test_tiering_is_the_workers_and_a_remote_tier(tmp_path, capsys):
    rec, found = recommend(tmp_path, capsys, "--budget", "10")
    assert rec["architecture"] == "tiering" and set(found) == {"workers", "remote"}
    workers, remote = found["workers"], found["remote"]
    assert workers["num_nodes"] == rec["n_workers"] and workers["resources"] == {
        "cloud": "aws",
        "region": rec["region"],
        "instance_type": rec["worker_type"],
        "use_spot": True,
    }
    # what only a launch knows is required at launch: the tier's addresses, its token
    assert workers["envs"]["DEEPVM_CHECKPOINT_TIERS"] is None
    assert workers["secrets"] == {"DEEPVM_CHECKPOINT_TOKEN": None}
    assert "torchrun" in workers["run"] and "$SKYPILOT_NODE_RANK" in workers["run"]
    # the tier: one cluster per remote node, each serving its memory with the token
    assert remote["num_nodes"] == 1
    assert remote["resources"]["instance_type"] == rec["remote_type"]
    assert remote["resources"]["use_spot"] is False and remote["resources"]["ports"] == [8470]
    assert 'deepvm checkpoint serve --dir "/dev/shm/' in remote["run"]
    assert remote["secrets"] == {"DEEPVM_CHECKPOINT_TOKEN": None}
    header = (tmp_path / "plan.yaml").read_text()
    assert f"--zone-ids {rec['zone']}" in header  # the priced zone ID, and how to pin it
    launches = [line for line in header.splitlines() if "sky launch" in line]
    assert len(launches) == rec["n_remote"] + 1 and launches[-1].endswith(" plan.yaml")


def test_single_anchor_is_the_spot_workers_and_an_on_demand_anchor(tmp_path, capsys):
    rec, found = recommend(tmp_path, capsys, "--budget", "10", "--policy", "cost_first")
    assert rec["architecture"] == "single_anchor" and set(found) == {"workers", "anchor"}
    assert found["workers"]["num_nodes"] == rec["n_spot"]
    assert found["workers"]["resources"]["use_spot"] is True
    assert found["anchor"]["num_nodes"] == rec["n_on_demand"] == 1
    assert found["anchor"]["resources"]["use_spot"] is False
    # one torchrun world over both: the anchor is rank 0 (and the tier), the workers follow
    assert found["anchor"]["envs"]["DEEPVM_NODES"] == str(rec["n_workers"])
    assert "SKYPILOT_NODE_RANK + 1" in found["workers"]["run"]
    assert found["workers"]["envs"]["MASTER_ADDR"] is None
    assert "deepvm checkpoint serve" in found["anchor"]["run"]
    assert '--node-rank="$SKYPILOT_NODE_RANK"' in found["anchor"]["run"]


def test_every_file_is_a_task_skypilot_accepts(tmp_path, capsys):
    """SkyPilot's own schema and catalog checks, on one answer of each shape: AWS
    Tiering and Single Anchor, GCP (a host with GPUs and an n1 host with attached
    V100s), Azure."""
    gcp = (ROOT / "datasets" / "catalog-gcp.csv").read_text().splitlines()
    (tmp_path / "v100.csv").write_text(
        "\n".join(line for line in gcp[1:] if line.startswith("provider") or "V100" in line)
    )
    answers = {
        "aws-tiering": ["--budget", "10"],
        "aws-anchor": ["--budget", "10", "--policy", "cost_first"],
        "gcp": ["--budget", "10", "--cloud", "gcp"],
        "gcp-n1": ["--budget", "12", "--catalog", str(tmp_path / "v100.csv")],
        "azure": ["--budget", "10", "--cloud", "azure"],
    }
    files, recs = [], {}
    for label, argv in answers.items():
        path = tmp_path / label / "plan.yaml"
        path.parent.mkdir()
        assert main(["recommend", *argv, "--json", "--sky-yaml", str(path)]) == 0
        recs[label] = json.loads(capsys.readouterr().out)["recommendations"][0]
        files += sorted(path.parent.glob("*.yaml"))
    verdicts = skypilot_schema.validate(files, tmp_path / "sky")
    bad = {path: v["error"] for path, v in verdicts.items() if not v["ok"]}
    assert not bad, bad
    assert len(verdicts) == len(files) >= 10
    for path, verdict in verdicts.items():
        rec = recs[Path(path).parent.name]
        assert verdict["region"] == rec["region"]
        assert verdict["cloud"].lower() == rec["cloud"]


def test_a_bad_path_is_refused_before_planning(tmp_path, capsys):
    assert main(["recommend", "--budget", "3", "--sky-yaml", str(tmp_path / "plan.txt")]) == 2
    assert "must end in .yaml" in capsys.readouterr().err
    folder = tmp_path / "x.yaml"
    folder.mkdir()
    assert main(["recommend", "--budget", "3", "--sky-yaml", str(folder)]) == 2
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("budget", ["3", "25"])
def test_every_node_of_the_plan_is_in_a_task(tmp_path, capsys, budget):
    rec, found = recommend(tmp_path, capsys, "--budget", budget, "--policy", "all")
    gpu_nodes = sum(t["num_nodes"] for role, t in found.items() if role != "remote")
    assert gpu_nodes == rec["n_workers"]
    spot = sum(t["num_nodes"] for t in found.values() if t["resources"]["use_spot"])
    assert spot == rec["n_spot"]


@pytest.mark.parametrize("cloud", ["gcp", "azure"])
def test_each_cloud_gets_its_own_cloud_and_region_and_no_zone(tmp_path, capsys, cloud):
    rec, found = recommend(tmp_path, capsys, "--budget", "10", "--cloud", cloud)
    assert rec["cloud"] == cloud and rec["zone"] is None  # per-region prices: no zone
    for task in found.values():
        assert task["resources"]["cloud"] == cloud
        assert task["resources"]["region"] == rec["region"]
        assert "zone" not in task["resources"]
    if rec["remote_type"]:  # Tiering's remote tier stays in the workers' cloud and region
        assert found["remote"]["resources"]["instance_type"] == rec["remote_type"]


def test_a_gcp_n1_host_is_launched_as_host_plus_accelerators(tmp_path, capsys):
    # GCP's V100 types only: the catalog names each node n1-standard-N+KxV100.
    lines = (ROOT / "datasets" / "catalog-gcp.csv").read_text().splitlines()
    (tmp_path / "v100.csv").write_text(
        "\n".join(line for line in lines[1:] if line.startswith("provider") or "V100" in line)
    )
    catalog = str(tmp_path / "v100.csv")
    rec, found = recommend(tmp_path, capsys, "--budget", "12", "--catalog", catalog)
    host, _, gpus = rec["worker_type"].partition("+")
    count, _, model = gpus.partition("x")
    assert host.startswith("n1-standard-") and model == "V100"
    assert found["workers"]["resources"]["instance_type"] == host
    assert found["workers"]["resources"]["accelerators"] == f"V100:{count}"


def test_the_wheel_is_this_machines_deepvm_and_installs_without_an_index(tmp_path):
    import hashlib
    import subprocess
    import sys

    from deepvm import __version__
    from deepvm.launcher.wheel import build_wheel

    first = build_wheel(tmp_path / "a")
    again = build_wheel(tmp_path / "b")
    assert first.name == f"deepvm-{__version__}-py3-none-any.whl"
    # the same code gives the same bytes (the manifest records their hash)
    assert (
        hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(again.read_bytes()).digest()
    )
    with zipfile.ZipFile(first) as built:
        names = set(built.namelist())
        shipped = (ROOT / "deepvm" / "render" / "launch.py").read_bytes()
        assert shipped == built.read("deepvm/render/launch.py")
    assert {"deepvm/_datasets/catalog-aws.csv", "flows/__init__.py"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--target", str(target), str(first)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    probe = (
        "import deepvm, flows; from deepvm.base.datasets import dataset_path; "
        "print(deepvm.__version__, deepvm.__file__, dataset_path('catalog-gcp.csv'))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(target)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    version, module, data = ran.stdout.split()
    assert version == __version__ and module.startswith(str(target))
    assert data.startswith(str(target)) and (target / "bin" / "deepvm").exists()
