"""``deepvm launch``: start a recommended cluster with SkyPilot, the checkpoint tier
first (deepvm.launcher); ``--down`` tears a launch down, ``--move`` carries a running
job to tonight's cluster, ``--list`` shows what this machine launched."""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from typing import Any

from deepvm.base.config import DEFAULT_TOP
from deepvm.base.errors import InputError
from deepvm.cli._arguments import BUDGET, number
from deepvm.cli._common import (
    add_inputs,
    add_job,
    add_jobs_file,
    planner_inputs,
    store_location,
    writable_store,
)
from deepvm.cli._listing import output_format
from deepvm.cli._output import json_text, progress, table_text
from deepvm.model.cluster import Cluster, cluster_words

__all__ = ["add_parsers", "cmd_launch"]

_NAME = re.compile(r"^[a-z](?:[a-z0-9-]{0,22}[a-z0-9])?$")


def add_parsers(sub: Any) -> None:
    la = sub.add_parser(
        "launch",
        help="start a recommended cluster with SkyPilot, its checkpoint tier first",
        description="Launch deepvm's cluster with SkyPilot (the sky command): the priced zone "
        "pinned, the checkpoint tier first (Single Anchor's anchor, or Tiering's remote "
        "nodes), its /health awaited, then the workers told MASTER_ADDR, the tier addresses "
        "and the tier's token; deepvm itself goes to the nodes as a wheel of this machine's "
        "code. The cluster is deepvm's recommendation for --budget (rank 1, or --rank N), or "
        "a registered JOB's cluster in the store's newest fleet plan. What runs is recorded "
        "in a manifest under $DEEPVM_HOME (default ~/.deepvm); --down NAME tears it down.",
    )
    la.add_argument(
        "job", nargs="?", help="a registered job: launch its cluster in the newest fleet plan"
    )
    what = la.add_mutually_exclusive_group()
    what.add_argument(
        "--budget",
        type=BUDGET,
        metavar="USD_PER_HOUR",
        help="launch deepvm's recommendation for this budget (the recommend options apply)",
    )
    what.add_argument("--down", metavar="NAME", help="tear down every cluster of launch NAME")
    what.add_argument(
        "--restart",
        metavar="NAME",
        help="restart launch NAME's job after a preemption: its anchor and workers are "
        "launched again (SkyPilot replaces lost nodes) and resume from the tier",
    )
    what.add_argument("--list", action="store_true", help="the launches this machine made")
    la.add_argument(
        "--rank", type=number(ge=1, le=1000, integer=True), metavar="N",
        help="with --budget: launch deepvm's Nth recommendation (default: 1)",
    )  # fmt: skip
    la.add_argument(
        "--store",
        metavar="URI",
        help="with JOB: the store whose newest fleet plan names its cluster; the job is "
        "adopted there as running (default: $DEEPVM_STORE)",
    )
    add_jobs_file(
        la, "with JOB: the registered jobs (default: the shipped datasets/scenarios.toml)"
    )
    la.add_argument(
        "--move",
        action="store_true",
        help="with JOB: move it from the cluster a launch runs it on to the fleet plan's: "
        "the old tier's newest checkpoint restored on the new tier, then the old cluster down",
    )
    la.add_argument(
        "--name",
        metavar="NAME",
        help="the launch's name, the prefix of its SkyPilot clusters (lower-case letters, "
        "digits and dashes; default: the job or workload and 4 random hex digits)",
    )
    la.add_argument(
        "--train",
        metavar="ARGS",
        help="what torchrun runs on every node, e.g. 'train.py --epochs 3' or '-m pkg.train' "
        "(default: deepvm's own resumable job, python -m deepvm.bench.train, which checks "
        "the wiring); ship your code with SkyPilot's workdir or an image",
    )
    zone = la.add_mutually_exclusive_group()
    zone.add_argument(
        "--require-zone",
        action="store_true",
        help="stop where the priced AWS zone cannot be pinned (the AWS CLI is missing or "
        "fails); by default the launch goes region-wide with a warning",
    )
    zone.add_argument(
        "--any-zone",
        action="store_true",
        help="do not pin the zone: launch anywhere in the region (the spot price may differ)",
    )
    la.add_argument(
        "--keep-tier",
        action="store_true",
        help="if the workers fail to launch, keep the tier up (default: torn down too)",
    )
    la.add_argument(
        "--timeout",
        dest="health_timeout",
        type=number(gt=0, le=7200),
        default=600.0,
        metavar="S",
        help="how long each tier may take to answer /health after its launch (default: 600)",
    )
    la.add_argument(
        "--dry-run",
        action="store_true",
        help="print every command with its arguments and the task files; run nothing",
    )
    add_job(la)
    add_inputs(la)


def cmd_launch(args: argparse.Namespace) -> int:
    from deepvm.launcher import Tools

    tools = Tools(env=dict(os.environ), dry_run=args.dry_run, show=print)
    if args.list:
        return _list(args)
    if args.down:
        return _down(args, tools)
    if args.restart:
        from deepvm.launcher import restart

        return _report(args, restart(args.restart, tools, echo=progress, dry_run=args.dry_run))
    _check_request(args)
    if args.job:
        target, store, tonight = _fleet_target(args)
    else:
        target, store, tonight = _recommended_target(args), None, None
    options = _options(args, target)
    if args.move:
        from deepvm.launcher import move

        decision = _decision(tonight, target)
        manifest = move(target, options, tools, echo=progress, store=store, decision=decision)
    else:
        from deepvm.launcher import launch

        manifest = launch(target, options, tools, echo=progress, store=store)
    return _report(args, manifest)


def _check_request(args: argparse.Namespace) -> None:
    if args.job and args.budget is not None:
        raise InputError(
            "give JOB (its fleet plan's cluster) or --budget (deepvm's recommendation), not both"
        )
    if not args.job and args.budget is None:
        raise InputError(
            "what to launch: --budget USD_PER_HOUR (deepvm's recommendation), or JOB --store "
            "URI (its cluster in the newest fleet plan); --down NAME tears a launch down"
        )
    if args.job and args.rank is not None:
        raise InputError(
            "--rank picks among --budget's recommendations; JOB launches its fleet plan"
        )
    if args.move and not args.job:
        raise InputError("--move needs JOB --store URI: the running job to move")
    if args.name is not None and not _NAME.match(args.name):
        raise InputError(
            f"--name {args.name!r} must be 1-24 lower-case letters, digits and dashes, "
            "starting with a letter (SkyPilot's cluster names)"
        )


def _options(args: argparse.Namespace, target: Any) -> Any:
    from deepvm.launcher import LaunchOptions

    return LaunchOptions(
        name=args.name or _default_name(target.job or target.workload),
        train=args.train,
        require_zone=args.require_zone,
        any_zone=args.any_zone,
        keep_tier=args.keep_tier,
        timeout_s=float(args.health_timeout),
        dry_run=args.dry_run,
    )


def _default_name(label: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:14].strip("-")
    slug = slug if slug[:1].isalpha() else f"dvm-{slug}".strip("-")
    return f"{slug}-{secrets.token_hex(2)}"


def _recommended_target(args: argparse.Namespace) -> Any:
    from deepvm.cli._common import job_from_args
    from deepvm.launcher import Target
    from deepvm.planner import recommend

    rank = int(args.rank or 1)
    args.top = max(DEFAULT_TOP, rank)
    inputs = planner_inputs(args)
    job = job_from_args(args, policies=["deepvm"], workloads=inputs.workloads)
    result = recommend(args.budget, job, inputs=inputs)
    ranked = [r for r in result.recommendations if r.policy == job.policies[0]]
    picked = next((r for r in ranked if r.rank == rank), None)
    if picked is None:
        raise InputError(
            f"--rank {rank}: deepvm has {len(ranked)} recommendations for ${args.budget:g}/h"
        )
    return Target(
        rec=picked.as_dict(),
        workload=result.workload,
        versions=job.checkpoint_versions,
        source=f"deepvm recommend --budget {args.budget:g}, {picked.policy} #{rank}, prices "
        f"{result.prices_snapshot}",
    )


def _fleet_target(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The registered job's cluster in the store's newest fleet plan, checked
    against the store's newest catalog."""
    from deepvm.launcher import Target
    from deepvm.records.jobs import load_jobs

    store = writable_store(store_location(args, required=True))
    inputs = planner_inputs(args, store=store)
    specs = {j.name: j for j in load_jobs(args.scenarios, inputs.workloads)}
    if args.job not in specs:
        raise InputError(
            f"job {args.job!r} is not registered; the registered jobs: {', '.join(sorted(specs))}"
        )
    from deepvm.records.results import read_nightly

    dates, tonight = read_nightly(store, "fleet")
    if not dates:
        raise InputError("the store has no fleet plan: run `deepvm nightly --store URI` first")
    mine = tonight[tonight["scenario"] == args.job]
    row = mine.iloc[-1].to_dict() if not mine.empty else {}
    cluster = Cluster.from_mapping(row)
    if cluster is None:
        raise InputError(
            f"the fleet plan of {dates[-1]} leaves {args.job} unplanned: nothing to launch"
        )
    _in_catalog(cluster, inputs, dates[-1])
    spec = specs[args.job].spec
    target = Target(
        rec={**cluster.as_dict(), "binding": row.get("binding")},
        workload=spec.workload,
        versions=spec.checkpoint_versions,
        source=f"the fleet plan of {dates[-1]} for {args.job}",
        job=args.job,
        plan_date=dates[-1],
    )
    return target, store, tonight


def _in_catalog(cluster: Cluster, inputs: Any, date: str) -> None:
    table = inputs.catalog.table
    have = set(zip(table["region"], table["instance_type"], strict=True))
    for itype in (cluster.worker_type, cluster.remote_type):
        if itype and (cluster.region, itype) not in have:
            raise InputError(
                f"the fleet plan of {date} runs {itype} in {cluster.region}, which the catalog "
                f"({inputs.catalog.snapshot}) no longer has: re-plan with `deepvm nightly` first"
            )


def _decision(tonight: Any, target: Any) -> dict[str, Any] | None:
    """The stay-or-move the fleet plan made for the job (with the move's costs)."""
    from deepvm.records.running import moves_tonight

    return moves_tonight(tonight).get(str(target.job))


def _down(args: argparse.Namespace, tools: Any) -> int:
    from deepvm.launcher import down

    manifest = down(args.down, tools, echo=progress, dry_run=args.dry_run)
    if output_format(args) == "json":
        sys.stdout.write(json_text(manifest.as_dict()))
    elif not args.dry_run:
        print(f"{manifest.name} is down: {', '.join(c.name for c in manifest.clusters)}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from deepvm.launcher import known_launches

    launches = known_launches()
    if output_format(args) == "json":
        sys.stdout.write(json_text([m.as_dict() for m in launches]))
        return 0
    rows = [
        {
            "name": m.name,
            "state": m.state,
            "job": m.job or "",
            "cluster": cluster_words(m.cluster, architecture=True, region=True),
            "cost": f"{m.hourly_cost:.4f}",
            "launched": m.launched_at or m.created_at,
        }
        for m in launches
    ]
    columns = [("name", "name"), ("state", "state"), ("job", "job"), ("cluster", "cluster")]
    columns += [("cost", "$/h"), ("launched", "launched")]
    print(table_text(rows, columns) if rows else "no launches on this machine")
    return 0


def _report(args: argparse.Namespace, manifest: Any) -> int:
    if output_format(args) == "json":
        sys.stdout.write(json_text(manifest.as_dict()))
        return 0
    if args.dry_run:
        print(f"dry run: nothing was launched ({manifest.name})")
        return 0
    words = cluster_words(manifest.cluster, architecture=True, region=True)
    print(f"launched {manifest.name}: {words}, ${manifest.hourly_cost:.4f}/h")
    rows = [
        {"cluster": c.name, "role": c.role, "address": c.address or "", "state": c.state}
        for c in manifest.clusters
    ]
    print(table_text(rows, [("cluster", "cluster"), ("role", "role"), ("address", "address"),
                            ("state", "state")]))  # fmt: skip
    print(f"after a preemption: deepvm launch --restart {manifest.name} (resumes from the tier)")
    print(f"tear it down: deepvm launch --down {manifest.name}")
    return 0
