"""Azure rows of the shipped catalogs (``datasets/catalog-azure.csv``), built by
scripts/build_catalog.py from the copied SkyPilot-format Azure file.

The source (``azure-gpu-vms-skypilot-v8-fork.csv``) is a fork of SkyPilot's
catalog, US regions only, one row per (VM size, region) with its on-demand and
spot price. Its defects, each handled here and named in the row's ``price_note``
(or, for rows left out, in ``LEFT_OUT``):

* Every H100 row's spot price equals its on-demand price: no spot discount was
  recorded, so the spot market is left out for those rows (no spot price).
* ``Standard_ND96isr_H100_v5`` says 12 GPUs; it has 8 (Azure's ND H100 v5
  documentation): the count is corrected (``gpus_fixed`` in
  ``azure-instance-specs.csv``) and the peak FLOP/s follows it.
* ``Standard_NC*ads_A10_v4`` rows lack their GPU columns. ``NC32ads_A10_v4``
  holds one whole A10 and is kept with that filled in; ``NC8ads`` and
  ``NC16ads`` hold a third and a half of one (GPU partitions), which a node
  count in whole GPUs cannot express: left out. Rows without a price (eastus)
  are left out.
* ``Standard_NCC40ads_H100_v5`` (a confidential-computing VM) lacks its GPU
  columns: left out.

No CPU-only sizes are in the source, so Tiering (a remote tier of CPU nodes in
the workers' region) is not planned on Azure.

Quotas (deepvm.catalog.quotas): on demand, a node counts its vCPUs against its VM
family's quota (``standardNCADSA100v4Family``) and the regional total
(``cores``); spot, against the one regional Spot quota (``lowPriorityCores``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from catalog_gcp import provenance  # scripts/, beside this file

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "datasets" / "sources"
VMS = "azure-gpu-vms-skypilot-v8-fork.csv"
SPECS = "azure-instance-specs.csv"
PRICE_SOURCE = "skypilot-catalog-v8-fork@20291d7e (azure)"
PRICE_DATE = "2025"  # the snapshot records no date (as the AWS and GCP rows)
SPECS_SOURCE = f"azure-docs (network: estimate, see {SPECS})"
# Rows left out, by VM size: why.
LEFT_OUT = {
    "Standard_NC8ads_A10_v4": "a third of an A10 (a GPU partition); GPU columns missing",
    "Standard_NC16ads_A10_v4": "half an A10 (a GPU partition); GPU columns missing",
    "Standard_NCC40ads_H100_v5": "confidential-computing VM; GPU columns missing",
}


def _read(name: str) -> list[dict[str, str]]:
    lines = (SOURCES / name).read_text().splitlines()
    body = "\n".join(line for line in lines if not line.startswith("#"))
    return list(csv.DictReader(io.StringIO(body)))


def azure_rows(peak_flops: dict[str, float]) -> list[dict[str, object]]:
    """One catalog row per priced (region, VM size) of the source, defects handled."""
    specs = {r["instance_type"]: r for r in _read(SPECS)}
    out = []
    for vm in _read(VMS):
        itype = vm["InstanceType"]
        if itype in LEFT_OUT or not vm["Price"]:
            continue
        spec = specs.get(itype)
        if spec is None:
            raise SystemExit(f"{itype}: no row in {SPECS}; add one")
        notes = []
        model = spec["accelerator_fixed"] or vm["AcceleratorName"]
        count = int(float(vm["AcceleratorCount"] or 0))
        if spec["gpus_fixed"]:
            fixed = int(spec["gpus_fixed"])
            notes.append(
                f"source defect: {count or 'no'} GPUs in the source; {fixed} per Azure's "
                "documentation"
            )
            count = fixed
        ondemand = float(vm["Price"])
        spot: float | None = float(vm["SpotPrice"]) if vm["SpotPrice"] else None
        if spot is not None and spot >= ondemand:
            spot = None
            notes.append("source defect: spot price equal to on-demand (no discount "
                         "recorded); spot left out")  # fmt: skip
        out.append(
            {
                "provider": "azure",
                "region": vm["Region"],
                "instance_type": itype,
                "quota_group": spec["quota_family"],
                "spot_quota_group": "lowPriorityCores",
                "regional_quota_group": "cores",
                "spot_regional_quota_group": "",
                "vcpus": f"{float(vm['vCPUs']):.10g}",
                "memory_gib": f"{float(vm['MemoryGiB']):.10g}",
                "network_gbps": f"{float(spec['network_gbps']):.10g}",
                "accelerator_name": model,
                "accelerator_count": count,
                "accelerator_memory_gib": f"{float(spec['accelerator_memory_gib']):.10g}",
                "peak_flops": f"{peak_flops[model] * count:.4g}",
                "ondemand_price": f"{ondemand:.10g}",
                "spot_price": f"{spot:.10g}" if spot is not None else "",
                **provenance(PRICE_SOURCE, PRICE_DATE, SPECS_SOURCE, notes),
            }
        )
    return sorted(out, key=lambda r: (str(r["region"]), str(r["instance_type"])))
