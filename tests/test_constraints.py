"""Every constraint of every architecture: a configuration that breaks exactly
one is rejected by the model check, and the MILP never picks it."""

import numpy as np
import pytest
from helpers import cpu_row, gpu_row, job, make_fleet
from milp_oracle import INFEASIBLE, OPTIMAL, ClusterMILP

from deepvm.planner._constraints import violations
from deepvm.planner._objectives import candidate_scores
from deepvm.planner.candidates import (
    ON_DEMAND,
    SINGLE_ANCHOR,
    TIERING,
    Config,
    build_candidates,
    hourly_cost,
)


def names_broken(*args) -> list[str]:  # type: ignore[no-untyped-def]
    """The names of the limits a configuration breaks."""
    return [v.name for v in violations(*args)]


def base_fleet(quota=None):
    rows = [
        gpu_row("g", od=1.0, spot=0.3, vcpus=4, gbps=10),
        cpu_row("c", od=0.2, memory_gib=8, gbps=5),
    ]
    quotas = {("G", "spot"): 68, ("G", "on_demand"): 16, ("standard", "on_demand"): 8}
    quotas.update(quota or {})
    return make_fleet(rows, quotas=quotas)


def best(fleet, j, budget, archs):
    cands = build_candidates(fleet)
    milp = ClusterMILP(fleet, j, cands)
    allowed = cands.arch_mask(*archs).astype(float)
    return milp.solve(candidate_scores(fleet, cands, "throughput"), budget, allowed)


def test_feasible_reference_configs_pass():
    f = base_fleet()
    assert names_broken(f, job(), Config(SINGLE_ANCHOR, 0, 4), 10) == []
    assert names_broken(f, job(), Config(ON_DEMAND, 0, 4), 10) == []
    assert names_broken(f, job(), Config(TIERING, 0, 16, 0, 1), 10) == []


@pytest.mark.parametrize(
    ("config", "budget", "broken"),
    [
        # Single Anchor: n >= 2, spot quota (n-1)c <= Q, on-demand quota c <= Q, budget
        (Config(SINGLE_ANCHOR, 0, 1), 100, "single_anchor needs n >= 2"),
        (Config(SINGLE_ANCHOR, 0, 19), 100, "spot quota"),  # 18 * 4 = 72 > 68
        (Config(SINGLE_ANCHOR, 0, 4), 1.89, "budget"),  # 1 + 3 * 0.3 = 1.9
        # On-Demand: quota n c <= Q, budget
        (Config(ON_DEMAND, 0, 5), 100, "on-demand quota"),  # 20 > 16
        (Config(ON_DEMAND, 0, 2), 1.99, "budget"),
        # Tiering: saturation, memory, spot quota, remote quota, budget
        (Config(TIERING, 0, 17, 0, 1), 100, "network saturation"),  # N_sat(5) = 16
        (Config(TIERING, 0, 4, 0, 3), 100, "remote on-demand quota"),  # 12 > 8 vCPUs
        (Config(TIERING, 0, 4, 0, 1), 1.39, "budget"),  # 1.2 + 0.2
    ],
)
def test_exactly_one_violation(config, budget, broken):
    assert names_broken(base_fleet(), job(), config, budget) == [broken]


def test_memory_and_spot_quota_violations():
    f = base_fleet()
    # 0.8 * 8 GiB = 6.87 GB per remote node < 2 versions x 4 GB
    assert names_broken(f, job(checkpoint_gb=4), Config(TIERING, 0, 4, 0, 1), 100) == [
        "checkpoint memory"
    ]
    assert names_broken(f, job(checkpoint_gb=4), Config(TIERING, 0, 4, 0, 2), 100) == []
    f = base_fleet({("G", "spot"): 12})
    assert names_broken(f, job(), Config(TIERING, 0, 4, 0, 1), 100) == ["spot quota"]


def test_tiering_saturation_uses_min_bandwidth():
    # GPU link 2 Gbps limits even a 30 Gbps remote: N_sat(2) = 12
    f = make_fleet([gpu_row("g", 1.0, 0.3, gbps=2), cpu_row("c", 0.2, gbps=30)])
    assert names_broken(f, job(), Config(TIERING, 0, 12, 0, 1), 100) == []
    assert names_broken(f, job(), Config(TIERING, 0, 13, 0, 1), 100) == ["network saturation"]
    assert names_broken(f, job(), Config(TIERING, 0, 13, 0, 2), 100) == []


def test_milp_respects_each_binding_constraint():
    f = base_fleet()
    # Saturation: budget allows 17 spot workers + 1 remote, but one remote serves 16;
    # 17 workers need 2 remotes (0.3*17 + 0.4 = 5.5 > 5.3).
    out = best(f, job(), 5.3, [TIERING])
    assert out.status == OPTIMAL
    assert out.config == Config(TIERING, 0, 16, 0, 1)
    # Memory: a 4 GB checkpoint needs two remotes.
    out = best(f, job(checkpoint_gb=4), 5.3, [TIERING])
    assert out.config.n_remote == 2 and names_broken(f, job(4), out.config, 5.3) == []
    # Spot quota caps Single Anchor at 1 + 68 / 4 = 18 nodes even with money to spare.
    out = best(f, job(), 100, [SINGLE_ANCHOR])
    assert out.config == Config(SINGLE_ANCHOR, 0, 18)
    # On-demand quota caps On-Demand at 4 nodes.
    out = best(f, job(), 100, [ON_DEMAND])
    assert out.config == Config(ON_DEMAND, 0, 4)
    # Budget: cheapest possible is tiering 1 worker + 1 remote = 0.5
    assert best(f, job(), 0.49, [SINGLE_ANCHOR, TIERING, ON_DEMAND]).status == INFEASIBLE
    out = best(f, job(), 0.5, [SINGLE_ANCHOR, TIERING, ON_DEMAND])
    assert out.config == Config(TIERING, 0, 1, 0, 1)
    assert hourly_cost(f, out.config) == pytest.approx(0.5)


def test_remote_quota_makes_large_tiering_infeasible():
    f = base_fleet({("standard", "on_demand"): 4})  # one remote node only
    out = best(f, job(), 100, [TIERING])
    assert out.config.n_workers == 16 and out.config.n_remote == 1


def test_type_without_spot_market_only_on_demand():
    f = make_fleet([gpu_row("g", 1.0, None), cpu_row("c", 0.2)])
    cands = build_candidates(f)
    assert set(np.unique(cands.architecture)) == {2}  # on_demand only
    assert names_broken(f, job(), Config(SINGLE_ANCHOR, 0, 2), 100) == [
        "worker type has no spot price"
    ]


def test_a_new_limit_is_one_class_that_every_check_and_explanation_follows(monkeypatch):
    """docs/ARCHITECTURE.md, "Planning": a limit is one object in CONSTRAINTS. Here a
    cap of 4 worker nodes, added in one place, binds the planner's answers, the
    model check, the explanation and the fleet plan."""
    from dataclasses import dataclass

    from deepvm.base.config import JobSpec
    from deepvm.planner import _constraints as constraints
    from deepvm.planner.api import recommend
    from deepvm.planner.fleet.plan import plan_fleet
    from deepvm.planner.fleet.types import RegisteredJob
    from deepvm.planner.inputs import Inputs

    @dataclass(frozen=True)
    class FourNodes(constraints.Limit):
        name: str = "four-node cap"

        def broken(self, f, job, c, budget):
            return c.n_workers > 4

        def words(self, f, c, budget):
            return "the four-node cap (a team rule)"

        def admits(self, f, job, candidates):
            return candidates.n <= 4

    inputs = Inputs.load()
    alone = recommend(10.0, inputs=inputs, top=1, objective="paper").recommendations[0]
    assert alone.n_workers > 4  # what the cap must change
    monkeypatch.setattr(constraints, "CONSTRAINTS", (*constraints.CONSTRAINTS, FourNodes()))
    result = recommend(10.0, inputs=inputs, top=3, objective="paper", explain=True)
    firsts = [r for r in result.recommendations if r.policy == "deepvm"]
    assert firsts and all(r.n_workers <= 4 for r in firsts)
    assert firsts[0].binding == "the four-node cap (a team rule)"
    f = base_fleet()
    assert "four-node cap" in names_broken(f, job(), Config(SINGLE_ANCHOR, 0, 5), 100)
    assert "four-node cap" not in names_broken(f, job(), Config(SINGLE_ANCHOR, 0, 4), 100)
    plan = plan_fleet([RegisteredJob("big", 10.0, JobSpec(objective="paper"))], inputs)
    assert plan.jobs[0].planned and plan.jobs[0].cluster.n_workers <= 4
