"""The MILP's optimum equals exhaustive enumeration on many random small catalogs."""

import math

import pandas as pd
import pytest
from helpers import cpu_row, gpu_row, job, make_fleet
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from milp_oracle import MilpPlanner

from deepvm.performance.overhead import SaturationModel
from deepvm.planner._exhaustive import best_configs, enumerate_feasible
from deepvm.planner._policies import Planner
from deepvm.planner.candidates import (
    DESIGN_ARCHITECTURES,
    ON_DEMAND,
    SINGLE_ANCHOR,
    TIERING,
    Config,
    hourly_cost,
)

MAX_NODES = 10
price = st.integers(min_value=50, max_value=30000).map(lambda c: c / 10000)  # $0.005-$3
gbps = st.sampled_from([0.3, 1.7, 5, 10, 12.5, 25, 50])
model_rows = st.one_of(
    st.builds(lambda p: {"model": "amdahl", "p": p}, st.floats(0.5, 1.0)),
    st.builds(
        lambda a, b, c: {"model": "deepvm", "a": a, "b": b, "c": c},
        st.floats(0.05, 1.5),
        st.floats(1.0, 12.0),
        st.floats(1.0, 12.0),
    ),
    st.builds(
        lambda a, b, c: {"model": "logistic", "a": a, "b": b, "c": c},
        st.floats(0.05, 1.5),
        st.floats(1.0, 12.0),
        st.floats(1.0, 12.0),
    ),
    st.builds(
        lambda al, be: {"model": "usl", "alpha": al, "beta": be},
        st.floats(0, 0.3),
        st.floats(0, 0.05),
    ),
    st.just({"model": "linear"}),
)


@st.composite
def scenarios(draw):
    """Small fleets over one or two regions, each with its own quotas (a regionless
    limit per group and market, overridden in region r1 by some draws)."""
    regions = ["r0", "r1"][: draw(st.integers(1, 2))]
    n_gpu = draw(st.integers(1, 3))
    n_cpu = draw(st.integers(0, 3))
    rows, models = [], []
    for i in range(n_gpu):
        od = draw(price)
        spot = draw(
            st.one_of(st.none(), st.integers(10, 100).map(lambda p, od=od: round(od * p / 100, 4)))
        )
        row = gpu_row(
            f"g{i}",
            od,
            spot if spot else None,
            vcpus=draw(st.sampled_from([4, 8])),
            gbps=draw(gbps),
            group=draw(st.sampled_from(["G", "P"])),
            peak=draw(st.integers(1, 50)) * 1e12,
            region=draw(st.sampled_from(regions)),
        )
        rows.append(row)
        if len(regions) == 2 and i == 0 and draw(st.booleans()):
            # the same type in the other region, at another price
            other = "r1" if row["region"] == "r0" else "r0"
            rows.append({**row, "region": other, "ondemand_price": draw(price)})
        models.append({"instance_type": f"g{i}", "workload": "resnet50", **draw(model_rows)})
    for j in range(n_cpu):
        rows.append(
            cpu_row(
                f"c{j}",
                draw(price),
                memory_gib=draw(st.sampled_from([2, 4, 8, 16])),
                gbps=draw(gbps),
                vcpus=draw(st.sampled_from([2, 4])),
                region=draw(st.sampled_from(regions)),
            )
        )
    quotas = {
        (g, m): draw(st.sampled_from([8, 16, 32, 64]))
        for g in ("G", "P", "standard")
        for m in ("spot", "on_demand")
    }
    # In r1 the G spot quota is always tighter than elsewhere; the others sometimes.
    regional = {
        ("r1", g, m): draw(st.sampled_from([0, 4, 8] if (g, m) == ("G", "spot") else [0, 4, 16]))
        for g in ("G", "standard")
        for m in ("spot", "on_demand")
        if len(regions) == 2 and ((g, m) == ("G", "spot") or draw(st.booleans()))
    }
    overhead = pd.DataFrame(models).assign(source="test")
    for column in ("a", "b", "c", "p", "alpha", "beta"):
        if column not in overhead:
            overhead[column] = float("nan")
    # Half the scenarios use a low saturation curve, so that with n <= 10 the
    # network constraints bind on both the worker and the remote side.
    saturation = draw(
        st.one_of(
            st.none(),
            st.just(SaturationModel.from_points([(0.3, 1), (5, 2), (12.5, 3), (50, 6)])),
        )
    )
    fleet = make_fleet(
        rows, quotas=quotas, overhead=overhead, saturation=saturation, regional=regional
    )
    budget = draw(st.integers(10, 2500)) / 100
    checkpoint = draw(st.sampled_from([0.1, 1.0, 3.0, 8.0]))
    return fleet, budget, checkpoint


def reference_score(fleet, config: Config, objective: str, linear: bool) -> float:
    """The objectives (docs/ARCHITECTURE.md) written out again, apart from the planner."""
    i, n = config.worker, config.n_workers
    s = n if linear else float(fleet.gpu_models[i]([n])[0])
    flops = fleet.gpu_flops[i] * s
    if objective == "throughput":
        return flops
    p = fleet.gpu_ondemand[i] if config.architecture == ON_DEMAND else fleet.gpu_spot[i]
    return 3600 * flops / p


POLICY_ARCHS = {
    ("deepvm", "throughput"): DESIGN_ARCHITECTURES,
    ("deepvm_noscale", "throughput"): DESIGN_ARCHITECTURES,
    ("on_demand", "throughput"): (ON_DEMAND,),
    ("deepvm", "paper"): (SINGLE_ANCHOR, TIERING),
    ("on_demand", "paper"): (ON_DEMAND,),
}


def assert_same_optima(fleet, j, budget, policy, objective, got, top):
    feasible = enumerate_feasible(
        fleet, j, budget, architectures=POLICY_ARCHS[policy, objective], max_nodes=MAX_NODES
    )
    linear = policy == "deepvm_noscale"
    scored = [(c, cost, reference_score(fleet, c, objective, linear)) for c, cost in feasible]
    want = best_configs(scored, top=top)

    assert len(got) == len(want)
    for config, (ref_config, ref_cost, ref_score) in zip(got, want, strict=True):
        score = reference_score(fleet, config, objective, linear)
        cost = next(c for cfg, c in feasible if cfg == config)  # it is feasible
        assert score == pytest.approx(ref_score, rel=1e-6), (config, ref_config)
        if math.isclose(score, ref_score, rel_tol=1e-9):
            assert cost == pytest.approx(ref_cost, rel=1e-9, abs=1e-9), (config, ref_config)


# The numpy planner (the default), and the MILP as an independent cross-check; with
# presolve=False the solver alone makes every choice, so its formulation is checked.
METHODS = [("numpy", True), ("milp", True), ("milp", False)]


@settings(max_examples=90, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(sorted(POLICY_ARCHS)), st.sampled_from(METHODS))
def test_top3_equals_enumeration(scenario, policy_objective, method):
    fleet, budget, checkpoint = scenario
    policy, objective = policy_objective
    solver, presolve = method
    assume(solver == "numpy" or len(fleet.regions) == 1)  # the MILP plans one region
    j = job(checkpoint_gb=checkpoint)
    planner = (
        Planner(fleet, j, objective=objective, budget_cap=budget, max_nodes=MAX_NODES)
        if solver == "numpy"
        else MilpPlanner(
            fleet, j, objective=objective, budget_cap=budget, max_nodes=MAX_NODES, presolve=presolve
        )
    )
    got = [c for c, _ in planner.optimise(policy, budget, top=3)]
    assert_same_optima(fleet, j, budget, policy, objective, got, top=3)


@settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["throughput", "paper"]), st.sampled_from(METHODS))
def test_sweep_equals_enumeration(scenario, objective, method):
    """numpy: every budget from one pass over the candidates sorted by cost; MILP:
    every (policy, budget) one block of a single MILP."""
    fleet, top_budget, checkpoint = scenario
    j = job(checkpoint_gb=checkpoint)
    budgets = [0.0, top_budget / 7, top_budget / 3, top_budget / 2, top_budget]
    policies = [p for p, o in POLICY_ARCHS if o == objective]
    solver, presolve = method
    assume(solver == "numpy" or len(fleet.regions) == 1)  # the MILP plans one region
    planner = (
        Planner(fleet, j, objective=objective, budget_cap=top_budget, max_nodes=MAX_NODES)
        if solver == "numpy"
        else MilpPlanner(
            fleet,
            j,
            objective=objective,
            budget_cap=top_budget,
            max_nodes=MAX_NODES,
            presolve=presolve,
        )
    )
    swept = planner.sweep(policies, budgets)
    for (policy, budget), config in swept.items():
        got = [] if config is None else [config]
        assert_same_optima(fleet, j, budget, policy, objective, got, top=1)


def test_enumerator_agrees_on_the_paper_scenario():
    from tests_paths import PAPER

    from deepvm.planner.inputs import Inputs

    inputs = Inputs.load(
        catalog=PAPER / "catalog.csv",
        throughput=PAPER / "throughput.csv",
        overhead=PAPER / "overhead.csv",
        quotas=PAPER / "quotas.csv",
    )
    fleet = inputs.offers("resnet50")
    j = job(checkpoint_gb=0.3)
    planner = Planner(fleet, j, budget_cap=10.0, max_nodes=64)
    for budget in (0.5, 1.0, 2.5, 4.0, 7.3, 10.0):
        got = planner.optimise("deepvm", budget, top=1)[0][0]
        feasible = enumerate_feasible(fleet, j, budget, max_nodes=64)
        scored = [(c, cost, reference_score(fleet, c, "throughput", False)) for c, cost in feasible]
        ref = best_configs(scored, top=1)[0]
        assert reference_score(fleet, got, "throughput", False) == pytest.approx(ref[2])


def reference_baseline(fleet, j, budget, policy):
    """The baseline rule ("Policies") over exhaustive enumeration: per GPU type the largest
    feasible Single Anchor cluster; then the most nodes (cost_first) or the
    fastest type (performance_first), ties to the other key, then the cheaper."""
    largest = {}
    for config, cost in enumerate_feasible(
        fleet, j, budget, architectures=(SINGLE_ANCHOR,), max_nodes=MAX_NODES
    ):
        if config.worker not in largest or config.n_workers > largest[config.worker][0].n_workers:
            largest[config.worker] = (config, cost)
    if not largest:
        return None

    def key(item):
        config, cost = item
        flops = fleet.gpu_flops[config.worker]
        if policy == "cost_first":
            return (config.n_workers, flops, -cost)
        return (flops, config.n_workers, -cost)

    return max(largest.values(), key=key)[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["cost_first", "performance_first"]))
def test_baselines_at_every_budget_equal_the_rule(scenario, policy):
    fleet, top_budget, checkpoint = scenario
    j = job(checkpoint_gb=checkpoint)
    budgets = [0.0, top_budget / 7, top_budget / 3, top_budget / 2, top_budget]
    planner = Planner(fleet, j, budget_cap=top_budget, max_nodes=MAX_NODES)
    for budget, got in zip(budgets, planner.baselines(policy, budgets), strict=True):
        want = reference_baseline(fleet, j, budget, policy)
        if want is None:
            assert got is None
        else:
            assert got is not None
            assert (got.worker, got.n_workers) == (want.worker, want.n_workers) or (
                fleet.gpu_flops[got.worker] == fleet.gpu_flops[want.worker]
                and got.n_workers == want.n_workers
                and hourly_cost(fleet, got) == pytest.approx(hourly_cost(fleet, want))
            )
