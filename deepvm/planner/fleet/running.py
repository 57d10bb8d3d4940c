"""Running jobs in the fleet plan (docs/ARCHITECTURE.md, "Re-planning running
jobs"): a job that runs keeps its cluster unless moving pays.

For such a job, its cluster tonight is one of its candidates (added if pruning or
the budget left it out, when the job still may run it), and every other candidate
is valued net of the move (deepvm.planner.fleet.migration): its value is the running
cluster's times (1 + the move's gain over the work left). The running cluster
itself is weighted as (1 + min_gain) times its value, so that for the job alone a
move wins only when its gain is above the threshold; a shared quota or the team
budget may still move it, and the plan says so. A running cluster that no longer
fits the job's budget is kept only where the job says so (``keep_running``), else
it is left out and the job's note says why.

Once the plan is solved, :func:`decision` states tonight's one answer for each
running job (deepvm.planner.fleet.types.RunningDecision): it stays where the plan
keeps its cluster, and moves where the plan gives it another (with the move's
cost and gain, and why: the move pays; its cluster is over its budget or gone;
or the shared quotas or team budget need it elsewhere). Nothing else decides.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from deepvm.base.config import Objective
from deepvm.model.cluster import Cluster
from deepvm.planner import architectures as arch
from deepvm.planner._constraints import usage_matrix
from deepvm.planner._enumeration import budget_limit
from deepvm.planner.candidates import Config, cluster_of, hourly_cost
from deepvm.planner.fleet._options import JobOptions, JobState, job_options
from deepvm.planner.fleet.migration import Side, decide, work_left
from deepvm.planner.fleet.types import RunningDecision
from deepvm.planner.offers import Offers
from deepvm.planner.recommendation import Recommendation


def config_of(offers: Offers, cluster: Cluster) -> Config | None:
    """The running cluster as tonight's offers name it (None: its types are gone)."""
    worker = [
        i
        for i, t in enumerate(offers.gpu_types)
        if t == cluster.worker_type and offers.gpu_region_of(i) == cluster.region
    ]
    if not worker:
        return None
    remote = None
    if cluster.remote_type:
        found = [
            j
            for j, t in enumerate(offers.cpu_types)
            if t == cluster.remote_type and offers.cpu_region_of(j) == cluster.region
        ]
        if not found:
            return None
        remote = found[0]
    return Config(cluster.architecture, worker[0], cluster.n_workers, remote, cluster.n_remote)


def adjust(w: JobState, score_of: object, value_of: object, min_gain: float) -> None:
    """Value ``w``'s candidates net of moving off its running cluster (the module
    docstring). ``score_of(config)`` is the planner's score of a cluster and
    ``value_of(scores)`` the job's value of scores (deepvm.planner.fleet.plan)."""
    run, planner, o = w.job.running, w.planner, w.options
    if run is None or planner is None or o is None:
        return
    offers = planner.offers
    o = job_options(planner, w.job.budget, prune=False)  # pruned later, net of moving
    current = config_of(offers, run.cluster)
    if current is None:
        w.note = (
            f"its running cluster ({run.cluster.words(architecture=True, region=True)}) is "
            "not in tonight's catalog: it moves"
        )
        return
    cost_now = hourly_cost(offers, current)
    if cost_now > float(budget_limit(w.job.budget)) and not w.job.keep_running:
        w.note = (
            f"its running cluster now costs ${cost_now:.4f}/h, over its ${w.job.budget:g}/h "
            "budget: it moves (keep_running = true keeps it)"
        )
        return  # planned as a new job: every cluster is a move
    current_score = float(score_of(current))  # type: ignore[operator]
    if current not in o.configs:
        o = _with(o, offers, current, current_score, cost_now)
    value_now = float(value_of(current_score))  # type: ignore[operator]
    objective = Objective(planner.objective)
    old = _side(offers, current, run.efficiency, run.checkpoint_interval_s)
    left = work_left(w.job.spec.work_flops, run.work_done_flops, old)
    values = np.empty(len(o))
    weights = np.empty(len(o))
    for k, config in enumerate(o.configs):
        if config == current:
            values[k], weights[k] = value_now, value_now * (1 + min_gain)
            continue
        new = _side(offers, config, 1.0, math.nan)
        if objective == Objective.GOODPUT:  # the score is the goodput: F x efficiency
            efficiency = float(score_of(config)) / new.throughput_flops  # type: ignore[operator]
            new = Side(new.throughput_flops, new.hourly_cost, new.network_gbps, efficiency)
        d = decide(
            objective, old, new, left, checkpoint_gb=planner.job.checkpoint_gb,
            restart_s=planner.costs.restart_s, min_gain=min_gain,
        )  # fmt: skip
        values[k] = weights[k] = value_now * (1 + d.gain)
    w.options = o
    w.current = current
    w.net_values = {c: float(v) for c, v in zip(o.configs, values, strict=True)}
    w.net_weights = {c: float(v) for c, v in zip(o.configs, weights, strict=True)}


def decision(
    w: JobState, config: Config | None, cluster: Recommendation | None, min_gain: float
) -> RunningDecision | None:
    """Tonight's answer for running job ``w`` given the plan's ``config`` for it
    (``cluster``: that config as the planner describes it); None if it does not run."""
    run, planner = w.job.running, w.planner
    if run is None:
        return None
    was = run.cluster.words(architecture=True, region=True)
    if config is None or cluster is None or planner is None:
        why = w.note or "the plan leaves it unplanned"
        return RunningDecision(was, "stop", None, None, None, None, f"{why}: it stops")
    offers = planner.offers
    current = config_of(offers, run.cluster)
    if current is not None and config == current:
        return RunningDecision(was, "stay", 0.0, 0.0, 0.0, None, "stays on its running cluster")
    if current is not None:
        old = _side(offers, current, run.efficiency, run.checkpoint_interval_s)
    else:  # its types left the catalog: as it was adopted
        efficiency = run.efficiency if run.efficiency > 0 else 1.0
        old = Side(
            run.cluster.throughput_flops, run.cluster.hourly_cost, _DEFAULT_GBPS, efficiency,
            run.checkpoint_interval_s,
        )  # fmt: skip
    new = Side(
        cluster.throughput_flops, cluster.hourly_cost, float(offers.gpu_gbps[config.worker]),
        cluster.efficiency if cluster.efficiency > 0 else 1.0,
    )  # fmt: skip
    d = decide(
        planner.objective, old, new,
        work_left(w.job.spec.work_flops, run.work_done_flops, old),
        checkpoint_gb=planner.job.checkpoint_gb, restart_s=planner.costs.restart_s,
        min_gain=min_gain,
    )  # fmt: skip
    if w.note:  # over its budget, or gone from the catalog (adjust said which)
        reason = w.note
    elif d.move:
        reason = d.reason.replace(": stay", "")
    else:
        reason = (
            f"moving alone would not pay ({d.gain:+.1%} net of the move), but the shared "
            "quotas or the team budget need its cluster: it moves"
        )
    return RunningDecision(was, "move", d.gain, d.cost.hours, d.cost.usd, d.break_even_h, reason)


_DEFAULT_GBPS = 10.0  # a node's link where the catalog no longer says (a gone type)


def _with(o: JobOptions, offers: Offers, config: Config, score: float, cost: float) -> JobOptions:
    """``o`` and the running cluster (its usage on ``o``'s keys, and any key of its own)."""
    usage, keys = usage_matrix(
        offers,
        np.array([arch.code(config.architecture)]),
        np.array([config.worker]),
        np.array([config.n_workers]),
        np.array([-1 if config.remote is None else config.remote]),
        np.array([config.n_remote]),
    )
    every = list(o.keys) + [k for k in keys if k not in o.keys]
    old = np.zeros((len(o), len(every)))
    old[:, : len(o.keys)] = o.usage.toarray()
    row = np.zeros((1, len(every)))
    for c, key in enumerate(keys):
        row[0, every.index(key)] = usage[0, c]
    return JobOptions(
        o.configs.plus(config),
        np.append(o.score, score),
        np.append(o.cost, cost),
        sp.csr_matrix(np.vstack([old, row])),
        every,
        o.considered,
    )


def _side(offers: Offers, config: Config, efficiency: float, interval_s: float) -> Side:
    cluster = cluster_of(offers, config)
    return Side(
        cluster.throughput_flops,
        cluster.hourly_cost,
        float(offers.gpu_gbps[config.worker]),
        efficiency if efficiency > 0 else 1.0,
        interval_s,
    )


__all__ = ["adjust", "config_of", "decision"]
