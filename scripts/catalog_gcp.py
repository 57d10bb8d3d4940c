"""GCP rows of the shipped catalogs (``datasets/catalog-gcp.csv``), built by
scripts/build_catalog.py from the copied SkyPilot GCP files.

GCP sells GPUs attached to a host VM: an instance's price is its host VM row plus
the GPU-attachment row of its GPU model, count and region, on demand and spot
alike (``gcp-host-vms-skypilot-v8.csv`` for A100, A100-80GB and H100 hosts,
``gcp-g2-hosts-skypilot-v8.csv`` for L4's g2 hosts, ``gcp-n1-hosts-skypilot-v8.csv``
for T4's and V100's n1-standard hosts; ``gcp-gpu-attach-skypilot-v8.csv`` for the
GPUs). GCP has no machine type that names an n1 host with its GPUs, so those rows
are named host + GPUs, e.g. ``n1-standard-16+2xV100`` (deepvm.render.launch writes them
back as SkyPilot's ``instance_type`` and ``accelerators``). The n1 hosts carry 8
vCPUs per GPU (deepvm's choice, within GCP's per-GPU vCPU limits). The source's
T4 rows are for one GPU only, and its V100 rows are in us-central1 and
europe-west4 only. ``n1-standard-4`` is the one CPU-only type: the remote tier
of Tiering on GCP.

Defects of the source, handled and named in each row's ``price_note``:

* A100-80GB attachment rows whose spot price is above their on-demand price
  (us-central1, europe-west4): the spot market is left out for those rows (no
  spot price), since the source's spot figure cannot be right.
* H100 attachment prices differ several-fold between regions (4.20 vs 9.80 vs
  12.74 USD per GPU-hour on demand): kept as the source gives them, and named.

Quotas (deepvm.catalog.quotas): each row counts its GPUs against GCP's per-model GPU
quota (``NVIDIA_A100_GPUS``; ``PREEMPTIBLE_NVIDIA_A100_GPUS`` for spot) and its
vCPUs against the regional ``CPUS`` (``PREEMPTIBLE_CPUS``) quota.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "datasets" / "sources"
HOSTS = (
    "gcp-host-vms-skypilot-v8.csv",
    "gcp-g2-hosts-skypilot-v8.csv",
    "gcp-n1-hosts-skypilot-v8.csv",
)
ATTACH = "gcp-gpu-attach-skypilot-v8.csv"
SPECS = "gcp-instance-specs.csv"
PRICE_SOURCE = "skypilot-catalog-v8@006059e0 (gcp)"
PRICE_DATE = "2025"  # the SkyPilot snapshot records no date (as the AWS rows)
SPECS_SOURCE = "gcp-docs (network: estimate, see gcp-instance-specs.csv)"
# GCP's quota names per GPU model (the on-demand one; spot is PREEMPTIBLE_ + it).
GPU_QUOTA = {
    "A100": "NVIDIA_A100_GPUS",
    "A100-80GB": "NVIDIA_A100_80GB_GPUS",
    "H100": "NVIDIA_H100_GPUS",
    "L4": "NVIDIA_L4_GPUS",
    "T4": "NVIDIA_T4_GPUS",
    "V100": "NVIDIA_V100_GPUS",
}
# Hosts sold with GPUs attached at launch (n1), named host + GPUs in the catalog.
ATTACHED_HOSTS = ("n1-",)


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
            if not host["pairs_with"]:
                out.append(_cpu_row(host, specs[host["InstanceType"]]))
                continue
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
                    "instance_type": _name(host["InstanceType"], model, int(count)),
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
                    **provenance(PRICE_SOURCE, PRICE_DATE, SPECS_SOURCE, notes),
                }
            )
    return sorted(out, key=lambda r: (str(r["region"]), str(r["instance_type"])))


def _name(host: str, model: str, count: int) -> str:
    """The catalog's name of a host with its GPUs (``n1-standard-16+2xV100``); a2, a3
    and g2 types name their GPUs already."""
    return f"{host}+{count}x{model}" if host.startswith(ATTACHED_HOSTS) else host


def _cpu_row(host: dict[str, str], spec: dict[str, str]) -> dict[str, object]:
    """A CPU-only type (the remote checkpoint tier): on demand, in the CPUS quota."""
    return {
        "provider": "gcp",
        "region": host["Region"],
        "instance_type": host["InstanceType"],
        "quota_group": "CPUS",
        "spot_quota_group": "PREEMPTIBLE_CPUS",
        "regional_quota_group": "",
        "spot_regional_quota_group": "",
        "vcpus": f"{float(host['vCPUs']):.10g}",
        "memory_gib": f"{float(host['MemoryGiB']):.10g}",
        "network_gbps": f"{float(spec['network_gbps']):.10g}",
        "accelerator_name": "",
        "accelerator_count": 0,
        "accelerator_memory_gib": "0",
        "peak_flops": "",
        "ondemand_price": f"{float(host['Price']):.6g}",
        "spot_price": f"{float(host['SpotPrice']):.6g}",
        **provenance(PRICE_SOURCE, PRICE_DATE, SPECS_SOURCE, []),
    }


def provenance(
    price_source: str, price_date: str, specs_source: str, notes: list[str]
) -> dict[str, object]:
    """The last columns of a GCP or Azure row: where its figures are from. Neither
    cloud publishes interruption rates, so the planner's estimate applies."""
    return {
        "spot_zone": "",
        "interruption_bucket": "",
        "interruption_source": "estimate",
        "interruption_date": "",
        "regional_saving_pct": "",
        "price_source": price_source,
        "price_date": price_date,
        "specs_source": specs_source,
        "price_note": "; ".join(notes),
    }
