"""Quotas in each cloud's units (issue 26): GCP counts GPUs per GPU model and
vCPUs per region, separately for preemptible nodes; the planner, the fleet and
the explanations count each quota in its own unit and name it so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cpu_row, gpu_row, make_inputs
from tests_paths import ROOT

from deepvm.base.config import JobSpec
from deepvm.base.errors import InputError
from deepvm.catalog.quotas import load_quotas
from deepvm.cli import main
from deepvm.planner.fleet.plan import plan_fleet
from deepvm.planner.fleet.types import RegisteredJob

HEADER = (
    "provider,region,instance_type,quota_group,spot_quota_group,regional_quota_group,"
    "spot_regional_quota_group,vcpus,memory_gib,network_gbps,accelerator_name,"
    "accelerator_count,accelerator_memory_gib,peak_flops,ondemand_price,spot_price\n"
)
ROWS = (
    "gcp,us-central1,a2-highgpu-1g,NVIDIA_A100_GPUS,PREEMPTIBLE_NVIDIA_A100_GPUS,CPUS,"
    "PREEMPTIBLE_CPUS,12,85,24,A100,1,40,3.12e14,3.67339,1.80385\n"
    "gcp,us-central1,n2-highmem-8,N2,,CPUS,PREEMPTIBLE_CPUS,8,64,16,,0,0,,0.5,0.1\n"
)
QUOTAS = (
    "cloud,region,quota_group,market,unit,limit,source\n"
    "gcp,,NVIDIA_A100_GPUS,on_demand,gpus,4,test\n"
    "gcp,us-central1,PREEMPTIBLE_NVIDIA_A100_GPUS,spot,gpus,16,test\n"
    "gcp,,CPUS,on_demand,vcpus,24,test\n"
    "gcp,,PREEMPTIBLE_CPUS,spot,vcpus,{cpus},test\n"
)


def recommend(tmp_path: Path, capsys: pytest.CaptureFixture[str], cpus: int) -> dict:
    (tmp_path / "gcp.csv").write_text(HEADER + ROWS)
    (tmp_path / "q.csv").write_text(QUOTAS.format(cpus=cpus))
    argv = ["recommend", "--budget", "100", "--top", "1", "--json"]
    argv += ["--catalog", str(tmp_path / "gcp.csv"), "--quotas", str(tmp_path / "q.csv")]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["recommendations"][0]


def test_a_gpu_quota_binds_in_gpus(tmp_path, capsys):
    # 16 preemptible A100s of 1 GPU each, and the on-demand anchor: 17 nodes.
    rec = recommend(tmp_path, capsys, cpus=400)
    assert (rec["architecture"], rec["n_spot"], rec["n_on_demand"]) == ("single_anchor", 16, 1)
    assert rec["binding"] == "the PREEMPTIBLE_NVIDIA_A100_GPUS quota in us-central1 (16 GPUs)"


def test_the_regional_vcpu_quota_of_the_same_nodes_binds_in_vcpus(tmp_path, capsys):
    # 96 preemptible vCPUs / 12 per node = 8 spot nodes, below the 16 GPUs.
    rec = recommend(tmp_path, capsys, cpus=96)
    assert (rec["n_spot"], rec["n_on_demand"]) == (8, 1)
    assert rec["binding"] == "the PREEMPTIBLE_CPUS quota in us-central1 (96 vCPUs)"


def test_the_quotas_file_names_cloud_unit_and_limit(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text(QUOTAS.format(cpus=96))
    quotas = load_quotas(path)
    assert quotas.unit("NVIDIA_A100_GPUS") == "gpus" and quotas.unit("CPUS") == "vcpus"
    assert quotas.limit("PREEMPTIBLE_NVIDIA_A100_GPUS", "spot", "us-central1") == 16
    assert quotas.limit("PREEMPTIBLE_NVIDIA_A100_GPUS", "spot", "us-east4") == float("inf")
    path.write_text(QUOTAS.format(cpus=96).replace(",gpus,4,", ",tpus,4,"))
    with pytest.raises(InputError, match="unit='tpus' must be one of vcpus, gpus"):
        load_quotas(path)


def test_the_fleet_names_a_binding_gpu_quota_with_its_unit():
    """Two jobs whose solo clusters each take the 16 preemptible GPUs: one is held
    back, and its binding names the GPU quota in GPUs."""
    row = gpu_row("a2-highgpu-1g", 3.67, 1.80, vcpus=12, region="us-central1", peak=3e14)
    row.update(quota_group="NVIDIA_A100_GPUS", spot_quota_group="PREEMPTIBLE_NVIDIA_A100_GPUS")
    rows = [row, cpu_row("n2", 0.5, memory_gib=64, region="us-central1")]
    quotas = {
        ("NVIDIA_A100_GPUS", "on_demand"): 4,
        ("PREEMPTIBLE_NVIDIA_A100_GPUS", "spot"): 16,
    }
    units = {"NVIDIA_A100_GPUS": "gpus", "PREEMPTIBLE_NVIDIA_A100_GPUS": "gpus"}
    inputs = make_inputs(rows, quotas=quotas, units=units)
    spec = JobSpec(max_nodes=32)
    plan = plan_fleet([RegisteredJob("a", 40.0, spec), RegisteredJob("b", 40.0, spec)], inputs)
    held = [p for p in plan.jobs if p.value < 1]
    assert held and all(
        "the PREEMPTIBLE_NVIDIA_A100_GPUS quota in us-central1 (16 GPUs)" in (p.binding or "")
        for p in held
    )
    spot = {u.quota_group: u for u in plan.usage if u.market == "spot"}
    gpus = spot["PREEMPTIBLE_NVIDIA_A100_GPUS"]
    assert gpus.used <= 16 and gpus.unit == "gpus"
    assert gpus.label == "PREEMPTIBLE_NVIDIA_A100_GPUS"  # its name says the market


def test_cloud_restricts_a_catalog_of_two_clouds(tmp_path, capsys):
    """A catalog with AWS and GCP rows: --cloud plans in one of them only."""
    aws = "aws,us-east-1,p4d.24xlarge,P,,,,96,1152,400,A100,8,40,2.5e15,32.77,3.9\n"
    (tmp_path / "two.csv").write_text(HEADER + ROWS + aws)
    (tmp_path / "q.csv").write_text(QUOTAS.format(cpus=400) + "aws,,P,spot,vcpus,256,test\n")
    picked = {}
    for cloud in ("gcp", "aws"):
        argv = ["recommend", "--budget", "100", "--top", "1", "--json", "--cloud", cloud]
        argv += ["--catalog", str(tmp_path / "two.csv"), "--quotas", str(tmp_path / "q.csv")]
        assert main(argv) == 0
        rec = json.loads(capsys.readouterr().out)["recommendations"][0]
        picked[cloud] = (rec["worker_type"], rec["region"])
    assert picked == {
        "gcp": ("a2-highgpu-1g", "us-central1"),
        "aws": ("p4d.24xlarge", "us-east-1"),
    }


def test_a_registered_job_keeps_to_its_clouds_and_regions(tmp_path, capsys):
    """The scenarios file's clouds and regions: a job restricted to one cloud (or
    region) never gets a cluster of another, in the fleet plan as alone, even where
    the other would be worth more to it."""
    aws = "aws,us-east-1,p4d.24xlarge,P,,,,96,1152,400,A100,8,40,2.5e15,32.77,3.9\n"
    (tmp_path / "two.csv").write_text(HEADER + ROWS + aws)
    (tmp_path / "q.csv").write_text(QUOTAS.format(cpus=400) + "aws,,P,spot,vcpus,256,test\n")
    (tmp_path / "jobs.toml").write_text(
        '[[job]]\nname = "gcp-only"\nworkload = "resnet50"\nbudget = 60.0\nclouds = ["gcp"]\n\n'
        '[[job]]\nname = "central"\nworkload = "resnet50"\nbudget = 60.0\n'
        'regions = ["us-central1"]\n\n'
        '[[job]]\nname = "aws-only"\nworkload = "resnet50"\nbudget = 60.0\nclouds = ["aws"]\n'
    )
    argv = ["fleet", "--json", "--jobs", str(tmp_path / "jobs.toml")]
    argv += ["--catalog", str(tmp_path / "two.csv"), "--quotas", str(tmp_path / "q.csv")]
    assert main(argv) == 0
    jobs = {j["scenario"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert all(j["planned"] for j in jobs.values())
    assert jobs["gcp-only"]["region"] == jobs["central"]["region"] == "us-central1"
    assert jobs["gcp-only"]["worker_type"] == jobs["central"]["worker_type"] == "a2-highgpu-1g"
    assert (jobs["aws-only"]["region"], jobs["aws-only"]["worker_type"]) == (
        "us-east-1",
        "p4d.24xlarge",
    )
    # Unrestricted, the p4d cluster is the faster one: the restriction is what kept them.
    argv = ["recommend", "--budget", "60", "--top", "1", "--json"]
    argv += ["--catalog", str(tmp_path / "two.csv"), "--quotas", str(tmp_path / "q.csv")]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["recommendations"][0]["region"] == "us-east-1"


def test_a_cloud_that_leaves_no_type_is_named(tmp_path, capsys):
    (tmp_path / "jobs.toml").write_text(
        '[[job]]\nname = "j"\nworkload = "resnet50"\nbudget = 6.0\nclouds = ["gcp"]\n'
    )
    argv = ["fleet", "--json", "--jobs", str(tmp_path / "jobs.toml")]
    assert main([*argv, "--catalog", str(ROOT / "datasets" / "catalog-aws.csv")]) == 0
    job = json.loads(capsys.readouterr().out)["jobs"][0]
    assert job["planned"] is False and "gcp" in job["note"] and "leaves no GPU" in job["note"]
    assert main(argv) == 0  # the shipped catalogs have GCP's types
    job = json.loads(capsys.readouterr().out)["jobs"][0]
    assert job["planned"] and job["region"] in ("us-central1", "us-east4", "europe-west4")
    (tmp_path / "bad.toml").write_text(
        '[[job]]\nname = "j"\nworkload = "resnet50"\nbudget = 6.0\nclouds = "gcp"\nregions = [3]\n'
    )
    assert main(["fleet", "--jobs", str(tmp_path / "bad.toml")]) == 2
    assert "regions" in capsys.readouterr().err
