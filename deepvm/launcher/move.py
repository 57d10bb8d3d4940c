"""Moving a running job (docs/ARCHITECTURE.md, "Launching a plan"): the nightly
says it moves; ``deepvm launch JOB --store URI --move`` takes the newest
checkpoint from the tier of the cluster a launch runs it on, launches tonight's
cluster with that version restored on its tier before its workers start, then
tears the old cluster down (and, with the store, adopts the new one)."""

from __future__ import annotations

from typing import Any

from deepvm.base.errors import InputError
from deepvm.launcher._commands import Tools
from deepvm.launcher._manifest import Manifest, known_launches
from deepvm.launcher._steps import Echo, LaunchOptions, Target, down, launch, words
from deepvm.model.cluster import Cluster

__all__ = ["move", "running_launch"]


def move(
    target: Target,
    options: LaunchOptions,
    tools: Tools,
    *,
    echo: Echo,
    store: Any,
    decision: dict[str, Any] | None,
) -> Manifest:
    """Carry ``target.job`` from the cluster a launch runs it on to ``target``:
    the old tier's newest checkpoint, the new cluster launched with it restored on
    its tier before its workers start, then the old cluster torn down."""
    job = str(target.job)
    old = running_launch(job)
    new = Cluster.from_mapping(target.rec)
    was = Cluster.from_mapping(old.cluster)
    if new is None or was is None or new.identity() == was.identity():
        raise InputError(
            f"{target.source} keeps {job} on the cluster it runs on ({old.name}): nothing to move"
        )
    echo(f"move {job}: from {old.name} ({words(old.cluster)}) to {words(target.rec)}")
    if decision:
        echo(
            f"the planner assumed: {decision.get('decision', '?')}, gain "
            f"{_pct(decision.get('gain'))} net of a move of {_hours(decision.get('migration_h'))} "
            f"and ${_number(decision.get('migration_usd')):.2f}, paid back after "
            f"{_hours(decision.get('break_even_h'))} on the new cluster"
        )
    echo(f"move step 1: the newest checkpoint from {old.name}'s tier")
    restore = _newest_version(old, options, tools, echo)
    echo("move step 2: the new cluster, its tier restored before its workers start")
    manifest = launch(target, options, tools, echo=echo, restore=restore, store=store)
    echo(f"move step 3: the old cluster goes ({old.name})")
    down(old.name, tools, echo=echo, dry_run=options.dry_run)
    return manifest


def running_launch(job: str) -> Manifest:
    """The newest launch of ``job`` that is up; an InputError where none is."""
    up = [m for m in known_launches() if m.job == job and m.state == "up"]
    if not up:
        raise InputError(
            f"{job} runs on no cluster deepvm launched (no launch of it is up here): "
            f"launch it first, deepvm launch {job} --store URI"
        )
    return up[-1]


def _newest_version(
    old: Manifest, options: LaunchOptions, tools: Tools, echo: Echo
) -> tuple[bytes | bytearray, int] | None:
    urls = old.tier_urls()
    if options.dry_run:
        for url in urls:
            tools.show(f"# GET {url}/versions, then the newest version's bytes (with its token)")
        return (b"", 0)
    if not urls:
        echo(f"  warning: {old.name} has no checkpoint tier: the job starts over")
        return None
    from deepvm.checkpoint.client import load_bytes

    found = load_bytes(tiers=urls, token=old.token)
    if found is None:
        echo(f"  warning: {old.name}'s tier holds no version yet: the job starts over")
        return None
    echo(f"  version {found[1]} ({len(found[0]) / 1e9:.3g} GB)")
    return found


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _pct(value: Any) -> str:
    return f"{_number(value):+.1%}"


def _hours(value: Any) -> str:
    return f"{_number(value):.2f} h"
