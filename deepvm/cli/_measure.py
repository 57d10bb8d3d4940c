"""Measuring commands: benchmark, benchmark-scaling, fit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from deepvm.base.config import (
    BENCH_MAX_STEPS,
    BENCH_MIN_STEPS,
    BENCH_TARGET_TIMED_S,
    DEFAULT_BENCH_WARMUP,
)
from deepvm.base.errors import DeepvmError
from deepvm.cli._arguments import MAX_LOCAL_RANKS, MAX_STEPS, name_text, number, path_text
from deepvm.cli._common import add_store_timeout, check_output_path, store_location, writable_store
from deepvm.cli._output import print_json, progress, table_text

__all__ = [
    "BENCH_JSON_KEYS",
    "add_parsers",
    "add_scaling_parser",
    "cmd_benchmark",
    "cmd_benchmark_scaling",
    "cmd_fit",
]


def add_parsers(sub: Any) -> None:
    bn = sub.add_parser(
        "benchmark",
        help="measure this machine on sample workloads (real training steps)",
        description="Time real training steps of sample models with random weights and "
        "synthetic batches on this machine; record achieved FLOP/s. Needs deepvm[bench].",
    )
    bn.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help="workload to measure, repeatable, or 'all' (default: resnet50)",
    )
    bn.add_argument(
        "--steps",
        type=number(ge=2, le=MAX_STEPS, integer=True),
        metavar="N",
        help=f"timed steps (default: as many as fit in ~{BENCH_TARGET_TIMED_S:g} s, "
        f"{BENCH_MIN_STEPS} to {BENCH_MAX_STEPS})",
    )
    bn.add_argument(
        "--warmup",
        type=number(ge=0, le=MAX_STEPS, integer=True),
        default=DEFAULT_BENCH_WARMUP,
        metavar="N",
        help=f"untimed steps first (default: {DEFAULT_BENCH_WARMUP})",
    )
    bn.add_argument(
        "--batch-size",
        type=number(ge=1, le=1_000_000, integer=True),
        metavar="N",
        help="per-step batch (default: the workload's, per CPU or GPU)",
    )
    bn.add_argument(
        "--instance-type",
        type=name_text,
        metavar="TYPE",
        help="record as this instance type (default: cloud metadata, else local:<cpu model>)",
    )
    bn.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if available)")
    bn.add_argument("--store", metavar="URI", help="write the benchmarks rows to this store")
    add_store_timeout(bn)
    bn.add_argument("--json", action="store_true", help="print one JSON object")

    ft = sub.add_parser(
        "fit",
        help="fit the overhead (speedup) models to scaling measurements",
        description="Fit every speedup model (deepvm, logistic, amdahl, usl, linear) per "
        "(instance type, workload), score them by leave-one-out error and select the best. "
        "With --store the fits are written there, and recommend/sweep/flopp use them.",
    )
    src = ft.add_mutually_exclusive_group()
    src.add_argument(
        "--scaling",
        metavar="FILE",
        type=path_text,
        help="instance_type, workload, n_nodes and "
        "duration_s or speedup (CSV or Parquet); default: the store's scaling rows",
    )
    ft.add_argument(
        "--store",
        metavar="URI",
        help="read scaling rows from (without --scaling) "
        "and write overhead_models rows to this store",
    )
    add_store_timeout(ft)
    ft.add_argument("--plot", metavar="DIR", type=path_text, help="write one PNG per group here")
    ft.add_argument("--json", action="store_true", help="print one JSON object")


def add_scaling_parser(sub: Any) -> None:
    sc = sub.add_parser(
        "benchmark-scaling",
        help="measure data-parallel speedup over node counts (DDP)",
        description="Time a fixed amount of data-parallel training (PyTorch DDP; gloo on CPU, "
        "NCCL on CUDA) at each world size and record duration and speedup vs 1. On one "
        "machine it spawns local processes; on a cluster run it under torchrun (README).",
    )
    sc.add_argument("--workload", default="tiny")
    sc.add_argument(
        "--nodes",
        default="1,2",
        metavar="N,N,...",
        help="world sizes to measure; must include 1 (default: 1,2)",
    )
    sc.add_argument(
        "--global-batch",
        type=number(ge=1, le=1_000_000, integer=True),
        metavar="N",
        help="samples per step over all ranks (default: the workload's batch x "
        "the largest world size)",
    )
    sc.add_argument(
        "--steps",
        type=number(ge=1, le=MAX_STEPS, integer=True),
        default=20,
        metavar="N",
        help="steps per world size",
    )
    sc.add_argument("--instance-type", type=name_text, metavar="TYPE")
    sc.add_argument("--store", metavar="URI", help="write the scaling rows to this store")
    add_store_timeout(sc)
    sc.add_argument("--json", action="store_true", help="print one JSON object")


BENCH_JSON_KEYS = (
    "warning",
    "workload",
    "instance_type",
    "device",
    "dtype",
    "batch_size",
    "flops_per_step",
    "step_time_median_s",
    "step_time_p10_s",
    "step_time_p90_s",
    "achieved_flops",
    "samples_per_s",
    "status",
)


def cmd_benchmark(args: argparse.Namespace) -> int:
    from deepvm.bench import require_torch
    from deepvm.performance.workloads import WORKLOADS, get_workload

    names = args.workload or ["resnet50"]
    names = list(WORKLOADS) if "all" in names else names
    for name in names:
        get_workload(name)  # bad names fail before anything runs
    store = writable_store(args.store)
    require_torch()
    from deepvm.bench.run import (
        OK,
        benchmark_frame,
        check_device,
        identify,
        measurement_warning,
        run_benchmarks,
    )

    check_device(args.device)
    hardware = identify(args.instance_type, args.device)

    def report(result: Any) -> None:
        if not args.json:
            m = result.measurement
            line = (
                f"{result.workload}: {m.achieved_flops / 1e9:.1f} GFLOP/s, median step "
                f"{m.step_time_median_s:.3f} s, p90/p10 "
                f"{m.step_time_p90_s / m.step_time_p10_s:.3f}, {m.wall_s:.0f} s"
                if m
                else f"{result.workload}: FAILED {result.error}"
            )
            print(line, file=sys.stderr)
        if result.measurement and (warning := measurement_warning(result.measurement)):
            print(f"warning: {result.workload}: {warning}", file=sys.stderr)

    results = run_benchmarks(
        names,
        steps=args.steps,
        warmup=args.warmup,
        batch_size=args.batch_size,
        device=hardware.device,
        progress=not args.json,
        on_result=report,
    )
    df = benchmark_frame(results, hardware, batch_size=args.batch_size)
    if store:
        from deepvm.records.results import write_benchmarks

        progress(f"wrote {write_benchmarks(df, store)}")
    rows = json.loads(df.to_json(orient="records", date_format="iso"))
    if args.json:
        print_json({"results": [{k: r[k] for k in BENCH_JSON_KEYS} for r in rows]})
    else:
        for r in rows:
            r["gflops"] = "-" if r["achieved_flops"] is None else f"{r['achieved_flops'] / 1e9:.1f}"
            r["spread"] = (
                "-"
                if r["step_time_p10_s"] is None
                else f"{r['step_time_p90_s'] / r['step_time_p10_s']:.3f}"
            )
        print(f"{hardware.instance_type} ({hardware.device}, {hardware.cpu_cores} cores)")
        print(
            table_text(
                rows,
                [
                    ("workload", "workload"),
                    ("dtype", "dtype"),
                    ("batch_size", "batch"),
                    ("steps", "steps"),
                    ("step_time_median_s", "median s"),
                    ("spread", "p90/p10"),
                    ("gflops", "GFLOP/s"),
                    ("samples_per_s", "samples/s"),
                    ("status", "status"),
                ],
            )
        )
    return 0 if any(r.status == OK for r in results) else 1


def cmd_benchmark_scaling(args: argparse.Namespace) -> int:
    from deepvm.bench import require_torch
    from deepvm.performance.workloads import get_workload

    get_workload(args.workload)
    try:
        nodes = sorted({int(v) for v in args.nodes.split(",")})
    except ValueError:
        raise DeepvmError(f"--nodes {args.nodes!r} must be comma-separated integers") from None
    if nodes[0] < 1 or 1 not in nodes:
        raise DeepvmError(f"--nodes {args.nodes!r} must be >= 1 and include 1 (the baseline)")
    if nodes[-1] > MAX_LOCAL_RANKS:
        raise DeepvmError(
            f"--nodes {args.nodes!r}: at most {MAX_LOCAL_RANKS} local processes; on a real "
            "cluster run the scaling module under torchrun (README)"
        )
    store = writable_store(args.store)
    require_torch()
    from deepvm.bench.scaling import measure_scaling, scaling_frame
    from deepvm.performance.fitting import SUPERLINEAR_TOLERANCE

    points = measure_scaling(
        args.workload,
        nodes,
        steps=args.steps,
        global_batch=args.global_batch,
        progress=not args.json,
    )
    df = scaling_frame(points, args.workload, args.instance_type)
    for row in df.itertuples():
        if row.speedup > row.n_nodes * SUPERLINEAR_TOLERANCE:
            print(
                f"warning: speedup {row.speedup:.3g} on {row.n_nodes} ranks is more than "
                "linear: a measurement error (another load on this machine, or too few "
                "--steps); `deepvm fit` will refuse these rows, so re-measure",
                file=sys.stderr,
            )
    if store:
        from deepvm.records.results import write_scaling

        progress(f"wrote {write_scaling(df, store)}")
    rows = json.loads(df.to_json(orient="records", date_format="iso"))
    if args.json:
        print_json({"results": rows})
    else:
        print(
            table_text(
                rows,
                [
                    ("instance_type", "instance_type"),
                    ("workload", "workload"),
                    ("n_nodes", "nodes"),
                    ("duration_s", "duration s"),
                    ("speedup", "speedup"),
                ],
            )
        )
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from deepvm.performance.fitting import fit_all, fit_warnings, load_scaling
    from deepvm.records.inputs import store_scaling
    from deepvm.store import Store

    written = writable_store(args.store)
    uri = store_location(args, required=False)
    store = written or (Store.open(uri) if uri else None)
    if args.plot:
        check_output_path("--plot", args.plot, folder=True)
    if args.scaling:
        points = load_scaling(args.scaling)
    elif store:
        points = store_scaling(store)
    else:
        raise DeepvmError("give --scaling FILE or --store URI (where benchmark-scaling wrote)")
    report = fit_all(points)
    for (itype, workload), why in report.skipped.items():
        print(f"not fitted: {itype}/{workload}: {why}", file=sys.stderr)
    for warning in fit_warnings(report.fits):
        print(f"warning: {warning}", file=sys.stderr)
    if args.plot and report.fits:
        from deepvm.render.plots import plot_fits

        for path in plot_fits(report.fits, points, args.plot):
            progress(f"wrote {path}")
    if store and report.fits:
        from deepvm.records.results import write_fits

        progress(f"wrote {write_fits(report.fits, store)}")
    if args.json:
        print_json({"models": [f.as_dict() for f in report.fits]})
        return 0
    rows = []
    for f in report.fits:
        rows.append(
            {
                "instance_type": f.instance_type,
                "workload": f.workload,
                "model": f.model.describe(),
                "rmse": f.rmse,
                "loo_rmse": f.loo_rmse,
                "r2": f.r2,
                "n": f.n_points,
                "selected": "*" if f.selected else "",
            }
        )
    if rows:
        print(
            table_text(
                rows,
                [
                    ("instance_type", "instance_type"),
                    ("workload", "workload"),
                    ("model", "model"),
                    ("rmse", "rmse"),
                    ("loo_rmse", "loo rmse"),
                    ("r2", "r2"),
                    ("n", "points"),
                    ("selected", "selected"),
                ],
            )
        )
    return 0 if report.fits else 1
