"""Preemption arithmetic against hand values, and the analytic makespan against
the Monte Carlo simulator."""

import json
import math

import pytest

from deepvm.cli import main
from deepvm.performance.preemption import (
    cluster_rate_per_s,
    expected_makespan,
    hourly_hazard,
    simulate,
    young_daly_interval_s,
)


def test_hazard_and_young_daly_hand_values():
    # 5 % a month: -ln(0.95) / 730 = 7.0265e-5 per hour
    assert hourly_hazard(0.05) == pytest.approx(0.051293294 / 730)
    assert hourly_hazard(0.0) == 0.0
    # 10 spot nodes at 20 %/month: 10 x 0.22314355 / 730 / 3600 per second
    assert cluster_rate_per_s(10, 0.2) == pytest.approx(10 * 0.22314355 / 730 / 3600)
    # delta = 60 s, lambda = 1e-4 /s: sqrt(2 x 60 / 1e-4) = 1095.4 s
    assert young_daly_interval_s(60, 1e-4) == pytest.approx(math.sqrt(1.2e6))
    assert young_daly_interval_s(60, 0.0) == math.inf
    with pytest.raises(ValueError):
        hourly_hazard(1.0)


def test_no_preemptions_is_work_plus_checkpoints():
    a = expected_makespan(2.0, 0.0, 600.0, 30.0, 300.0)
    assert a.makespan_h == pytest.approx((7200 + 12 * 30) / 3600)
    s = simulate(2.0, 0.0, 600.0, 30.0, 300.0, runs=10)
    assert s.makespan_h_mean == pytest.approx(a.makespan_h)
    assert s.makespan_h_std == pytest.approx(0, abs=1e-9)


@pytest.mark.parametrize("n_spot", [1, 8, 32])
@pytest.mark.parametrize("monthly", [0.05, 0.2])
@pytest.mark.parametrize(("stall", "restart"), [(30.0, 120.0), (120.0, 600.0)])
def test_analytic_matches_simulation_where_first_order_holds(n_spot, monthly, stall, restart):
    rate = cluster_rate_per_s(n_spot, monthly)
    analytic = expected_makespan(20.0, rate, None, stall, restart)
    assert rate * (analytic.checkpoint_interval_s + stall) < 0.3  # the valid regime
    sim = simulate(20.0, rate, analytic.checkpoint_interval_s, stall, restart, runs=3000, seed=1)
    assert sim.makespan_h_mean == pytest.approx(analytic.makespan_h, rel=0.05)
    assert analytic.efficiency < 1


def test_an_empty_checkpoint_takes_the_limit_of_the_efficiency():
    """Regression: a zero stall (--checkpoint-gb 0) divided 0 by 0, and `compare`
    and `simulate preemption` ended in ZeroDivisionError. As the stall tends to 0
    the efficiency tends to 1 / (1 + rate x restart)."""
    rate, restart = 1e-4, 300.0
    a = expected_makespan(10.0, rate, None, 0.0, restart)
    assert a.efficiency == pytest.approx(1 / (1 + rate * restart))
    tiny = expected_makespan(10.0, rate, None, 1e-9, restart)
    assert a.efficiency == pytest.approx(tiny.efficiency, rel=1e-3)


def test_more_spot_nodes_take_longer():
    spans = [
        expected_makespan(10, cluster_rate_per_s(n, 0.1), None, 60, 300).makespan_h
        for n in (1, 4, 16, 64)
    ]
    assert spans == sorted(spans) and spans[-1] > spans[0]


def test_simulate_cli_json(capsys):
    assert (
        main(
            [
                "simulate",
                "preemption",
                "--n-spot",
                "16",
                "--interruption-rate",
                "0.1",
                "--work-hours",
                "24",
                "--runs",
                "500",
                "--hourly-cost",
                "3",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"simulated", "analytic"}
    assert set(out["simulated"]) == {"makespan_h_mean", "makespan_h_std", "cost_mean"}
    assert set(out["analytic"]) == {"makespan_h", "checkpoint_interval_s", "efficiency"}
    assert out["simulated"]["cost_mean"] == pytest.approx(3 * out["simulated"]["makespan_h_mean"])
    assert out["simulated"]["makespan_h_mean"] == pytest.approx(
        out["analytic"]["makespan_h"], rel=0.05
    )
    assert (
        main(
            [
                "simulate",
                "preemption",
                "--n-spot",
                "2",
                "--interruption-rate",
                "1.5",
                "--work-hours",
                "1",
            ]
        )
        == 2
    )
    assert "--interruption-rate" in capsys.readouterr().err


def test_analytic_is_optimistic_where_restarts_get_preempted():
    """Where lambda R is large the simulator's preempted restarts make runs longer
    than the analytic model says (the documented limit); without them it agrees."""
    rate = cluster_rate_per_s(256, 0.9)
    analytic = expected_makespan(20.0, rate, None, 10.0, 3600.0)
    assert rate * 3600 > 0.5
    tau = analytic.checkpoint_interval_s
    real = simulate(20.0, rate, tau, 10.0, 3600.0, runs=3000, seed=2)
    assert real.makespan_h_mean > analytic.makespan_h * 1.1
    plain = simulate(20.0, rate, tau, 10.0, 3600.0, runs=3000, seed=2, preemptible_restarts=False)
    assert plain.makespan_h_mean == pytest.approx(analytic.makespan_h, rel=0.05)
