"""``deepvm launch``: a recommended cluster wired and started with SkyPilot, the
checkpoint tier first (docs/ARCHITECTURE.md, "Launching a plan").

A launch, in order, each step said as it runs:

1. SkyPilot can use the cluster's cloud (``sky check``);
2. the priced zone: an AWS zone ID becomes this account's zone name (the AWS
   CLI) and every task is pinned to it;
3. deepvm as a wheel for the nodes, a fresh token for the tier, the task files
   and the manifest (deepvm.launcher._manifest), before any cluster is asked for;
4. the tier: Single Anchor's anchor, or one cluster per Tiering remote node;
5. their addresses (``sky status --ip``), then each tier's ``/health``;
6. the workers, told ``MASTER_ADDR`` and every tier address;
7. the manifest says ``up``; with a store, the job is adopted as running.

A step that fails tears down what this launch started (the tier stays with
``keep_tier``) and says what still runs. ``down`` tears a launch down, workers
first and the tier last; ``restart`` starts the job again after a preemption
(a move: deepvm.launcher.move).
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepvm import __version__
from deepvm.base.errors import DeepvmError, InputError, LaunchError
from deepvm.checkpoint.protocol import ENV_TIERS, ENV_TOKEN, auth_headers
from deepvm.launcher._commands import Tools
from deepvm.launcher._manifest import ClusterRecord, Manifest, launch_folder, read
from deepvm.launcher.wheel import build_wheel, wheel_name
from deepvm.model.cluster import cluster_words
from deepvm.render.launch import Task, render, sky_tasks

__all__ = ["LaunchOptions", "Target", "down", "launch", "restart"]

Echo = Callable[[str], None]
HEALTH_POLL_S = 0.5
TIER_ROLES = ("anchor", "remote")


@dataclass(frozen=True)
class Target:
    """What to launch: a recommendation (``Recommendation.as_dict()`` or a fleet
    row's cluster fields), the workload it was planned for, the checkpoint
    versions the tier keeps, and where the answer came from."""

    rec: dict[str, Any]
    workload: str
    versions: int
    source: str
    job: str | None = None
    plan_date: str | None = None


@dataclass(frozen=True)
class LaunchOptions:
    name: str
    train: str | None = None  # what torchrun runs (None: deepvm's own resumable job)
    require_zone: bool = False  # stop where the priced zone cannot be pinned
    any_zone: bool = False  # do not pin the zone at all
    keep_tier: bool = False  # a failed workers launch leaves the tier up
    timeout_s: float = 600.0  # how long each tier may take to answer /health
    dry_run: bool = False


def launch(
    target: Target,
    options: LaunchOptions,
    tools: Tools,
    *,
    echo: Echo,
    restore: tuple[bytes | bytearray, int] | None = None,
    store: Any = None,
) -> Manifest:
    """Launch ``target`` (the steps above); its manifest. ``restore``: a
    checkpoint version put on the new tier before the workers start (a move)."""
    rec, name = target.rec, options.name
    cloud = rec.get("cloud") or "aws"
    tools.require_sky()
    folder = launch_folder(name)
    if not options.dry_run and (folder / "manifest.json").exists():
        state = read(name).state
        raise InputError(
            f"a launch named {name!r} exists already ({state}): choose another --name, or "
            f"tear it down first: deepvm launch --down {name}"
        )
    echo(f"launch {name}: {words(rec)}, ${rec['hourly_cost']:.4f}/h ({target.source})")
    echo(f"step 1: SkyPilot can use {cloud} (sky check {cloud})")
    tools.check_cloud(cloud)
    echo("step 2: the priced zone")
    zone = _pin_zone(rec, options, tools, echo)
    echo("step 3: deepvm for the nodes (a wheel), the tier's token, the tier's task files")
    wheel = folder / wheel_name() if options.dry_run else build_wheel(_private(folder))
    token = secrets.token_urlsafe(32)
    tools.env[ENV_TOKEN] = token  # `sky launch --secret` reads it from here, never the argv
    tasks = sky_tasks(
        rec, workload=target.workload, name=name, wheel=wheel, train=options.train,
        versions=target.versions, zone=zone,
    )  # fmt: skip
    manifest = Manifest(
        name=name, state="launching", created_at=_now(), deepvm_version=__version__,
        source=target.source, job=target.job, workload=target.workload, cluster=dict(rec),
        hourly_cost=float(rec["hourly_cost"]), zone=zone, wheel=str(wheel),
        wheel_sha256="" if options.dry_run else _sha256(wheel), token=token,
        clusters=_records(tasks, folder, name),
        store=None if store is None else str(getattr(store, "uri", "")) or None,
    )  # fmt: skip
    if rec["architecture"] == "spot_object_store":
        manifest.notes.append(
            "spot_object_store keeps its checkpoints in object storage, which deepvm does not "
            "launch: the workers write to their local folder unless your script saves elsewhere"
        )
        echo(f"warning: {manifest.notes[-1]}")
    _write_files(manifest, [t for t in tasks if t.role in TIER_ROLES], options, tools)
    tiers = [c for c in manifest.clusters if c.role in TIER_ROLES]
    workers = [c for c in manifest.clusters if c.role == "workers"]
    if tiers:
        echo(f"step 4: the checkpoint tier first ({', '.join(c.name for c in tiers)})")
        try:
            for record in tiers:
                _launch(record, manifest, tools, echo, options, secret=True)
            echo("step 5: the tier's addresses and /health")
            for record in tiers:
                record.address = tools.address(record.name)
                _save(manifest, options)
            for url in manifest.tier_urls():
                _wait_healthy(url, token, options, tools, echo)
            if restore is not None:
                _restore(manifest.tier_urls()[0], restore, token, options, tools, echo)
        except DeepvmError as exc:
            _fail(manifest, options, tools, echo, exc, torn=tiers, kept=[])
    else:
        echo("steps 4-5: no checkpoint tier in this architecture")
    if workers:
        known = {ENV_TIERS: ",".join(manifest.tier_urls())}
        anchor = next((c for c in tiers if c.role == "anchor"), None)
        if anchor is not None:
            known["MASTER_ADDR"] = str(anchor.address)
        echo(
            "step 6: the workers, with "
            + ", ".join(f"{k}={v}" for k, v in known.items() if v)
            + (f" and ${ENV_TOKEN}" if tiers else "")
        )
        wired = sky_tasks(
            rec, workload=target.workload, name=name, wheel=wheel, train=options.train,
            versions=target.versions, zone=zone, known=known,
        )  # fmt: skip
        _write_files(manifest, [t for t in wired if t.role == "workers"], options, tools)
        try:
            for record in workers:
                _launch(record, manifest, tools, echo, options, secret=bool(tiers))
        except DeepvmError as exc:
            kept = tiers if options.keep_tier else []
            torn = workers if options.keep_tier else [*workers, *tiers]
            _fail(manifest, options, tools, echo, exc, torn=torn, kept=kept)
    manifest.state = "up"
    manifest.launched_at = _now()
    _save(manifest, options)
    echo(f"step 7: {name} is up" + (" (dry run: nothing ran)" if options.dry_run else ""))
    if store is not None and target.job and not options.dry_run:
        from deepvm.records.running import adopt

        adopted = adopt(
            store, target.job, date=target.plan_date, started_at=dt.datetime.now(dt.UTC)
        )
        echo(f"adopted {adopted.scenario} as running {words(adopted.cluster.as_dict())}")
    return manifest


def down(name: str, tools: Tools, *, echo: Echo, dry_run: bool = False) -> Manifest:
    """Tear down every cluster of launch ``name``, workers first and the tier last."""
    manifest = read(name)
    tools.require_sky()
    clusters = [c for c in manifest.clusters if c.state != "down"]
    order = [c for c in clusters if c.role == "workers"] + [
        c for c in clusters if c.role in TIER_ROLES
    ]
    echo(f"tearing down {name}: {', '.join(c.name for c in order) or 'nothing left'}")
    failed = _tear_down(order, tools, echo)
    if not dry_run:
        manifest.state = "down" if not failed else "failed"
        manifest.write()
    if failed:
        raise LaunchError(
            "sky down failed for "
            + "; ".join(f"{c}: {why}" for c, why in failed)
            + f": run `sky down {' '.join(c for c, _ in failed)}`"
        )
    return manifest


def restart(name: str, tools: Tools, *, echo: Echo, dry_run: bool = False) -> Manifest:
    """Launch ``name``'s anchor and workers again, with the same task files and
    token: after a preemption the whole job restarts (SkyPilot brings back lost
    nodes) and every rank resumes from the tier's newest version."""
    manifest = read(name)
    if manifest.state != "up":
        raise InputError(f"launch {name} is {manifest.state}, not up: nothing to restart")
    tools.require_sky()
    tools.env[ENV_TOKEN] = manifest.token
    options = LaunchOptions(name=name, dry_run=dry_run)
    tiered = bool(manifest.tier_urls())
    for record in [c for c in manifest.clusters if c.role in ("anchor", "workers")]:
        _launch(record, manifest, tools, echo, options, secret=tiered)
    echo(f"{name}: the job restarted; it resumes from the tier's newest version")
    return manifest


# --- the steps' parts ------------------------------------------------------------------


def _pin_zone(rec: dict[str, Any], options: LaunchOptions, tools: Tools, echo: Echo) -> str | None:
    zone_id, region = rec.get("zone"), rec["region"]
    if not zone_id or (rec.get("cloud") or "aws") != "aws":
        echo("  priced per region: no zone to pin")
        return None
    if options.any_zone:
        echo(
            f"  warning: --any-zone: launching anywhere in {region}; the spot price may differ "
            f"from the one planned in zone ID {zone_id}"
        )
        return None
    echo(f"  zone ID {zone_id} to this account's zone name (aws ec2 describe-availability-zones)")
    answer = tools.zone_name(region, zone_id)
    if answer.name:
        echo(f"  pinned to {answer.name} ({zone_id})")
        return answer.name
    if answer.unknown:
        raise InputError(
            f"this AWS account has no zone {zone_id} in {region} ({answer.problem}): plan on "
            "this account's zones, or pass --any-zone to launch anywhere in the region"
        )
    if options.require_zone:
        raise LaunchError(
            f"cannot pin zone {zone_id}: {answer.problem}; set up the AWS CLI, or launch "
            "anywhere in the region without --require-zone"
        )
    echo(
        f"  warning: cannot pin zone {zone_id} ({answer.problem}): launching anywhere in "
        f"{region}; the spot price may differ from the one planned"
    )
    return None


def _records(tasks: list[Task], folder: Path, name: str) -> list[ClusterRecord]:
    out = []
    for task in tasks:
        file = str(folder / f"{task.role}.yaml")
        if task.role == "remote":
            out += [ClusterRecord(f"{name}-remote-{i}", "remote", file) for i in range(task.copies)]
        else:
            out.append(ClusterRecord(f"{name}-{task.role}", task.role, file))
    return out


def _write_files(
    manifest: Manifest, tasks: list[Task], options: LaunchOptions, tools: Tools
) -> None:
    """The task files in the launch's folder (a dry run shows them instead), and the
    manifest that names them."""
    for task in tasks:
        header = [
            f"deepvm launch {manifest.name}: {task.role} ({manifest.source})",
            f"{words(manifest.cluster)}, ${manifest.hourly_cost:.4f}/h",
        ]
        text = render(task.config, header)
        if options.dry_run:
            tools.show(f"--- {launch_folder(manifest.name) / (task.role + '.yaml')}")
            tools.show(text.rstrip("\n"))
        else:
            path = _private(launch_folder(manifest.name)) / f"{task.role}.yaml"
            path.write_text(text)
    _save(manifest, options)


def _launch(
    record: ClusterRecord,
    manifest: Manifest,
    tools: Tools,
    echo: Echo,
    options: LaunchOptions,
    *,
    secret: bool,
) -> None:
    record.state = "launching"  # named before it is asked for: a crash leaves it findable
    _save(manifest, options)
    echo(f"  sky launch {record.name} ({record.role})")
    record.launch_command = tools.launch(
        record.name, record.task_file, secret=ENV_TOKEN if secret else None
    )
    record.state = "up"
    _save(manifest, options)


def _wait_healthy(url: str, token: str, options: LaunchOptions, tools: Tools, echo: Echo) -> None:
    """Until the tier at ``url`` answers /health with the launch's token, at most
    ``options.timeout_s``."""
    if options.dry_run:
        tools.show(f"# wait until GET {url}/health answers (with the token), at most "
                   f"{options.timeout_s:g} s")  # fmt: skip
        return
    echo(f"  waiting for {url}/health (at most {options.timeout_s:g} s)")
    deadline = time.monotonic() + options.timeout_s
    last = "no answer yet"
    while True:
        request = urllib.request.Request(url + "/health", headers=auth_headers(token))
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                held = json.loads(response.read())
            echo(f"  {url} answers: {held.get('versions', 0)} versions held")
            return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise LaunchError(
                    f"the tier at {url} answers but refuses this launch's token"
                ) from None
            last = f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:
            last = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            raise LaunchError(
                f"the tier at {url} did not answer /health within {options.timeout_s:g} s "
                f"({last}); raise --timeout, or look at its log: sky logs"
            )
        time.sleep(HEALTH_POLL_S)


def _restore(
    url: str,
    version: tuple[bytes | bytearray, int],
    token: str,
    options: LaunchOptions,
    tools: Tools,
    echo: Echo,
) -> None:
    data, step = version
    if options.dry_run:
        tools.show(f"# PUT {url}/versions/{step}: the old tier's newest checkpoint")
        return
    from deepvm.checkpoint.client import put_version

    put_version(url, step, data, token=token)
    echo(f"  restored version {step} ({len(data) / 1e9:.3g} GB) on {url}")


def _fail(
    manifest: Manifest,
    options: LaunchOptions,
    tools: Tools,
    echo: Echo,
    exc: DeepvmError,
    *,
    torn: list[ClusterRecord],
    kept: list[ClusterRecord],
) -> None:
    """Tear down ``torn`` (the ones asked for), keep ``kept``, record it, and raise
    one line that says what still runs."""
    asked = [c for c in torn if c.state != "planned"]
    failed = _tear_down(asked, tools, echo)
    manifest.state = "failed"
    _save(manifest, options)
    running = [c.name for c in kept] + [c for c, _ in failed]
    left = (
        f"; still running: {', '.join(running)} (tear down: deepvm launch --down {manifest.name})"
        if running
        else "; nothing of it runs"
    )
    cause = InputError if isinstance(exc, InputError) else LaunchError
    raise cause(f"{exc}{left}") from None


def _tear_down(clusters: list[ClusterRecord], tools: Tools, echo: Echo) -> list[tuple[str, str]]:
    failed = []
    for record in clusters:
        echo(f"  sky down {record.name}")
        why = tools.down(record.name)
        if why is None:
            record.state = "down"
        else:
            failed.append((record.name, why))
    return failed


def _save(manifest: Manifest, options: LaunchOptions) -> None:
    if not options.dry_run:
        manifest.write()


def _private(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def words(row: dict[str, Any]) -> str:
    """A cluster row in deepvm's words, with its architecture and region."""
    return cluster_words(row, architecture=True, region=True)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
