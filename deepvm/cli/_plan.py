"""Planning commands for one job: recommend, sweep, compare (the fleet: cli/_fleet.py)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from deepvm.base.config import (
    DEFAULT_TOP,
    MAX_HOURLY_COST,
    MAX_SWEEP_BUDGETS,
)
from deepvm.base.errors import DeepvmError, InputError
from deepvm.cli._arguments import BUDGET, SMALL_COUNT, name_text
from deepvm.cli._common import (
    add_inputs,
    add_job,
    add_store_timeout,
    check_outputs,
    job_from_args,
    planner_inputs,
    store_location,
    writable_store,
)
from deepvm.cli._launch_files import check_yaml_path, write_launch_files
from deepvm.cli._listing import output_format, render_listing
from deepvm.cli._output import dollars_text, hours_text, json_text, progress, tflops
from deepvm.model.cluster import CLUSTER_FIELDS, cluster_words
from deepvm.model.provenance import figures_of, figures_words, outlier_words

__all__ = [
    "REC_JSON_KEYS",
    "add_parsers",
    "cmd_compare",
    "cmd_recommend",
    "cmd_sweep",
    "parse_budgets",
]


def add_parsers(sub: Any) -> None:
    rec = sub.add_parser(
        "recommend",
        help="the best clusters for a budget",
        description="Rank the best clusters for at most BUDGET USD per hour.",
    )
    rec.add_argument(
        "--budget",
        type=BUDGET,
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
    cmp_.add_argument("--budget", type=BUDGET, required=True, metavar="USD_PER_HOUR")
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


REC_JSON_KEYS = (
    "policy",
    "rank",
    *CLUSTER_FIELDS,  # the cluster as deepvm.model.cluster.Cluster names it
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
    # where the figures are from (deepvm.model.provenance), and the spot price in context
    "flops_basis",
    "flops_date",
    "overhead_basis",
    "overhead_date",
    "price_source",
    "price_date",
    "interruption_source",
    "interruption_bucket",
    "interruption_date",
    "spot_saving_pct",
    "regional_saving_pct",
    "spot_outlier",
)


def cmd_recommend(args: argparse.Namespace) -> int:
    from deepvm.planner import recommend

    store = writable_store(store_location(args, required=False))
    if args.sky_yaml is not None:
        check_yaml_path(args.sky_yaml)
    inputs = planner_inputs(args, store)
    job = job_from_args(args, policies=["deepvm"], workloads=inputs.workloads)
    result = recommend(args.budget, job, inputs=inputs)
    fmt = output_format(args)
    # The answer is rendered before anything is written: a bad --columns writes nothing.
    recs: list[dict[str, Any]] = [r.as_dict() for r in result.recommendations]
    text = _recommend_text(args, fmt, result, recs)
    if args.sky_yaml is not None:
        write_launch_files(
            args.sky_yaml, result, result.recommendations[0].as_dict(), job.checkpoint_versions
        )
    written = None
    if store:
        from deepvm.records.results import WHAT_IF, today_utc, write_recommendations

        # A what-if, dated by the prices it planned on: the store's newest, unless
        # --catalog gave others (then today).
        prices = store.partitions("prices") if args.catalog is None else []
        date = prices[-1] if prices else today_utc()
        where, _ = write_recommendations(
            result, store, scenario=args.scenario, snapshot_date=date, run_kind=WHAT_IF
        )
        written = f"a what-if of {date} to {where} (the nightly record is unchanged)"
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
                # where the first cluster's figures come from (deepvm.model.provenance)
                "inputs": (
                    {k: p.as_dict() for k, p in figures_of(recs[0]).items()} if recs else None
                ),
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
    if recs:
        print(f"{recs[0]['policy']} #{recs[0]['rank']}'s figures: {figures_words(recs[0])}")
    for r in recs[:1]:
        outlier = outlier_words(r)
        if outlier:
            print(f"warning: {outlier}")
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
        from deepvm.records.results import write_parquet_atomic

        write_parquet_atomic(result.results, args.out)
    if args.plot:
        from deepvm.render.plots import plot_sweep

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
        from deepvm.records.results import write_parquet_atomic

        write_parquet_atomic(df, args.out)
    if args.plot:
        from deepvm.render.plots import plot_compare

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
    if max(values) > MAX_HOURLY_COST:
        raise InputError(f"--budgets {spec!r}: budgets go up to {MAX_HOURLY_COST:g} USD/h")
    return values
