"""The Azure catalog (datasets/catalog-azure.csv) against its source file, row for
row, with the source's defects handled and named (issue 26)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from tests_paths import ROOT

from deepvm.catalog import load_catalog
from deepvm.cli import main

SOURCES = ROOT / "datasets" / "sources"
LEFT_OUT = {"Standard_NC8ads_A10_v4", "Standard_NC16ads_A10_v4", "Standard_NCC40ads_H100_v5"}


def rows(name: str) -> list[dict[str, str]]:
    text = (SOURCES / name).read_text()
    return list(csv.DictReader(io.StringIO("\n".join(
        line for line in text.splitlines() if not line.startswith("#")
    ))))  # fmt: skip


def shipped():
    return load_catalog(ROOT / "datasets" / "catalog-azure.csv").table


def test_every_priced_source_row_is_one_catalog_row_with_its_defects_handled():
    table = shipped()
    index = {(table["region"][k], table["instance_type"][k]): k for k in range(len(table))}
    source = rows("azure-gpu-vms-skypilot-v8-fork.csv")
    kept = [r for r in source if r["Price"] and r["InstanceType"] not in LEFT_OUT]
    assert len(index) == len(kept) == 125
    for vm in kept:
        k = index[vm["Region"], vm["InstanceType"]]
        assert table["provider"][k] == "azure"
        assert table["vcpus"][k] == float(vm["vCPUs"])
        assert table["ondemand_price"][k] == pytest.approx(float(vm["Price"]))
        spot = float(table["spot_price"][k])
        if float(vm["SpotPrice"]) >= float(vm["Price"]):  # the H100 defect
            assert spot != spot  # NaN: no spot market
            assert "spot price equal to on-demand" in table["price_note"][k]
        else:
            assert spot == pytest.approx(float(vm["SpotPrice"]))
        if vm["InstanceType"] == "Standard_ND96isr_H100_v5":
            assert vm["AcceleratorCount"] == "12"  # the source's count...
            assert table["accelerator_count"][k] == 8  # ...corrected
            assert "12 GPUs in the source; 8" in table["price_note"][k]
        elif vm["InstanceType"] == "Standard_NC32ads_A10_v4":
            assert vm["AcceleratorName"] == ""  # missing in the source, filled
            assert (table["accelerator_name"][k], table["accelerator_count"][k]) == ("A10", 1)
        else:
            assert table["accelerator_name"][k] == vm["AcceleratorName"]
            assert table["accelerator_count"][k] == int(vm["AcceleratorCount"])
        assert table["spot_quota_group"][k] == "lowPriorityCores"
        assert table["regional_quota_group"][k] == "cores"
        assert table["quota_group"][k].startswith("standard")
        assert table["quota_group"][k].endswith("Family")


def test_rows_left_out_are_the_partitions_and_the_unpriced():
    types = set(shipped()["instance_type"])
    assert not types & LEFT_OUT
    assert "Standard_NC32ads_A10_v4" in types
    every_h100 = shipped()["accelerator_name"] == "H100"
    assert all(p != p for p in shipped()["spot_price"][every_h100])


def test_azure_spot_counts_only_the_regional_spot_quota(tmp_path, capsys):
    (tmp_path / "q.csv").write_text(
        "cloud,region,quota_group,market,unit,limit\n"
        "azure,,lowPriorityCores,spot,vcpus,48\n"
        "azure,,cores,on_demand,vcpus,64\n"
    )
    argv = ["recommend", "--budget", "20", "--top", "1", "--json", "--region", "eastus"]
    argv += ["--catalog", str(ROOT / "datasets" / "catalog-azure.csv")]
    argv += ["--quotas", str(tmp_path / "q.csv")]
    assert main(argv) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    vcpus = dict(zip(shipped()["instance_type"], shipped()["vcpus"], strict=False))
    # Spot nodes count only against the regional Spot quota, in vCPUs: within 48.
    assert 0 < rec["n_spot"] * vcpus[rec["worker_type"]] <= 48
    assert rec["binding"] == "the lowPriorityCores quota in eastus (48 vCPUs)"
