"""--sky-yaml: SkyPilot task YAML for the chosen cluster. SkyPilot itself does not
install without ~40 packages (and a click downgrade), so CI checks the files'
structure against the task fields SkyPilot documents; the same files validate
against SkyPilot 0.14.1's own schema (see the issue 16 note)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests_paths import ROOT

from deepvm.cli import main

# The task and resources fields these files may use (SkyPilot's task YAML reference).
TASK_FIELDS = {"name", "num_nodes", "resources", "envs", "setup", "run", "workdir", "file_mounts"}
RESOURCE_FIELDS = {"cloud", "region", "zone", "instance_type", "use_spot", "accelerators"}


def tasks(path: Path) -> dict[str, dict]:
    found = {}
    for file in sorted(path.parent.glob(f"{path.stem}*.yaml")):
        text = file.read_text()
        task = yaml.safe_load(text)
        role = next(line for line in text.splitlines() if line.startswith("# this task: "))
        found[role.split(": ")[1]] = task
        assert set(task) <= TASK_FIELDS and {"name", "num_nodes", "resources", "run"} <= set(task)
        assert set(task["resources"]) <= RESOURCE_FIELDS
        assert isinstance(task["num_nodes"], int) and task["num_nodes"] >= 1
        assert isinstance(task["resources"]["use_spot"], bool)
        assert all(isinstance(v, str) for v in task.get("envs", {}).values())
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
    assert workers["envs"]["DEEPVM_ZONE_ID"] == rec["zone"]
    assert "torchrun" in workers["run"] and "$SKYPILOT_NODE_RANK" in workers["run"]
    assert remote["num_nodes"] == rec["n_remote"]
    assert remote["resources"]["instance_type"] == rec["remote_type"]
    assert remote["resources"]["use_spot"] is False


def test_single_anchor_is_the_spot_workers_and_an_on_demand_anchor(tmp_path, capsys):
    rec, found = recommend(tmp_path, capsys, "--budget", "10", "--policy", "cost_first")
    assert rec["architecture"] == "single_anchor" and set(found) == {"workers", "anchor"}
    assert found["workers"]["num_nodes"] == rec["n_spot"]
    assert found["workers"]["resources"]["use_spot"] is True
    assert found["anchor"]["num_nodes"] == rec["n_on_demand"] == 1
    assert found["anchor"]["resources"]["use_spot"] is False
    # one torchrun world over both: the anchor is rank 0, the workers follow it
    assert found["anchor"]["envs"]["DEEPVM_NODES"] == str(rec["n_workers"])
    assert "SKYPILOT_NODE_RANK + 1" in found["workers"]["run"]


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
        assert "zone" not in task["resources"] and "DEEPVM_ZONE_ID" not in task["envs"]
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
