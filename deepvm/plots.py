"""PNG figures (matplotlib, headless). Needs the ``plot`` extra."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from deepvm.errors import DeepvmError


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise DeepvmError("plots need matplotlib: pip install 'deepvm[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_available() -> None:
    """Raise the install hint now, before any long work whose result is to be drawn."""
    _pyplot()


def plot_fits(fits: Sequence, points: pd.DataFrame, folder: str | Path) -> list[Path]:
    """One PNG per (instance type, workload): the measured speedups, every fitted
    curve, the selected one drawn thick."""
    plt = _pyplot()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    groups: dict[tuple[str, str], list] = {}
    for f in fits:
        groups.setdefault((f.instance_type, f.workload), []).append(f)
    for (itype, workload), group in groups.items():
        measured = points[(points["instance_type"] == itype) & (points["workload"] == workload)]
        top = int(max(measured["n_nodes"].max() * 1.5, 4))
        n = np.arange(1, top + 1)
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        for f in group:
            ax.plot(
                n,
                f.model(n),
                lw=3 if f.selected else 1.2,
                alpha=1 if f.selected else 0.7,
                label=f"{f.model.describe()}  loo rmse {f.loo_rmse:.3g}"
                + ("  (selected)" if f.selected else ""),
            )
        ax.scatter(
            measured["n_nodes"], measured["speedup"], color="black", zorder=5, label="measured"
        )
        ax.set_xlabel("nodes n")
        ax.set_ylabel("speedup s(n) = duration(1) / duration(n)")
        ax.set_title(f"{itype} / {workload}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        path = out / (re.sub(r"[^A-Za-z0-9._-]+", "_", f"{itype}__{workload}") + ".png")
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def _save(fig: object, path: str | Path) -> Path:
    """Save atomically: a half-written PNG never replaces a good one."""
    import os
    import uuid

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp.png")
    try:
        fig.savefig(tmp)  # type: ignore[attr-defined]
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def plot_sweep(results: pd.DataFrame, path: str | Path, title: str) -> Path:
    """Normalised performance of every policy against the hourly budget (the
    DeepVM paper's simulation figure): one line per policy."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    for policy, rows in results.groupby("policy", sort=False):
        rows = rows.sort_values("budget")
        ax.plot(rows["budget"], rows["normalized"], marker=".", ms=3, lw=1.5, label=policy)
    ax.set_xlabel("pricing willingness (budget, USD per hour)")
    ax.set_ylabel("normalised performance (1 = deepvm at the top budget)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_compare(rows: pd.DataFrame, path: str | Path, title: str) -> Path:
    """Expected makespan and hourly price of each compared cluster, side by side
    (the DeepVM paper's AWS figure)."""
    plt = _pyplot()
    labels = [f"{r.label}\n{r.cluster}" for r in rows.itertuples()]
    x = np.arange(len(rows))
    fig, left = plt.subplots(figsize=(max(6.0, 1.6 * len(rows)), 4.8), dpi=110)
    right = left.twinx()
    left.bar(x - 0.2, rows["expected_makespan_h"], width=0.4, color="tab:blue", label="makespan")
    right.bar(x + 0.2, rows["hourly_cost"], width=0.4, color="tab:orange", label="$/h")
    left.set_ylabel("expected makespan (hours)", color="tab:blue")
    right.set_ylabel("price (USD per hour)", color="tab:orange")
    left.set_xticks(x, labels, fontsize=7)
    left.set_title(title)
    left.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
