"""Fleet planning (deepvm.planner.fleet.plan) against brute force over every
combination of every job's feasible clusters, on small fleets with tight quotas."""

import math
from dataclasses import replace

import pandas as pd
import pytest
from helpers import cpu_row, gpu_row, make_inputs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from deepvm.base.config import JobSpec
from deepvm.catalog.quotas import Quotas
from deepvm.planner._exhaustive import enumerate_feasible
from deepvm.planner.api import job_planner
from deepvm.planner.candidates import DESIGN_ARCHITECTURES, ON_DEMAND, SINGLE_ANCHOR, TIERING
from deepvm.planner.fleet._options import undominated
from deepvm.planner.fleet.plan import plan_fleet
from deepvm.planner.fleet.types import RegisteredJob
from deepvm.store import Store

MAX_NODES = 6
ARCHS = {"throughput": DESIGN_ARCHITECTURES, "paper": (SINGLE_ANCHOR, TIERING)}


def reference_score(fleet, config, objective):
    """The objectives written out again, apart from the planner."""
    i, n = config.worker, config.n_workers
    flops = fleet.gpu_flops[i] * float(fleet.gpu_models[i]([n])[0])
    if objective == "throughput":
        return flops
    p = fleet.gpu_ondemand[i] if config.architecture == ON_DEMAND else fleet.gpu_spot[i]
    return 3600 * flops / p


def reference_usage(fleet, config, rows, units):
    """Each quota's use per (region, key, market), from the architectures'
    definitions and the catalog rows' quota columns: a GPU key counts GPUs, every
    other key vCPUs, and a row's regional key the vCPUs of the same nodes."""
    i, n = config.worker, config.n_workers
    spot = (
        n - 1
        if config.architecture == SINGLE_ANCHOR
        else (0 if config.architecture == ON_DEMAND else n)
    )
    out = {}

    def add(row, market, count):
        first = row.get("spot_quota_group") or row["quota_group"]
        group = first if market == "spot" else row["quota_group"]
        per_node = row["accelerator_count"] if units.get(group) == "gpus" else row["vcpus"]
        regional = row.get(
            "spot_regional_quota_group" if market == "spot" else "regional_quota_group"
        )
        for key, amount in (((row["region"], group, market), per_node),
                            ((row["region"], regional, market), row["vcpus"])):  # fmt: skip
            if key[1] and count * amount:
                out[key] = out.get(key, 0) + count * amount

    gpu = rows[fleet.gpu_types[i], fleet.gpu_region_of(i)]
    for market, count in (("spot", spot), ("on_demand", n - spot)):
        add(gpu, market, count)
    if config.remote is not None:
        remote = rows[fleet.cpu_types[config.remote], fleet.cpu_region_of(config.remote)]
        add(remote, "on_demand", config.n_remote)
    return out


def brute_force(options, priorities, quota, team_budget):
    """Best sum of priority x value over every combination (None = unplanned), and
    the least total cost among combinations within 1e-9 of it. Branch and bound:
    a branch is cut only when even every remaining job at value 1 cannot reach
    the best found."""
    best = [-1.0, math.inf]
    remaining = [sum(priorities[k:]) for k in range(len(options) + 1)]

    def walk(k, value, cost, used):
        if value + remaining[k] < best[0] * (1 - 1e-9) - 1e-12:
            return
        if k == len(options):
            if value > best[0] * (1 + 1e-9) + 1e-12:
                best[:] = [value, cost]
            elif value >= best[0] * (1 - 1e-9) - 1e-12:
                best[1] = min(best[1], cost)
            return
        walk(k + 1, value, cost, used)
        for v, c, use in options[k]:
            if team_budget is not None and cost + c > team_budget * (1 + 1e-9) + 1e-9:
                continue
            after = dict(used)
            for key, vcpus in use.items():
                after[key] = after.get(key, 0) + vcpus
            if any(after[key] > quota(key) + 1e-9 for key in use):
                continue
            walk(k + 1, value + priorities[k] * v, cost + c, after)

    walk(0, 0.0, 0.0, {})
    return best


price = st.integers(min_value=500, max_value=30000).map(lambda c: c / 10000)


@st.composite
def fleets(draw):
    regions = ["r0", "r1"][: draw(st.integers(1, 2))]
    rows, models = [], []
    for i in range(draw(st.integers(2, 4))):
        od = draw(price)
        spot = round(od * draw(st.integers(20, 90)) / 100, 4)
        rows.append(
            gpu_row(
                f"g{i}",
                od,
                spot if draw(st.integers(0, 5)) else None,
                vcpus=draw(st.sampled_from([4, 8])),
                gbps=draw(st.sampled_from([1.7, 10, 25])),
                group=draw(st.sampled_from(["G", "P"])),
                peak=draw(st.integers(1, 50)) * 1e12,
                region=draw(st.sampled_from(regions)),
            )
        )
        if draw(st.integers(0, 2)) == 0:  # a GCP-like type: quotas in GPUs and regional vCPUs
            rows[-1].update(
                quota_group="NVIDIA_X_GPUS",
                spot_quota_group="PREEMPTIBLE_NVIDIA_X_GPUS",
                accelerator_count=draw(st.sampled_from([1, 2, 4])),
                regional_quota_group="CPUS",
                spot_regional_quota_group="PREEMPTIBLE_CPUS",
            )
        models.append(
            {
                "instance_type": f"g{i}",
                "workload": "*",
                "model": "amdahl",
                "p": draw(st.floats(0.6, 1.0)),
            }
        )
    for j in range(draw(st.integers(0, 2))):
        rows.append(
            cpu_row(
                f"c{j}",
                draw(price),
                memory_gib=draw(st.sampled_from([4, 16])),
                vcpus=draw(st.sampled_from([2, 4])),
                group=draw(st.sampled_from(["standard", "G"])),
                region=draw(st.sampled_from(regions)),
            )
        )
        if draw(st.integers(0, 2)) == 0:
            rows[-1].update(regional_quota_group="CPUS")
    quotas = {
        (g, m): draw(st.sampled_from([8, 16, 24, 32]))
        for g in ("G", "P", "standard")
        for m in ("spot", "on_demand")
    }
    quotas["NVIDIA_X_GPUS", "on_demand"] = draw(st.sampled_from([1, 2, 4, 8]))
    quotas["PREEMPTIBLE_NVIDIA_X_GPUS", "spot"] = draw(st.sampled_from([2, 4, 8, 16]))
    quotas["CPUS", "on_demand"] = draw(st.sampled_from([8, 16, 32]))
    quotas["PREEMPTIBLE_CPUS", "spot"] = draw(st.sampled_from([16, 32]))
    regional = {("r1", "G", "spot"): draw(st.sampled_from([4, 8]))} if len(regions) == 2 else {}
    units = {"NVIDIA_X_GPUS": "gpus", "PREEMPTIBLE_NVIDIA_X_GPUS": "gpus"}
    overhead = pd.DataFrame(models).assign(source="test")
    inputs = make_inputs(rows, quotas=quotas, regional=regional, overhead=overhead, units=units)
    by_name = {(r["instance_type"], r["region"]): r for r in rows}
    jobs = [
        RegisteredJob(
            f"job{k}",
            draw(st.integers(50, 800)) / 100,
            JobSpec(
                objective=draw(st.sampled_from(sorted(ARCHS))),
                checkpoint_gb=draw(st.sampled_from([0.5, 4.0])),
                max_nodes=MAX_NODES,
            ),
            priority=draw(st.sampled_from([1.0, 1.0, 2.0, 3.5])),
        )
        for k in range(draw(st.integers(2, 4)))
    ]
    team_budget = draw(st.one_of(st.none(), st.integers(50, 1500).map(lambda c: c / 100)))
    return inputs, jobs, team_budget, by_name, units


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_fleet_plan_equals_brute_force(case):
    inputs, jobs, team_budget, rows, units = case
    plan = plan_fleet(jobs, inputs, team_budget=team_budget)
    assert plan.status == "optimal"

    def quota(key):
        region, group, market = key
        return inputs.quotas.limit(group, market, region)

    options, priorities, feasible_of = [], [], []
    for fj in jobs:
        fleet = inputs.offers("resnet50")
        planner, job = job_planner(fj.spec, fleet, fj.budget, None)
        objective = fj.spec.objective
        # Every cluster within the budget, quotas aside (no quota limits), then
        # kept where its own use, counted here, fits every quota.
        unlimited = replace(planner.offers, quotas=Quotas())
        feasible = [
            (c, cost)
            for c, cost in enumerate_feasible(
                unlimited, job, fj.budget, architectures=ARCHS[objective], max_nodes=MAX_NODES
            )
            if all(v <= quota(k) + 1e-9 for k, v in reference_usage(fleet, c, rows, units).items())
        ]
        feasible_of.append(feasible)
        scored = [(c, cost, reference_score(fleet, c, objective)) for c, cost in feasible]
        solo = max((s for _, _, s in scored), default=None)
        options.append(
            [(s / solo, cost, reference_usage(fleet, c, rows, units)) for c, cost, s in scored]
            if solo
            else []
        )
        priorities.append(fj.priority)

    want_value, want_cost = brute_force(options, priorities, quota, team_budget)
    assert plan.objective_value == pytest.approx(want_value, rel=1e-6, abs=1e-9)
    assert plan.hourly_cost == pytest.approx(want_cost, rel=1e-6, abs=1e-6)
    # Within quotas and budgets, counted again here.
    used = {}
    for fj, p, feasible in zip(jobs, plan.jobs, feasible_of, strict=True):
        assert p.scenario == fj.name
        if p.planned:
            assert p.cluster.hourly_cost <= fj.budget * (1 + 1e-9) + 1e-9
            assert 0 < p.value <= 1 + 1e-6
            fleet = inputs.offers("resnet50")
            config = next(
                c
                for c, _ in feasible
                if fleet.gpu_types[c.worker] == p.cluster.worker_type
                and fleet.gpu_region_of(c.worker) == p.cluster.region
                and c.architecture == p.cluster.architecture
                and c.n_workers == p.cluster.n_workers
                and (c.remote is None or fleet.cpu_types[c.remote] == p.cluster.remote_type)
                and c.n_remote == p.cluster.n_remote
            )
            for key, vcpus in reference_usage(fleet, config, rows, units).items():
                used[key] = used.get(key, 0) + vcpus
        else:
            assert p.value == 0 and p.cluster is None
    for key, vcpus in used.items():
        assert vcpus <= quota(key) + 1e-9
    for u in plan.usage:
        assert u.used == pytest.approx(used.get((u.region, u.quota_group, u.market), 0))
    if team_budget is not None:
        assert plan.hourly_cost <= team_budget * (1 + 1e-9) + 1e-9


def test_undominated_keeps_exactly_the_pareto_rows():
    points = [
        [0, 5, 1],  # kept
        [0, 5, 1],  # a copy of the first: dropped
        [1, 6, 1],  # worse in everything than row 0: dropped
        [-1, 9, 0],  # better score, dearer: kept
        [0, 4, 2],  # cheaper, more quota: kept
        [2, 1, 9],  # kept
    ]
    import numpy as np

    assert list(undominated(np.array(points, dtype=float), chunk=2)) == [0, 3, 4, 5]


def test_undominated_by_groups_agrees_with_comparing_every_pair():
    """undominated compares rows only within groups of quota columns; on random
    sparse rows (some using no quota) it keeps exactly the rows a comparison of
    every pair on every column keeps."""
    import numpy as np

    from deepvm.planner.fleet._options import _pareto

    rng = np.random.default_rng(3)
    for _ in range(300):
        n, d = int(rng.integers(1, 120)), int(rng.integers(2, 9))
        points = rng.integers(0, 4, size=(n, d)).astype(float)
        points[:, 0] -= 2  # scores: negative too
        if d > 2:
            points[:, 2:] *= rng.random((n, d - 2)) < 0.3
        for margin in (0.0, 0.5):
            grouped = undominated(points, chunk=int(rng.integers(2, 40)), margin=margin)
            assert list(grouped) == list(_pareto(points, 256, margin))


def test_one_pass_with_cost_breaking_ties_keeps_what_two_passes_keep():
    """The fleet's pruning without a team budget (plan._prune_across): one pass in
    which cost counts only between rows within the margin keeps exactly the rows of
    a pass without the margin and then one with it leaving cost out, and exactly
    those no other row dominates in either sense (identical rows: the first)."""
    import numpy as np

    def dominates(a: np.ndarray, b: np.ndarray, margin: float) -> bool:
        usage = bool((a[2:] <= b[2:]).all())
        return usage and (a[0] <= b[0] - margin or (a[0] <= b[0] and a[1] <= b[1]))

    rng = np.random.default_rng(5)
    for _ in range(300):
        n, d = int(rng.integers(1, 90)), int(rng.integers(2, 8))
        points = rng.integers(0, 4, size=(n, d)).astype(float)
        points[:, 0] -= 2
        if d > 2:
            points[:, 2:] *= rng.random((n, d - 2)) < 0.3
        margin = float(rng.choice([0.5, 1.0, 2.5]))  # > 0: else cost never counts
        chunk = int(rng.integers(2, 40))
        one = undominated(points, chunk=chunk, margin=margin, cost_breaks_ties=True)
        first = undominated(points, chunk=chunk)
        kept = points[first][:, [0, *range(2, d)]]
        two = first[undominated(kept, chunk=chunk, margin=margin)]
        assert list(one) == list(two)
        brute = [
            b for b in range(n)
            if not any(
                dominates(points[a], points[b], margin)
                and (a < b or not dominates(points[b], points[a], margin))
                for a in range(n) if a != b
            )
        ]  # fmt: skip
        assert list(one) == brute


def test_each_budgets_options_are_the_spec_frontier_within_that_budget():
    """job_options takes a spec's undominated clusters once (PlannerRows.frontier) and
    keeps those within each job's budget: on the shipped catalog, for every budget
    of the benchmark's spread and a gpt2 and a cost job, exactly the clusters that
    comparing the ones within that budget alone keeps."""
    import numpy as np

    from deepvm.planner._enumeration import budget_limit
    from deepvm.planner.fleet._options import job_options, planner_rows
    from deepvm.planner.inputs import Inputs

    inputs = Inputs.load()
    specs = [JobSpec(workload="gpt2"), JobSpec(workload="resnet50", objective="cost",
                                               work_flops=2e18)]  # fmt: skip
    for spec in specs:
        planner = job_planner(spec, inputs.offers(spec.workload), 20.0, None)[0]
        rows = planner_rows(planner)
        for budget in (1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0):
            within = np.flatnonzero(rows.cost <= float(budget_limit(budget)))
            alone = within[undominated(np.column_stack(
                [-rows.score[within], rows.cost[within], rows.usage[within]]))]  # fmt: skip
            options = job_options(planner, budget, rows)
            assert options.considered == len(within)
            assert len(options) == len(alone) > 0
            assert np.array_equal(options.cost, rows.cost[alone])
            assert np.array_equal(options.score, rows.score[alone])
            assert np.array_equal(options.usage.toarray(), rows.usage[alone])


def two_jobs_one_on_demand_quota():
    """Job a fills the G on-demand quota with on-demand nodes; job b's Tiering
    cluster is cheapest with a remote node of group G, which no longer fits."""
    rows = [
        gpu_row("g0", 1.0, 0.6, vcpus=4, group="G", peak=1e14),
        gpu_row("g1", 0.5, None, vcpus=4, group="G", peak=1e14),
        cpu_row("c-cheap", 0.05, memory_gib=16, vcpus=4, group="G"),
        cpu_row("c-dear", 0.10, memory_gib=16, vcpus=4, group="standard"),
    ]
    quotas = {("G", "on_demand"): 8, ("G", "spot"): 16, ("standard", "on_demand"): 32}
    inputs = make_inputs(rows, quotas=quotas)
    spec = JobSpec(checkpoint_gb=0.5, max_nodes=8)
    return inputs, [RegisteredJob("a", 1.0, spec), RegisteredJob("b", 2.0, spec)]


def test_a_dearer_remote_in_another_quota_group_lets_both_jobs_run():
    inputs, jobs = two_jobs_one_on_demand_quota()
    plan = plan_fleet(jobs, inputs)
    a, b = plan.jobs
    assert (a.cluster.architecture, a.cluster.n_workers) == ("on_demand", 2)
    assert b.solo.remote_type == "c-cheap"  # alone, the cheaper remote
    assert (b.cluster.architecture, b.cluster.remote_type) == ("tiering", "c-dear")
    assert a.value == b.value == 1 and plan.objective_value == 2
    assert a.binding is None and b.binding is None
    used = {(u.quota_group, u.market): (u.used, u.solo_used, u.quota) for u in plan.usage}
    assert used["G", "on_demand"] == (8, 12, 8)


def test_binding_names_the_quota_and_the_team_budget():
    inputs, jobs = two_jobs_one_on_demand_quota()
    plan = plan_fleet(jobs, inputs, team_budget=1.5)
    a, b = plan.jobs
    # $1.5/h cannot pay for both solo clusters ($1 + $1.85).
    assert plan.hourly_cost <= 1.5 + 1e-9
    short = [p for p in (a, b) if p.value < 1]
    assert short and all("team budget" in p.binding for p in short)


# --- the command, the scenarios file -----------------------------------------------

JOB_KEYS = {
    "scenario", "planned", "priority", "shared", "value", "region", "zone", "architecture",
    "worker_type", "n_workers", "n_spot", "n_on_demand", "remote_type", "n_remote",
    "hourly_cost", "throughput_flops", "cloud", "solo_throughput_flops", "solo_hourly_cost",
    "binding", "note", "workload", "objective", "work_flops", "expected_makespan_h",
    "expected_total_cost", "deadline_h", "meets_deadline",
    # a running job's one decision (null for the others)
    "running_cluster", "decision", "gain", "migration_h", "migration_usd", "break_even_h",
    "decision_reason",
}  # fmt: skip


def fleet_json(capsys, *argv):
    import json

    from deepvm.cli import main

    assert main(["fleet", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_fleet_json_contract_on_the_shipped_jobs(capsys):
    out = fleet_json(capsys)
    assert out["status"] == "optimal" and out["team_budget"] is None
    assert {j["scenario"] for j in out["jobs"]} == {
        "resnet50-3usd", "gpt2-6usd", "bert-paper-10usd", "resnet50-90-epochs-by-deadline",
    }  # fmt: skip
    for job in out["jobs"]:
        assert set(job) == JOB_KEYS
        assert job["planned"] and 0 < job["value"] <= 1 + 1e-6
    # Alone the jobs would ask for more of some quota than the account has; together
    # they fit every quota.
    assert all(u["quota"] is None or u["used"] <= u["quota"] for u in out["usage"])
    overrun = [u for u in out["usage"] if u["quota"] is not None and u["solo_used"] > u["quota"]]
    assert overrun
    assert out["objective_value"] == pytest.approx(sum(j["value"] for j in out["jobs"]))
    held = [j for j in out["jobs"] if j["value"] < 1 - 1e-6]
    names = {
        f"the {u['quota_group']} {u['market'].replace('_', '-')} quota in {u['region']} "
        f"({u['quota']:g} vCPUs)"
        for u in overrun
    }
    assert held and all(set(j["binding"].split("; ")) <= names for j in held)


def test_team_budget_and_table(capsys):
    from deepvm.cli import main

    out = fleet_json(capsys, "--team-budget", "4")
    assert out["team_budget"] == 4 and out["hourly_cost"] <= 4 + 1e-9
    assert any("team budget" in (j["binding"] or "") for j in out["jobs"])
    assert main(["fleet", "--team-budget", "4"]) == 0
    text = capsys.readouterr().out
    assert "held back by" in text and "spot in us-east-1" in text and "team budget" in text


def test_priority_and_jobs_that_run_alone(tmp_path, capsys):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[[job]]\nname = "big"\nworkload = "resnet50"\nbudget = 6\n\n'
        '[[job]]\nname = "vip"\nworkload = "gpt2"\nbudget = 6\npriority = 10\n\n'
        '[[job]]\nname = "later"\nworkload = "bert-base"\nbudget = 6\nfleet = false\n'
    )
    out = fleet_json(capsys, "--jobs", str(jobs))
    by = {j["scenario"]: j for j in out["jobs"]}
    assert by["vip"]["value"] == pytest.approx(1) and by["vip"]["priority"] == 10
    assert by["big"]["value"] < 1 and by["big"]["binding"]
    # planned alone: as good as alone, and not counted in the shared quotas
    later = by["later"]
    assert not later["shared"] and later["value"] == 1 and later["binding"] is None
    g_spot = next(u for u in out["usage"] if (u["quota_group"], u["market"]) == ("G", "spot"))
    shared_spot = sum(
        j["n_spot"] * 4 for j in out["jobs"] if j["shared"] and j["worker_type"] == "g4dn.xlarge"
    )
    assert (
        g_spot["used"] <= 128
        and g_spot["used"] >= shared_spot
        and g_spot["vcpus"] == g_spot["used"]
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("priority = 0", "priority=0 must be a number from 0.001 to 1000"),
        ('priority = "high"', "priority='high' must be a number from 0.001 to 1000"),
        ('fleet = "no"', "fleet='no' must be true or false"),
    ],
)
def test_bad_fleet_keys_are_named(tmp_path, capsys, entry, message):
    from deepvm.cli import main

    jobs = tmp_path / "jobs.toml"
    jobs.write_text(f'[[job]]\nname = "a"\nworkload = "resnet50"\nbudget = 3\n{entry}\n')
    assert main(["fleet", "--jobs", str(jobs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "job 1 (a)" in err


def test_a_job_that_cannot_run_alone_is_unplanned_with_a_note(tmp_path, capsys):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[[job]]\nname = "ok"\nworkload = "resnet50"\nbudget = 3\n\n'
        '[[job]]\nname = "poor"\nworkload = "resnet50"\nbudget = 0.05\n'
    )
    out = fleet_json(capsys, "--jobs", str(jobs))
    poor = next(j for j in out["jobs"] if j["scenario"] == "poor")
    assert not poor["planned"] and poor["value"] == 0 and poor["worker_type"] is None
    assert "below the cheapest feasible cluster" in poor["note"]


def test_negative_team_budget_is_a_usage_error(capsys):
    from deepvm.cli import main

    assert main(["fleet", "--team-budget", "-1"]) == 2
    assert "--team-budget" in capsys.readouterr().err


def test_no_prices_on_or_before_the_date_is_named(tmp_path):
    from deepvm.base.errors import InputError
    from deepvm.nightly.prices import refresh_prices
    from deepvm.records.inputs import catalog_from_store

    refresh_prices(Store.open(tmp_path), "snapshot", snapshot_date="2026-12-02")
    with pytest.raises(InputError, match="no prices on or before 2026-12-01; its first snapshot"):
        catalog_from_store(Store.open(tmp_path), "2026-12-01")


def test_the_fleet_answer_names_makespan_cost_deadline_and_writes_launch_files(tmp_path, capsys):
    """Per job: architecture, region, zone, makespan, total cost and the deadline
    check, in the JSON and the table (`--columns expected_makespan_h`), and each
    planned job's SkyPilot files with --sky-yaml."""
    import yaml

    from deepvm.cli import main

    out = fleet_json(capsys)
    late = next(j for j in out["jobs"] if j["scenario"] == "resnet50-90-epochs-by-deadline")
    assert late["deadline_h"] == 12 and late["meets_deadline"] is True
    assert late["expected_makespan_h"] <= 12 and late["expected_total_cost"] > 0
    assert late["expected_total_cost"] == pytest.approx(
        late["expected_makespan_h"] * late["hourly_cost"]
    )
    folder = tmp_path / "launch"
    argv = ["fleet", "--format", "csv", "--columns", "job,architecture,expected_makespan_h"]
    assert main([*argv, "--sky-yaml", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "job,architecture,expected_makespan_h" and len(lines) == 5
    for job in out["jobs"]:
        main_task = yaml.safe_load((folder / f"{job['scenario']}.yaml").read_text())
        assert main_task["resources"]["instance_type"] == job["worker_type"]
    assert main(["fleet"]) == 0
    table = capsys.readouterr().out
    assert "meets 12 h" in table and "tiering: 1 x p4d.24xlarge spot" in table


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), st.data())
def test_fleet_plan_with_a_running_job_equals_brute_force(case, data):
    """Job 0 runs on one of its feasible clusters: its candidates are valued net of
    moving (deepvm.planner.fleet.migration, whose terms tests/test_migration.py checks by
    hand), staying weighs (1 + min_gain), and the plan is still the best one."""
    from deepvm.base.config import DEFAULT_MIN_GAIN
    from deepvm.planner.candidates import cluster_of
    from deepvm.planner.fleet.migration import Side, decide
    from deepvm.planner.fleet.types import Running

    inputs, jobs, team_budget, rows, units = case
    fleet = inputs.offers("resnet50")

    def quota(key):
        region, group, market = key
        return inputs.quotas.limit(group, market, region)

    def feasible_for(fj):
        planner, job = job_planner(fj.spec, fleet, fj.budget, None)
        unlimited = replace(planner.offers, quotas=Quotas())
        return planner, [
            (c, cost)
            for c, cost in enumerate_feasible(
                unlimited,
                job,
                fj.budget,
                architectures=ARCHS[fj.spec.objective],
                max_nodes=MAX_NODES,
            )
            if all(v <= quota(k) + 1e-9 for k, v in reference_usage(fleet, c, rows, units).items())
        ]

    planner0, feasible0 = feasible_for(jobs[0])
    assume(feasible0)  # something it can run on
    current, _ = data.draw(st.sampled_from(feasible0))
    interval = data.draw(st.sampled_from([math.nan, 600.0]))
    running = Running(cluster_of(planner0.offers, current), checkpoint_interval_s=interval)
    jobs = [replace(jobs[0], running=running), *jobs[1:]]
    plan = plan_fleet(jobs, inputs, team_budget=team_budget)
    assert plan.status == "optimal"

    def side(c, cost, interval_s):
        flops = reference_score(fleet, c, "throughput")
        return Side(flops, cost, float(fleet.gpu_gbps[c.worker]), 1.0, interval_s)

    options, priorities = [], []
    for k, fj in enumerate(jobs):
        _, feasible = feasible_for(fj)
        objective = fj.spec.objective
        scored = [(c, cost, reference_score(fleet, c, objective)) for c, cost in feasible]
        solo = max((s for _, _, s in scored), default=None)
        if not solo:
            options.append([])
        elif k == 0:
            cost_now = next(cost for c, cost, _ in scored if c == current)
            value_now = next(s for c, _, s in scored if c == current) / solo
            old = side(current, cost_now, interval)
            left = 24 * 3600 * old.useful_flops
            weighted = []
            for c, cost, _ in scored:
                if c == current:
                    weight = value_now * (1 + DEFAULT_MIN_GAIN)
                else:
                    gain = decide(
                        objective, old, side(c, cost, math.nan), left,
                        checkpoint_gb=fj.spec.checkpoint_gb, restart_s=fj.spec.restart_s,
                    ).gain  # fmt: skip
                    weight = value_now * (1 + gain)
                weighted.append((weight, cost, reference_usage(fleet, c, rows, units)))
            options.append(weighted)
        else:
            options.append(
                [(s / solo, cost, reference_usage(fleet, c, rows, units)) for c, cost, s in scored]
            )
        priorities.append(fj.priority)
    want_value, want_cost = brute_force(options, priorities, quota, team_budget)
    assert plan.objective_value == pytest.approx(want_value, rel=1e-6, abs=1e-9)
    assert plan.hourly_cost == pytest.approx(want_cost, rel=1e-6, abs=1e-6)
    first = plan.jobs[0]  # it stays, moves or stops, and says which, once
    assert first.running is not None and first.note == first.running.reason
    kept = first.cluster is not None and first.cluster.identity() == running.cluster.identity()
    expected = "stop" if not first.planned else "stay" if kept else "move"
    assert first.running.decision == expected


def test_alike_jobs_take_their_clusters_in_name_order():
    """Jobs with the same spec, budget and priority plan as one class; its clusters
    go back to the jobs in name order, each cluster in the tie-break order (the
    first name takes the first cluster), whatever order the jobs were given in."""
    from deepvm.planner.fleet.plan import plan_fleet
    from deepvm.planner.fleet.types import RegisteredJob as Job
    from deepvm.planner.inputs import Inputs

    inputs = Inputs.load()
    spec = JobSpec(workload="resnet50")
    names = ["d-job", "b-job", "a-job", "c-job"]
    plan = plan_fleet([Job(name, 3.0, spec) for name in names], inputs)
    clusters = {j.scenario: j.cluster for j in plan.jobs}
    assert len({c.words() for c in clusters.values()}) > 1  # not all on one cluster
    offers = inputs.offers("resnet50")
    keys = []
    for name in sorted(names):
        c = clusters[name]
        worker = next(
            i for i, t in enumerate(offers.gpu_types)
            if t == c.worker_type and offers.gpu_region_of(i) == c.region
        )  # fmt: skip
        keys.append((offers.gpu_cloud[worker], c.region, c.architecture, c.worker_type,
                     c.n_workers, c.remote_type or "", c.n_remote))  # fmt: skip
    assert keys == sorted(keys)
    again = plan_fleet([Job(name, 3.0, spec) for name in reversed(names)], inputs)
    assert {j.scenario: j.cluster.identity() for j in again.jobs} == {
        name: c.identity() for name, c in clusters.items()
    }


def test_alike_jobs_exchange_equal_clusters_to_take_them_in_name_order():
    """prefer_canonical (deepvm.planner.fleet._ties): two alike jobs share the
    program's columns (one class: an equal cluster in r1 and in r2, one of each
    fits); the first job by name sits in r2 and the second in r1. The first takes
    r1, the second moving to r2 to make room."""
    import numpy as np
    import scipy.sparse as sp

    from deepvm.planner.fleet._ties import prefer_canonical

    usage = sp.csc_matrix(np.eye(2))  # r1's quota x column 0, r2's x column 1
    owner = np.array([0, 0])  # one class: both jobs' clusters

    def region(c: int) -> tuple[str]:
        return ("r1",) if c == 0 else ("r2",)

    chosen = {0: 1, 1: 0}  # job 0 on r2, job 1 on r1
    out = prefer_canonical(chosen, owner, np.ones(2), np.ones(2), usage, np.ones(2), [0, 1],
                           region)  # fmt: skip
    assert out == {0: 0, 1: 1}
    # Job 1 first by name: it keeps r1, and job 0 finds no later job to exchange with.
    out = prefer_canonical(chosen, owner, np.ones(2), np.ones(2), usage, np.array([1.0, 2.0]),
                           [1, 0], region)  # fmt: skip
    assert out == chosen


def _prefer_canonical_by_hand(chosen, owner, weight, cost, usage, capacity, order, key_of):  # type: ignore[no-untyped-def]
    """prefer_canonical's rule as its docstring states it, slowly: each job in name
    order takes its first equal cluster (of its class) that fits, or that fits once
    a later job (any, in name order) moves to another of its own equal clusters."""
    import numpy as np

    dense = usage.toarray()
    chosen = dict(chosen)
    ties = {}
    for j, c in chosen.items():
        same = (np.abs(weight - weight[c]) <= 1e-9) & (np.abs(cost - cost[c]) <= 1e-9)
        equal = [int(k) for k in np.flatnonzero((owner == owner[c]) & same)]
        ties[j] = sorted(equal, key=key_of)

    def use(c):  # type: ignore[no-untyped-def]
        return dense[:, c]

    used = sum(use(c) for c in chosen.values())
    limit = capacity + 1e-9 * np.maximum(1.0, np.abs(capacity))
    position = {j: k for k, j in enumerate(order)}
    for job in order:
        if job not in chosen:
            continue
        for better in ties[job]:
            if better == chosen[job]:
                break
            delta = use(better) - use(chosen[job])
            if np.all(used + delta <= limit):
                used, chosen[job] = used + delta, better
                break
            found = next(
                ((other, alt, delta + use(alt) - use(chosen[other]))
                 for other in sorted(chosen, key=position.__getitem__)
                 if position[other] > position[job]
                 for alt in ties[other]
                 if alt != chosen[other]
                 and np.all(used + delta + use(alt) - use(chosen[other]) <= limit)),
                None,
            )  # fmt: skip
            if found is not None:
                other, alt, change = found
                used, chosen[job], chosen[other] = used + change, better, alt
                break
    return chosen


def test_prefer_canonical_is_its_rule_by_hand_on_random_fleets():
    """The tie-break finds the jobs that can make room from each pick's own column
    (the short keys' rows can hold every column of a large program); on 300 random
    small fleets, alike jobs sharing their class's columns (and some the same one),
    it gives what its rule, applied by hand over every later job, gives; value,
    cost and every limit are kept."""
    import numpy as np
    import scipy.sparse as sp

    from deepvm.planner.fleet._ties import prefer_canonical

    rng = np.random.default_rng(11)
    exchanges = 0
    for _ in range(300):
        jobs, per_class, keys = (
            int(rng.integers(2, 7)),
            int(rng.integers(2, 5)),
            int(rng.integers(1, 4)),
        )
        classes = int(rng.integers(1, jobs + 1))  # alike jobs share a class's columns
        of_job = rng.integers(0, classes, size=jobs)
        usage = sp.csc_matrix(rng.integers(0, 3, size=(keys, classes * per_class)).astype(float))
        owner = np.repeat(np.arange(classes), per_class)
        weight = rng.integers(1, 3, size=len(owner)).astype(float)  # ties are frequent
        cost = np.ones(len(owner))
        picks = of_job * per_class + rng.integers(0, per_class, size=jobs)
        chosen = {j: int(k) for j, k in enumerate(picks)}
        used = usage.toarray()[:, picks].sum(axis=1)
        capacity = used + rng.integers(0, 2, size=keys)
        order = [int(j) for j in rng.permutation(jobs)]
        rank = rng.permutation(len(owner))
        args = (chosen, owner, weight, cost, usage, capacity, order,
                lambda c, rank=rank: (int(rank[c]),))  # fmt: skip
        out = prefer_canonical(*args)
        assert out == _prefer_canonical_by_hand(*args)
        after = np.array([out[j] for j in range(jobs)])
        assert (owner[after] == owner[picks]).all()  # each job within its class
        assert weight[after].sum() == weight[picks].sum() and cost[after].sum() == cost[picks].sum()
        assert np.all(usage.toarray()[:, after].sum(axis=1) <= capacity + 1e-9)
        exchanges += sum(out[j] != chosen[j] for j in range(jobs)) > 1
    assert exchanges >= 20  # the exchange path ran, not only single moves


def test_config_rows_build_each_cluster_as_the_planner_names_it():
    """JobOptions keep their clusters as arrays (_options.ConfigRows): each Config is
    built when asked for, equal to the one the planner would name, rows taken keep
    their order, and a cluster appended (a running job's) round-trips."""
    import numpy as np

    from deepvm.planner import architectures as arch
    from deepvm.planner.candidates import TIERING, Config
    from deepvm.planner.fleet._options import ConfigRows

    names = [a.name for a in arch.REGISTRY]
    rows = ConfigRows(
        np.array([arch.code(names[0]), arch.code(TIERING)]), np.array([3, 5]),
        np.array([2, 4]), np.array([-1, 7]), np.array([0, 1]),
    )  # fmt: skip
    assert list(rows) == [Config(names[0], 3, 2), Config(TIERING, 5, 4, 7, 1)]
    assert rows[-1] == Config(TIERING, 5, 4, 7, 1) and rows[0:1] == [Config(names[0], 3, 2)]
    assert list(rows.take(np.array([1, 0]))) == [rows[1], rows[0]]
    running = Config(TIERING, 9, 2, 1, 3)
    grown = rows.plus(running)
    assert len(grown) == 3 and grown[2] == running and running in grown and len(rows) == 2
    with pytest.raises(AssertionError, match="round-trip"):
        rows.plus(Config(names[0], 1, 1, None, 2))  # remote nodes without a remote type
