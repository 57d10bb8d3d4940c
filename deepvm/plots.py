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
