"""The fleet command: one plan for every registered job (deepvm.planner.fleet.plan);
the adopt and finish commands: what a registered job runs on now (deepvm.records.running)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from deepvm.base.config import DEFAULT_CHECKPOINT_VERSIONS, MAX_WORK_FLOPS
from deepvm.base.errors import DeepvmError
from deepvm.cli._arguments import TEAM_BUDGET, date_text, number
from deepvm.cli._common import (
    add_inputs,
    add_jobs_file,
    add_min_gain,
    add_store_timeout,
    add_time_limit,
    check_output_path,
    planner_inputs,
    store_location,
    writable_store,
)
from deepvm.cli._launch_files import check_launch_files
from deepvm.cli._listing import add_format, output_format, render_listing
from deepvm.cli._output import (
    dollars_text,
    hours_text,
    json_text,
    money_text,
    progress,
    stepwise_progress,
    table_text,
    tflops,
)
from deepvm.model.cluster import cluster_words

if TYPE_CHECKING:  # the planner is imported when a command runs, not at start-up
    from deepvm.planner.fleet.types import FleetPlan

__all__ = [
    "WORK_DONE",
    "add_adopt_parser",
    "add_finish_parser",
    "add_parsers",
    "cmd_adopt",
    "cmd_finish",
    "cmd_fleet",
    "warn_unproven",
]


def add_parsers(sub: Any) -> None:
    fl_ = sub.add_parser(
        "fleet",
        help="one plan for every registered job under the shared quotas",
        description="Plan every job of the scenarios file at once: each job's best cluster "
        "such that together they fit the account's quotas (per region, quota group and "
        "market) and, with --team-budget, the team's hourly budget. Jobs gain priority x "
        "(their objective over what they would get alone); a job may stay unplanned.",
    )
    add_jobs_file(fl_, "registered jobs (TOML; default: the shipped datasets/scenarios.toml)")
    fl_.add_argument(
        "--team-budget",
        type=TEAM_BUDGET,
        metavar="USD_PER_HOUR",
        help="the most all the jobs' clusters may cost together per hour (default: none)",
    )
    fl_.add_argument(
        "--store",
        metavar="URI",
        help="plan on this store's newest prices, benchmarks and fits (read only; "
        "default: $DEEPVM_STORE if set)",
    )
    fl_.add_argument(
        "--sky-yaml",
        metavar="FOLDER",
        help="write each planned job's SkyPilot task files into FOLDER (JOB.yaml, and "
        "JOB-anchor.yaml / JOB-remote.yaml where its architecture has them)",
    )
    add_min_gain(fl_)
    add_store_timeout(fl_)
    add_time_limit(fl_)
    add_format(fl_)
    add_inputs(fl_)


def cmd_fleet(args: argparse.Namespace) -> int:
    from deepvm.base.errors import SolverError
    from deepvm.planner.fleet.plan import plan_fleet
    from deepvm.records.jobs import load_jobs

    if args.sky_yaml is not None:
        check_output_path("--sky-yaml", args.sky_yaml, folder=True)
    fmt = output_format(args)  # a usage error before the solve, not after it
    uri = store_location(args, required=False)
    store = None
    if uri:
        from deepvm.store import Store

        store = Store.open(uri)
    inputs = planner_inputs(args, store=store)
    jobs = load_jobs(args.scenarios, inputs.workloads)
    if store is not None:  # jobs that run (deepvm adopt) weigh moving against staying
        from deepvm.records.running import with_running

        jobs = with_running(store, jobs)
    plan = plan_fleet(
        jobs, inputs, team_budget=args.team_budget, time_limit_s=args.time_limit,
        min_gain=args.min_gain, progress=stepwise_progress(),
    )  # fmt: skip
    warn_unproven(plan)
    if plan.status not in ("optimal", "limit_with_incumbent"):
        raise SolverError(
            f"the fleet solve stopped {plan.status.replace('_', ' ')} after "
            f"{plan.solve_s:.1f} s without a plan; raise --time-limit"
        )
    text = json_text(plan.as_dict()) if fmt == "json" else _fleet_listing(args, plan)
    if args.sky_yaml is not None:  # after the answer is rendered: a bad --columns writes nothing
        versions = {j.name: j.spec.checkpoint_versions for j in jobs}
        _write_fleet_launch_files(args.sky_yaml, plan, versions)
    sys.stdout.write(text)
    if fmt != "table":
        return 0
    _print_quota_use(plan)
    return 0


def warn_unproven(plan: FleetPlan) -> None:
    """On stderr, what the time limit left unproven in ``plan``, if anything
    (``fleet``, ``nightly``)."""
    words = plan.unproven_words("--time-limit")
    if words is not None:
        print(f"warning: {words}", file=sys.stderr)


def _fleet_listing(args: argparse.Namespace, plan: Any) -> str:
    from deepvm.planner.fleet.types import deadline_words

    team = f"  team budget ${plan.team_budget:g}/h" if plan.team_budget is not None else ""
    header = (
        f"Fleet of {len(plan.jobs)} jobs  value {plan.objective_value:.4g}  "
        f"${plan.hourly_cost:.4f}/h{team}  prices {plan.prices_snapshot}"
    )
    raw = plan.as_dict()["jobs"]
    rows = []
    for job in raw:
        planned = job["planned"]
        rows.append(
            {
                **job,
                "job": job["scenario"],
                "prio": f"{job['priority']:g}" + ("" if job["shared"] else " (alone)"),
                "value_text": f"{job['value']:.3f}",
                "cluster": cluster_words(job, architecture=True) if planned else "unplanned",
                "makespan": hours_text(job["expected_makespan_h"] or math.nan),
                "total": dollars_text(job["expected_total_cost"] or math.nan),
                "deadline": deadline_words(job),
                "cost": money_text(job["hourly_cost"]),
                "tflops": tflops(job["throughput_flops"]) if planned else None,
                "solo_cost": (
                    f"{job['solo_hourly_cost']:.4f}"
                    if job["solo_hourly_cost"] is not None
                    else None
                ),
                "solo_tflops": (
                    tflops(job["solo_throughput_flops"])
                    if job["solo_throughput_flops"] is not None
                    else None
                ),
                "held_back_by": job["binding"] or job["note"],
            }
        )
    columns = [
        ("job", "job"),
        ("prio", "priority"),
        ("value_text", "value"),
        ("region", "region"),
        ("zone", "zone"),
        ("cluster", "cluster"),
        ("cost", "$/h"),
        ("tflops", "TFLOP/s"),
        ("solo_cost", "alone $/h"),
        ("solo_tflops", "alone TFLOP/s"),
    ]
    if any(job["expected_makespan_h"] is not None for job in raw):  # a job gave its work
        columns += [("makespan", "makespan"), ("total", "total $")]
    if any(job["deadline_h"] is not None for job in raw):
        columns += [("deadline", "deadline")]
    running = [_running_words(job) for job in raw]
    if any(running):  # jobs that run (deepvm adopt): stay or move
        for row, words in zip(rows, running, strict=True):
            row["running"] = words
            if words:  # said here, not under held back by
                row["held_back_by"] = row["binding"]
        columns += [("running", "running")]
    columns += [("held_back_by", "held back by")]
    return render_listing(args, rows, columns, list(raw[0]) if raw else ["scenario"], header=header)


def _running_words(job: dict[str, Any]) -> str:
    """A running job's decision (deepvm.planner.fleet.types.RunningDecision) in a
    word or two: ``stays``, ``moves (+44.6%)``, ``moves (over budget)``, ``stops``."""
    decision = job.get("decision")
    if decision is None:
        return ""
    if decision == "move":
        reason = job["decision_reason"] or ""
        why = (
            "over budget"
            if "over its" in reason
            else ("gone" if "not in tonight's catalog" in reason else f"{job['gain']:+.1%}")
        )
        return f"moves ({why})"
    return {"stay": "stays", "stop": "stops"}.get(decision, decision)


def _write_fleet_launch_files(folder: str, plan: Any, versions: dict[str, int]) -> None:
    """Each planned job's SkyPilot tasks (deepvm.render.launch) in ``folder``, named after
    the job; every file checked before any is written."""
    from pathlib import Path

    from deepvm.launcher.wheel import build_wheel
    from deepvm.render.launch import write_sky_yaml

    todo = []
    for job in plan.jobs:
        if not job.planned or job.cluster is None:
            continue
        rec = {**job.cluster.as_dict(), "binding": job.binding}
        path = os.path.join(folder, f"{job.scenario}.yaml")
        check_launch_files(path, rec, job.workload, f"{job.scenario}, ")
        todo.append((path, rec, job))
    if not todo:
        return
    wheel = build_wheel(Path(folder).resolve())  # one wheel, shared by every job's tasks
    progress(f"wrote {wheel} (deepvm for the nodes)")
    for path, rec, job in todo:
        title = (
            f"deepvm fleet: {job.scenario} (priority {job.priority:g}, value {job.value:.3f}), "
            f"prices {plan.prices_snapshot}"
        )
        files = write_sky_yaml(
            path, rec, workload=job.workload, title=title, wheel=wheel,
            versions=versions.get(job.scenario, DEFAULT_CHECKPOINT_VERSIONS),
        )  # fmt: skip
        for written in files:
            progress(f"wrote {written}")


def _amount(value: float, unit: str) -> str:
    from deepvm.catalog.quotas import UNIT_WORDS

    return f"{value:g} {UNIT_WORDS[unit]}"


def _print_quota_use(plan: Any) -> None:
    print()
    usage = [
        {
            **u,
            "where": (u["label"] or f"{u['quota_group']} {u['market'].replace('_', '-')}")
            + (f" in {u['region']}" if u["region"] else ""),
            # Each quota counts in its own unit (vCPUs, or GPUs on GCP): amounts say it.
            "quota": "no limit" if u["quota"] is None else _amount(u["quota"], u["unit"]),
            "used": _amount(u["used"], u["unit"]),
            "solo_used": _amount(u["solo_used"], u["unit"]),
        }
        for u in plan.as_dict()["usage"]
    ]
    print(
        table_text(
            usage,
            [
                ("where", "quota"),
                ("used", "fleet use"),
                ("quota", "limit"),
                ("solo_used", "use if planned alone"),
            ],
        )
    )


# Work done so far: none yet (0) up to the largest training work deepvm accepts.
WORK_DONE = number(ge=0, le=MAX_WORK_FLOPS)


def add_adopt_parser(sub: Any) -> None:
    ad_ = sub.add_parser(
        "adopt",
        help="record which cluster a registered job now runs on",
        description="Mark a plan in the store as the cluster JOB runs on (the store's "
        "running table): by default the job's cluster in the newest fleet plan, or with "
        "--rank N deepvm's Nth recommendation for it. The nightly then weighs moving it "
        "against staying (deepvm.planner.fleet.migration).",
    )
    ad_.add_argument("job", help="the registered job's name (the scenarios file's name)")
    ad_.add_argument("--store", metavar="URI", help="the store (default: $DEEPVM_STORE)")
    which = ad_.add_mutually_exclusive_group()
    which.add_argument(
        "--rank", type=int, metavar="N", help="deepvm's recommendation of rank N, not the fleet's"
    )
    which.add_argument(
        "--cluster",
        metavar="WORDS",
        help="the cluster it runs on, as deepvm writes it, e.g. 'tiering: 2 x p4d.24xlarge "
        "spot + 1 x t3.xlarge in us-east-1' (found in that night's catalog)",
    )
    done = ad_.add_mutually_exclusive_group()
    done.add_argument(
        "--work-done", type=WORK_DONE, metavar="FLOPS", help="training FLOPs done so far"
    )
    done.add_argument(
        "--started",
        metavar="ISO_TIME",
        help="when it started (e.g. 2026-12-01T08:00Z): the work done is estimated at the "
        "cluster's goodput since then",
    )
    ad_.add_argument(
        "--date",
        type=date_text,
        metavar="YYYY-MM-DD",
        help="adopt the plan of this night or before",
    )
    add_format(ad_)


def add_finish_parser(sub: Any) -> None:
    fi_ = sub.add_parser(
        "finish",
        help="record that a running job has ended",
        description="Mark JOB as no longer running (the store's running table): the "
        "nightly stops weighing its moves and plans it as a job to start. Tear its cluster "
        "down yourself (deepvm launch --down NAME).",
    )
    fi_.add_argument("job", help="the registered job's name")
    fi_.add_argument("--store", metavar="URI", help="the store (default: $DEEPVM_STORE)")
    add_format(fi_)


def cmd_finish(args: argparse.Namespace) -> int:
    from deepvm.records.running import finish

    store = writable_store(store_location(args, required=True))
    ended = finish(store, args.job)
    row = {"scenario": args.job, "finished": True, **ended.cluster.as_dict()}
    if output_format(args) == "json":
        sys.stdout.write(json_text(row))
        return 0
    words = cluster_words(row, architecture=True, region=True)
    print(f"{args.job} no longer runs (it ran {words})")
    return 0


def cmd_adopt(args: argparse.Namespace) -> int:
    from deepvm.records.running import adopt, started_time

    store = writable_store(store_location(args, required=True))
    if args.rank is not None and args.rank < 1:
        raise DeepvmError(f"--rank {args.rank} must be 1 or more")
    started = started_time(args.started) if args.started else None
    adopted = adopt(
        store, args.job, rank=args.rank, work_done_flops=args.work_done, started_at=started,
        date=args.date, cluster_words=args.cluster,
    )  # fmt: skip
    row = {
        "scenario": adopted.scenario,
        "plan_date": adopted.plan_date,
        "source": adopted.source,
        **adopted.cluster.as_dict(),
        "work_done_flops": adopted.work_done_flops,
    }
    if output_format(args) == "json":
        sys.stdout.write(json_text(row))
        return 0
    done = adopted.work_done_flops
    print(
        f"{adopted.scenario} runs {cluster_words(row, architecture=True, region=True)} "
        f"(the {adopted.source} plan of {adopted.plan_date})"
        + (f"; {done:.3g} FLOPs done" if done is not None else "")
    )
    return 0
