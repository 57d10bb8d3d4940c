"""Preemption-aware planning: interruption data, the goodput model, objectives
goodput and cost (exact against enumeration), deadlines, compare and plots."""

import json
import math
from dataclasses import replace

import duckdb
import numpy as np
import pandas as pd
import pytest
from helpers import job
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from milp_oracle import MilpPlanner
from test_milp_vs_enumeration import MAX_NODES, scenarios
from tests_paths import PAPER_ARGS

from deepvm.base.errors import InputError
from deepvm.catalog import load_catalog, load_interruptions, with_interruptions
from deepvm.catalog.advisor_buckets import INTERRUPTION_BUCKETS, bucket_rate
from deepvm.cli import main
from deepvm.performance.preemption import (
    efficiency,
    expected_makespan,
)
from deepvm.planner._exhaustive import best_configs, enumerate_feasible
from deepvm.planner._goodput import CheckpointCosts, config_risk, object_store_usd_per_hour
from deepvm.planner._policies import Planner
from deepvm.planner.candidates import (
    ARCHITECTURES,
    OBJECT_STORE,
    ON_DEMAND,
    SINGLE_ANCHOR,
    TIERING,
    Config,
    throughput,
)
from tests.helpers import whole


def test_buckets_and_shipped_rates():
    assert bucket_rate("<5%") == 0.025 and bucket_rate("5-10%") == 0.075
    assert bucket_rate(" 10 - 15 % ") == 0.125 and bucket_rate(">20%") == 0.30
    with pytest.raises(ValueError, match="unknown interruption bucket"):
        bucket_rate("25%")
    shipped = load_catalog(None, region="us-east-1").instances
    spot = shipped[shipped["spot_price"].notna()]
    assert spot["interruption_rate"].notna().all()
    assert set(spot["interruption_rate"]) <= set(INTERRUPTION_BUCKETS.values())
    assert shipped.set_index("instance_type").at["p5.48xlarge", "interruption_rate"] == 0.30


def test_interruption_override_file(tmp_path):
    path = tmp_path / "rates.csv"
    pd.DataFrame(
        {"instance_type": ["g5.xlarge", "p3.2xlarge"], "interruption_bucket": [">20%", "<5%"]}
    ).to_csv(path, index=False)
    catalog = with_interruptions(load_catalog(None, region="us-east-1"), load_interruptions(path))
    rates = catalog.instances.set_index("instance_type")["interruption_rate"]
    assert rates["g5.xlarge"] == 0.30 and rates["p3.2xlarge"] == 0.025
    # not named: the catalog's own (the Spot Instance Advisor's 15-20 % in us-east-1)
    assert rates["g4dn.xlarge"] == 0.175
    sources = catalog.instances.set_index("instance_type")["interruption_source"]
    assert (sources["g5.xlarge"], sources["g4dn.xlarge"]) == ("file", "aws-spot-advisor")
    pd.DataFrame({"instance_type": ["g5.xlarge"], "interruption_rate": [1.5]}).to_csv(
        path, index=False
    )
    with pytest.raises(InputError, match=r"'g5.xlarge'.*below 1"):
        load_interruptions(path)


def test_bad_bucket_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "rates.csv"
    path.write_text("instance_type,interruption_bucket\ng5.xlarge,often\n")
    assert main(["recommend", "--budget", "3", "--interruptions", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'g5.xlarge'" in err and "often" in err


def test_prices_refresh_stores_the_rates(tmp_path, capsys):
    assert main(["prices", "refresh", "--store", str(tmp_path), "--date", "2026-12-01"]) == 0
    capsys.readouterr()
    rows = (
        whole(tmp_path, "prices")
        .filter("instance_type = 'g5.xlarge'")
        .select("region, market, interruption_rate")
        .fetchall()
    )
    shipped = load_catalog().instances.set_index(["region", "instance_type"])["interruption_rate"]
    assert {(r, m): rate for r, m, rate in rows} == {
        **{(r, "spot"): shipped[r, "g5.xlarge"] for r in ("us-east-1", "us-west-2", "eu-west-1")},
        **{(r, "on_demand"): None for r in ("us-east-1", "us-west-2", "eu-west-1")},
    }


def test_goodput_model_hand_values():
    # One node, monthly fraction 0.1: h = -ln(0.9)/730 per hour.
    lam = -math.log(0.9) / 730 / 3600
    eff, tau = efficiency(np.array([lam]), 30.0, 300.0)
    want_tau = math.sqrt(2 * 30 / lam)
    want_eff = want_tau / (math.expm1(lam * (want_tau + 30)) * (1 / lam + 300))
    assert tau[0] == pytest.approx(want_tau) and eff[0] == pytest.approx(want_eff)
    # The vectorised efficiency agrees with expected_makespan.
    analytic = expected_makespan(100.0, lam, None, 30.0, 300.0)
    assert analytic.efficiency == pytest.approx(eff[0], rel=1e-9)
    assert efficiency(np.array([0.0]), 30.0, 300.0)[0][0] == 1.0

    from helpers import cpu_row, gpu_row, make_fleet

    fleet = make_fleet(
        [gpu_row("g", 1.0, 0.3, gbps=8), cpu_row("c", 0.1)],
        quotas={(g, m): 1000 for g in ("G", "standard") for m in ("spot", "on_demand")},
    )
    fleet = replace(fleet, gpu_interruption=np.array([0.1]))
    j = job(checkpoint_gb=2.0, versions=2)
    costs = CheckpointCosts(restart_s=100, disk_gb_per_s=0.5, object_store_gb_per_s=0.25)
    h = -math.log(0.9) / 730 / 3600
    cases = {  # architecture, n -> (spot nodes, stall s, restart s)
        (SINGLE_ANCHOR, 5): (4, 2 / 0.5, 100 + 8 * 2 / 8),
        (TIERING, 5): (5, 8 * 2 / 8, 100 + 8 * 2 / 8),
        (OBJECT_STORE, 5): (5, 2 / 0.25, 100 + 2 / 0.25),
        (ON_DEMAND, 5): (0, 0.0, 0.0),
    }
    for (arch, n), (spot, stall, restart) in cases.items():
        remote = (0, 1) if arch == TIERING else (None, 0)
        r = config_risk(fleet, Config(arch, 0, n, *remote), j, costs)
        assert r.rate_per_s[0] == pytest.approx(spot * h)
        assert r.stall_s[0] == pytest.approx(stall) and r.restart_s[0] == pytest.approx(restart)
    # 4 GB stored at $0.023/GB-month, 20 parts x 12 checkpoints/h x $0.005/1000 requests.
    assert object_store_usd_per_hour(j, costs) == pytest.approx(4 * 0.023 / 730 + 20 * 12 * 5e-6)


rates = st.lists(st.sampled_from([0.0, 0.025, 0.3, 0.9]), min_size=4, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenarios(),
    rates,
    st.sampled_from(["goodput", "cost"]),
    st.floats(0.5, 500.0),
    st.one_of(st.none(), st.floats(0.05, 50.0)),
    st.sampled_from(["numpy", "milp"]),
)
def test_risk_objectives_equal_enumeration(scenario, monthly, objective, hours, deadline, solver):
    """Exact over the same candidates; goodput never picks a dominated cluster."""
    fleet, budget, checkpoint = scenario
    fleet = replace(fleet, gpu_interruption=np.array(monthly[: len(fleet.gpu_types)]))
    assume(solver == "numpy" or len(fleet.regions) == 1)  # the MILP plans one region
    j = job(checkpoint_gb=checkpoint)
    work = 3e13 * 3600 * hours
    deadline = deadline if objective == "cost" else None
    make = Planner if solver == "numpy" else MilpPlanner
    planner = make(
        fleet,
        j,
        objective=objective,
        budget_cap=budget,
        max_nodes=MAX_NODES,
        work_flops=work,
        deadline_h=deadline,
        # Slow checkpoints and long restarts, so that efficiencies differ widely.
        checkpoint_costs=CheckpointCosts(
            restart_s=20000, disk_gb_per_s=0.002, object_store_gb_per_s=0.001
        ),
    )
    got = planner.optimise("deepvm", budget, 1)
    fleet = planner.offers  # with the object-store cost
    costs = planner.costs
    rows = []
    for config, cost in enumerate_feasible(
        fleet, j, budget, architectures=ARCHITECTURES, max_nodes=MAX_NODES
    ):
        flops = throughput(fleet, config)
        r = config_risk(fleet, config, j, costs, work / flops)
        makespan_h = work / (flops * r.efficiency[0]) / 3600
        if deadline is not None and makespan_h > deadline * (1 + 1e-9):
            continue
        score = flops * r.efficiency[0] if objective == "goodput" else -makespan_h * cost
        rows.append((config, cost, score, flops, r))
    want = best_configs([(c, cost, s) for c, cost, s, _, _ in rows], top=1)
    assert len(got) == len(want)
    if not got:
        return
    config = got[0][0]
    mine = next(row for row in rows if row[0] == config)
    assert mine[2] == pytest.approx(want[0][2], rel=1e-6)
    if objective == "goodput":
        for other, cost, _, flops, r in rows:
            strictly = (
                flops > mine[3] * (1 + 1e-9)
                or cost < mine[1] * (1 - 1e-9)
                or r.rate_per_s[0] < mine[4].rate_per_s[0] * (1 - 1e-9)
            )
            dominates = (
                flops >= mine[3]
                and cost <= mine[1]
                and r.rate_per_s[0] <= mine[4].rate_per_s[0]
                and r.stall_s[0] <= mine[4].stall_s[0]
                and r.restart_s[0] <= mine[4].restart_s[0]
            )
            assert not (dominates and strictly), (config, other)


def test_cost_objective_needs_work_and_deadline_message(capsys):
    assert main(["recommend", "--budget", "3", "--objective", "cost"]) == 2
    assert "--work" in capsys.readouterr().err
    args = ["recommend", "--budget", "3", "--objective", "cost", "--work", "2.8e18"]
    assert main([*args, "--json"]) == 0
    fine = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert fine["expected_makespan_h"] > 0 and fine["expected_total_cost"] > 0
    assert main([*args, "--deadline-h", "0.1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "0.1 h deadline" in err and "the fastest" in err
    fastest = float(err.split("takes ")[1].split(" h")[0])
    assert fastest > 0.1
    # The fastest makespan is achievable: with that deadline the job is feasible.
    assert main([*args, "--deadline-h", f"{fastest * 1.01:.6g}", "--json"]) == 0
    met = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert met["expected_makespan_h"] <= fastest * 1.01
    assert main(["recommend", "--budget", "3", "--deadline-h", "5"]) == 2
    assert "--deadline-h 5 applies to objective cost" in capsys.readouterr().err


def test_simulate_a_catalog_configuration(capsys):
    args = ["simulate", "preemption", "--instance-type", "g4dn.xlarge", "--n-workers", "16"]
    args += ["--region", "us-east-1"]
    assert main([*args, "--work", "1e18", "--runs", "4000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    sim, analytic = out["simulated"], out["analytic"]
    assert sim["makespan_h_mean"] == pytest.approx(analytic["makespan_h"], rel=0.05)
    assert sim["cost_mean"] > 0 and 0 < analytic["efficiency"] < 1
    assert main([*args, "--architecture", "tiering", "--work-hours", "3"]) == 2
    assert "--remote-type" in capsys.readouterr().err
    tiering = [
        *args,
        "--architecture",
        "tiering",
        "--remote-type",
        "c3.xlarge",
        "--work-hours",
        "3",
    ]
    assert main(tiering) == 2  # 16 workers, one 0.3 Gbps remote node: saturated
    assert "network saturation" in capsys.readouterr().err


def test_compare_and_sweep_plots(tmp_path, capsys):
    out, png = tmp_path / "cmp.parquet", tmp_path / "cmp.png"
    args = ["compare", "--budget", "3", "--epochs", "10", "--dataset-size", "1281167"]
    assert main([*args, "--out", str(out), "--plot", str(png), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    labels = [r["label"] for r in rows]
    assert labels[:3] == ["deepvm #1", "deepvm #2", "deepvm #3"]
    assert {"cost_first", "performance_first"} <= set(labels)
    stored = duckdb.sql(f"select label, expected_makespan_h from '{out}'").df()
    assert list(stored["label"]) == labels and (stored["expected_makespan_h"] > 0).all()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    sweep_png = tmp_path / "sweep.png"
    sweep = ["sweep", "--budgets", "0:4:0.5", *PAPER_ARGS, "--plot", str(sweep_png)]
    assert main(sweep) == 0
    assert sweep_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "sweep.jpg"
    assert main(["sweep", "--budgets", "1,2", "--plot", str(bad)]) == 2
    assert "must end in .png" in capsys.readouterr().err and not bad.exists()
    assert main(["compare", "--budget", "3"]) == 2
    assert "--work" in capsys.readouterr().err
