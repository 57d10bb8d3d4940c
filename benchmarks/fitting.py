"""`deepvm fit`'s cost (run by hand: `python benchmarks/fitting.py`; not in CI).

Side by side in one run, on the same groups: deepvm's fitting (deepvm.performance.fitting:
analytic Jacobians, leave-one-out fits started from the full fit's best minima)
and the reference it replaced (every start for the full fit and for each
leave-one-out fit, numerical Jacobians; the ``deepvm`` kind with its cancelling
plateau c as a third parameter). Groups: three of ten points (NODES; amdahl,
usl and logistic curves with 2 % noise) and the shipped data's MLPerf scaling
groups (datasets/sources, as scripts/build_catalog.py fits them). Prints CPU
seconds of each, and per group the selected kind and its RMSE and leave-one-out
RMSE for both. Target (issue 38): three groups of ten in under 1 s of CPU, the
same selected models and RMSE within 1 %.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from deepvm.performance.fitting import FIT_ORDER, SELECT_RTOL, fit_group
from deepvm.performance.overhead import SpeedupModel, logistic

NODES = [1, 2, 4, 6, 8, 12, 16, 20, 24, 32]
TRUTHS = [
    SpeedupModel("amdahl", {"p": 0.93}),
    SpeedupModel("usl", {"alpha": 0.03, "beta": 0.0008}),
    SpeedupModel("logistic", {"a": 0.25, "b": 14.0, "c": 12.0}),
]


def groups() -> list[tuple[str, list[int], list[float]]]:
    rng = np.random.default_rng(0)
    out = []
    for truth in TRUTHS:
        s = truth(NODES) * (1 + 0.02 * rng.standard_normal(len(NODES)))
        out.append((f"synthetic {truth.kind}", NODES, [float(v) for v in s]))
    import catalog_scaling

    results = catalog_scaling.read_results(
        Path(__file__).resolve().parents[1] / "datasets" / "sources" / catalog_scaling.MLPERF_FILE
        if hasattr(catalog_scaling, "MLPERF_FILE")
        else Path(__file__).resolve().parents[1]
        / "datasets"
        / "sources"
        / "mlperf-training-resnet-bert.csv"
    )
    points = catalog_scaling.scaling_points(results)
    for (gpu, bench), g in points.groupby(["gpu", "benchmark"]):
        if g["n_nodes"].nunique() >= 2:
            nodes = [1, *g["n_nodes"].tolist()]
            out.append((f"MLPerf {bench} on {gpu}", nodes, [1.0, *g["speedup"].tolist()]))
    return out


# --- the reference: the fitting deepvm shipped before issue 38 -----------------


def _reference_curve(kind: str, theta: list[float], n: np.ndarray) -> np.ndarray:
    if kind == "amdahl":
        s = 1.0 / ((1.0 - theta[0]) + theta[0] / n)
    elif kind == "usl":
        s = n / (1.0 + theta[0] * (n - 1.0) + theta[1] * n * (n - 1.0))
    elif kind == "logistic":
        s = logistic(n, *theta)
    else:  # deepvm with (a, b, c): c cancels
        a, b, c = theta
        beyond = n > b
        tangent = np.where(beyond, (a * c / 4.0) * (n - b) + c / 2.0, 1.0)
        s = n * np.where(beyond, logistic(n, a, b, c) / tangent, 1.0)
    return np.where(n == 1, 1.0, s)


def _reference_params(kind: str, n: np.ndarray, y: np.ndarray) -> list[float]:
    from scipy.optimize import least_squares

    top_n, top_y = float(n.max()), float(max(y.max(), 1.0))
    if kind == "amdahl":
        starts, bounds = [[0.5], [0.9], [0.99]], ([0.0], [1.0])
    elif kind == "usl":
        starts = [[a, b] for a in (0.0, 0.05, 0.3) for b in (0.0, 1e-3, 1e-2)]
        bounds = ([0.0, 0.0], [10.0, 10.0])
    else:
        starts = [
            list(t)
            for t in itertools.product(
                (0.05, 0.2, 1.0), (top_n / 4, top_n / 2, top_n, 2 * top_n),
                (top_y, 2 * top_y, 4 * top_y),
            )
        ]  # fmt: skip
        bounds = ([1e-4, -top_n, 1e-3], [20.0, 20 * top_n, 100 * top_y])
    best_cost, best = math.inf, starts[0]
    for start in starts:
        x0 = np.clip(start, bounds[0], bounds[1])
        result = least_squares(
            lambda t: _reference_curve(kind, list(t), n) - y, x0, bounds=bounds,
            method="trf", max_nfev=2000,
        )  # fmt: skip
        if result.cost < best_cost:
            best_cost, best = float(result.cost), list(result.x)
    return best


def reference_fit(nodes: list[int], speedups: list[float]) -> tuple[str, float, float]:
    """The selected kind, its RMSE and leave-one-out RMSE, as the reference fits."""
    n_all, y_all = np.asarray(nodes, float), np.asarray(speedups, float)
    n, y = n_all[n_all >= 2], y_all[n_all >= 2]
    scores = {}
    for kind in FIT_ORDER:
        if kind == "linear":
            full, held = [], [[] for _ in n]
        else:
            full = _reference_params(kind, n, y)
            held = [
                _reference_params(kind, np.delete(n, k), np.delete(y, k)) for k in range(len(n))
            ]
        curve = (
            (lambda t, x: x)
            if kind == "linear"
            else (lambda t, x, k=kind: _reference_curve(k, t, x))
        )
        rmse = math.sqrt(float(np.mean((curve(full, n) - y) ** 2)))
        loo = [curve(held[k], n[k : k + 1])[0] - y[k] for k in range(len(n))]
        scores[kind] = (rmse, math.sqrt(float(np.mean(np.square(loo)))))
    best = min(s[1] for s in scores.values())
    chosen = next(k for k in FIT_ORDER if scores[k][1] <= best * (1 + SELECT_RTOL) + 1e-12)
    return chosen, *scores[chosen]


def main() -> None:
    data = groups()
    began = time.process_time()
    ours = []
    for _, nodes, speedups in data:
        chosen = next(f for f in fit_group("g", "w", nodes, speedups) if f.selected)
        ours.append((chosen.model.kind, chosen.rmse, chosen.loo_rmse))
    ours_cpu = time.process_time() - began
    began = time.process_time()
    theirs = [reference_fit(nodes, speedups) for _, nodes, speedups in data]
    reference_cpu = time.process_time() - began
    synthetic = sum(1 for name, _, _ in data if name.startswith("synthetic"))
    began = time.process_time()
    for _, nodes, speedups in data[:synthetic]:
        fit_group("g", "w", nodes, speedups)
    three = time.process_time() - began
    began = time.process_time()
    for _, nodes, speedups in data[:synthetic]:
        reference_fit(nodes, speedups)
    three_reference = time.process_time() - began
    print(f"{len(data)} groups: deepvm {ours_cpu:.2f} s CPU, the reference {reference_cpu:.2f} s "
          f"-> {reference_cpu / ours_cpu:.1f}x; the three groups of ten alone: {three:.2f} s "
          f"against {three_reference:.2f} s (target < 1 s)")  # fmt: skip
    for (name, _, _), mine, ref in zip(data, ours, theirs, strict=True):
        same = "same" if mine[0] == ref[0] else "DIFFERENT"
        change = (mine[1] - ref[1]) / ref[1] if ref[1] else 0.0
        print(f"  {name}: {mine[0]} rmse {mine[1]:.4g} loo {mine[2]:.4g} | reference {ref[0]} "
              f"rmse {ref[1]:.4g} loo {ref[2]:.4g} ({same} model, rmse {change:+.2%})")  # fmt: skip


if __name__ == "__main__":
    main()
