"""What the commands share beyond argument types (``deepvm.cli._arguments``) and
output (``deepvm.cli._output``): the option groups (inputs, the job, the jobs file,
timeouts), the store a command uses, checked before any work, and the job and
planner inputs built from the options."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from deepvm.base.config import (
    DEFAULT_CHECKPOINT_VERSIONS,
    DEFAULT_MAX_NODES,
    DEFAULT_PRICE_TIMEOUT_S,
    DEFAULT_RESTART_S,
    DEFAULT_TIME_LIMIT_S,
    DEFAULT_TOP,
    DEFAULT_WORKLOAD,
    ENV_STORE,
    MAX_DEADLINE_H,
)
from deepvm.base.errors import DeepvmError
from deepvm.cli._arguments import (
    CHECKPOINT_GB,
    MAX_TIMEOUT_S,
    MIN_GAIN,
    NODE_COUNT,
    POSITIVE,
    RESTART_S,
    SMALL_COUNT,
    WORK_FLOPS,
    number,
    path_text,
)
from deepvm.cli._listing import add_format
from deepvm.store.location import DEFAULT_TIMEOUT_S, ENV_TIMEOUT

__all__ = [
    "PLANNING_OPTIONS",
    "add_inputs",
    "add_job",
    "add_jobs_file",
    "add_min_gain",
    "add_store_timeout",
    "add_time_limit",
    "add_timeout",
    "check_output_path",
    "check_outputs",
    "job_from_args",
    "planner_inputs",
    "price_timeout",
    "regions_list",
    "store_location",
    "writable_store",
]


class _JobsFile(argparse.Action):
    """--jobs FILE; its old name --scenarios still works, with a line saying so."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        if option == "--scenarios":
            print("deepvm: --scenarios is now --jobs; the old name still works", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_jobs_file(p: argparse.ArgumentParser, help_text: str) -> None:
    """--jobs FILE: the registered jobs (TOML), ``--scenarios`` its deprecated alias."""
    p.add_argument(
        "--jobs",
        "--scenarios",
        dest="scenarios",
        metavar="FILE",
        type=path_text,
        action=_JobsFile,
        help=help_text + "; --scenarios is its old name",
    )


def add_min_gain(p: argparse.ArgumentParser) -> None:
    """--min-gain: how much a move must save before a running job moves."""
    from deepvm.base.config import DEFAULT_MIN_GAIN

    p.add_argument(
        "--min-gain",
        type=MIN_GAIN,
        default=DEFAULT_MIN_GAIN,
        metavar="FRACTION",
        help="a running job (deepvm adopt) moves only when the move saves more than this "
        f"share of its remaining time or cost (default: {DEFAULT_MIN_GAIN:g})",
    )


# The input options that shape a plan but not its prices (the nightly's own).
PLANNING_OPTIONS = (
    "throughput", "overhead", "quotas", "cloud", "region", "saturation", "interruptions",
    "spot_price",
)  # fmt: skip


def add_inputs(p: argparse.ArgumentParser, *, prices: bool = True) -> None:
    """The planner's input options; ``prices`` False: no --catalog and no
    --workloads (the nightly takes its prices from its source, and has its own
    --workloads)."""
    g = p.add_argument_group("inputs (CSV or Parquet; default: the shipped data)")
    if prices:
        g.add_argument(
            "--catalog",
            metavar="FILE",
            type=path_text,
            help="instance types and prices "
            "(provider, region, instance_type, quota_group, vcpus, memory_gib, "
            "network_gbps, accelerator_name, accelerator_count, ondemand_price, spot_price)",
        )
    g.add_argument(
        "--throughput",
        metavar="FILE",
        type=path_text,
        help="measured single-node FLOP/s (instance_type, workload, flops)",
    )
    g.add_argument(
        "--overhead",
        metavar="FILE",
        type=path_text,
        help="speedup models (instance_type, workload, "
        "model, and a,b,c | p | alpha,beta); '*' matches any",
    )
    g.add_argument(
        "--quotas",
        metavar="FILE",
        type=path_text,
        help="vCPU quotas (quota_group, market, vcpus)",
    )
    g.add_argument(
        "--cloud",
        help="plan in this cloud only (the catalog's provider: aws, gcp, azure; default: "
        "every cloud of the catalog)",
    )
    g.add_argument(
        "--region",
        help="plan in this region only (default: every region of the catalog, each with "
        "its own quotas)",
    )
    g.add_argument(
        "--saturation",
        metavar="FILE",
        type=path_text,
        help="network saturation points "
        "(bandwidth_gbps, workers) replacing the shipped N_sat table",
    )
    if prices:
        g.add_argument(
            "--workloads",
            metavar="FILE",
            type=path_text,
            help="your own workloads (CSV or TOML: name, train_flops_per_sample, parameters, "
            "accelerator_memory_gib per GPU; optional checkpoint_gb, samples_per_epoch), "
            "usable by --workload and the scenarios file",
        )
    g.add_argument(
        "--interruptions",
        metavar="FILE",
        type=path_text,
        help="spot interruption rates overriding the catalog's (instance_type and "
        "interruption_rate, a monthly fraction, or interruption_bucket, e.g. '5-10%%')",
    )
    g.add_argument(
        "--spot-price",
        choices=("zone", "regional"),
        default="zone",
        help="plan on each type's cheapest zone's spot price (zone, default) or on "
        "on-demand x (1 - the Spot Instance Advisor's regional average saving) (regional)",
    )


def add_timeout(p: argparse.ArgumentParser) -> None:
    """--timeout of a command that fetches prices: the fetch's deadline and each store
    request's."""
    p.add_argument(
        "--timeout",
        type=number(gt=0, le=MAX_TIMEOUT_S),
        default=None,
        metavar="S",
        help="one deadline in seconds for the whole price fetch, retries included, and "
        f"for each store request (default: {DEFAULT_PRICE_TIMEOUT_S:g}; store requests: "
        f"${ENV_TIMEOUT}, else {DEFAULT_TIMEOUT_S:g})",
    )


def add_store_timeout(p: argparse.ArgumentParser) -> None:
    """--timeout of a command that reads or writes a store."""
    p.add_argument(
        "--timeout",
        type=number(gt=0, le=MAX_TIMEOUT_S),
        default=None,
        metavar="S",
        help="seconds any one store request may take, retries included; an unreachable "
        f"store fails within it (default: ${ENV_TIMEOUT}, else {DEFAULT_TIMEOUT_S:g})",
    )


def price_timeout(args: argparse.Namespace) -> float:
    """The price fetch's deadline: --timeout, else the default."""
    return DEFAULT_PRICE_TIMEOUT_S if args.timeout is None else float(args.timeout)


def add_job(p: argparse.ArgumentParser) -> None:

    p.add_argument(
        "--workload",
        default=DEFAULT_WORKLOAD,
        help="sample workload whose throughput and scaling to plan for "
        "(default: resnet50; see `deepvm workloads`)",
    )
    p.add_argument(
        "--checkpoint-gb",
        type=CHECKPOINT_GB,
        metavar="GB",
        help="checkpoint size C in GB (default: the workload's weights + Adam state)",
    )
    p.add_argument(
        "--checkpoint-versions",
        type=SMALL_COUNT,
        default=DEFAULT_CHECKPOINT_VERSIONS,
        metavar="K",
        help=f"checkpoint versions the remote tier holds (default: {DEFAULT_CHECKPOINT_VERSIONS})",
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
    w.add_argument(
        "--work",
        type=WORK_FLOPS,
        metavar="FLOPS",
        help="total training FLOPs, e.g. 1e19",
    )
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
        type=number(gt=0, le=MAX_DEADLINE_H),
        metavar="HOURS",
        help="objective cost: the expected makespan must be at most this",
    )
    w.add_argument(
        "--restart-s",
        type=RESTART_S,
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
    # No solver runs for one job (every candidate is evaluated exactly): the flag
    # is still accepted, for scripts that pass it, and says so (job_from_args).
    p.add_argument("--time-limit", type=POSITIVE, default=None, help=argparse.SUPPRESS)
    add_format(p)


def add_time_limit(p: argparse.ArgumentParser) -> None:
    """For commands that plan the fleet (``fleet``, ``nightly``)."""
    p.add_argument(
        "--time-limit",
        type=POSITIVE,
        default=DEFAULT_TIME_LIMIT_S,
        metavar="S",
        help="the fleet solve's time limit in seconds, for the whole solve: past it, the "
        f"best plan so far, and a warning saying what is not proven (default: "
        f"{DEFAULT_TIME_LIMIT_S:g})",
    )


def planner_inputs(args: argparse.Namespace, store: Any = None) -> Any:
    """The planner's inputs; the store's readers (and pyarrow) load only with a
    store (``store``: the command's, already opened; else the one the options name)."""
    from deepvm.planner.inputs import InputFiles, Inputs

    files: Any = {name: getattr(args, name) for name in InputFiles.__annotations__}
    if store is None:
        uri = store_location(args, required=False)
        if not uri:
            return Inputs.load(**files)
        from deepvm.store import Store

        store = Store.open(uri)
    from deepvm.records.inputs import load_inputs

    return load_inputs(store=store, **files)


def job_from_args(
    args: argparse.Namespace, *, policies: Sequence[str], workloads: Any = None
) -> Any:
    """The job the options describe, built once (recommend, sweep, compare);
    ``workloads``: the registry the inputs declare."""
    from deepvm.base.config import JobSpec
    from deepvm.performance.workloads import training_work

    if getattr(args, "time_limit", None) is not None:
        print(
            "deepvm: warning: --time-limit has no effect here (one job is planned "
            "exactly, no solver runs); it applies to `deepvm fleet` and will be removed",
            file=sys.stderr,
        )
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
    )


def check_outputs(out: str | None, plot: str | None) -> None:
    """Check output paths before any work, so that nothing is half-written."""
    if out is not None and not out.endswith((".parquet", ".pq")):
        raise DeepvmError(f"--out {out!r} must end in .parquet")
    if plot is not None and not plot.lower().endswith(".png"):
        raise DeepvmError(f"--plot {plot!r} must end in .png")
    for flag, path in (("--out", out), ("--plot", plot)):
        if path is not None:
            check_output_path(flag, path)
    if plot is not None:
        from deepvm.render.plots import check_available

        check_available()  # the plot extra is missing: say so before solving anything


def check_output_path(flag: str, path: str, *, folder: bool = False) -> None:
    """An output path that can be written: not a folder (or, for ``folder``, not a
    file), and not under a file."""
    if not path.strip():
        raise DeepvmError(f"{flag} {path!r} is empty: give a path")
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


def store_location(args: argparse.Namespace, *, required: bool) -> str | None:
    """The one place a command's store is resolved: --store, else $DEEPVM_STORE,
    else ./deepvm-store for the commands that need a store (None for the others)."""
    from deepvm.base.config import DEFAULT_STORE

    given = getattr(args, "store", None) or os.environ.get(ENV_STORE)
    if given:
        return str(given)
    return DEFAULT_STORE if required else None


def writable_store(uri: str | None) -> Any:
    """The store a command will write, opened once and checked before any work
    (a deepvm.store.Store; None: no store)."""
    if not uri:
        return None
    from deepvm.store import Store

    return Store.open(uri).ensure_writable()


def regions_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    regions = [r.strip() for r in text.split(",") if r.strip()]
    if not regions:
        raise DeepvmError(f"--regions {text!r} names no region; e.g. --regions us-east-1")
    return regions
