"""Plots people can read, checked on the figures: no two cluster labels overlap,
the legend hides no measured point, whole node counts, points over curves, the
sweep's title names its prices; and the PNGs the commands write."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")
from PIL import Image

from deepvm.cli import main
from deepvm.performance.fitting import fit_group
from deepvm.performance.overhead import SpeedupModel
from deepvm.planner import compare, sweep
from deepvm.render.plots import compare_figure, fit_figure, sweep_figure


def boxes(fig, artists):
    renderer = fig.canvas.get_renderer()
    return [a.get_window_extent(renderer) for a in artists]


def overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_compare_labels_do_not_overlap_and_it_has_a_legend_and_total_cost():
    _, df = compare(10.0, 1e19)
    df["cluster"] = [f"{r.n_workers} x {r.worker_type}" for r in df.itertuples()]
    fig = compare_figure(df, "t")
    left, right = fig.axes
    labels = [t for t in left.get_yticklabels() if t.get_text()]
    assert len(labels) == len(df)
    assert not any(overlap(a, b) for a, b in itertools.combinations(boxes(fig, labels), 2))
    # every label is inside the figure (none cut off at the left edge)
    assert all(b.x0 >= 0 for b in boxes(fig, labels))
    assert fig.legends and "picked by deepvm" in [t.get_text() for t in fig.legends[0].texts]
    assert right.get_xlabel() == "expected total cost (USD)"
    widths = sorted(p.get_width() for p in right.patches)
    assert widths == pytest.approx(sorted(df["expected_total_cost"]))


def test_fit_legend_is_clear_of_the_points_and_the_axis_counts_nodes():
    nodes = np.array([1, 2, 4, 8])
    points = pd.DataFrame(
        {
            "instance_type": "g",
            "workload": "w",
            "n_nodes": nodes,
            "speedup": SpeedupModel("amdahl", {"p": 0.9})(nodes),
        }
    )
    fits = fit_group("g", "w", points["n_nodes"].to_numpy(), points["speedup"].to_numpy())
    fig = fit_figure(fits, points, "g / w")
    (ax,) = fig.axes
    legend = ax.get_legend()
    (axes_box,) = boxes(fig, [ax])
    assert not overlap(boxes(fig, [legend])[0], axes_box)  # below the axes, not on the data
    assert len(legend.get_texts()) == len(fits) + 1  # every model and the measured points
    fig.canvas.draw()
    ticks = [float(t) for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(t == int(t) for t in ticks)
    scatter = ax.collections[0]
    assert all(scatter.get_zorder() > line.get_zorder() for line in ax.get_lines())


def test_sweep_title_names_the_catalog_and_price_date():
    result = sweep([2.0, 4.0])
    fig = sweep_figure(result.results, "resnet50", result.prices_snapshot)
    title = fig.axes[0].get_title()
    label = "catalog-{aws,gcp,azure}.csv@2025"
    assert result.prices_snapshot == label and label in title


def test_the_commands_write_pngs_of_a_readable_size(tmp_path, capsys):
    sweep_png, compare_png = tmp_path / "s.png", tmp_path / "c.png"
    assert main(["sweep", "--budgets", "1:6:1", "--plot", str(sweep_png), "--json"]) == 0
    argv = ["compare", "--budget", "10", "--work", "1e19", "--plot", str(compare_png)]
    assert main([*argv, "--json"]) == 0
    for png, least in ((sweep_png, (700, 450)), (compare_png, (1000, 450))):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
        with Image.open(png) as img:
            assert img.size[0] >= least[0] and img.size[1] >= least[1]
