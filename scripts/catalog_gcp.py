"""GCP rows of the shipped catalogs (``datasets/catalog-gcp.csv``), built by
scripts/build_catalog.py from the copied SkyPilot GCP files.

GCP sells GPUs attached to a host VM: an instance's price is its host VM row plus
the GPU-attachment row of its GPU model, count and region, on demand and spot
alike (``gcp-host-vms-skypilot-v8.csv`` for A100, A100-80GB and H100 hosts,
``gcp-g2-hosts-skypilot-v8.csv`` for L4's g2 hosts; ``gcp-gpu-attach-skypilot-v8.csv``
for the GPUs). T4 and V100 (n1 hosts) are not built: their host rows are not
among the copied files. Nor are CPU-only types, so Tiering (a remote tier of CPU
nodes in the workers' region) is not planned on GCP yet.

Defects of the source, handled and named in each row's ``price_note``:

* A100-80GB attachment rows whose spot price is above their on-demand price
  (us-central1, europe-west4): the spot market is left out for those rows (no
  spot price), since the source's spot figure cannot be right.
* H100 attachment prices differ several-fold between regions (4.20 vs 9.80 vs
  12.74 USD per GPU-hour on demand): kept as the source gives them, and named.

Quotas (deepvm.quotas): each row counts its GPUs against GCP's per-model GPU
quota (``NVIDIA_A100_GPUS``; ``PREEMPTIBLE_NVIDIA_A100_GPUS`` for spot) and its
vCPUs against the regional ``CPUS`` (``PREEMPTIBLE_CPUS``) quota.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "datasets" / "sources"
HOSTS = ("gcp-host-vms-skypilot-v8.csv", "gcp-g2-hosts-skypilot-v8.csv")
ATTACH = "gcp-gpu-attach-skypilot-v8.csv"
SPECS = "gcp-instance-specs.csv"
PRICE_SOURCE = "skypilot-catalog-v8@006059e0 (gcp)"
PRICE_DATE = "2025"  # the SkyPilot snapshot records no date (as the AWS rows)
# GCP's quota names per GPU model (the on-demand one; spot is PREEMPTIBLE_ + it).
GPU_QUOTA = {
    "A100": "NVIDIA_A100_GPUS",
    "A100-80GB": "NVIDIA_A100_80GB_GPUS",
    "H100": "NVIDIA_H100_GPUS",
    "L4": "NVIDIA_L4_GPUS",
}


def _read(name: str) -> list[dict[str, str]]:
    lines = (SOURCES / name).read_text().splitlines()
    body = "\n".join(line for line in lines if not line.startswith("#"))
    return list(csv.DictReader(io.StringIO(body)))


def gcp_rows(peak_flops: dict[str, float]) -> list[dict[str, object]]:
    """One catalog row per (region, host type) with its attached GPUs."""
    attach = {(r["AcceleratorName"], int(r["AcceleratorCount"]), r["Region"]): r
              for r in _read(ATTACH)}  # fmt: skip
    specs = {r["instance_type"]: r for r in _read(SPECS)}
    out = []
    for name in HOSTS:
        for host in _read(name):
            model, count = host["pairs_with"].rsplit("x", 1)
            gpu = attach.get((model, int(count), host["Region"]))
            if gpu is None:
                where = f"{host['InstanceType']} {host['Region']}"
                raise SystemExit(f"{where}: no {model} x{count} GPU row")
            spec = specs[host["InstanceType"]]
            notes = []
            ondemand = float(host["Price"]) + float(gpu["Price"])
            spot: float | None = float(host["SpotPrice"]) + float(gpu["SpotPrice"])
            if float(gpu["SpotPrice"]) > float(gpu["Price"]):
                spot = None
                notes.append("source defect: the GPU part's spot price is above its on-demand "
                             "price; spot left out")  # fmt: skip
            if model == "H100":
                notes.append("the source's H100 prices differ several-fold between regions")
            out.append(
                {
                    "provider": "gcp",
                    "region": host["Region"],
                    "instance_type": host["InstanceType"],
                    "quota_group": GPU_QUOTA[model],
                    "spot_quota_group": "PREEMPTIBLE_" + GPU_QUOTA[model],
                    "regional_quota_group": "CPUS",
                    "spot_regional_quota_group": "PREEMPTIBLE_CPUS",
                    "vcpus": f"{float(host['vCPUs']):.10g}",
                    "memory_gib": f"{float(host['MemoryGiB']):.10g}",
                    "network_gbps": f"{float(spec['network_gbps']):.10g}",
                    "accelerator_name": model,
                    "accelerator_count": int(count),
                    "accelerator_memory_gib": f"{float(spec['accelerator_memory_gib']):.10g}",
                    "peak_flops": f"{peak_flops[model] * int(count):.4g}",
                    "ondemand_price": f"{ondemand:.6g}",
                    "spot_price": f"{spot:.6g}" if spot is not None else "",
                    "spot_zone": "",
                    "interruption_bucket": "",
                    "interruption_source": "estimate",
                    "interruption_date": "",
                    "regional_saving_pct": "",
                    "price_source": PRICE_SOURCE,
                    "price_date": PRICE_DATE,
                    "specs_source": "gcp-docs (network: estimate, see gcp-instance-specs.csv)",
                    "price_note": "; ".join(notes),
                }
            )
    return sorted(out, key=lambda r: (str(r["region"]), str(r["instance_type"])))
