"""The ``deepvm`` command. Heavy imports (cvxpy, pandas) happen inside the
subcommands so ``deepvm --help`` starts fast."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from deepvm.config import (
    DEFAULT_CHECKPOINT_VERSIONS,
    DEFAULT_MAX_NODES,
    DEFAULT_PRICE_TIMEOUT_S,
    DEFAULT_RESTART_S,
    DEFAULT_TIME_LIMIT_S,
    DEFAULT_TOP,
    DEFAULT_WORKLOAD,
    ENV_STORE,
    MAX_NAME_LENGTH,
)
from deepvm.errors import DeepvmError, ParameterError

EXIT_BAD_INPUT = 2
# Caps on what one command may ask for (a request past them is a mistake, and
# would run for hours or exhaust memory).
MAX_SIMULATED_RUNS = 1_000_000
MAX_NODES_CAP = 100_000
MAX_STEPS = 100_000
MAX_TIMEOUT_S = 3600.0
MAX_LOCAL_RANKS = 64

# The library's parameter names as the CLI spells them (errors name the flag).
FLAG_NAMES = {
    "policies": "--policy",
    "work_flops": "--work",
    "time_limit_s": "--time-limit",
    "snapshot_date": "--date",
    "timeout_s": "--timeout",
    "team_budget": "--team-budget",
}


def flag_name(param: str) -> str:
    return FLAG_NAMES.get(param, "--" + param.replace("_", "-"))


class _Parser(argparse.ArgumentParser):
    """Usage errors as one ``deepvm: error:`` line (exit 2), like every other error."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see '{self.prog} --help')"
        self.exit(EXIT_BAD_INPUT, f"deepvm: error: {message}{hint}\n")


def number(
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    integer: bool = False,
) -> Callable[[str], float]:
    """An argparse type: a finite number within bounds (NaN and inf refused);
    ``integer`` accepts 1e3 but not 1.5."""
    bounds = [
        f"{op} {limit:,.10g}"
        for op, limit in ((">", gt), (">=", ge), ("<", lt), ("<=", le))
        if limit is not None
    ]
    kind = "a whole number" if integer else "a finite number"
    wanted = kind + (" " + " and ".join(bounds) if bounds else "")

    def parse(text: str) -> Any:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        ok = math.isfinite(value) and not (integer and value != int(value))
        ok = ok and (gt is None or value > gt) and (ge is None or value >= ge)
        ok = ok and (lt is None or value < lt) and (le is None or value <= le)
        if not ok:
            raise argparse.ArgumentTypeError(f"{text!r} must be {wanted}")
        return int(value) if integer else value

    return parse


def date_text(text: str) -> str:
    """An argparse type: a YYYY-MM-DD date."""
    from deepvm.names import check_date

    try:
        return check_date(text)
    except DeepvmError:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a date as YYYY-MM-DD, e.g. 2026-12-03"
        ) from None


def name_text(text: str) -> str:
    """An argparse type: a name that becomes a store file name (not blank, not over-long)."""
    if not text.strip() or len(text) > MAX_NAME_LENGTH:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is {len(text)} characters long; use 1 to {MAX_NAME_LENGTH}"
        )
    return text


POSITIVE = number(gt=0)
NON_NEGATIVE = number(ge=0)
SMALL_COUNT = number(ge=1, le=1000, integer=True)  # --top, checkpoint versions
NODE_COUNT = number(ge=1, le=MAX_NODES_CAP, integer=True)


def _join_negative_values(argv: list[str]) -> list[str]:
    """``--opt -1e9`` and ``--budgets -1:3:1`` as ``--opt=-1e9``: argparse takes a
    value that starts with '-' for an option unless it looks like a plain number."""
    out: list[str] = []
    for token in argv:
        if (
            out
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and re.match(r"^-(?:[\d.]|inf|nan)", token, re.IGNORECASE)
        ):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def _add_inputs(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("inputs (CSV or Parquet; default: the shipped data)")
    g.add_argument(
        "--catalog",
        metavar="FILE",
        help="instance types and prices "
        "(provider, region, instance_type, quota_group, vcpus, memory_gib, "
        "network_gbps, accelerator_name, accelerator_count, ondemand_price, spot_price)",
    )
    g.add_argument(
        "--throughput",
        metavar="FILE",
        help="measured single-node FLOP/s (instance_type, workload, flops)",
    )
    g.add_argument(
        "--overhead",
        metavar="FILE",
        help="speedup models (instance_type, workload, "
        "model, and a,b,c | p | alpha,beta); '*' matches any",
    )
    g.add_argument("--quotas", metavar="FILE", help="vCPU quotas (quota_group, market, vcpus)")
    g.add_argument(
        "--region",
        help="plan in this region only (default: every region of the catalog, each with "
        "its own quotas)",
    )
    g.add_argument(
        "--saturation",
        metavar="FILE",
        help="network saturation points "
        "(bandwidth_gbps, workers) replacing the shipped N_sat table",
    )
    g.add_argument(
        "--workloads",
        metavar="FILE",
        help="your own workloads (CSV or TOML: name, train_flops_per_sample, parameters, "
        "accelerator_memory_gib per GPU; optional checkpoint_gb, samples_per_epoch), "
        "usable by --workload and the scenarios file",
    )
    g.add_argument(
        "--interruptions",
        metavar="FILE",
        help="spot interruption rates overriding the catalog's (instance_type and "
        "interruption_rate, a monthly fraction, or interruption_bucket, e.g. '5-10%%')",
    )


def _add_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=number(gt=0, le=MAX_TIMEOUT_S),
        default=DEFAULT_PRICE_TIMEOUT_S,
        metavar="S",
        help="one deadline in seconds for the whole price fetch, retries included "
        f"(default: {DEFAULT_PRICE_TIMEOUT_S:g})",
    )


def _add_job(p: argparse.ArgumentParser) -> None:

    p.add_argument(
        "--workload",
        default=DEFAULT_WORKLOAD,
        help="sample workload whose throughput and scaling to plan for "
        "(default: resnet50; see `deepvm workloads`)",
    )
    p.add_argument(
        "--checkpoint-gb",
        type=NON_NEGATIVE,
        metavar="GB",
        help="checkpoint size C in GB (default: the workload's weights + Adam state)",
    )
    p.add_argument(
        "--checkpoint-versions",
        type=SMALL_COUNT,
        default=DEFAULT_CHECKPOINT_VERSIONS,
        metavar="K",
        help="checkpoint versions the remote tier holds (default: 2)",
    )
    p.add_argument(
        "--objective",
        choices=("throughput", "paper", "goodput", "cost"),
        default="throughput",
        help="throughput: fastest cluster (ties: cheaper); paper: the DeepVM "
        "paper's FLOPP x speedup score; goodput: fastest after expected preemption "
        "losses; cost: least expected total cost of the work (needs --work or --epochs "
        "with --dataset-size; optional --deadline-h) (default: throughput)",
    )
    w = p.add_argument_group("training run and preemption (objectives goodput and cost)")
    w.add_argument("--work", type=POSITIVE, metavar="FLOPS", help="total training FLOPs, e.g. 1e19")
    w.add_argument(
        "--epochs", type=POSITIVE, help="epochs (with --dataset-size, instead of --work)"
    )
    w.add_argument(
        "--dataset-size",
        type=POSITIVE,
        metavar="SAMPLES",
        help="samples per epoch; work = epochs x samples x the workload's FLOPs per sample",
    )
    w.add_argument(
        "--deadline-h",
        type=POSITIVE,
        metavar="HOURS",
        help="objective cost: the expected makespan must be at most this",
    )
    w.add_argument(
        "--restart-s",
        type=NON_NEGATIVE,
        default=DEFAULT_RESTART_S,
        metavar="S",
        help="seconds to re-acquire a preempted node before reloading the checkpoint "
        f"(default: {DEFAULT_RESTART_S:g})",
    )
    p.add_argument(
        "--max-nodes",
        type=NODE_COUNT,
        default=DEFAULT_MAX_NODES,
        metavar="N",
        help=f"largest cluster considered (default: {DEFAULT_MAX_NODES})",
    )
    _add_time_limit(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _add_time_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--time-limit",
        type=POSITIVE,
        default=DEFAULT_TIME_LIMIT_S,
        metavar="S",
        help=f"solver time limit per solve in seconds (default: {DEFAULT_TIME_LIMIT_S:g})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="deepvm",
        description="Which GPU cluster to rent for deep-learning training under an hourly "
        "budget (DeepVM, CCGrid 2024).",
    )
    from deepvm import __version__

    parser.add_argument("--version", action="version", version=f"deepvm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    rec.add_argument(
        "--scenario",
        type=name_text,
        help="name of this job in the store (default: derived from workload, budget and objective)",
    )
    _add_job(rec)
    _add_inputs(rec)

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
    _add_job(sw)
    _add_inputs(sw)

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
    _add_job(cmp_)
    _add_inputs(cmp_)

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
    _add_time_limit(fl_)
    fl_.add_argument("--json", action="store_true", help="print one JSON object")
    _add_inputs(fl_)

    cat = sub.add_parser("catalog", help="list instance types and prices")
    cat.add_argument("--kind", choices=("all", "gpu", "cpu"), default="all")
    cat.add_argument("--match", metavar="TEXT", help="instance types whose name contains TEXT")
    cat.add_argument(
        "--max-price", type=NON_NEGATIVE, metavar="USD", help="on-demand price at most this"
    )
    cat.add_argument("--json", action="store_true", help="print JSON")
    cat.add_argument("--catalog", metavar="FILE", help="a catalog file instead of the snapshot")
    cat.add_argument("--region")

    fl = sub.add_parser("flopp", help="FLOP per dollar per instance type and market")
    fl.add_argument("--workload", default=DEFAULT_WORKLOAD)
    fl.add_argument("--market", choices=("all", "spot", "on_demand"), default="all")
    fl.add_argument("--json", action="store_true", help="print JSON")
    fl.add_argument(
        "--store",
        metavar="URI",
        help="use the latest benchmarks in this store and write the flopp rows to it",
    )
    fl.add_argument("--catalog", metavar="FILE")
    fl.add_argument("--throughput", metavar="FILE")
    fl.add_argument("--region")

    wl = sub.add_parser("workloads", help="list the sample workloads (and your own)")
    wl.add_argument(
        "--workloads", metavar="FILE", help="also list the workloads this file declares"
    )

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
        help=f"timed steps (default: as many as fit in ~{25} s, 5 to 50)",
    )
    bn.add_argument(
        "--warmup",
        type=number(ge=0, le=MAX_STEPS, integer=True),
        default=2,
        metavar="N",
        help="untimed steps first",
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
        help="instance_type, workload, n_nodes and "
        "duration_s or speedup (CSV or Parquet); default: the store's scaling rows",
    )
    ft.add_argument(
        "--store",
        metavar="URI",
        help="read scaling rows from (without --scaling) "
        "and write overhead_models rows to this store",
    )
    ft.add_argument("--plot", metavar="DIR", help="write one PNG per group here")
    ft.add_argument("--json", action="store_true", help="print one JSON object")

    pr = sub.add_parser("prices", help="refresh or show the store's price snapshots")
    prs = pr.add_subparsers(dest="prices_command", required=True, metavar="ACTION")
    ref = prs.add_parser("refresh", help="fetch current prices and specs into the store")
    ref.add_argument(
        "--source",
        default="snapshot",
        help="snapshot (default), aws, azure, skypilot, or a catalog file",
    )
    ref.add_argument("--regions", metavar="R,R", help="regions to fetch (aws, azure)")
    ref.add_argument("--skypilot-csv", metavar="PATH_OR_URL", help="a SkyPilot vms.csv")
    ref.add_argument("--store", metavar="URI")
    ref.add_argument("--date", type=date_text, metavar="YYYY-MM-DD")
    _add_timeout(ref)
    ref.add_argument("--json", action="store_true")
    show = prs.add_parser("show", help="list the newest snapshot's prices")
    show.add_argument("--store", metavar="URI")
    show.add_argument("--match", metavar="TEXT", help="instance types containing TEXT")
    show.add_argument("--json", action="store_true")

    st = sub.add_parser("store", help="check or compact a store")
    sts = st.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    chk = sts.add_parser(
        "check",
        help="read every file, check its schema version, name the bad ones",
        description="Read every file of every table of the store and check that it is that "
        "table's, of this schema version. Exit status 1 when a file is bad (each is named, "
        "with how to fix it).",
    )
    chk.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    chk.add_argument("--json", action="store_true", help="print one JSON object")
    cpt = sts.add_parser(
        "compact",
        help="merge each finished month's daily files into one file per table",
        description="Merge each month that ended before --before (default: today, so every "
        "finished month) into one Parquet file per table, atomically; every row keeps its "
        "date column, and DuckDB, pandas and polars read the store as before. Files in the "
        "old day-folder layout are moved into month folders.",
    )
    cpt.add_argument("--store", metavar="URI", help="default: $DEEPVM_STORE, else ./deepvm-store")
    cpt.add_argument(
        "--before",
        metavar="YYYY-MM-DD",
        help="compact the months that ended before this date (default: today, UTC)",
    )
    cpt.add_argument("--json", action="store_true", help="print one JSON object")

    sim = sub.add_parser("simulate", help="Monte Carlo checks of the analytic models")
    sims = sim.add_subparsers(dest="simulate_command", required=True, metavar="WHAT")
    pre = sims.add_parser(
        "preemption",
        help="makespan of one training run under spot preemptions",
        description="Simulate many seeded runs (exponential preemptions per spot node, work "
        "since the last checkpoint lost, a restart after each) and compare with the analytic "
        "expected makespan (deepvm.preemption).",
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
        type=NON_NEGATIVE,
        help="seconds a checkpoint stalls training (default: 60, or the model's for "
        "--instance-type)",
    )
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
        help="GPU nodes (default: 8)",
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
    config.add_argument("--checkpoint-gb", type=NON_NEGATIVE, metavar="GB")
    config.add_argument(
        "--checkpoint-versions",
        type=SMALL_COUNT,
        default=DEFAULT_CHECKPOINT_VERSIONS,
        metavar="K",
    )
    config.add_argument(
        "--work", type=POSITIVE, metavar="FLOPS", help="total FLOPs (instead of --work-hours)"
    )
    _add_inputs(pre)
    pre.add_argument(
        "--work-hours",
        type=POSITIVE,
        help="failure-free compute time of the run, hours",
    )
    pre.add_argument(
        "--checkpoint-interval-s",
        type=POSITIVE,
        help="seconds of work between checkpoints (default: Young/Daly)",
    )
    pre.add_argument(
        "--restart-s",
        type=NON_NEGATIVE,
        default=DEFAULT_RESTART_S,
        help=f"seconds to re-acquire a node (default: {DEFAULT_RESTART_S:g}; with "
        "--instance-type the checkpoint reload is added)",
    )
    pre.add_argument(
        "--hourly-cost",
        type=NON_NEGATIVE,
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

    nt = sub.add_parser(
        "nightly",
        help="refresh prices, FLOPP, refit, re-plan every registered job, plan the fleet",
        description="The nightly run without Prefect: prices -> FLOPP -> refit (when there "
        "are newer scaling runs) -> re-plan every job of the scenarios file -> one fleet "
        "plan for all of them under the shared quotas -> change report; then every month "
        "that ended before the night's date is compacted into one file per table.",
    )
    nt.add_argument(
        "--store", metavar="URI", help="the store (default: $DEEPVM_STORE, else ./deepvm-store)"
    )
    nt.add_argument(
        "--scenarios",
        metavar="FILE",
        help="registered jobs (TOML; default: the shipped datasets/scenarios.toml)",
    )
    nt.add_argument(
        "--source",
        default="snapshot",
        help="price source: snapshot (default), aws, azure, skypilot, or a file",
    )
    nt.add_argument(
        "--regions",
        metavar="R,R",
        help="price regions to fetch (aws, azure); every region is planned",
    )
    nt.add_argument("--skypilot-csv", metavar="PATH_OR_URL")
    nt.add_argument(
        "--date", type=date_text, metavar="YYYY-MM-DD", help="snapshot date (default: today, UTC)"
    )
    nt.add_argument(
        "--workloads",
        metavar="FILE",
        help="your own workloads, which the scenarios file's jobs may name (see recommend)",
    )
    nt.add_argument(
        "--team-budget",
        type=NON_NEGATIVE,
        metavar="USD_PER_HOUR",
        help="the most all the jobs' clusters may cost together per hour in the fleet "
        "plan (default: none)",
    )
    nt.add_argument(
        "--no-compact",
        action="store_true",
        help="leave finished months' daily files as they are (see `deepvm store compact`)",
    )
    _add_timeout(nt)
    nt.add_argument("--json", action="store_true", help="print one JSON object")

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
    sc.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


# --- output helpers ---------------------------------------------------------------------------


def _table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    """A plain aligned text table; ``columns`` are (key, header)."""
    cells = [[_fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max([len(h)] + [len(c[n]) for c in cells]) for n, (_, h) in enumerate(columns)]
    lines = ["  ".join(h.ljust(w) for (_, h), w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def _tflops(x: float) -> str:
    return f"{x / 1e12:.2f}"


def _print_json(obj: Any) -> None:
    """One JSON object; NaN and infinities become null (they are not JSON)."""
    print(json.dumps(_json_safe(obj), indent=2, allow_nan=False))


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def _inputs(args: argparse.Namespace) -> Any:
    """The planner's inputs; the store's readers (and pyarrow) load only with a store."""
    from deepvm.planner.api import InputFiles, Inputs

    files: Any = {name: getattr(args, name) for name in InputFiles.__annotations__}
    store = getattr(args, "store", None) or os.environ.get(ENV_STORE)
    if not store:
        return Inputs.load(**files)
    from deepvm.store_inputs import load_inputs

    return load_inputs(store=store, **files)


# The input options shared by the planning commands (their flags: _add_inputs).
INPUT_OPTIONS = (
    "catalog",
    "throughput",
    "overhead",
    "quotas",
    "region",
    "saturation",
    "interruptions",
    "workloads",
)


def _job(args: argparse.Namespace, *, policies: Sequence[str], workloads: Any = None) -> Any:
    """The job the options describe, built once (recommend, sweep, compare);
    ``workloads``: the registry the inputs declare."""
    from deepvm.config import JobSpec
    from deepvm.workloads import training_work

    return JobSpec(
        workload=args.workload,
        checkpoint_gb=args.checkpoint_gb,
        checkpoint_versions=args.checkpoint_versions,
        objective=args.objective,
        policies=tuple(getattr(args, "policy", None) or policies),
        top=getattr(args, "top", DEFAULT_TOP),
        work_flops=training_work(
            args.workload,
            work_flops=args.work,
            epochs=args.epochs,
            dataset_size=args.dataset_size,
            workloads=workloads,
        ),
        deadline_h=args.deadline_h,
        restart_s=args.restart_s,
        max_nodes=args.max_nodes,
        time_limit_s=args.time_limit,
    )


def _check_out(out: str | None, plot: str | None) -> None:
    """Check output paths before any work, so that nothing is half-written."""
    if out and not out.endswith((".parquet", ".pq")):
        raise DeepvmError(f"--out {out!r} must end in .parquet")
    if plot and not plot.lower().endswith(".png"):
        raise DeepvmError(f"--plot {plot!r} must end in .png")
    for flag, path in (("--out", out), ("--plot", plot)):
        if path:
            _check_output_path(flag, path)
    if plot:
        from deepvm.plots import check_available

        check_available()  # the plot extra is missing: say so before solving anything


def _check_output_path(flag: str, path: str, *, folder: bool = False) -> None:
    """An output path that can be written: not a folder (or, for ``folder``, not a
    file), and not under a file."""
    target = os.path.abspath(path)
    if os.path.isdir(target) and not folder:
        raise DeepvmError(f"{flag} {path!r} is a folder: give a file name")
    if os.path.isfile(target) and folder:
        raise DeepvmError(f"{flag} {path!r} is a file: give a folder")
    above = os.path.dirname(target)
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        raise DeepvmError(f"{flag} {path!r} is under {above!r}, which is a file")
    if not os.access(above, os.W_OK):
        raise DeepvmError(f"{flag} {path!r}: {above!r} is not writable")


def _writable_store(uri: str | None) -> str | None:
    """The store a command will write, checked before any work (None: no store)."""
    if not uri:
        return None
    from deepvm.store import Store

    return Store.open(uri).ensure_writable().uri


def _hours(value: float) -> str:
    return "-" if value != value else f"{value:.3g} h"  # NaN: no work given


def _dollars(value: float) -> str:
    return "-" if value != value else f"${value:,.2f}"


# --- commands --------------------------------------------------------------------------------

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
)


def cmd_recommend(args: argparse.Namespace) -> int:
    from deepvm.planner import recommend

    store_uri = _writable_store(args.store or os.environ.get(ENV_STORE))
    inputs = _inputs(args)
    job = _job(args, policies=["deepvm"], workloads=inputs.workloads)
    result = recommend(args.budget, job, inputs=inputs)
    written = None
    if store_uri:
        from deepvm.results import write_recommendations

        written, _ = write_recommendations(result, store_uri, scenario=args.scenario)
    recs: list[dict[str, Any]] = [r.as_dict() for r in result.recommendations]
    if args.json:
        _print_json(
            {
                "budget": result.budget,
                "objective": result.objective,
                "workload": result.workload,
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
    else:
        print(
            f"Budget ${result.budget:g}/h  workload {result.workload}  objective "
            f"{result.objective}  checkpoint {result.checkpoint_gb:.3g} GB  prices "
            f"{result.prices_snapshot}"
        )
        for r in recs:
            r["cluster"] = _cluster_text(r)
            r["tflops"] = _tflops(r["throughput_flops"])
            r["cost"] = f"{r['hourly_cost']:.4f}"
            r["scaling"] = f"{r['overhead_model']} [{r['overhead_source']}]"
            r["risk"] = f"{r['preemptions_per_h']:.3g}/h, eff {r['efficiency']:.1%}"
            r["makespan"] = _hours(r["expected_makespan_h"])
            r["total"] = _dollars(r["expected_total_cost"])
        columns = [("policy", "policy"), ("rank", "#")]
        if len({r["region"] for r in recs}) > 1:  # ranked across regions: say where
            columns.append(("region", "region"))
        columns += [
            ("architecture", "architecture"),
            ("cluster", "cluster"),
            ("cost", "$/h"),
            ("tflops", "TFLOP/s"),
            ("risk", "preemptions, efficiency"),
        ]
        if result.work_flops is not None:
            columns += [("makespan", "makespan"), ("total", "total $")]
        columns += [("flops_source", "F from"), ("scaling", "scaling model")]
        print(_table(recs, columns))
        if any(r["flops_source"] == "estimate" for r in recs):
            print(
                "F from 'estimate': no measurement or published figure; the accelerators' "
                "peak FLOP/s times the share of peak that the published GPU nearest in "
                "peak reaches on this workload (measure with --throughput FILE)."
            )
        notes = result.measurements.describe()
        if notes:
            print(notes)
        if result.left_out:
            print(
                "left out (their GPUs cannot hold the workload): "
                + ", ".join(
                    f"{o['instance_type']} ({o['reason']})" for o in _by_type(result.left_out)
                )
            )
    if written is not None:
        print(f"wrote {written}", file=sys.stderr)
    return 0


def _by_type(rows: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """One row per instance type (the same type is left out in every region)."""
    return list({r["instance_type"]: r for r in rows}.values())


def _cluster_text(r: dict[str, Any]) -> str:
    text = f"{r['n_workers']} x {r['worker_type']} ({r['n_spot']} spot, {r['n_on_demand']} od)"
    if isinstance(r.get("remote_type"), str) and r["remote_type"]:
        text += f" + {r['n_remote']} x {r['remote_type']}"
    return text


def cmd_sweep(args: argparse.Namespace) -> int:
    from deepvm.planner import parse_budgets, sweep

    budgets = parse_budgets(args.budgets)
    _check_out(args.out, args.plot)
    inputs = _inputs(args)
    result = sweep(budgets, _job(args, policies=["all"], workloads=inputs.workloads), inputs=inputs)
    if args.out:
        from deepvm.results import write_parquet_atomic

        write_parquet_atomic(result.results, args.out)
    if args.plot:
        from deepvm.plots import plot_sweep

        title = f"{result.workload}, objective {result.objective}"
        print(f"wrote {plot_sweep(result.results, args.plot, title)}", file=sys.stderr)
    if args.json:  # pandas is not needed for these rows: sweeps stay light (benchmarks/planner.py)
        _print_json({"budgets": result.budgets, "results": result.rows})
        return 0
    shown = [
        {**r, "tflops": _tflops(r["throughput_flops"]), "normalized": f"{r['normalized']:.3f}"}
        for r in result.rows
    ]
    print(
        _table(
            shown,
            [
                ("budget", "budget"),
                ("policy", "policy"),
                ("architecture", "architecture"),
                ("worker_type", "worker"),
                ("n_workers", "n"),
                ("remote_type", "remote"),
                ("n_remote", "m"),
                ("hourly_cost", "$/h"),
                ("tflops", "TFLOP/s"),
                ("normalized", "normalized"),
            ],
        )
    )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from deepvm.planner import compare

    _check_out(args.out, args.plot)
    inputs = _inputs(args)
    job = _job(args, policies=["deepvm"], workloads=inputs.workloads)
    if job.work_flops is None:
        raise DeepvmError(
            "compare needs the training job: --work FLOPS, or --epochs with --dataset-size"
        )
    result, df = compare(args.budget, job.work_flops, job, inputs=inputs)
    df["cluster"] = [_cluster_text(r) for r in df.to_dict("records")]
    if args.out:
        from deepvm.results import write_parquet_atomic

        write_parquet_atomic(df, args.out)
    if args.plot:
        from deepvm.plots import plot_compare

        title = (
            f"{result.workload}: {result.work_flops:.3g} FLOPs within ${result.budget:g}/h "
            f"(objective {result.objective})"
        )
        print(f"wrote {plot_compare(df, args.plot, title)}", file=sys.stderr)
    if args.json:
        _print_json(
            {
                "budget": result.budget,
                "work_flops": result.work_flops,
                "objective": result.objective,
                "workload": result.workload,
                "rows": json.loads(df.to_json(orient="records")),
            }
        )
        return 0
    print(
        f"{result.work_flops:.3g} FLOPs of {result.workload} within ${result.budget:g}/h, "
        f"objective {result.objective}, prices {result.prices_snapshot}"
    )
    shown = df.to_dict("records")
    for r in shown:
        r["cost"] = f"{r['hourly_cost']:.4f}"
        r["tflops"] = _tflops(r["throughput_flops"])
        r["eff"] = f"{r['efficiency']:.1%}"
        r["makespan"] = _hours(r["expected_makespan_h"])
        r["total"] = _dollars(r["expected_total_cost"])
    print(
        _table(
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
        )
    )
    return 0


def cmd_fleet(args: argparse.Namespace) -> int:
    from deepvm.errors import SolverError
    from deepvm.planner.fleet_plan import plan_fleet
    from deepvm.scenarios import load_scenarios

    inputs = _inputs(args)
    jobs = load_scenarios(args.scenarios, inputs.workloads)
    plan = plan_fleet(jobs, inputs, team_budget=args.team_budget, time_limit_s=args.time_limit)
    if plan.status != "optimal":
        raise SolverError(
            f"the fleet solve stopped {plan.status.replace('_', ' ')} after "
            f"{plan.solve_s:.1f} s without a proven optimum; raise --time-limit"
        )
    if args.json:
        _print_json(plan.as_dict())
        return 0
    team = f"  team budget ${plan.team_budget:g}/h" if plan.team_budget is not None else ""
    print(
        f"Fleet of {len(plan.jobs)} jobs  value {plan.objective_value:.4g}  "
        f"${plan.hourly_cost:.4f}/h{team}  prices {plan.prices_snapshot}"
    )
    rows = []
    for job in plan.as_dict()["jobs"]:
        planned = job["planned"]
        rows.append(
            {
                "scenario": job["scenario"],
                "priority": f"{job['priority']:g}" + ("" if job["shared"] else " (alone)"),
                "value": f"{job['value']:.3f}",
                "region": job["region"],
                "cluster": _cluster_text(job) if planned else "unplanned",
                "cost": _money(job["hourly_cost"]),
                "tflops": _tflops(job["throughput_flops"]) if planned else None,
                "solo_cost": (
                    f"{job['solo_hourly_cost']:.4f}"
                    if job["solo_hourly_cost"] is not None
                    else None
                ),
                "solo_tflops": (
                    _tflops(job["solo_throughput_flops"])
                    if job["solo_throughput_flops"] is not None
                    else None
                ),
                "binding": job["binding"] or job["note"],
            }
        )
    columns = [("scenario", "job"), ("priority", "priority"), ("value", "value")]
    if len({r["region"] for r in rows if r["region"]}) > 1:
        columns.append(("region", "region"))
    columns += [
        ("cluster", "cluster"),
        ("cost", "$/h"),
        ("tflops", "TFLOP/s"),
        ("solo_cost", "alone $/h"),
        ("solo_tflops", "alone TFLOP/s"),
        ("binding", "held back by"),
    ]
    print(_table(rows, columns))
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
        _table(
            usage,
            [
                ("where", "quota"),
                ("vcpus", "fleet vCPUs"),
                ("quota", "limit"),
                ("solo_vcpus", "vCPUs if planned alone"),
            ],
        )
    )
    return 0


def _money(usd_per_hour: float | None) -> str | None:
    return None if usd_per_hour is None else f"{usd_per_hour:.4f}"


def cmd_catalog(args: argparse.Namespace) -> int:
    from deepvm.catalog import load_catalog

    catalog = load_catalog(args.catalog, region=args.region)
    df = {"all": catalog.instances, "gpu": catalog.gpu, "cpu": catalog.cpu}[args.kind]
    if args.match:
        df = df[df["instance_type"].str.contains(args.match, regex=False)]
    if args.max_price is not None:
        df = df[df["ondemand_price"] <= args.max_price]
    columns = [
        "region",
        "instance_type",
        "quota_group",
        "vcpus",
        "memory_gib",
        "network_gbps",
        "accelerator_name",
        "accelerator_count",
        "peak_flops",
        "ondemand_price",
        "spot_price",
        "spot_zone",
        "price_source",
        "price_date",
    ]
    df = df.sort_values(["accelerator_count", "ondemand_price", "region"])
    if args.json:
        keys = [*columns[:8], "accelerator_memory_gib", *columns[8:]]
        _print_json(
            {
                "snapshot": catalog.snapshot,
                "instances": json.loads(df[keys].to_json(orient="records", date_format="iso")),
            }
        )
        return 0
    print(f"{len(df)} instance types ({catalog.snapshot})")
    print(_table(df[columns].to_dict("records"), [(c, c) for c in columns]))
    return 0


def cmd_flopp(args: argparse.Namespace) -> int:
    from deepvm.catalog import load_catalog
    from deepvm.flopp import flopp_table, load_throughput, merge_measurements
    from deepvm.planner.fleet import build_fleet
    from deepvm.quotas import load_quotas
    from deepvm.store_inputs import latest_measurements

    _writable_store(args.store)
    catalog = load_catalog(args.catalog, region=args.region)
    store = args.store or os.environ.get(ENV_STORE)
    measured = merge_measurements(
        latest_measurements(store) if store else None,
        load_throughput(args.throughput) if args.throughput else None,
    )
    build_fleet(catalog, args.workload, quotas=load_quotas(), measured=measured)  # validates
    df = flopp_table(catalog, args.workload, measured)
    if args.market != "all":
        df = df[df["market"] == args.market]
    if args.store:
        from deepvm.results import write_flopp

        print(f"wrote {write_flopp(df, args.store, catalog.snapshot)}", file=sys.stderr)
    if args.json:
        _print_json(
            {
                "workload": args.workload,
                "rows": json.loads(df.to_json(orient="records", date_format="iso")),
            }
        )
        return 0
    shown = df.copy()
    shown["tflops"] = shown["achieved_flops"].map(_tflops)
    shown["pflop_per_usd"] = shown["flopp"].map(lambda v: f"{v / 1e15:.1f}")
    print(
        _table(
            shown.to_dict("records"),
            [
                ("region", "region"),
                ("instance_type", "instance_type"),
                ("market", "market"),
                ("tflops", "TFLOP/s"),
                ("usd_per_hour", "$/h"),
                ("pflop_per_usd", "PFLOP/$"),
                ("flops_source", "F from"),
            ],
        )
    )
    return 0


def cmd_workloads(args: argparse.Namespace) -> int:
    from deepvm.workloads import WORKLOADS, load_workloads

    registry = load_workloads(args.workloads) if args.workloads else WORKLOADS
    rows = [
        {
            "name": w.name,
            "parameters": f"{w.parameters / 1e6:.1f}M",
            "checkpoint_gb": f"{w.checkpoint_gb:.3f}",
            "memory": f"{w.accelerator_memory_gib:g}",
            "description": w.description,
        }
        for w in registry.values()
    ]
    print(
        _table(
            rows,
            [
                ("name", "name"),
                ("parameters", "parameters"),
                ("checkpoint_gb", "checkpoint GB"),
                ("memory", "GPU GiB needed"),
                ("description", "description"),
            ],
        )
    )
    return 0


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
    from deepvm.workloads import WORKLOADS, get_workload

    names = args.workload or ["resnet50"]
    names = list(WORKLOADS) if "all" in names else names
    for name in names:
        get_workload(name)  # bad names fail before anything runs
    store = _writable_store(args.store)
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
        from deepvm.results import write_benchmarks

        print(f"wrote {write_benchmarks(df, store)}", file=sys.stderr)
    rows = json.loads(df.to_json(orient="records", date_format="iso"))
    if args.json:
        _print_json({"results": [{k: r[k] for k in BENCH_JSON_KEYS} for r in rows]})
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
            _table(
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
    from deepvm.workloads import get_workload

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
    store = _writable_store(args.store)
    require_torch()
    from deepvm.bench.scaling import measure_scaling, scaling_frame

    points = measure_scaling(
        args.workload,
        nodes,
        steps=args.steps,
        global_batch=args.global_batch,
        progress=not args.json,
    )
    df = scaling_frame(points, args.workload, args.instance_type)
    if store:
        from deepvm.results import write_scaling

        print(f"wrote {write_scaling(df, store)}", file=sys.stderr)
    rows = json.loads(df.to_json(orient="records", date_format="iso"))
    if args.json:
        _print_json({"results": rows})
    else:
        print(
            _table(
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
    from deepvm.fitting import fit_all, fit_warnings, load_scaling
    from deepvm.store_inputs import store_scaling

    store = args.store or os.environ.get(ENV_STORE)
    if args.store:
        _writable_store(args.store)
    if args.plot:
        _check_output_path("--plot", args.plot, folder=True)
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
        from deepvm.plots import plot_fits

        for path in plot_fits(report.fits, points, args.plot):
            print(f"wrote {path}", file=sys.stderr)
    if store and report.fits:
        from deepvm.results import write_fits

        print(f"wrote {write_fits(report.fits, store)}", file=sys.stderr)
    if args.json:
        _print_json({"models": [f.as_dict() for f in report.fits]})
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
            _table(
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


def cmd_nightly(args: argparse.Namespace) -> int:
    from deepvm.pipeline import nightly
    from deepvm.report import change_report_markdown
    from deepvm.scenarios import load_scenarios
    from deepvm.store import store_uri
    from deepvm.workloads import load_workloads

    registry = load_workloads(args.workloads) if args.workloads else None
    scenarios = load_scenarios(args.scenarios, registry)
    store = _writable_store(store_uri(args.store))
    assert store is not None
    report = nightly(
        store,
        scenarios,
        source=args.source,
        snapshot_date=args.date,
        regions=_regions(args.regions),
        skypilot_csv=args.skypilot_csv,
        timeout_s=args.timeout,
        team_budget=args.team_budget,
        workloads=args.workloads,
        compact=not args.no_compact,
    )
    failed = [p for p in report.plans if p.error]
    if args.json:
        _print_json(
            {
                "snapshot_date": report.snapshot_date,
                "store": store,
                "prices": {
                    "source": report.prices.source,
                    "failed": report.prices.failed,
                    "stale": report.prices.stale,
                    "rows": report.prices.rows,
                    "attempts": report.prices.attempts,
                    "error": report.prices.error,
                },
                "refitted_models": report.refitted,
                "plans": [
                    {
                        "scenario": p.scenario,
                        "error": p.error,
                        "recommendations": 0
                        if p.recommendations is None
                        else len(p.recommendations),
                    }
                    for p in report.plans
                ],
                "fleet": None if report.fleet is None else report.fleet.as_dict(),
                "changes": json.loads(report.changes.to_json(orient="records")),
                "compacted": None
                if report.compacted is None
                else {t: m for t, m in report.compacted.months.items() if m},
                "compact_error": report.compact_error,
            }
        )
    else:
        print(change_report_markdown(report.changes, prices=report.prices))
        for p in failed:
            print(f"job {p.scenario} not planned: {p.error}", file=sys.stderr)
    if report.compact_error:
        print(
            f"warning: the night is published, but compacting finished months failed: "
            f"{report.compact_error}",
            file=sys.stderr,
        )
    if report.prices.failed:
        print(
            f"deepvm: price source {report.prices.source!r} unreachable "
            f"({report.prices.error}); planned on the {report.prices.fallback_from} snapshot",
            file=sys.stderr,
        )
        return 1
    return 0 if len(failed) < len(report.plans) else 1


def _regions(text: str | None) -> list[str] | None:
    if text is None:
        return None
    regions = [r.strip() for r in text.split(",") if r.strip()]
    if not regions:
        raise DeepvmError(f"--regions {text!r} names no region; e.g. --regions us-east-1")
    return regions


def cmd_store(args: argparse.Namespace) -> int:
    from deepvm.store import Store

    store = Store.open(args.store)
    if not store.exists():
        raise DeepvmError(f"store {store.uri!r} does not exist: give --store or $DEEPVM_STORE")
    if args.store_command == "compact":
        return _store_compact(store, args)
    return _store_check(store, args)


def _store_check(store: Any, args: argparse.Namespace) -> int:
    from deepvm.store import check_store

    found = check_store(store)
    if args.json:
        _print_json(
            {
                "store": store.uri,
                "ok": found.ok,
                "files": found.files,
                "rows": found.rows,
                "bad": found.bad,
                "dead_staging": found.dead_staging,
                "legacy_files": found.legacy_files,
            }
        )
    else:
        for table, count in found.files.items():
            if count:
                print(f"{table}: {count} files, {found.rows[table]} rows")
        for line in found.bad:
            print(f"BAD {line}")
        if found.dead_staging:
            print(
                f"{found.dead_staging} staging folder(s) of dead writers: the next write "
                "removes them"
            )
        if found.legacy_files:
            print(
                f"{found.legacy_files} file(s) in the old day-folder layout: "
                "`deepvm store compact` moves them (plain DuckDB globs need one layout)"
            )
        print("ok" if found.ok else f"{len(found.bad)} bad file(s)")
    return 0 if found.ok else 1


def _store_compact(store: Any, args: argparse.Namespace) -> int:
    store.ensure_writable()
    print(f"compacting {store.uri} ...", file=sys.stderr)
    done = store.compact(before=args.before)
    if args.json:
        _print_json(
            {
                "store": store.uri,
                "before": done.before,
                "months": done.months,
                "files_merged": done.files_merged,
                "legacy_moved": done.legacy_moved,
            }
        )
        return 0
    for table, months in done.months.items():
        if months:
            print(
                f"{table}: {done.files_merged[table]} files -> {len(months)} ({', '.join(months)})"
            )
        if done.legacy_moved[table]:
            print(f"{table}: {done.legacy_moved[table]} file(s) moved out of day folders")
    if not done.changed:
        print(f"nothing to compact: every month before {done.before[:7]} is one file already")
    return 0


def cmd_prices(args: argparse.Namespace) -> int:
    from deepvm.store import Store, store_uri

    store = store_uri(args.store)
    if args.prices_command == "refresh":
        from deepvm.catalog.sources import get_source
        from deepvm.pipeline import refresh_prices

        _writable_store(store)
        regions = _regions(args.regions)
        get_source(args.source, regions=regions, skypilot_csv=args.skypilot_csv)  # validates
        print(f"fetching prices from {args.source} ...", file=sys.stderr)
        r = refresh_prices(
            store,
            args.source,
            snapshot_date=args.date,
            regions=regions,
            skypilot_csv=args.skypilot_csv,
            timeout_s=args.timeout,
        )
        summary = {
            "snapshot_date": r.snapshot_date,
            "source": r.source,
            "rows": r.rows,
            "dropped": r.dropped,
            "stale": r.stale,
            "failed": r.failed,
            "attempts": r.attempts,
            "error": r.error,
            "store": store,
        }
        if args.json:
            _print_json(summary)
        elif r.failed and r.fallback_from == r.snapshot_date:
            print(f"{r.source} FAILED ({r.error}); {r.snapshot_date} keeps the prices it has")
        elif r.failed:
            print(
                f"{r.source} FAILED ({r.error}); carried the {r.fallback_from} snapshot "
                f"forward as stale into {r.snapshot_date}"
            )
        else:
            print(
                f"{r.rows} prices from {r.source} into {store} ({r.snapshot_date}); "
                f"{r.dropped} rows without a usable price dropped"
            )
        return 1 if r.failed else 0
    dates = Store.open(store).partitions("prices")
    if not dates:
        raise DeepvmError(f"store {store!r} has no prices: run `deepvm prices refresh`")
    newest = Store.open(store).read("prices", partitions=dates[-1:])  # that snapshot only
    if args.match:
        newest = newest[newest["instance_type"].str.contains(args.match, regex=False)]
    newest = newest.sort_values(["instance_type", "market", "usd_per_hour"])
    columns = [
        "snapshot_date",
        "provider",
        "region",
        "zone",
        "instance_type",
        "market",
        "usd_per_hour",
        "source",
        "price_date",
        "stale",
    ]
    if args.json:
        _print_json(
            {"prices": json.loads(newest[columns].to_json(orient="records", date_format="iso"))}
        )
    else:
        print(_table(newest[columns].to_dict("records"), [(c, c) for c in columns]))
    return 0


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
    from deepvm.planner.api import make_job
    from deepvm.planner.candidates import TIERING, Config, hourly_cost, throughput, violations
    from deepvm.planner.goodput import CheckpointCosts, config_risk, object_store_usd_per_hour

    fleet = _inputs(args).fleet(args.workload)
    places = [i for i, t in enumerate(fleet.gpu_types) if t == args.instance_type]
    if not places:
        raise DeepvmError(
            f"--instance-type {args.instance_type!r} is not a GPU type of the catalog"
        )
    if len(places) > 1:  # the same type in several regions: prices differ
        listed = ", ".join(fleet.gpu_region_of(i) for i in places)
        raise DeepvmError(
            f"--instance-type {args.instance_type!r} is in several regions ({listed}); "
            "pick one with --region"
        )
    i = places[0]
    n = 8 if args.n_workers is None else args.n_workers
    remote = None
    if args.architecture == TIERING:
        local = [
            j
            for j, t in enumerate(fleet.cpu_types)
            if t == args.remote_type and fleet.cpu_region_of(j) == fleet.gpu_region_of(i)
        ]
        if not local:
            raise DeepvmError(
                "--architecture tiering needs --remote-type, a CPU type of the catalog in "
                f"the workers' region ({fleet.gpu_region_of(i)})"
            )
        remote = local[0]
    job = make_job(args.workload, args.checkpoint_gb, args.checkpoint_versions)
    costs = CheckpointCosts(restart_s=args.restart_s)
    fleet = replace(fleet, object_store_usd_per_hour=object_store_usd_per_hour(job, costs))
    config = Config(args.architecture, i, n, remote, args.n_remote if remote is not None else 0)
    broken = violations(fleet, job, config, math.inf)
    if broken:
        raise DeepvmError(
            f"{n} x {args.instance_type} ({args.architecture}) is not a feasible cluster: "
            + ", ".join(broken)
        )
    work_hours = args.work_hours
    if args.work is not None:
        if work_hours is not None:
            raise DeepvmError("give --work or --work-hours, not both")
        if not args.work > 0:
            raise DeepvmError("--work must be a positive number of FLOPs")
        work_hours = args.work / throughput(fleet, config) / 3600.0
    if work_hours is None:
        raise DeepvmError("simulate needs --work-hours or --work")
    r = config_risk(fleet, config, job, costs)
    described = f"{n} x {args.instance_type} ({args.architecture}, {config.n_spot} spot)"
    return _SimulatedCase(
        float(r.rate_per_s[0]),
        work_hours,
        float(r.stall_s[0]),
        float(r.restart_s[0]),
        hourly_cost(fleet, config) if args.hourly_cost is None else args.hourly_cost,
        described,
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    from deepvm.preemption import cluster_rate_per_s, expected_makespan, simulate

    if args.instance_type is not None:
        if args.n_spot is not None or args.interruption_rate is not None:
            raise DeepvmError(
                "--instance-type takes --n-spot and --interruption-rate from the catalog"
            )
        case = _case_from_catalog(args)
        if args.checkpoint_stall_s is not None:
            case = replace(case, stall_s=args.checkpoint_stall_s)
    else:
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
            60.0 if args.checkpoint_stall_s is None else args.checkpoint_stall_s,
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
        _print_json(out)
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


COMMANDS = {
    "recommend": cmd_recommend,
    "sweep": cmd_sweep,
    "compare": cmd_compare,
    "fleet": cmd_fleet,
    "catalog": cmd_catalog,
    "flopp": cmd_flopp,
    "workloads": cmd_workloads,
    "benchmark": cmd_benchmark,
    "benchmark-scaling": cmd_benchmark_scaling,
    "fit": cmd_fit,
    "nightly": cmd_nightly,
    "prices": cmd_prices,
    "store": cmd_store,
    "simulate": cmd_simulate,
}


def main(argv: Sequence[str] | None = None) -> int:
    tokens = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not tokens:  # `deepvm` alone: what it can do
        parser.print_help()
        return 0
    try:
        args = parser.parse_args(_join_negative_values(tokens))
    except SystemExit as exc:  # usage errors (already printed), --help, --version
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        return COMMANDS[args.command](args)
    except ParameterError as exc:
        print(f"deepvm: error: {exc.render(flag_name)}", file=sys.stderr)
        return exc.exit_status
    except DeepvmError as exc:
        print(f"deepvm: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:  # `deepvm ... | head`
        return 0
    except OSError as exc:  # the environment, not a bug: say which file
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"deepvm: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
