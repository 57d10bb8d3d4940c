"""The GCP catalog (datasets/catalog-gcp.csv) against its source files, row for
row: each instance is its host VM plus its attached GPUs, on demand and spot,
with the source's defects handled and named (issue 26)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from tests_paths import ROOT

from deepvm.catalog import load_catalog
from deepvm.cli import main

SOURCES = ROOT / "datasets" / "sources"


def rows(name: str) -> list[dict[str, str]]:
    text = (SOURCES / name).read_text()
    return list(csv.DictReader(io.StringIO("\n".join(
        line for line in text.splitlines() if not line.startswith("#")
    ))))  # fmt: skip


def test_every_host_row_is_one_catalog_row_priced_host_plus_gpus():
    gpus = {
        (r["AcceleratorName"], r["AcceleratorCount"], r["Region"]): r
        for r in rows("gcp-gpu-attach-skypilot-v8.csv")
    }
    hosts = [
        *rows("gcp-host-vms-skypilot-v8.csv"),
        *rows("gcp-g2-hosts-skypilot-v8.csv"),
        *rows("gcp-n1-hosts-skypilot-v8.csv"),
    ]
    table = load_catalog(ROOT / "datasets" / "catalog-gcp.csv").table
    shipped = {(table["region"][k], table["instance_type"][k]): k for k in range(len(table))}
    assert len(shipped) == len(hosts) == 53
    cpu_only = [h for h in hosts if not h["pairs_with"]]
    assert len(cpu_only) == 3  # n1-standard-4, the remote tier, in each region
    for host in cpu_only:
        k = shipped[host["Region"], host["InstanceType"]]
        assert table["accelerator_count"][k] == 0 and table["quota_group"][k] == "CPUS"
        assert table["ondemand_price"][k] == pytest.approx(float(host["Price"]))
    for host in (h for h in hosts if h["pairs_with"]):
        model, count = host["pairs_with"].rsplit("x", 1)
        gpu = gpus[model, count, host["Region"]]
        # n1 hosts take their GPUs at launch: the catalog names both.
        name = host["InstanceType"]
        name = f"{name}+{count}x{model}" if name.startswith("n1-") else name
        k = shipped[host["Region"], name]
        assert table["provider"][k] == "gcp"
        assert table["accelerator_name"][k] == model
        assert table["accelerator_count"][k] == int(count)
        assert table["vcpus"][k] == float(host["vCPUs"])
        assert table["ondemand_price"][k] == pytest.approx(
            float(host["Price"]) + float(gpu["Price"]), rel=1e-5
        )
        spot = float(table["spot_price"][k])
        if float(gpu["SpotPrice"]) > float(gpu["Price"]):  # the named defect
            assert spot != spot  # NaN: no spot market
            assert "spot price is above its on-demand" in table["price_note"][k]
        else:
            assert spot == pytest.approx(
                float(host["SpotPrice"]) + float(gpu["SpotPrice"]), rel=1e-5
            )
        assert table["quota_group"][k] == f"NVIDIA_{model.replace('-', '_')}_GPUS"
        assert table["spot_quota_group"][k] == "PREEMPTIBLE_" + table["quota_group"][k]
        assert table["price_source"][k].startswith("skypilot-catalog-v8@006059e0")


def test_the_a100_80gb_defect_drops_spot_only_where_the_source_is_wrong():
    table = load_catalog(ROOT / "datasets" / "catalog-gcp.csv").table
    no_spot = table["spot_price"] != table["spot_price"]  # NaN
    a100_80 = table["accelerator_name"] == "A100-80GB"
    without = sorted({str(r) for r in table["region"][no_spot & a100_80]})
    assert without == ["europe-west4", "us-central1"]  # us-east4's spot is below on-demand


def test_planning_on_gcp_counts_its_gpu_quotas_in_gpus(tmp_path, capsys):
    (tmp_path / "q.csv").write_text(
        "cloud,region,quota_group,market,unit,limit\n"
        "gcp,,PREEMPTIBLE_NVIDIA_L4_GPUS,spot,gpus,16\n"
        "gcp,,NVIDIA_L4_GPUS,on_demand,gpus,8\n"
    )
    argv = ["recommend", "--budget", "20", "--top", "1", "--json", "--cloud", "gcp"]
    argv += ["--catalog", str(ROOT / "datasets" / "catalog-gcp.csv")]
    argv += ["--quotas", str(tmp_path / "q.csv"), "--region", "us-central1"]
    assert main(argv) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    # 2 spot nodes of 8 L4s fill the 16 preemptible L4s; a third would need 24.
    assert (rec["worker_type"], rec["n_spot"], rec["n_on_demand"]) == ("g2-standard-96", 2, 1)
    assert rec["binding"] == "the PREEMPTIBLE_NVIDIA_L4_GPUS quota in us-central1 (16 GPUs)"


def test_the_three_cloud_catalog_keeps_every_files_columns(capsys):
    """The shipped catalog joins the clouds' files under the union of their columns:
    GCP's spot GPU quota keys and Azure's regional keys survive the join, so
    `recommend --cloud gcp` plans as on GCP's own file."""
    shipped = load_catalog().table
    for cloud in ("gcp", "azure"):
        own = load_catalog(ROOT / "datasets" / f"catalog-{cloud}.csv").table
        rows = [k for k in range(len(shipped)) if shipped["provider"][k] == cloud]
        assert len(rows) == len(own)
        for column in ("quota_group", "spot_quota_group", "regional_quota_group"):
            if column not in own:
                continue
            assert [shipped[column][k] for k in rows] == list(own[column]), (cloud, column)
    argv = ["recommend", "--budget", "6", "--top", "2", "--json", "--cloud", "gcp"]
    assert main(argv) == 0
    from_shipped = json.loads(capsys.readouterr().out)
    assert main([*argv, "--catalog", str(ROOT / "datasets" / "catalog-gcp.csv")]) == 0
    alone = json.loads(capsys.readouterr().out)
    key = ["worker_type", "n_workers", "n_spot", "hourly_cost"]
    assert [[r[k] for k in key] for r in from_shipped["recommendations"]] == [
        [r[k] for k in key] for r in alone["recommendations"]
    ]
