"""A fleet solve that stops at its time limit still gives a plan, checked like any
other and labelled as not proven best, with the bound on how much better one
could be: whether the search stopped with a plan, stopped before it held one, or
the relaxation itself did not finish (issue 35: on a busy machine the 5 s limit
ran out in the relaxation and the fleet gave no plan at all).

The solver's stopping is stood in for (deepvm.planner.highs.solve answering as
HiGHS does at its limit), so these tests do not depend on how fast the machine is."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from deepvm.cli import main
from deepvm.config import JobSpec
from deepvm.planner import Inputs, highs
from deepvm.planner.fleet_plan import plan_fleet
from deepvm.planner.fleet_types import RegisteredJob


def hard_jobs(count: int = 30) -> list[RegisteredJob]:
    """Jobs of every objective on the three shipped clouds, more than the quotas hold."""
    rng = random.Random(7)
    jobs = []
    for k in range(count):
        objective = rng.choice(("throughput", "paper", "goodput", "cost"))
        spec = JobSpec(
            workload=rng.choice(("resnet50", "gpt2", "bert-base", "vit-b16")),
            objective=objective,
            work_flops=rng.choice([5e17, 2e18, 8e18]) if objective == "cost" else None,
        )
        budget = float(rng.choice([2, 3, 4, 6, 8, 10]))
        jobs.append(RegisteredJob(f"job{k}", budget, spec, priority=rng.choice([1.0, 2.0, 3.0])))
    return jobs


def stopping(monkeypatch, *, lp: bool, mip_has_plan: bool) -> None:
    """HiGHS stopped by its time limit: the relaxation (``lp``) without an answer,
    or the value search right after it began, with the plan it started from
    (``mip_has_plan``) or none."""
    real = highs.solve

    def solve(objective, rows, upper, *, maximise, integer, **options):
        if not integer and lp:
            return highs.Solution(highs.LIMIT_NO_INCUMBENT, np.zeros(0), np.nan, np.zeros(0), 5.0)
        if integer and maximise:
            start = options.get("start")
            if mip_has_plan and start is not None:
                value = float(np.asarray(objective) @ start)
                return highs.Solution(highs.LIMIT_WITH_INCUMBENT, start, value, np.zeros(0), 5.0)
            if not mip_has_plan:
                return highs.Solution(highs.LIMIT_NO_INCUMBENT, np.zeros(0), np.nan, np.zeros(0), 5)
        return real(objective, rows, upper, maximise=maximise, integer=integer, **options)

    monkeypatch.setattr(highs, "solve", solve)


@pytest.fixture(scope="module")
def optimum():
    """The jobs, the inputs, and their plan unhindered (the optimum)."""
    jobs, inputs = hard_jobs(), Inputs.load()
    return jobs, inputs, plan_fleet(jobs, inputs)


@pytest.mark.parametrize(
    ("lp", "mip_has_plan"),
    [(True, False), (False, True), (False, False)],
    ids=["relaxation-unfinished", "search-stopped-with-a-plan", "search-stopped-without"],
)
def test_a_time_limited_solve_gives_a_checked_plan_and_its_bound(
    monkeypatch, optimum, lp, mip_has_plan
):
    jobs, inputs, best = optimum
    stopping(monkeypatch, lp=lp, mip_has_plan=mip_has_plan)
    plan = plan_fleet(jobs, inputs, time_limit_s=5)
    assert plan.status == "limit_with_incumbent"
    planned = [j for j in plan.jobs if j.planned]
    assert len(planned) >= len(jobs) // 2  # a plan, not nothing
    assert plan.objective_value <= best.objective_value + 1e-9 <= plan.objective_bound + 1e-6
    value = sum(j.priority * j.value for j in plan.jobs)
    assert abs(value - plan.objective_value) < 1e-6 * value
    for use in plan.usage:  # within every quota (the separate check passed too)
        assert use.quota is None or use.vcpus <= use.quota + 1e-9


def test_the_cli_prints_the_plan_and_warns(tmp_path, capsys, monkeypatch):
    lines = []
    for job in hard_jobs():
        lines.append(
            f'[[job]]\nname = "{job.name}"\nworkload = "{job.spec.workload}"\n'
            f"budget = {job.budget}\npriority = {job.priority}\n"
            f'objective = "{job.spec.objective}"\n'
            + (f"work_flops = {job.spec.work_flops}\n" if job.spec.work_flops else "")
        )
    (tmp_path / "jobs.toml").write_text("\n".join(lines))
    stopping(monkeypatch, lp=True, mip_has_plan=False)
    argv = ["fleet", "--json", "--scenarios", str(tmp_path / "jobs.toml"), "--time-limit", "5"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["status"] == "limit_with_incumbent"
    assert out["objective_value"] <= out["objective_bound"]
    assert "stopped at its time limit" in captured.err and "raise --time-limit" in captured.err
