"""A catalog that spans regions is planned across all of them, each region with
its own quotas; `--region` restricts it; every answer names its region."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from deepvm.catalog import load_catalog
from deepvm.catalog.quotas import load_quotas
from deepvm.cli import main

WEST = "us-west-2"


@pytest.fixture(scope="module")
def two_regions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The shipped us-east-1 catalog and a us-west-2 copy (other prices), and
    quotas with a tight G spot quota in us-west-2 only."""
    base = tmp_path_factory.mktemp("regions")
    east = load_catalog(region="us-east-1").instances
    west = east.assign(
        region=WEST,
        ondemand_price=east["ondemand_price"] * 1.1,
        spot_price=east["spot_price"] * 0.8,
    )
    pd.concat([east, west]).to_csv(base / "catalog.csv", index=False)
    (base / "quotas.csv").write_text(
        "quota_group,market,vcpus,region\n"
        "G,on_demand,32,\nG,spot,128,\nG,spot,8,us-west-2\n"
        "standard,on_demand,256,\nstandard,spot,256,\nP,on_demand,256,\nP,spot,256,\n"
    )
    return {"catalog": str(base / "catalog.csv"), "quotas": str(base / "quotas.csv")}


def run(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_quotas_per_region(two_regions):
    quotas = load_quotas(two_regions["quotas"])
    assert quotas.limit("G", "spot", WEST) == 8
    assert quotas.limit("G", "spot", "us-east-1") == 128  # the regionless row
    assert quotas.limit("G", "on_demand", WEST) == 32


def test_duplicate_regional_quota_is_refused(tmp_path, capsys):
    path = tmp_path / "q.csv"
    path.write_text("quota_group,market,vcpus,region\nG,spot,8,r\nG,spot,16,r\n")
    assert main(["recommend", "--budget", "3", "--quotas", str(path)]) == 2
    assert "duplicate entry for region=r, quota_group=G, market=spot" in capsys.readouterr().err


def test_recommend_ranks_across_regions_within_each_regions_quotas(two_regions, capsys):
    argv = ["recommend", "--budget", "3", "--top", "5", "--policy", "all", "--json"]
    out = run(capsys, *argv, "--catalog", two_regions["catalog"], "--quotas", two_regions["quotas"])
    recs = out["recommendations"]
    assert {r["region"] for r in recs} == {"us-east-1", WEST}
    for policy in ("deepvm", "deepvm_noscale", "on_demand"):
        mine = [r for r in recs if r["policy"] == policy]
        keys = [(r["region"], r["architecture"], r["worker_type"], r["n_workers"]) for r in mine]
        assert len(set(keys)) == len(keys) == 5  # distinct, a region apart counts
    for r in recs:
        if r["region"] == WEST and r["worker_type"].startswith("g"):
            assert r["n_spot"] * 4 <= 8  # us-west-2's own G spot quota
        if r["n_spot"]:
            assert r["zone"] is None or isinstance(r["zone"], str)
    deepvm = [r["throughput_flops"] for r in recs if r["policy"] == "deepvm"]
    assert deepvm == sorted(deepvm, reverse=True)  # ranked best first across both regions


def test_region_restricts_planning(two_regions, capsys):
    argv = ["recommend", "--budget", "3", "--top", "3", "--policy", "all", "--json"]
    out = run(capsys, *argv, "--catalog", two_regions["catalog"], "--region", WEST)
    assert {r["region"] for r in out["recommendations"]} == {WEST}


def test_sweep_compare_flopp_and_catalog_follow(two_regions, capsys):
    files = ["--catalog", two_regions["catalog"], "--quotas", two_regions["quotas"]]
    sweep = run(capsys, "sweep", "--budgets", "1,3,10", "--json", *files)
    assert {r["region"] for r in sweep["results"]} <= {"us-east-1", WEST}
    compare = run(capsys, "compare", "--budget", "3", "--work", "1e18", "--json", *files)
    assert compare["rows"]
    flopp = run(capsys, "flopp", "--json", "--catalog", two_regions["catalog"])
    assert {r["region"] for r in flopp["rows"]} == {"us-east-1", WEST}
    catalog = run(capsys, "catalog", "--json", "--catalog", two_regions["catalog"])
    assert {r["region"] for r in catalog["instances"]} == {"us-east-1", WEST}


def test_a_store_snapshot_spanning_regions_is_planned_across_them(two_regions, tmp_path, capsys):
    store = str(tmp_path / "s")
    assert main(["prices", "refresh", "--source", two_regions["catalog"], "--store", store]) == 0
    capsys.readouterr()
    argv = ["recommend", "--budget", "3", "--policy", "all", "--store", store, "--json"]
    out = run(capsys, *argv, "--cloud", "aws")  # the other clouds keep the shipped rows
    assert {r["region"] for r in out["recommendations"]} == {"us-east-1", WEST}


def test_simulate_asks_for_a_region_when_the_type_is_in_several(two_regions, capsys):
    argv = ["simulate", "preemption", "--instance-type", "g4dn.xlarge", "--work-hours", "1"]
    assert main([*argv, "--catalog", two_regions["catalog"]]) == 2
    assert "pick one with --region" in capsys.readouterr().err
    assert main([*argv, "--catalog", two_regions["catalog"], "--region", WEST, "--json"]) == 0
    assert Path(two_regions["catalog"]).exists()
