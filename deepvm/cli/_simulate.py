"""Monte Carlo checks of the analytic models."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from deepvm.base.config import (
    DEFAULT_CHECKPOINT_STALL_S,
    DEFAULT_CHECKPOINT_VERSIONS,
    DEFAULT_RESTART_S,
    DEFAULT_SIMULATED_WORKERS,
    DEFAULT_WORKLOAD,
    MAX_DEADLINE_H,
    MAX_HOURLY_COST,
    MAX_NODES_CAP,
)
from deepvm.base.errors import DeepvmError
from deepvm.cli._arguments import (
    CHECKPOINT_GB,
    MAX_SIMULATED_RUNS,
    NODE_COUNT,
    RESTART_S,
    SMALL_COUNT,
    WORK_FLOPS,
    number,
)
from deepvm.cli._common import add_inputs, planner_inputs
from deepvm.cli._output import print_json

__all__ = ["add_parsers", "cmd_simulate"]


def add_parsers(sub: Any) -> None:
    sim = sub.add_parser("simulate", help="Monte Carlo checks of the analytic models")
    sims = sim.add_subparsers(dest="simulate_command", required=True, metavar="WHAT")
    pre = sims.add_parser(
        "preemption",
        help="makespan of one training run under spot preemptions",
        description="Simulate many seeded runs (exponential preemptions per spot node, work "
        "since the last checkpoint lost, a restart after each) and compare with the analytic "
        "expected makespan (deepvm.performance.preemption).",
    )
    explicit = pre.add_argument_group("an explicit configuration")
    explicit.add_argument(
        "--n-spot",
        type=number(ge=0, le=MAX_NODES_CAP, integer=True),
        help="spot nodes in the cluster",
    )
    explicit.add_argument(
        "--interruption-rate",
        type=number(ge=0, lt=1),
        metavar="F",
        help="fraction of spot instances reclaimed per month, e.g. 0.05",
    )
    explicit.add_argument(
        "--checkpoint-stall-s",
        type=RESTART_S,
        help=f"seconds a checkpoint stalls training (default: {DEFAULT_CHECKPOINT_STALL_S:g}, "
        "or the model's for "
        "--instance-type)",
    )
    first_catalog_option = len(pre._actions)
    config = pre.add_argument_group(
        "or a configuration from the catalog (rate, stall, restart and price from the "
        "goodput model)"
    )
    config.add_argument("--instance-type", metavar="TYPE", help="the GPU worker type")
    config.add_argument(
        "--architecture",
        choices=("single_anchor", "tiering", "on_demand", "spot_object_store"),
        default="single_anchor",
    )
    config.add_argument(
        "--n-workers",
        type=NODE_COUNT,
        metavar="N",
        help=f"GPU nodes (default: {DEFAULT_SIMULATED_WORKERS})",
    )
    config.add_argument("--remote-type", metavar="TYPE", help="tiering: the remote CPU type")
    config.add_argument(
        "--n-remote",
        type=NODE_COUNT,
        default=1,
        metavar="M",
        help="tiering: nodes",
    )
    config.add_argument("--workload", default=DEFAULT_WORKLOAD)
    config.add_argument("--checkpoint-gb", type=CHECKPOINT_GB, metavar="GB")
    config.add_argument(
        "--checkpoint-versions",
        type=SMALL_COUNT,
        default=DEFAULT_CHECKPOINT_VERSIONS,
        metavar="K",
    )
    config.add_argument(
        "--work",
        type=WORK_FLOPS,
        metavar="FLOPS",
        help="total FLOPs (instead of --work-hours)",
    )
    add_inputs(pre)
    # What only a configuration from the catalog reads (refused without
    # --instance-type): each option with its default, as argparse holds them.
    pre.set_defaults(
        catalog_options=tuple(
            (a.option_strings[0], a.dest, a.default)
            for a in pre._actions[first_catalog_option:]
            if a.dest != "instance_type"
        )
    )
    pre.add_argument(
        "--work-hours",
        type=number(gt=0, le=MAX_DEADLINE_H),
        help="failure-free compute time of the run, hours",
    )
    pre.add_argument(
        "--checkpoint-interval-s",
        type=number(gt=0, le=MAX_DEADLINE_H * 3600),
        help="seconds of work between checkpoints (default: Young/Daly)",
    )
    pre.add_argument(
        "--restart-s",
        type=RESTART_S,
        default=DEFAULT_RESTART_S,
        help=f"seconds to re-acquire a node (default: {DEFAULT_RESTART_S:g}; with "
        "--instance-type the checkpoint reload is added)",
    )
    pre.add_argument(
        "--hourly-cost",
        type=number(ge=0, le=MAX_HOURLY_COST),
        help="USD/h, for cost_mean (default: 0, or the configuration's price)",
    )
    pre.add_argument(
        "--runs",
        type=number(ge=2, le=MAX_SIMULATED_RUNS, integer=True),
        default=2000,
        help=f"simulated runs, 2 to {MAX_SIMULATED_RUNS:,} (default: 2000)",
    )
    pre.add_argument(
        "--seed", type=number(ge=0, le=2**32 - 1, integer=True), default=0, help="random seed"
    )
    pre.add_argument("--json", action="store_true")


@dataclass(frozen=True)
class _SimulatedCase:
    rate_per_s: float  # the cluster's preemption rate
    work_hours: float
    stall_s: float
    restart_s: float
    hourly_cost: float
    described: str


def _case_from_catalog(args: argparse.Namespace) -> _SimulatedCase:
    """The rate, stall, restart, price and work of a catalog configuration."""
    from deepvm.planner.api import cluster_risk

    risk = cluster_risk(
        planner_inputs(args),
        args.workload,
        args.instance_type,
        args.architecture,
        DEFAULT_SIMULATED_WORKERS if args.n_workers is None else args.n_workers,
        remote_type=args.remote_type,
        n_remote=args.n_remote,
        checkpoint_gb=args.checkpoint_gb,
        checkpoint_versions=args.checkpoint_versions,
        restart_s=args.restart_s,
    )
    work_hours = args.work_hours
    if args.work is not None:
        if work_hours is not None:
            raise DeepvmError("give --work or --work-hours, not both")
        if not args.work > 0:
            raise DeepvmError("--work must be a positive number of FLOPs")
        work_hours = args.work / risk.throughput_flops / 3600.0
    if work_hours is None:
        raise DeepvmError("simulate needs --work-hours or --work")
    return _SimulatedCase(
        risk.rate_per_s,
        work_hours,
        risk.stall_s,
        risk.restart_s,
        risk.hourly_cost if args.hourly_cost is None else args.hourly_cost,
        risk.described,
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    from deepvm.performance.preemption import cluster_rate_per_s, expected_makespan, simulate

    if args.instance_type is not None:
        if args.n_spot is not None or args.interruption_rate is not None:
            raise DeepvmError(
                "--instance-type takes --n-spot and --interruption-rate from the catalog"
            )
        case = _case_from_catalog(args)
        if args.checkpoint_stall_s is not None:
            case = replace(case, stall_s=args.checkpoint_stall_s)
    else:
        # The catalog configuration's options say nothing without --instance-type.
        unused = [flag for flag, dest, default in args.catalog_options
                  if getattr(args, dest) != default]  # fmt: skip
        if unused:
            raise DeepvmError(
                f"{unused[0]} describes a configuration from the catalog: give it with "
                "--instance-type TYPE, or drop it"
            )
        if args.n_spot is None or args.interruption_rate is None or args.work_hours is None:
            raise DeepvmError(
                "simulate needs --n-spot, --interruption-rate and --work-hours, or --instance-type"
            )
        if args.n_spot < 0:
            raise DeepvmError("--n-spot must be >= 0")
        if not 0 <= args.interruption_rate < 1:
            raise DeepvmError("--interruption-rate must be in [0, 1)")
        case = _SimulatedCase(
            cluster_rate_per_s(args.n_spot, args.interruption_rate),
            args.work_hours,
            DEFAULT_CHECKPOINT_STALL_S
            if args.checkpoint_stall_s is None
            else args.checkpoint_stall_s,
            args.restart_s,
            args.hourly_cost or 0.0,
            f"{args.n_spot} spot nodes",
        )
    checks = [
        (case.work_hours > 0, "--work-hours must be > 0"),
        (
            case.stall_s >= 0 and case.restart_s >= 0,
            "--checkpoint-stall-s and --restart-s must be >= 0",
        ),
        (
            args.checkpoint_interval_s is None or args.checkpoint_interval_s > 0,
            "--checkpoint-interval-s must be > 0",
        ),
        (args.runs >= 2, "--runs must be >= 2"),
    ]
    for ok, message in checks:
        if not ok:
            raise DeepvmError(message)
    rate = case.rate_per_s
    if case.stall_s == 0 and rate > 0 and args.checkpoint_interval_s is None:
        raise DeepvmError(
            "a checkpoint stall of 0 s (--checkpoint-stall-s 0, or --checkpoint-gb 0) makes "
            "Young/Daly's checkpoint interval 0 s (checkpoint continuously), which cannot be "
            "simulated: give --checkpoint-interval-s"
        )
    analytic = expected_makespan(
        case.work_hours, rate, args.checkpoint_interval_s, case.stall_s, case.restart_s
    )
    sim = simulate(
        case.work_hours,
        rate,
        analytic.checkpoint_interval_s,
        case.stall_s,
        case.restart_s,
        hourly_cost=case.hourly_cost,
        runs=args.runs,
        seed=args.seed,
    )
    out = {
        "simulated": {
            "makespan_h_mean": sim.makespan_h_mean,
            "makespan_h_std": sim.makespan_h_std,
            "cost_mean": sim.cost_mean,
        },
        "analytic": {
            "makespan_h": analytic.makespan_h,
            "checkpoint_interval_s": analytic.checkpoint_interval_s,
            "efficiency": analytic.efficiency,
        },
    }
    if args.json:
        print_json(out)
    else:
        print(
            f"{case.described}: preemption rate {rate * 3600:.4g}/h; {case.work_hours:.4g} h of "
            f"work; checkpoint stall {case.stall_s:.3g} s every "
            f"{analytic.checkpoint_interval_s:.0f} s of work; restart {case.restart_s:.3g} s"
        )
        print(
            f"analytic makespan {analytic.makespan_h:.4g} h (efficiency "
            f"{analytic.efficiency:.1%}); simulated {sim.makespan_h_mean:.4g} h "
            f"± {sim.makespan_h_std:.3g} over {sim.runs} runs; mean cost ${sim.cost_mean:,.2f}"
        )
    return 0
