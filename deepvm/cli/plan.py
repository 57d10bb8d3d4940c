"""Planning commands: recommend, sweep, compare, fleet."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from deepvm.cli.common import (
    NON_NEGATIVE,
    POSITIVE,
    SMALL_COUNT,
    add_format,
    add_inputs,
    add_job,
    add_store_timeout,
    add_time_limit,
    check_output_path,
    check_outputs,
    dollars_text,
    hours_text,
    job_from_args,
    json_text,
    money_text,
    name_text,
    output_format,
    planner_inputs,
    progress,
    render_listing,
    store_location,
    table_text,
    tflops,
    writable_store,
)
from deepvm.cluster import cluster_words
from deepvm.config import (
    DEFAULT_TOP,
    MAX_SWEEP_BUDGETS,
)
from deepvm.errors import DeepvmError, InputError


def add_parsers(sub: Any) -> None:
    rec = sub.add_parser(
        "recommend",
        help="the best clusters for a budget",
        description="Rank the best clusters for at most BUDGET USD per hour.",
    )
    rec.add_argument(
        "--budget",
        type=POSITIVE,
        required=True,
        metavar="USD_PER_HOUR",
        help="the most you pay per hour for the whole cluster",
    )
    rec.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help="deepvm (default), deepvm_noscale, cost_first, performance_first, "
        "on_demand, or all; repeatable",
    )
    rec.add_argument(
        "--top",
        type=SMALL_COUNT,
        default=DEFAULT_TOP,
        metavar="K",
        help=f"distinct configurations per optimised policy (default: {DEFAULT_TOP})",
    )
    rec.add_argument(
        "--store",
        metavar="URI",
        help="read benchmarks from and write the recommendations to this store "
        "(default: $DEEPVM_STORE if set, else nothing is read or written)",
    )
    add_store_timeout(rec)
    rec.add_argument(
        "--scenario",
        type=name_text,
        help="name of this job in the store (default: derived from workload, budget and objective)",
    )
    rec.add_argument(
        "--sky-yaml",
        metavar="FILE",
        help="write the first recommendation as a SkyPilot task YAML (a Single Anchor's "
        "anchor and a Tiering remote tier go to FILE-anchor.yaml / FILE-remote.yaml)",
    )
    add_job(rec)
    add_inputs(rec)

    sw = sub.add_parser(
        "sweep",
        help="every policy over a range of budgets",
        description="The paper's simulation: every policy at every budget.",
    )
    sw.add_argument(
        "--budgets",
        required=True,
        metavar="START:STOP:STEP",
        help="budgets in USD/h, STOP excluded (e.g. 0:10.1:0.1), or a comma list",
    )
    sw.add_argument(
        "--policy",
        action="append",
        metavar="NAME",
        help="policies to sweep (default: all); repeatable",
    )
    sw.add_argument("--out", metavar="FILE.parquet", help="also write the results as Parquet")
    sw.add_argument(
        "--plot",
        metavar="FILE.png",
        help="also draw normalised performance per policy against the budget",
    )
    sw.add_argument("--store", metavar="URI", help="use the latest benchmarks in this store")
    add_store_timeout(sw)
    add_job(sw)
    add_inputs(sw)

    cmp_ = sub.add_parser(
        "compare",
        help="one training job on deepvm's top clusters vs the cost-first and "
        "performance-first rules",
        description="Expected makespan (with preemption) and hourly price of deepvm's top-3 "
        "clusters next to cost-first and performance-first, for a fixed amount of work "
        "(the DeepVM paper's AWS comparison).",
    )
    cmp_.add_argument("--budget", type=POSITIVE, required=True, metavar="USD_PER_HOUR")
    cmp_.add_argument(
        "--top",
        type=SMALL_COUNT,
        default=DEFAULT_TOP,
        metavar="K",
        help=f"deepvm clusters (default: {DEFAULT_TOP})",
    )
    cmp_.add_argument("--out", metavar="FILE.parquet", help="also write the rows as Parquet")
    cmp_.add_argument("--plot", metavar="FILE.png", help="also draw makespan and price per cluster")
    cmp_.add_argument("--store", metavar="URI", help="use the latest benchmarks in this store")
    add_store_timeout(cmp_)
    add_job(cmp_)
    add_inputs(cmp_)

    fl_ = sub.add_parser(
        "fleet",
        help="one plan for every registered job under the shared quotas",
        description="Plan every job of the scenarios file at once: each job's best cluster "
        "such that together they fit the account's quotas (per region, quota group and "
        "market) and, with --team-budget, the team's hourly budget. Jobs gain priority x "
        "(their objective over what they would get alone); a job may stay unplanned.",
    )
    fl_.add_argument(
        "--scenarios",
        metavar="FILE",
        help="registered jobs (TOML; default: the shipped datasets/scenarios.toml)",
    )
    fl_.add_argument(
        "--team-budget",
        type=NON_NEGATIVE,
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
    add_store_timeout(fl_)
    add_time_limit(fl_)
    add_format(fl_)
    add_inputs(fl_)


REC_JSON_KEYS = (
    "policy",
    "rank",
    "region",
    "zone",
    "architecture",
    "worker_type",
    "n_workers",
    "n_spot",
    "n_on_demand",
    "remote_type",
    "n_remote",
    "hourly_cost",
    "throughput_flops",
    "objective_value",
    "preemptions_per_h",
    "checkpoint_interval_s",
    "efficiency",
    "goodput_flops",
    "expected_makespan_h",
    "expected_total_cost",
    "overhead_model",
    "overhead_source",
    "flops_source",
    "binding",
    "cheaper",
    "faster",
)


def cmd_recommend(args: argparse.Namespace) -> int:
    from deepvm.planner import recommend

    store = writable_store(store_location(args, required=False))
    if args.sky_yaml:
        _check_yaml_path(args.sky_yaml)
    inputs = planner_inputs(args, store)
    job = job_from_args(args, policies=["deepvm"], workloads=inputs.workloads)
    result = recommend(args.budget, job, inputs=inputs)
    fmt = output_format(args)
    # The answer is rendered before anything is written: a bad --columns writes nothing.
    recs: list[dict[str, Any]] = [r.as_dict() for r in result.recommendations]
    text = _recommend_text(args, fmt, result, recs)
    if args.sky_yaml:
        _write_launch_files(args.sky_yaml, result, result.recommendations[0].as_dict())
    written = None
    if store:
        from deepvm.results import write_recommendations

        written, _ = write_recommendations(result, store, scenario=args.scenario)
    sys.stdout.write(text)
    if fmt == "table":
        _recommend_notes(result, recs)
    if written is not None:
        progress(f"wrote {written}")
    return 0


def _recommend_text(args: argparse.Namespace, fmt: str, result: Any, recs: list[Any]) -> str:
    job = {"budget": result.budget, "objective": result.objective, "workload": result.workload}
    if fmt == "json":
        return json_text(
            {
                **job,
                "checkpoint_gb": result.checkpoint_gb,
                "prices_snapshot": result.prices_snapshot,
                "recommendations": [{k: r[k] for k in REC_JSON_KEYS} for r in recs],
                "measurements": {
                    "used": list(result.measurements.used),
                    "not_used": list(result.measurements.not_used),
                },
                "left_out": list(result.left_out),
            }
        )
    job["prices_snapshot"] = result.prices_snapshot
    for r in recs:
        r.update(job)
        r["cluster"] = cluster_words(r)
        r["tflops"] = tflops(r["throughput_flops"])
        r["cost"] = f"{r['hourly_cost']:.4f}"
        r["scaling"] = f"{r['overhead_model']} [{r['overhead_source']}]"
        r["risk"] = f"{r['preemptions_per_h']:.3g}/h, eff {r['efficiency']:.1%}"
        r["makespan"] = hours_text(r["expected_makespan_h"])
        r["total"] = dollars_text(r["expected_total_cost"])
    columns = [
        ("policy", "policy"),
        ("rank", "#"),
        ("region", "region"),
        ("zone", "zone"),
        ("architecture", "architecture"),
        ("cluster", "cluster"),
        ("cost", "$/h"),
        ("tflops", "TFLOP/s"),
    ]
    if result.work_flops is not None:
        columns += [("makespan", "makespan"), ("total", "total $")]
    columns += [("binding", "held back by")]
    header = (
        f"Budget ${result.budget:g}/h  workload {result.workload}  objective "
        f"{result.objective}  checkpoint {result.checkpoint_gb:.3g} GB  prices "
        f"{result.prices_snapshot}"
    )
    return render_listing(args, recs, columns, [*job, *REC_JSON_KEYS], header=header)


def _write_launch_files(path: str, result: Any, first: dict[str, Any]) -> None:
    """The first recommendation's SkyPilot tasks; every file checked before any is written."""
    from deepvm.launch import sky_tasks, task_paths, write_sky_yaml

    roles = list(sky_tasks(first, workload=result.workload))
    for role, where in task_paths(path, roles).items():
        check_output_path(f"--sky-yaml ({role} task)", str(where))
    title = (
        f"deepvm recommend --budget {result.budget:g}: {first['policy']} #{first['rank']} "
        f"for {result.workload} (objective {result.objective}), prices "
        f"{result.prices_snapshot}"
    )
    for written in write_sky_yaml(path, first, workload=result.workload, title=title):
        progress(f"wrote {written}")


def _check_yaml_path(path: str) -> None:
    if not path.endswith((".yaml", ".yml")):
        raise DeepvmError(f"--sky-yaml {path!r} must end in .yaml")
    check_output_path("--sky-yaml", path)


def _recommend_notes(result: Any, recs: list[dict[str, Any]]) -> None:
    """What the table leaves out: the next cheaper and faster cluster, where F is an
    estimate, measurements not used, types left out."""
    for r in recs:
        for kind, alt in (("cheaper", r.get("cheaper")), ("faster", r.get("faster"))):
            if alt:
                where = "" if kind == "cheaper" else f" (needs ${alt['budget']:g}/h)"
                print(
                    f"{r['policy']} #{r['rank']}: next {kind}: {alt['architecture']} "
                    f"{cluster_words(alt)}, ${alt['hourly_cost']:.4f}/h, "
                    f"{tflops(alt['throughput_flops'])} TFLOP/s{where}"
                )
    if any(r["flops_source"] == "estimate" for r in recs):
        print(
            "Some F are estimates (see --columns ...,flops_source): no measurement or published "
            "figure; the accelerators' peak FLOP/s times the share of peak that the published "
            "GPU nearest in peak reaches on this workload (measure with --throughput FILE)."
        )
    notes = result.measurements.describe()
    if notes:
        print(notes)
    if result.left_out:
        print(
            "left out (their GPUs cannot hold the workload): "
            + ", ".join(f"{o['instance_type']} ({o['reason']})" for o in _by_type(result.left_out))
        )


def _by_type(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """One row per instance type (the same type is left out in every region)."""
    return list({r["instance_type"]: r for r in rows}.values())


def cmd_sweep(args: argparse.Namespace) -> int:
    from deepvm.planner import sweep

    budgets = parse_budgets(args.budgets)
    check_outputs(args.out, args.plot)
    inputs = planner_inputs(args)
    result = sweep(
        budgets, job_from_args(args, policies=["all"], workloads=inputs.workloads), inputs=inputs
    )
    fmt = output_format(args)
    # Rendered before --out and --plot are written: a bad --columns writes nothing.
    if fmt == "json":  # pandas is not needed for these rows: sweeps stay light
        text = json_text({"budgets": result.budgets, "results": result.rows})
    else:
        text = _sweep_listing(args, result)
    if args.out:
        from deepvm.results import write_parquet_atomic

        write_parquet_atomic(result.results, args.out)
    if args.plot:
        from deepvm.plots import plot_sweep

        title = f"{result.workload}, objective {result.objective}"
        progress(f"wrote {plot_sweep(result.results, args.plot, title, result.prices_snapshot)}")
    sys.stdout.write(text)
    return 0


def _sweep_listing(args: argparse.Namespace, result: Any) -> str:
    shown = [
        {**r, "tflops": tflops(r["throughput_flops"]), "norm": f"{r['normalized']:.3f}"}
        for r in result.rows
    ]
    return render_listing(
        args,
        shown,
        [
            ("budget", "budget"),
            ("policy", "policy"),
            ("region", "region"),
            ("architecture", "architecture"),
            ("worker_type", "worker"),
            ("n_workers", "n"),
            ("remote_type", "remote"),
            ("n_remote", "m"),
            ("hourly_cost", "$/h"),
            ("tflops", "TFLOP/s"),
            ("norm", "normalized"),
        ],
        list(result.rows[0]) if result.rows else ["budget", "policy"],
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from deepvm.planner import compare

    check_outputs(args.out, args.plot)
    inputs = planner_inputs(args)
    job = job_from_args(args, policies=["deepvm"], workloads=inputs.workloads)
    if job.work_flops is None:
        raise DeepvmError(
            "compare needs the training job: --work FLOPS, or --epochs with --dataset-size"
        )
    result, df = compare(args.budget, job.work_flops, job, inputs=inputs)
    df["cluster"] = [cluster_words(r) for r in df.to_dict("records")]
    text = _compare_text(args, result, df)  # before --out and --plot: see cmd_sweep
    if args.out:
        from deepvm.results import write_parquet_atomic

        write_parquet_atomic(df, args.out)
    if args.plot:
        from deepvm.plots import plot_compare

        title = (
            f"{result.workload}: {result.work_flops:.3g} FLOPs within ${result.budget:g}/h "
            f"(objective {result.objective}); prices {result.prices_snapshot}"
        )
        progress(f"wrote {plot_compare(df, args.plot, title)}")
    sys.stdout.write(text)
    return 0


def _compare_text(args: argparse.Namespace, result: Any, df: Any) -> str:
    records = json.loads(df.to_json(orient="records"))
    fmt = output_format(args)
    if fmt == "json":
        return json_text(
            {
                "budget": result.budget,
                "work_flops": result.work_flops,
                "objective": result.objective,
                "workload": result.workload,
                "rows": records,
            }
        )
    header = (
        f"{result.work_flops:.3g} FLOPs of {result.workload} within ${result.budget:g}/h, "
        f"objective {result.objective}, prices {result.prices_snapshot}"
    )
    shown = [dict(r) for r in records]
    for r in shown:
        r["cost"] = f"{r['hourly_cost']:.4f}"
        r["tflops"] = tflops(r["throughput_flops"])
        r["eff"] = f"{r['efficiency']:.1%}"
        r["makespan"] = hours_text(r["expected_makespan_h"])
        r["total"] = dollars_text(r["expected_total_cost"])
    return render_listing(
        args,
        shown,
        [
            ("label", "cluster of"),
            ("architecture", "architecture"),
            ("cluster", "cluster"),
            ("cost", "$/h"),
            ("tflops", "TFLOP/s"),
            ("eff", "efficiency"),
            ("makespan", "makespan"),
            ("total", "total $"),
        ],
        list(df.columns),
        header=header,
    )


def cmd_fleet(args: argparse.Namespace) -> int:
    from deepvm.errors import SolverError
    from deepvm.planner.fleet_plan import plan_fleet
    from deepvm.scenarios import load_scenarios

    if args.sky_yaml:
        check_output_path("--sky-yaml", args.sky_yaml, folder=True)
    inputs = planner_inputs(args)
    jobs = load_scenarios(args.scenarios, inputs.workloads)
    plan = plan_fleet(jobs, inputs, team_budget=args.team_budget, time_limit_s=args.time_limit)
    if plan.status != "optimal":
        raise SolverError(
            f"the fleet solve stopped {plan.status.replace('_', ' ')} after "
            f"{plan.solve_s:.1f} s without a proven optimum; raise --time-limit"
        )
    fmt = output_format(args)
    text = json_text(plan.as_dict()) if fmt == "json" else _fleet_listing(args, plan)
    if args.sky_yaml:  # after the answer is rendered: a bad --columns writes nothing
        _write_fleet_launch_files(args.sky_yaml, plan)
    sys.stdout.write(text)
    if fmt != "table":
        return 0
    _print_quota_use(plan)
    return 0


def _fleet_listing(args: argparse.Namespace, plan: Any) -> str:
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
                "deadline": _deadline_text(job),
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
    columns += [("held_back_by", "held back by")]
    return render_listing(args, rows, columns, list(raw[0]) if raw else ["scenario"], header=header)


def _deadline_text(job: dict[str, Any]) -> str | None:
    if job["deadline_h"] is None:
        return None
    if job["meets_deadline"] is None:
        return f"{job['deadline_h']:g} h"
    return f"{'meets' if job['meets_deadline'] else 'MISSES'} {job['deadline_h']:g} h"


def _write_fleet_launch_files(folder: str, plan: Any) -> None:
    """Each planned job's SkyPilot tasks (deepvm.launch) in ``folder``, named after
    the job; every file checked before any is written."""
    import os

    from deepvm.launch import sky_tasks, task_paths, write_sky_yaml

    todo = []
    for job in plan.jobs:
        if not job.planned or job.cluster is None:
            continue
        rec = {**job.cluster.as_dict(), "binding": job.binding}
        path = os.path.join(folder, f"{job.scenario}.yaml")
        roles = list(sky_tasks(rec, workload=job.workload))
        for role, where in task_paths(path, roles).items():
            check_output_path(f"--sky-yaml ({job.scenario}, {role} task)", str(where))
        todo.append((path, rec, job))
    for path, rec, job in todo:
        title = (
            f"deepvm fleet: {job.scenario} (priority {job.priority:g}, value {job.value:.3f}), "
            f"prices {plan.prices_snapshot}"
        )
        for written in write_sky_yaml(path, rec, workload=job.workload, title=title):
            progress(f"wrote {written}")


def _print_quota_use(plan: Any) -> None:
    print()
    usage = [
        {
            **u,
            "where": f"{u['quota_group']} {u['market'].replace('_', '-')}"
            + (f" in {u['region']}" if u["region"] else ""),
            "quota": "no limit" if u["quota"] is None else f"{u['quota']:g}",
            "vcpus": f"{u['vcpus']:g}",
            "solo_vcpus": f"{u['solo_vcpus']:g}",
        }
        for u in plan.as_dict()["usage"]
    ]
    print(
        table_text(
            usage,
            [
                ("where", "quota"),
                ("vcpus", "fleet vCPUs"),
                ("quota", "limit"),
                ("solo_vcpus", "vCPUs if planned alone"),
            ],
        )
    )


def parse_budgets(spec: str) -> list[float]:
    """``--budgets``: ``START:STOP:STEP`` (STOP excluded, as Python's range) or a
    comma list."""
    try:
        if ":" in spec:
            start, stop, step = (float(v) for v in spec.split(":"))
            if step <= 0 or stop <= start:
                raise ValueError
            count = math.ceil((stop - start) / step - 1e-9)
            if count > MAX_SWEEP_BUDGETS:
                raise InputError(
                    f"--budgets {spec!r} asks for {count:,} budgets; at most "
                    f"{MAX_SWEEP_BUDGETS:,}: raise STEP or narrow START:STOP"
                )
            values = [round(start + k * step, 10) for k in range(count)]
        else:
            values = [float(v) for v in spec.split(",") if v.strip()]
        if not all(math.isfinite(v) for v in values):
            raise ValueError
    except ValueError:
        raise InputError(
            f"--budgets {spec!r} must be START:STOP:STEP with STOP > START and STEP > 0, "
            "or a comma-separated list"
        ) from None
    if not values or any(v < 0 for v in values) or max(values) <= 0:
        raise InputError(f"--budgets {spec!r} must be budgets >= 0 with at least one > 0")
    return values
