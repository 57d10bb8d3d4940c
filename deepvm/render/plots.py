"""PNG figures (matplotlib, headless). Needs the ``plot`` extra."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from deepvm.base.errors import DeepvmError

__all__ = [
    "backtest_figure",
    "check_available",
    "compare_figure",
    "fit_figure",
    "plot_backtest",
    "plot_compare",
    "plot_fits",
    "plot_sweep",
    "sweep_figure",
]


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
    """One PNG per (instance type, workload): every fitted curve (the selected one
    thick), the measured speedups drawn over them, whole node counts on the x
    axis, the legend below the axes so that it hides no point."""
    plt = _pyplot()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    groups: dict[tuple[str, str], list] = {}
    for f in fits:
        groups.setdefault((f.instance_type, f.workload), []).append(f)
    for (itype, workload), group in groups.items():
        measured = points[(points["instance_type"] == itype) & (points["workload"] == workload)]
        fig = fit_figure(group, measured, f"{itype} / {workload}")
        path = out / (re.sub(r"[^A-Za-z0-9._-]+", "_", f"{itype}__{workload}") + ".png")
        written.append(_save(fig, path))
        plt.close(fig)
    return written


def fit_figure(group: Sequence, measured: pd.DataFrame, title: str) -> Any:
    """One group's figure (see plot_fits)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    top = int(max(measured["n_nodes"].max() * 1.5, 4))
    n = np.arange(1, top + 1)
    fig, ax = plt.subplots(figsize=(7, 5.6), dpi=110)
    for f in sorted(group, key=lambda f: f.selected):  # the selected one last, on top
        ax.plot(
            n,
            f.model(n),
            lw=3 if f.selected else 1.2,
            alpha=1 if f.selected else 0.6,
            zorder=3 if f.selected else 2,
            label=f"{f.model.describe()}  loo rmse {f.loo_rmse:.3g}"
            + ("  (selected)" if f.selected else ""),
        )
    ax.scatter(
        measured["n_nodes"],
        measured["speedup"],
        s=42,
        color="black",
        edgecolor="white",
        linewidth=1.2,
        zorder=10,
        label="measured",
    )
    # The y range the data and the selected curve need (a diverging model would flatten them).
    selected = [f for f in group if f.selected] or group
    high = max(float(measured["speedup"].max()), *(float(np.max(f.model(n))) for f in selected))
    ax.set_ylim(0, high * 1.15 + 0.1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("nodes n")
    ax.set_ylabel("speedup s(n) = duration(1) / duration(n)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
    fig.tight_layout()
    return fig


def _save(fig: object, path: str | Path) -> Path:
    """Save atomically: a half-written PNG never replaces a good one."""
    from deepvm.base.output_files import atomic_output

    with atomic_output(path) as tmp:
        # "tight": the saved image grows to hold a legend placed outside the axes
        fig.savefig(tmp, bbox_inches="tight", pad_inches=0.15)  # type: ignore[attr-defined]
    return Path(path)


def plot_sweep(
    results: pd.DataFrame, path: str | Path, title: str, prices_snapshot: str = ""
) -> Path:
    """Normalised performance of every policy against the hourly budget (the
    DeepVM paper's simulation figure): one line per policy; the title names the
    catalog and the date its prices refer to."""
    plt = _pyplot()
    fig = sweep_figure(results, title, prices_snapshot)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def sweep_figure(results: pd.DataFrame, title: str, prices_snapshot: str = "") -> Any:
    """The sweep's figure (see plot_sweep)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    for policy, rows in results.groupby("policy", sort=False):
        rows = rows.sort_values("budget")
        ax.plot(rows["budget"], rows["normalized"], marker=".", ms=3, lw=1.5, label=policy)
    ax.set_xlabel("pricing willingness (budget, USD per hour)")
    ax.set_ylabel("normalised performance (1 = deepvm at the top budget)")
    ax.set_title(title + (f"\nprices: {prices_snapshot}" if prices_snapshot else ""), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_compare(rows: pd.DataFrame, path: str | Path, title: str) -> Path:
    """Each compared cluster's expected makespan and expected total cost, as
    horizontal bars (the cluster names stay readable), the total and its $/h
    written beside the cost bar, coloured by the rule that picked it (the
    legend). The DeepVM paper's AWS figure."""
    plt = _pyplot()
    fig = compare_figure(rows, title)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def compare_figure(rows: pd.DataFrame, title: str) -> Any:
    """The comparison's figure (see plot_compare)."""
    plt = _pyplot()
    rows = rows.reset_index(drop=True)
    colours = {"deepvm": "tab:blue", "cost_first": "tab:orange", "performance_first": "tab:green"}
    colour = [colours.get(str(p), "tab:gray") for p in rows["policy"]]
    labels = [f"{r.label}\n{r.cluster}" for r in rows.itertuples()]
    y = np.arange(len(rows))[::-1]  # the first row on top
    height = 1.6 + 0.7 * len(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, height), dpi=110, sharey=True)
    left.barh(y, rows["expected_makespan_h"], color=colour)
    right.barh(y, rows["expected_total_cost"], color=colour)
    for k, r in enumerate(rows.itertuples()):
        right.text(
            float(r.expected_total_cost),
            y[k],
            f"  ${r.expected_total_cost:,.0f} (${r.hourly_cost:.2f}/h)",
            va="center",
            fontsize=8,
        )
    left.set_yticks(y, labels, fontsize=8)
    left.set_xlabel("expected makespan (hours)")
    right.set_xlabel("expected total cost (USD)")
    right.set_xlim(0, float(rows["expected_total_cost"].max()) * 1.35)
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="x")
    from matplotlib.patches import Patch

    shown = dict.fromkeys(str(p) for p in rows["policy"])
    fig.legend(
        handles=[Patch(color=colours.get(p, "tab:gray"), label=f"picked by {p}") for p in shown],
        fontsize=8,
        loc="lower center",
        ncol=len(shown),
        frameon=False,
    )
    fig.suptitle(title, fontsize=10)
    # Room for the cluster names on the left and the legend below (no tight_layout:
    # it cannot size shared axes with long tick labels).
    fig.subplots_adjust(
        left=0.3, right=0.98, top=1 - 0.6 / height, bottom=1.1 / height, wspace=0.05
    )
    return fig


def plot_backtest(series: pd.DataFrame, path: str | Path, title: str) -> Path:
    """A backtest's cumulative work and cost per policy over the nights
    (deepvm.nightly.backtest): two panels, one line per policy."""
    plt = _pyplot()
    fig = backtest_figure(series, title)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def backtest_figure(series: pd.DataFrame, title: str) -> Any:
    """The backtest's figure (see plot_backtest)."""
    plt = _pyplot()
    fig, (work, cost) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=110)
    for policy, rows in series.groupby("policy", sort=False):
        nights = pd.to_datetime(rows["night"])
        work.plot(nights, rows["work_flops"] / 1e18, lw=1.5, label=policy)
        cost.plot(nights, rows["cost_usd"], lw=1.5, label=policy)
    work.set_ylabel("cumulative work (EFLOP)")
    cost.set_ylabel("cumulative cost (USD)")
    for ax in (work, cost):
        ax.grid(alpha=0.3)
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    work.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
