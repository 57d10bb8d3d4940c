"""Fitting the overhead models: recovery, selection, plots, planner integration."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from tests_paths import PAPER, PAPER_ARGS

from deepvm.base.errors import InputError
from deepvm.cli import main
from deepvm.performance.fitting import fit_all, fit_group, load_scaling
from deepvm.performance.overhead import SpeedupModel

NODES = [1, 2, 4, 6, 8, 12, 16, 20, 24, 32]


def noisy(model: SpeedupModel, sigma: float = 0.02, seed: int = 0, nodes=NODES):
    rng = np.random.default_rng(seed)
    s = model(nodes)
    return list(s * (1 + sigma * rng.standard_normal(len(nodes))))


@pytest.mark.parametrize(
    ("kind", "params", "tol"),
    [
        ("amdahl", {"p": 0.93}, {"p": 0.01}),
        ("usl", {"alpha": 0.03, "beta": 0.0008}, {"alpha": 0.01, "beta": 0.0004}),
        ("logistic", {"a": 0.25, "b": 14.0, "c": 12.0}, {"a": 0.05, "b": 1.5, "c": 1.0}),
    ],
)
def test_recovers_known_parameters_from_noisy_data(kind, params, tol):
    truth = SpeedupModel(kind, params)
    fits = {f.model.kind: f for f in fit_group("g", "w", NODES, noisy(truth))}
    got = fits[kind].model.params
    for name, value in params.items():
        assert got[name] == pytest.approx(value, abs=tol[name]), (name, got)
    assert fits[kind].r2 > 0.98


def test_logistic_fit_escapes_bad_starts():
    # Steep curve with a late inflection: a single default start lands badly.
    truth = SpeedupModel("logistic", {"a": 0.9, "b": 22.0, "c": 20.0})
    fits = {f.model.kind: f for f in fit_group("g", "w", NODES, noisy(truth, 0.005))}
    assert fits["logistic"].rmse < 0.3


@pytest.mark.parametrize(
    "truth",
    [
        SpeedupModel("linear"),
        SpeedupModel("amdahl", {"p": 0.9}),
        SpeedupModel("usl", {"alpha": 0.02, "beta": 0.004}),  # retrograde: peaks, then falls
    ],
)
def test_selection_picks_the_generating_model(truth):
    fits = fit_group("g", "w", NODES, noisy(truth, 0.01, seed=3))
    (selected,) = [f for f in fits if f.selected]
    assert selected.model.kind == truth.kind


def test_fewer_than_three_node_counts_is_skipped():
    points = pd.DataFrame(
        {
            "instance_type": ["g", "g"],
            "workload": ["w", "w"],
            "n_nodes": [1, 2],
            "speedup": [1.0, 1.8],
        }
    )
    report = fit_all(points)
    assert report.fits == [] and "at least 3" in report.skipped[("g", "w")]


def write(tmp_path, text, name="s.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "instance_type,workload,n_nodes,duration_s\ng,w,1,10\ng,w,1,9\n",
            "row 2: duplicate entry",
        ),
        (
            "instance_type,workload,n_nodes,duration_s\ng,w,1,10\ng,w,2,0\n",
            "row 2 (instance_type=g): duration_s=0 must be > 0",
        ),
        (
            "instance_type,workload,n_nodes,duration_s\ng,w,0,10\n",
            "row 1 (instance_type=g): n_nodes=0 must be >= 1",
        ),
        (
            "instance_type,workload,n_nodes,duration_s\ng,w,2,10\ng,w,4,6\n",
            "row 1: group g/w has durations but no n_nodes=1 row",
        ),
        ("instance_type,workload,n_nodes\ng,w,2\n", "needs a duration_s or a speedup column"),
    ],
)
def test_bad_scaling_input(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=re.escape(message)):
        load_scaling(path)
    assert main(["fit", "--scaling", path]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and path in err


def test_fit_cli_json_plot_and_store(tmp_path, capsys):
    truth = SpeedupModel("amdahl", {"p": 0.8})
    rows = [
        f"g4dn.xlarge,resnet50,{n},{100 / s:.6f}" for n, s in zip(NODES, truth(NODES), strict=True)
    ]
    path = write(tmp_path, "instance_type,workload,n_nodes,duration_s\n" + "\n".join(rows))
    store = tmp_path / "store"
    plots = tmp_path / "plots"
    assert (
        main(["fit", "--scaling", path, "--json", "--plot", str(plots), "--store", str(store)]) == 0
    )
    models = json.loads(capsys.readouterr().out)["models"]
    assert {m["model"] for m in models} == {"deepvm", "logistic", "amdahl", "usl", "linear"}
    (sel,) = [m for m in models if m["selected"]]
    assert sel["model"] in ("amdahl", "usl") and sel["loo_rmse"] < 0.01
    assert all(
        set(m)
        == {
            "instance_type",
            "workload",
            "model",
            "params",
            "rmse",
            "loo_rmse",
            "r2",
            "n_points",
            "selected",
        }
        for m in models
    )
    (png,) = list(plots.glob("*.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    from PIL import Image

    with Image.open(png) as img:
        assert img.size[0] > 400
    # the planner now uses the fitted, much worse-scaling model for g4dn.xlarge
    assert (
        main(
            [
                "recommend",
                "--budget",
                "3",
                "--json",
                "--store",
                str(store),
                "--top",
                "1",
                "--policy",
                "cost_first",
                "--cloud",
                "aws",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert rec["worker_type"] == "g4dn.xlarge" and rec["overhead_source"] == "measured"
    assert rec["overhead_basis"].startswith("fitted to deepvm's scaling runs")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", rec["overhead_date"])


def test_planner_answer_changes_when_a_fit_says_a_type_scales_worse(tmp_path, capsys):
    paper = [
        "--catalog",
        str(PAPER / "catalog.csv"),
        "--throughput",
        str(PAPER / "throughput.csv"),
        "--quotas",
        str(PAPER / "quotas.csv"),
    ]
    linear = write(tmp_path, "instance_type,workload,model\n*,resnet50,linear\n", "lin.csv")
    assert (
        main(["recommend", "--budget", "4", "--json", "--top", "1", "--overhead", linear, *paper])
        == 0
    )
    before = json.loads(capsys.readouterr().out)["recommendations"][0]
    bad = write(
        tmp_path,
        "instance_type,workload,n_nodes,speedup\n"
        + "\n".join(
            f"{before['worker_type']},resnet50,{n},{s:.6f}"
            for n, s in zip(NODES, SpeedupModel("amdahl", {"p": 0.5})(NODES), strict=True)
        ),
    )
    store = tmp_path / "store"
    assert main(["fit", "--scaling", bad, "--store", str(store)]) == 0
    capsys.readouterr()
    # store fits beat the shipped defaults, a user --overhead file beats both: use the
    # linear file only for the other types
    others = write(
        tmp_path,
        "instance_type,workload,model\n"
        + "\n".join(
            f"{t},resnet50,linear"
            for t in ("g3s.xlarge", "g4dn.xlarge", "g5.xlarge")
            if t != before["worker_type"]
        ),
        "others.csv",
    )
    assert (
        main(
            [
                "recommend",
                "--budget",
                "4",
                "--json",
                "--top",
                "1",
                "--overhead",
                others,
                "--store",
                str(store),
                *paper,
            ]
        )
        == 0
    )
    after = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert after["worker_type"] != before["worker_type"]


def test_saturation_override(tmp_path, capsys):
    paper = PAPER_ARGS
    assert main(["recommend", "--budget", "3", "--json", "--top", "1", *paper]) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert rec["architecture"] == "tiering" and rec["n_workers"] > 2
    one = write(tmp_path, "bandwidth_gbps,workers\n1,1\n100,1\n", "sat.csv")
    assert (
        main(["recommend", "--budget", "3", "--json", "--top", "1", "--saturation", one, *paper])
        == 0
    )
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    if rec["architecture"] == "tiering":  # one worker per remote node now
        assert rec["n_remote"] >= rec["n_workers"]
    bad = write(tmp_path, "bandwidth_gbps,workers\n1,10\n5,4\n", "bad.csv")
    assert main(["recommend", "--budget", "3", "--saturation", bad]) == 2
    assert "must not decrease" in capsys.readouterr().err


@pytest.mark.parametrize(
    "speedups",
    [[1, 1.8, 2.4, 2.8, 3.0, 3.1], [1, 0.97, 0.93, 0.9, 0.86, 0.83]],
    ids=["saturating", "slower-with-more-ranks"],
)
def test_the_deepvm_kind_is_fitted_on_its_own_curve(speedups):
    """Regression: deepvm reused the logistic's (a, b, c), so its curve n K(n) rose
    and fell away from the data (r2 -1.27 and -166 here; -0.22 in the README's
    figure where the logistic scored 0.996)."""
    from deepvm.performance.fitting import fit_group

    fits = {f.model.kind: f for f in fit_group("t", "w", [1, 2, 3, 4, 5, 6], speedups)}
    deepvm = fits["deepvm"]
    assert deepvm.r2 > 0.85
    assert deepvm.model.params != fits["logistic"].model.params
    curve = deepvm.model([1, 2, 3, 4, 5, 6])
    assert max(abs(c - s) for c, s in zip(curve, speedups, strict=True)) < 0.25


@pytest.mark.parametrize(
    ("kind", "theta"),
    [
        ("amdahl", [0.9]),
        ("usl", [0.03, 0.0008]),
        ("logistic", [0.25, 14.0, 12.0]),
        ("deepvm", [0.14, 5.5]),
        ("deepvm", [0.3, -4.0]),
    ],
)
def test_the_fits_analytic_jacobians_match_the_models(kind, theta):
    """The values are the models' own (deepvm.performance.overhead.speedup), and the Jacobian
    the fits use agrees with central differences of them."""
    from deepvm.performance.fitting import _model_and_jacobian
    from deepvm.performance.overhead import MODEL_PARAMS

    n = np.array(NODES, dtype=float) + 0.37 * (np.array(NODES) > 1)  # off the kink at b
    names = MODEL_PARAMS[kind]
    values, jac = _model_and_jacobian(kind, np.array(theta), n)
    model = SpeedupModel(kind, dict(zip(names, theta, strict=True)))
    assert np.allclose(values, model(n), rtol=1e-12)
    for j in range(len(theta)):
        h = 1e-6 * max(1.0, abs(theta[j]))
        up, down = list(theta), list(theta)
        up[j] += h
        down[j] -= h
        numeric = (
            SpeedupModel(kind, dict(zip(names, up, strict=True)))(n)
            - SpeedupModel(kind, dict(zip(names, down, strict=True)))(n)
        ) / (2 * h)
        assert np.allclose(jac[:, j], numeric, rtol=1e-5, atol=1e-7), (kind, names[j])
