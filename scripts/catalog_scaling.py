"""Multi-node speedup of 8-GPU A100 and H100 nodes from MLPerf Training results,
fitted with deepvm's own fitting, as rows of ``datasets/overhead-default.csv``
(used by scripts/build_catalog.py).

Points: within one round and one submitter, the 1-node run of a GPU and
benchmark against that submitter's n-node runs of the same GPU and benchmark,
speedup = time to train (1 node) / time to train (n nodes). Closed division
only (the open division may change the model); 2 <= n <= 16 (at hundreds of
nodes submitters change the global batch and the optimiser's settings, which
says nothing about the 2-16 nodes a team rents); a submitter with several
1-node runs of one GPU and benchmark in a round (Supermicro's variants) gives
no point, since which one its n-node run scales is not known.

Time to train is a conservative bound on per-step speedup: n nodes train with
an n times larger global batch, which needs more epochs to converge, so the
time-to-train speedup is at most the per-step (throughput) speedup.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from deepvm.performance.fitting import fit_group
from deepvm.performance.overhead import MODEL_PARAMS

MAX_NODES = 16
# The commit date of each round's results repository as read (the file's source line).
ROUND_DATES = {"v2.1": "2023-05-18", "v3.1": "2025-01-14", "v4.0": "2024-06-11"}
# MLPerf accelerator names -> deepvm's accelerator names (8-GPU SXM nodes only).
GPUS = {"A100-80GB": ("A100-SXM", "80GB"), "H100": ("H100-SXM", "")}
BENCHMARKS = {"resnet": "ResNet-50", "bert": "BERT-large pretraining"}
# The shipped types whose nodes are 8 of these GPUs, and what each is to the data:
# (the MLPerf GPU it takes, and the transfer where it is not that GPU).
NODE_TYPES = {
    ("A100-80GB", 8): ("A100-80GB", None),
    ("A100", 8): ("A100-80GB", "A100 SXM4 80GB -> 40GB"),
    ("H100", 8): ("H100", None),
}
# deepvm workload -> (the benchmark it takes, the transfer where it is not that one).
WORKLOAD_BENCHMARK = {
    "resnet50": ("resnet", None),
    "resnet18": ("resnet", "ResNet-50 -> ResNet-18"),
    "tiny": ("resnet", "ResNet-50 -> the tiny CNN"),
    "bert-base": ("bert", "BERT-large pretraining -> bert-base masked LM"),
    "vit-b16": ("bert", "BERT-large pretraining -> ViT-B/16"),
    "gpt2": ("bert", "BERT-large pretraining -> GPT-2"),
}


@dataclass(frozen=True)
class ScalingFit:
    gpu: str
    benchmark: str
    kind: str
    params: dict[str, float]
    rmse: float
    points: pd.DataFrame  # round, submitter, system, n_nodes, speedup

    @property
    def date(self) -> str:
        """The newest results repository date among the fit's points."""
        return max(ROUND_DATES[r] for r in set(self.points["round"]))

    def speedup_at(self, n: int) -> float:
        from deepvm.performance.overhead import SpeedupModel

        return float(SpeedupModel(self.kind, self.params)(n))

    def describe(self) -> str:
        counts = sorted(set(self.points["n_nodes"]))
        rounds = sorted(set(self.points["round"]))
        submitters = ", ".join(sorted(set(self.points["submitter"])))
        return (
            f"MLPerf Training {'/'.join(rounds)} closed ({submitters}): "
            f"{BENCHMARKS[self.benchmark]} time to train on {counts[0]}-{counts[-1]} nodes of "
            f"8 x {self.gpu} SXM; {self.kind} fit, rmse {self.rmse:.3f}"
        )


def gpu_of(accelerator: str) -> str | None:
    for gpu, (family, memory) in GPUS.items():
        if family in accelerator and memory in accelerator:
            return gpu
    return None


def read_results(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, comment=None, skiprows=1)


def scaling_points(results: pd.DataFrame) -> pd.DataFrame:
    """gpu, benchmark, round, submitter, system, n_nodes, speedup (module doc)."""
    rows = results[
        (results["division"] == "closed")
        & (results["acc_per_node"] == 8)
        & (results["runs_success"] > 0)
    ].copy()
    rows["gpu"] = rows["accelerator"].map(gpu_of)
    rows = rows[rows["gpu"].notna()]
    out = []
    for (rnd, submitter, gpu, benchmark), group in rows.groupby(
        ["round", "submitter", "gpu", "benchmark"], sort=True
    ):
        one = group[group["nodes"] == 1]
        if len(one) != 1:
            continue
        base = float(one["ttt_minutes_olympic_mean"].iloc[0])
        for r in group[(group["nodes"] > 1) & (group["nodes"] <= MAX_NODES)].itertuples():
            out.append(
                {
                    "gpu": gpu,
                    "benchmark": benchmark,
                    "round": rnd,
                    "submitter": submitter,
                    "system": r.system,
                    "n_nodes": int(r.nodes),
                    "speedup": base / float(r.ttt_minutes_olympic_mean),
                }
            )
    return pd.DataFrame(out).sort_values(["gpu", "benchmark", "n_nodes", "round", "submitter"])


def fits(results: pd.DataFrame) -> dict[tuple[str, str], ScalingFit]:
    """The selected fit per (gpu, benchmark)."""
    out = {}
    for (gpu, benchmark), group in scaling_points(results).groupby(["gpu", "benchmark"]):
        chosen = next(
            f
            for f in fit_group(gpu, benchmark, group["n_nodes"].tolist(), group["speedup"].tolist())
            if f.selected
        )
        out[gpu, benchmark] = ScalingFit(
            str(gpu),
            str(benchmark),
            chosen.model.kind,
            dict(chosen.model.params),
            chosen.rmse,
            group.reset_index(drop=True),
        )
    return out


def overhead_rows(
    catalog: list[dict[str, object]], results: pd.DataFrame
) -> list[dict[str, object]]:
    """Rows of overhead-default.csv for every shipped 8-GPU A100/H100 type: one per
    sample workload, and a ``*`` row (any other workload) taking the more
    conservative of the two fits at 8 nodes."""
    fitted = fits(results)
    out = []
    seen = set()
    for row in catalog:
        key = (str(row["accelerator_name"]), int(row["accelerator_count"]))  # type: ignore[call-overload]
        itype = str(row["instance_type"])
        if key not in NODE_TYPES or itype in seen:
            continue
        seen.add(itype)
        gpu, gpu_transfer = NODE_TYPES[key]
        conservative = min(
            (fitted[gpu, b] for b in BENCHMARKS), key=lambda f: f.speedup_at(8)
        ).benchmark
        targets = [*WORKLOAD_BENCHMARK.items(), ("*", (conservative, "to any other workload"))]
        for workload, (benchmark, task_transfer) in targets:
            fit = fitted[gpu, benchmark]
            transfers = [t for t in (gpu_transfer, task_transfer) if t]
            basis = fit.describe() + (f"; transferred: {', '.join(transfers)}" if transfers else "")
            out.append(
                {
                    "instance_type": itype,
                    "workload": workload,
                    "model": fit.kind,
                    **{p: _param(fit, p) for p in ("a", "b", "c", "p", "alpha", "beta")},
                    "source": "transferred" if transfers else "published",
                    "basis": basis,
                    "source_date": fit.date,
                    "fit_rmse": f"{fit.rmse:.6g}",
                }
            )
    return out


def _param(fit: ScalingFit, name: str) -> str:
    return f"{fit.params[name]:.6g}" if name in MODEL_PARAMS[fit.kind] else ""


def summary(results: pd.DataFrame) -> str:
    """One line per fit: its speedups at 2, 4, 8 and 16 nodes against the points."""
    lines = []
    for (gpu, benchmark), fit in fits(results).items():
        model = ", ".join(f"{n}: {fit.speedup_at(n):.2f}" for n in (2, 4, 8, 16))
        observed = ", ".join(
            f"{n}: {statistics.mean(g['speedup']):.2f}" for n, g in fit.points.groupby("n_nodes")
        )
        lines.append(f"{gpu} {benchmark}: fit {model}; MLPerf mean {observed}")
    return "\n".join(lines)
