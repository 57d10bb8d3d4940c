"""Build the shipped catalog and throughput tables from the copied public sources.

    python scripts/build_catalog.py          # rewrites the three files below
    python scripts/build_catalog.py --check  # exit 1 if they differ from a rebuild

Inputs (``datasets/sources/``, each with its ``# source:`` line):

* ``aws-vms-skypilot-v8.csv``: SkyPilot's public AWS catalog (on-demand price and
  per-zone spot price per instance type, region and zone).
* ``aws-instance-specs.csv``: what that file lacks, from AWS's documentation:
  quota group, network Gbps, accelerator memory; and an *estimated* Spot
  Instance Advisor bucket.
* ``published-throughput-lambda.csv``: Lambda's measured single-GPU training
  throughput (mixed precision rows are used).
* ``aws-spot-advisor-feed-2025-06-28.json``: AWS's Spot Instance Advisor feed
  (its source in the ``.source`` file beside it): the interruption bucket and
  the regional average spot saving per (region, type).
* ``mlperf-training-resnet-bert.csv``: MLPerf Training time to train by system
  and node count (scripts/catalog_scaling.py turns it into speedup fits).

Outputs (``datasets/``):

* ``catalog-aws.csv``: one row per (region, instance type) in us-east-1,
  us-west-2 and eu-west-1: the on-demand price, and the spot price of the
  cheapest Availability Zone (``spot_zone``; Local Zones such as use1-atl2-az1
  are left out: they need an opt-in and host few services). Types without an
  on-demand price (p5e.48xlarge) are left out. Every row names its
  ``price_source`` and ``price_date`` (the SkyPilot file records no date; it is
  a 2025-or-later snapshot, so the date is given at year precision, ``2025``).
  ``interruption_bucket`` and ``regional_saving_pct`` are the Advisor feed's
  for that region and type (``interruption_source`` aws-spot-advisor, dated
  ``interruption_date``); a type the feed lacks keeps the bucket estimated in
  aws-instance-specs.csv, labelled ``estimate``.
* ``throughput-published.csv``: FLOP/s of one node per (instance type,
  workload) = published samples/s x the sample's training FLOPs x accelerators;
  ``source`` is ``published`` only where the row is Lambda's own GPU, task and
  GPU count, else ``transferred``, and ``basis`` says from what.
* ``overhead-default.csv``: speedup models: MLPerf fits for 8-GPU A100/H100
  types (scripts/catalog_scaling.py), the DeepVM paper's fits, and the
  conservative default for every other type, each with source and basis.
* ``utilisation-estimates.csv``: per workload and published GPU, the fraction of
  peak FLOP/s reached; a GPU without a published row is estimated with the
  fraction of the published GPU nearest to it in peak FLOP/s (workloads without
  published rows take the closest kind's: CNNs ResNet-50's, transformers
  BERT's; any other workload the median over the published workloads).

GPU mapping (AWS accelerator -> Lambda row): V100 (p3) -> "LambdaCloud V100
16GB"; A10G (g5) -> "LambdaCloud A10": the same GA102 chip, AWS's variant is
close to but not identical with the A10 (clocks, power), so it is an
approximation; A100 (p4d, 40 GB SXM4) -> "LambdaCloud A100 40GB PCIe", the row
with the same memory: the SXM4 part runs at a higher power limit, so this
understates p4d a little; A100-80GB (p4de) -> "A100 80GB SXM4"; H100 (p5) ->
"H100 80GB SXM5". T4, L4, L40S and H200 have no row: estimated.

Multi-GPU nodes: node FLOP/s = per-GPU FLOP/s x accelerator count, i.e. data
parallelism inside a node is taken as linear (NVLink or PCIe all-reduce within
one machine); the overhead model covers scaling across nodes.

Samples: ResNet-50 rows are 224x224 images, FLOPs per image from deepvm's
sample model (torch.utils.flop_counter, 24.299 GFLOP forward + backward).
BERT rows are SQuAD fine-tuning sequences of 384 tokens: 212.0 GFLOP per
sequence, counted the same way on BertForQuestionAnswering (BERT-base) at 384
tokens; the FLOP/s so achieved is taken to carry over to deepvm's bert-base
workload (masked LM, 128 tokens).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import catalog_azure  # noqa: E402  (scripts/, beside this file)
import catalog_gcp  # noqa: E402
import catalog_scaling  # noqa: E402

from deepvm.catalog.common import ACCELERATOR_PEAK_FLOPS  # noqa: E402
from deepvm.catalog.spot_advisor import parse_feed  # noqa: E402
from deepvm.performance.workloads import WORKLOADS  # noqa: E402

SOURCES = ROOT / "datasets" / "sources"
OUT = ROOT / "datasets"
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
PRICE_SOURCE = "skypilot-catalog-v8@00148f2a"
PRICE_DATE = "2025"  # year precision: the snapshot records no date (see the docstring)
ADVISOR_FEED = "aws-spot-advisor-feed-2025-06-28.json"
ADVISOR_DATE = "2025-06-28"  # the date the copied feed was captured
LAMBDA_DATE = "2024-07-24"  # the Lambda files' last-touching commit
MLPERF_FILE = "mlperf-training-resnet-bert.csv"
LOCAL_ZONE = re.compile(r"^[a-z]+\d-[a-z]+\d+-az\d+$")  # e.g. use1-atl2-az1

LAMBDA_ROW = {
    "V100": "LambdaCloud V100 16GB",
    "V100-32GB": "LambdaCloud V100 16GB",
    "A10G": "LambdaCloud A10",
    "A10": "LambdaCloud A10",
    "A100": "LambdaCloud A100 40GB PCIe",
    "A100-80GB": "A100 80GB SXM4",
    "H100": "H100 80GB SXM5",
}
# Where the AWS GPU is not Lambda's: the transfer a row makes (see the docstring).
GPU_TRANSFER = {
    "A10G": "A10 -> A10G",
    "A100": "A100 40GB PCIe -> A100 40GB SXM4",
    "V100-32GB": "V100 16GB -> V100 32GB",
}
# GCP and Azure types whose GPU is another variant than Lambda's row of its model:
# instance-type prefix -> the transfer (Azure's NC A100 v4 and NC H100 v5 are PCIe).
TYPE_TRANSFER = {
    "Standard_NC24ads_A100_v4": "A100 80GB SXM4 -> A100 80GB PCIe",
    "Standard_NC48ads_A100_v4": "A100 80GB SXM4 -> A100 80GB PCIe",
    "Standard_NC96ads_A100_v4": "A100 80GB SXM4 -> A100 80GB PCIe",
    "Standard_NC40ads_H100_v5": "H100 80GB SXM5 -> H100 NVL 94GB",
    "Standard_NC80adis_H100_v5": "H100 80GB SXM5 -> H100 NVL 94GB",
}
# The DeepVM paper's fits (Kim et al., CCGrid 2024; fitted on ResNet training) and
# the conservative default for every other type: rows of overhead-default.csv.
PAPER_FITS = {
    "g3s.xlarge": (0.14086, 14.4926, 13.5325),
    "g4dn.xlarge": (0.13388, 12.8742, 6.17667),
    "g5.xlarge": (0.08533, 20.0667, 4.96223),
}
DEFAULT_AMDAHL_P = 0.9
# Peak dense FP16 FLOP/s of each Lambda GPU, to calibrate utilisation.
LAMBDA_PEAK = {
    "LambdaCloud V100 16GB": ACCELERATOR_PEAK_FLOPS["V100"],
    "LambdaCloud A10": ACCELERATOR_PEAK_FLOPS["A10"],
    "LambdaCloud A100 40GB PCIe": ACCELERATOR_PEAK_FLOPS["A100"],
    "A100 80GB SXM4": ACCELERATOR_PEAK_FLOPS["A100-80GB"],
    "H100 80GB SXM5": ACCELERATOR_PEAK_FLOPS["H100"],
}
# Lambda column -> (deepvm workload, training FLOPs per published sample).
PUBLISHED = {
    "resnet50_throughput": ("resnet50", WORKLOADS["resnet50"].train_flops_per_sample),
    "bert_base_squad_throughput": ("bert-base", 212.0e9),
}
# What each Lambda column measured, and the transfer to deepvm's workload (if any).
PUBLISHED_TASK = {
    "resnet50_throughput": ("ResNet-50", None),
    "bert_base_squad_throughput": (
        "BERT-base SQuAD fine-tuning",
        "SQuAD fine-tuning (384 tokens) -> masked LM (128 tokens)",
    ),
}
# Workloads without a published row take the calibration of the closest kind.
CALIBRATED_LIKE = {
    "resnet18": "resnet50",
    "resnet50": "resnet50",
    "vit-b16": "bert-base",
    "gpt2": "bert-base",
    "bert-base": "bert-base",
    "tiny": "resnet50",
}


def read_source(path: Path) -> tuple[str, list[dict[str, str]]]:
    """The ``# source:`` line and the rows of a copied public file."""
    text = path.read_text()
    lines = text.splitlines()
    source = lines[0].removeprefix("# source:").strip() if lines[0].startswith("#") else ""
    body = "\n".join(line for line in lines if not line.startswith("#"))
    return source, list(csv.DictReader(io.StringIO(body)))


def advisor_rows() -> dict[tuple[str, str], tuple[str, float]]:
    """(region, type) -> (interruption bucket, regional average saving %)."""
    feed = json.loads((SOURCES / ADVISOR_FEED).read_text())
    table = parse_feed(feed, feed_date=ADVISOR_DATE)
    return {
        (r.region, r.instance_type): (r.interruption_bucket, r.savings_pct)
        for r in table.itertuples()
    }


def catalog_rows() -> list[dict[str, object]]:
    _, vms = read_source(SOURCES / "aws-vms-skypilot-v8.csv")
    _, spec_rows = read_source(SOURCES / "aws-instance-specs.csv")
    specs = {r["instance_type"]: r for r in spec_rows}
    advisor = advisor_rows()
    by_key: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in vms:
        if r["Region"] in REGIONS:
            by_key.setdefault((r["Region"], r["InstanceType"]), []).append(r)
    out = []
    for (region, itype), zones in sorted(by_key.items()):
        if itype not in specs:
            raise SystemExit(f"{itype}: no row in aws-instance-specs.csv; add one")
        ondemand = {float(z["Price"]) for z in zones if z["Price"]}
        if not ondemand:
            continue  # no on-demand price (p5e.48xlarge): not plannable
        if len(ondemand) > 1:
            raise SystemExit(f"{region} {itype}: several on-demand prices {sorted(ondemand)}")
        spot = sorted(
            (float(z["SpotPrice"]), z["AvailabilityZone"])
            for z in zones
            if z["SpotPrice"] and not LOCAL_ZONE.match(z["AvailabilityZone"])
        )
        first = zones[0]
        accelerator = first["AcceleratorName"]
        count = int(float(first["AcceleratorCount"] or 0))
        spec = specs[itype]
        peak = ACCELERATOR_PEAK_FLOPS[accelerator] * count if count else None
        found = advisor.get((region, itype))
        bucket, saving = found if found else (spec["interruption_bucket"], None)
        out.append(
            {
                "provider": "aws",
                "region": region,
                "instance_type": itype,
                "quota_group": spec["quota_group"],
                "vcpus": _number(first["vCPUs"]),
                "memory_gib": _number(first["MemoryGiB"]),
                "network_gbps": _number(spec["network_gbps"]),
                "accelerator_name": accelerator,
                "accelerator_count": count,
                "accelerator_memory_gib": _number(spec["accelerator_memory_gib"]),
                "peak_flops": f"{peak:.4g}" if peak else "",
                "ondemand_price": _number(ondemand.pop()),
                "spot_price": _number(spot[0][0]) if spot else "",
                "spot_zone": spot[0][1] if spot else "",
                "interruption_bucket": bucket,
                "interruption_source": "aws-spot-advisor" if found else "estimate",
                "interruption_date": ADVISOR_DATE if found else "",
                "regional_saving_pct": _number(saving) if saving is not None else "",
                "price_source": PRICE_SOURCE,
                "price_date": PRICE_DATE,
                "specs_source": "aws-docs (network: " + spec["network_note"] + ")",
            }
        )
    return out


def published_rows(catalog: list[dict[str, object]]) -> list[dict[str, object]]:
    _, rows = read_source(SOURCES / "published-throughput-lambda.csv")
    mixed = {r["gpu_label"]: r for r in rows if r["precision"] == "fp16"}
    out = []
    seen = set()
    for row in catalog:
        row_label = LAMBDA_ROW.get(str(row["accelerator_name"]))
        if row_label is None or row["instance_type"] in seen:
            continue
        seen.add(row["instance_type"])
        for column, (workload, flops_per_sample) in PUBLISHED.items():
            per_gpu = float(mixed[row_label][column])
            count = int(row["accelerator_count"])  # type: ignore[call-overload]
            task, task_transfer = PUBLISHED_TASK[column]
            transfers = [
                t
                for t in (
                    TYPE_TRANSFER.get(str(row["instance_type"]))
                    or GPU_TRANSFER.get(str(row["accelerator_name"])),
                    task_transfer,
                    f"1 -> {count} GPUs (x {count}, linear within a node)" if count > 1 else None,
                )
                if t
            ]
            basis = f"Lambda: {task}, mixed precision, 1 x {row_label.removeprefix('LambdaCloud ')}"
            out.append(
                {
                    "instance_type": row["instance_type"],
                    "workload": workload,
                    "flops": f"{per_gpu * flops_per_sample * count:.10g}",
                    "source": "transferred" if transfers else "published",
                    "basis": basis
                    + (f"; transferred: {', '.join(transfers)}" if transfers else ""),
                    "source_date": LAMBDA_DATE,
                    "lambda_gpu": row_label,
                    "samples_per_s_per_gpu": per_gpu,
                    "accelerator_count": count,
                }
            )
    return out


def utilisation_rows() -> list[dict[str, object]]:
    """Per workload and published GPU: the fraction of its peak FLOP/s reached. A
    GPU without a published row takes the fraction of the published GPU nearest
    to it in peak FLOP/s (faster GPUs reach a smaller fraction: 16 % on a V100,
    6 % on an H100 for ResNet-50)."""
    _, rows = read_source(SOURCES / "published-throughput-lambda.csv")
    mixed = [r for r in rows if r["precision"] == "fp16" and r["gpu_label"] in LAMBDA_PEAK]
    shares: dict[str, dict[str, float]] = {}
    for column, (workload, flops_per_sample) in PUBLISHED.items():
        shares[workload] = {
            r["gpu_label"]: float(r[column]) * flops_per_sample / LAMBDA_PEAK[r["gpu_label"]]
            for r in mixed
        }
    out = []
    for workload, like in [*CALIBRATED_LIKE.items(), ("*", None)]:
        for gpu, peak in LAMBDA_PEAK.items():
            if like is None:
                share = statistics.median(by_gpu[gpu] for by_gpu in shares.values())
                basis = f"median over the published workloads on {gpu}"
            else:
                share = shares[like][gpu]
                basis = f"published {like} on {gpu} (mixed precision)"
            out.append(
                {
                    "workload": workload,
                    "peak_flops": f"{peak:.4g}",
                    "utilisation": f"{share:.6g}",
                    "basis": basis,
                }
            )
    return out


def overhead_rows(catalog: list[dict[str, object]]) -> list[dict[str, object]]:
    """The MLPerf fits of 8-GPU A100/H100 types, the paper's fits, and the
    conservative default (``*``, ``*``) for every other type."""
    blank = {p: "" for p in ("a", "b", "c", "p", "alpha", "beta")}
    results = catalog_scaling.read_results(SOURCES / MLPERF_FILE)
    out = catalog_scaling.overhead_rows(catalog, results)
    for itype, (a, b, c) in PAPER_FITS.items():
        out.append(
            {
                "instance_type": itype,
                "workload": "*",
                "model": "deepvm",
                **{**blank, "a": a, "b": b, "c": c},
                "source": "transferred",
                "basis": "the DeepVM paper's fit for this type (Kim et al., CCGrid 2024), "
                "measured on ResNet training; transferred: to every workload",
                "source_date": "2024",
                "fit_rmse": "",
            }
        )
    out.append(
        {
            "instance_type": "*",
            "workload": "*",
            "model": "amdahl",
            **{**blank, "p": DEFAULT_AMDAHL_P},
            "source": "estimate",
            "basis": "no published multi-node result for this type: a conservative "
            f"default, Amdahl p = {DEFAULT_AMDAHL_P:g} (1.8x on 2 nodes, 4.7x on 8)",
            "source_date": "",
            "fit_rmse": "",
        }
    )
    return out


def _number(value: object) -> str:
    return f"{float(value):.10g}"  # type: ignore[arg-type]


def render(rows: list[dict[str, object]], header: str) -> str:
    buffer = io.StringIO()
    buffer.write(f"# source: {header}\n")
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def outputs() -> dict[Path, str]:
    vms_source, _ = read_source(SOURCES / "aws-vms-skypilot-v8.csv")
    lambda_source, _ = read_source(SOURCES / "published-throughput-lambda.csv")
    mlperf_source, _ = read_source(SOURCES / MLPERF_FILE)
    advisor_source = (SOURCES / f"{ADVISOR_FEED}.source").read_text().strip()
    catalog = catalog_rows()
    gcp_catalog = catalog_gcp.gcp_rows(ACCELERATOR_PEAK_FLOPS)
    azure_catalog = catalog_azure.azure_rows(ACCELERATOR_PEAK_FLOPS)
    return {
        OUT / "catalog-aws.csv": render(
            catalog,
            f"built by scripts/build_catalog.py from datasets/sources: prices {vms_source} "
            "(snapshot date not recorded; 2025 or later); specs aws-instance-specs.csv; "
            f"interruption buckets and regional savings {ADVISOR_FEED} "
            f"({advisor_source.removeprefix('# source:').strip()})",
        ),
        OUT / "catalog-gcp.csv": render(
            gcp_catalog,
            "built by scripts/build_catalog.py (scripts/catalog_gcp.py) from datasets/sources: "
            f"prices {read_source(SOURCES / catalog_gcp.ATTACH)[0]}, GPU part plus host VM "
            f"({', '.join(catalog_gcp.HOSTS)}); network and GPU memory {catalog_gcp.SPECS} "
            "(network: estimate)",
        ),
        OUT / "catalog-azure.csv": render(
            azure_catalog,
            "built by scripts/build_catalog.py (scripts/catalog_azure.py) from datasets/sources: "
            f"prices {read_source(SOURCES / catalog_azure.VMS)[0].split(';')[0]}; quota "
            f"families, network and GPU memory {catalog_azure.SPECS} (network: estimate)",
        ),
        OUT / "overhead-default.csv": render(
            overhead_rows([*catalog, *gcp_catalog, *azure_catalog]),
            f"built by scripts/build_catalog.py: MLPerf fits from {mlperf_source}; the DeepVM "
            "paper's fits; the conservative default",
        ),
        OUT / "throughput-published.csv": render(
            published_rows([*catalog, *gcp_catalog, *azure_catalog]),
            f"built by scripts/build_catalog.py from {lambda_source} (fp16 rows)",
        ),
        OUT / "utilisation-estimates.csv": render(
            utilisation_rows(),
            f"built by scripts/build_catalog.py from {lambda_source} (fp16 rows)",
        ),
    }


def same_numbers(old: str, new: str, rtol: float = 1e-6) -> bool:
    """Whether two renderings say the same: the same text, numbers within ``rtol``
    (another numeric library may round the last digits of a fit differently), and
    a deepvm speedup model by its curve, not its (a, b, c), of which c cancels."""
    if old == new:
        return True
    old_lines, new_lines = old.splitlines(), new.splitlines()
    comments = (
        [x for x in old_lines if x.startswith("#")],
        [x for x in new_lines if x.startswith("#")],
    )
    if comments[0] != comments[1] or len(old_lines) != len(new_lines):
        return False
    rows = [
        list(csv.DictReader(x for x in lines if not x.startswith("#")))
        for lines in (old_lines, new_lines)
    ]
    for a, b in zip(*rows, strict=True):
        if a.keys() != b.keys():
            return False
        curve = a.get("model") == b.get("model") == "deepvm"
        for key in a:
            if curve and key in ("a", "b", "c"):
                continue
            if not _same_cell(a[key], b[key], rtol):
                return False
        if curve and not _same_curve(a, b, rtol):
            return False
    return True


def _same_cell(x: str, y: str, rtol: float) -> bool:
    if x == y:
        return True
    try:
        return math.isclose(float(x), float(y), rel_tol=rtol, abs_tol=1e-12)
    except ValueError:
        return False


def _same_curve(a: dict[str, str], b: dict[str, str], rtol: float) -> bool:
    from deepvm.performance.overhead import deepvm_factor

    n = np.arange(1, 257)
    first = deepvm_factor(n, *(float(a[k]) for k in ("a", "b")))
    second = deepvm_factor(n, *(float(b[k]) for k in ("a", "b")))
    return bool(np.allclose(first, second, rtol=rtol, atol=1e-9))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is out of date")
    args = parser.parse_args()
    stale = []
    for path, text in outputs().items():
        if args.check:
            if not path.exists() or not same_numbers(path.read_text(), text):
                stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)} ({text.count(chr(10)) - 2} rows)")
    if stale:
        print(f"out of date: {', '.join(stale)}; run python scripts/build_catalog.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
