"""Launch specs: a recommended cluster as SkyPilot tasks (docs/ARCHITECTURE.md,
"Launching a plan"). ``deepvm launch`` (deepvm.launcher) runs them; ``--sky-yaml``
writes the same tasks as files.

One task per group of like nodes, each launched as its own SkyPilot cluster, the
checkpoint tier first:

* ``anchor`` (Single Anchor): one on-demand node of the worker type that serves
  the checkpoint tier on its disk and is torchrun's rank 0;
* ``remote`` (Tiering): one on-demand CPU node per tier node, each serving the
  tier from its memory (``/dev/shm``), launched once per node;
* ``workers``: the spot (or on-demand) GPU nodes, told where the tier is
  (``DEEPVM_CHECKPOINT_TIERS``) and where rank 0 is (``MASTER_ADDR``: the
  anchor's address, or the workers' own first node).

What only a launch knows (the tier's addresses, the anchor's, the token) is an
env or secret left ``null`` in a file, which SkyPilot refuses to launch without
(``--env NAME=VALUE``, ``--secret NAME``): a file is never launched half-wired.
deepvm itself reaches the nodes as a wheel of the launching machine's own code,
uploaded with ``file_mounts`` and installed in ``setup`` (deepvm.launcher.wheel).

Zones: AWS prices spot per zone *ID* (``use1-az1``); SkyPilot's ``zone`` takes
the account's zone *name*, which ``deepvm launch`` resolves and pins (every task
of a launch in that one zone); a file names the ID and the command that gives
its name. GCP and Azure prices are per region, so their tasks name no zone.
GCP sells T4 and V100 attached to an n1 host, which the catalog names together
(``n1-standard-16+2xV100``): the task gives the host as ``instance_type`` and
the GPUs as ``accelerators`` (``V100:2``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepvm.base.errors import OutputError
from deepvm.base.output_files import atomic_output
from deepvm.checkpoint.protocol import (
    DEFAULT_PORT,
    ENV_TIERS,
    ENV_TOKEN,
    MEMORY_DIR,
    versions_per_tier,
)
from deepvm.model.cluster import cluster_words

__all__ = [
    "ANCHOR_DIR",
    "RDZV_PORT",
    "REMOTE_WHEEL_DIR",
    "TIER_MEMORY_SHARE",
    "Task",
    "how_to_launch",
    "render",
    "sky_tasks",
    "task_paths",
    "train_command",
    "write_sky_yaml",
]

RDZV_PORT = 29500  # torchrun's static rendezvous on rank 0
REMOTE_WHEEL_DIR = "/tmp/deepvm-dist"  # where a node finds the uploaded wheel
# The share of a tier node's memory its versions may fill: what the planner
# sizes the remote tier with (deepvm.planner.offers.REMOTE_MEMORY_FRACTION).
TIER_MEMORY_SHARE = 0.8
ANCHOR_DIR = "$HOME/deepvm-checkpoints"


@dataclass(frozen=True)
class Task:
    """One SkyPilot task of a launch: its role, how many clusters run it (one per
    tier node for ``remote``), and the task itself (SkyPilot's YAML as a dict)."""

    role: str  # "anchor", "remote" or "workers"
    copies: int
    config: dict[str, Any]


def train_command(workload: str) -> str:
    """What torchrun runs by default: deepvm's own resumable job, which checks the
    wiring end to end (rendezvous, checkpoints through the tier)."""
    job = f"-m deepvm.bench.train --workload {shlex.quote(workload)}"
    return job + " --steps 200 --checkpoint-every 20"


def sky_tasks(
    rec: Mapping[str, Any],
    *,
    workload: str,
    name: str,
    wheel: Path,
    train: str | None = None,
    versions: int = 2,
    zone: str | None = None,
    known: Mapping[str, str] | None = None,
) -> list[Task]:
    """The tasks of one recommendation (``Recommendation.as_dict()``), tier first.

    ``name`` names the launch (the tier's folder; SkyPilot's cluster names derive
    from it); ``wheel`` is the local deepvm wheel the nodes install; ``zone`` the
    zone *name* to pin. ``known`` fills envs a launch has learnt (``MASTER_ADDR``,
    ``DEEPVM_CHECKPOINT_TIERS``); the others stay ``null``: required at launch.
    """
    known = dict(known or {})
    region, itype, cloud = rec["region"], rec["worker_type"], rec.get("cloud") or "aws"
    architecture = rec["architecture"]
    anchor = architecture == "single_anchor" and rec["n_on_demand"] > 0
    remote_nodes = int(rec.get("n_remote") or 0) if rec.get("remote_type") else 0
    tiered = anchor or remote_nodes > 0
    common = {"DEEPVM_LAUNCH": name, "DEEPVM_WORKLOAD": workload}
    common["DEEPVM_NODES"] = str(int(rec["n_workers"]))
    secrets: dict[str, Any] = {ENV_TOKEN: None} if tiered else {}
    mounts = {f"{REMOTE_WHEEL_DIR}/{wheel.name}": str(wheel)}
    command = train or train_command(workload)
    tasks: list[Task] = []
    if anchor:
        tasks.append(
            Task(
                "anchor",
                1,
                _task(
                    f"{name}-anchor", 1, _resources(cloud, region, itype, False, zone),
                    envs=common, secrets=secrets, mounts=mounts,
                    setup=_install(wheel, "checkpoint,bench"),
                    run=_anchor_run(name, versions, command),
                    ports=[DEFAULT_PORT, RDZV_PORT],
                ),
            )
        )  # fmt: skip
    if remote_nodes:
        tasks.append(
            Task(
                "remote",
                remote_nodes,
                _task(
                    f"{name}-remote", 1,
                    _resources(cloud, region, rec["remote_type"], False, zone),
                    envs={**common, "DEEPVM_ROLE": "checkpoint-tier"}, secrets=secrets,
                    mounts=mounts,
                    setup=_install(wheel, "checkpoint") + "\n" + _MEMORY_SETUP,
                    run=_remote_run(name, versions_per_tier(versions, remote_nodes)),
                    ports=[DEFAULT_PORT],
                ),
            )
        )  # fmt: skip
    spot = int(rec["n_spot"])
    workers = spot if anchor else int(rec["n_workers"])
    if workers:
        envs = dict(common)
        if anchor:
            envs["MASTER_ADDR"] = known.get("MASTER_ADDR")  # type: ignore[assignment]
        if tiered:
            envs[ENV_TIERS] = known.get(ENV_TIERS)  # type: ignore[assignment]
        tasks.append(
            Task(
                "workers",
                1,
                _task(
                    f"{name}-workers", workers,
                    _resources(cloud, region, itype, spot > 0, zone),
                    envs=envs, secrets=secrets, mounts=mounts,
                    setup=_install(wheel, "checkpoint,bench"),
                    run=_torchrun(
                        command,
                        rank_offset=1 if anchor else 0,
                        master=None if anchor else _FIRST_NODE,
                    ),
                ),
            )
        )  # fmt: skip
    return tasks


def _task(
    name: str,
    nodes: int,
    resources: dict[str, Any],
    *,
    envs: Mapping[str, str | None],
    secrets: Mapping[str, Any],
    mounts: Mapping[str, str],
    setup: str,
    run: str,
    ports: list[int] | None = None,
) -> dict[str, Any]:
    task: dict[str, Any] = {
        "name": name,
        "num_nodes": nodes,
        "resources": {**resources, **({"ports": ports} if ports else {})},
        "envs": dict(envs),
    }
    if secrets:
        task["secrets"] = dict(secrets)
    task.update({"file_mounts": dict(mounts), "setup": setup, "run": run})
    return task


def _resources(
    cloud: str, region: str, instance_type: str, use_spot: bool, zone: str | None
) -> dict[str, Any]:
    host, plus, gpus = instance_type.partition("+")
    out: dict[str, Any] = {"cloud": cloud, "region": region}
    if zone:
        out["zone"] = zone
    out["instance_type"] = host
    if plus:  # a GCP n1 host with its GPUs: "n1-standard-16+2xV100" -> V100:2
        count, _, model = gpus.partition("x")
        out["accelerators"] = f"{model}:{count}"
    return {**out, "use_spot": use_spot}


def _install(wheel: Path, extras: str) -> str:
    """pip installs the uploaded wheel with its extras; then the wheel alone again,
    so a node that had another build of the same version gets this one."""
    remote = f"{REMOTE_WHEEL_DIR}/{wheel.name}"
    return f'pip install "{remote}[{extras}]"\npip install --force-reinstall --no-deps "{remote}"'


# tmpfs is half the memory by default; the planner sized the tier at 0.8 of it.
_MEMORY_SETUP = (
    "sudo mount -o remount,size=90% /dev/shm || "
    'echo "warning: /dev/shm keeps its size; the tier refuses versions beyond it (507)"'
)
_FIRST_NODE = '$(echo "$SKYPILOT_NODE_IPS" | head -n1)'
_OWN_ADDRESS = f'NODE_IP="{_FIRST_NODE}"'  # a one-node cluster: its own private address


def _serve(folder: str, versions: int, capacity: str | None) -> str:
    line = (
        f'deepvm checkpoint serve --dir "{folder}" --host "$NODE_IP" --port {DEFAULT_PORT} '
        f"--versions {versions}"
    )
    return line + (f' --capacity-gb "{capacity}"' if capacity else "")


def _remote_run(name: str, versions: int) -> str:
    """A tier node: the tier in memory, on the node's private address."""
    folder = f"{MEMORY_DIR}/{name}"
    capacity = (
        f"$(awk '/^MemTotal/ {{printf \"%.3f\", $2 * 1024 * {TIER_MEMORY_SHARE} / 1e9}}' "
        "/proc/meminfo)"
    )
    return f'{_OWN_ADDRESS}\nmkdir -p "{folder}"\nexec {_serve(folder, versions, capacity)}\n'


def _anchor_run(name: str, versions: int, command: str) -> str:
    """The anchor: the tier on its disk in the background, then torchrun's rank 0;
    its own saves go to its own tier."""
    folder = f"{ANCHOR_DIR}/{name}"
    return (
        f"{_OWN_ADDRESS}\n"
        f'mkdir -p "{folder}"\n'
        f"{_serve(folder, versions, None)} &\n"
        f'export {ENV_TIERS}="http://$NODE_IP:{DEFAULT_PORT}"\n'
        + _torchrun(command, rank_offset=0, master="$NODE_IP")
    )


def _torchrun(command: str, *, rank_offset: int, master: str | None) -> str:
    """torchrun over the task's nodes with a static rendezvous on rank 0 (SkyPilot
    sets SKYPILOT_NODE_IPS/RANK/NUM_GPUS_PER_NODE); with an anchor, rank 0 is the
    anchor (``MASTER_ADDR`` given) and the workers follow it. No elastic restarts:
    after a preemption the whole job restarts (the launch's relaunch command) and
    resumes from the tier."""
    rank = f"$((SKYPILOT_NODE_RANK + {rank_offset}))" if rank_offset else "$SKYPILOT_NODE_RANK"
    export = f'export MASTER_ADDR="{master}"\n' if master else ""
    return (
        f"{export}"
        f'torchrun --nnodes="$DEEPVM_NODES" --nproc-per-node="${{SKYPILOT_NUM_GPUS_PER_NODE:-1}}" '
        f'--node-rank="{rank}" --master-addr="$MASTER_ADDR" --master-port={RDZV_PORT} '
        f"--max-restarts=0 {command}\n"
    )


def task_paths(path: str | Path, roles: list[str]) -> dict[str, Path]:
    """Where each task goes: the workers at ``path``, a second task beside it
    (``plan.yaml`` -> ``plan-anchor.yaml``, ``plan-remote.yaml``)."""
    path = Path(path)
    return {
        role: path if role == "workers" else path.with_name(f"{path.stem}-{role}{path.suffix}")
        for role in roles
    }


def render(task: Mapping[str, Any], header: list[str]) -> str:
    """One task as YAML, after comment lines that say what it is (multi-line
    strings, the run script, as literal blocks)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    comments = "".join(f"# {line}\n" for line in header)
    return comments + yaml.dump(dict(task), Dumper=Dumper, sort_keys=False, width=100)


def how_to_launch(tasks: list[Task], paths: Mapping[str, Path], name: str) -> list[str]:
    """The commands that launch these files by hand, in order (what deepvm
    launch runs), as comment lines."""
    lines = ["launch in this order (or let `deepvm launch` do it all):"]
    if any(t.config.get("secrets") for t in tasks):
        lines.append(
            f"  export {ENV_TOKEN}=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    tiers: list[str] = []
    for task in tasks:
        secret = f" --secret {ENV_TOKEN}" if task.config.get("secrets") else ""
        file = paths[task.role].name
        clusters = (
            [f"{name}-remote-{i}" for i in range(task.copies)]
            if task.role == "remote"
            else [f"{name}-{task.role}"]
        )
        envs = ""
        if task.role == "workers":
            if "MASTER_ADDR" in task.config["envs"]:
                envs += f" --env MASTER_ADDR=$(sky status --ip {name}-anchor)"
            if ENV_TIERS in task.config["envs"]:
                envs += f' --env {ENV_TIERS}="{",".join(tiers)}"'
        for cluster in clusters:
            lines.append(f"  sky launch -y -d -c {cluster}{envs}{secret} {file}")
            if task.role != "workers":
                tiers.append(f"http://$(sky status --ip {cluster}):{DEFAULT_PORT}")
    return lines


def write_sky_yaml(
    path: str | Path,
    rec: Mapping[str, Any],
    *,
    workload: str,
    title: str,
    wheel: Path,
    versions: int,
) -> list[Path]:
    """Write the recommendation's tasks (the workers at ``path``) with ``wheel``
    beside them for the nodes; returns the files."""
    path = Path(path)
    name = _launch_name(path.stem)
    tasks = sky_tasks(rec, workload=workload, name=name, wheel=wheel, versions=versions)
    paths = task_paths(path, [t.role for t in tasks])
    zone = rec.get("zone")
    header = [
        title,
        f"{cluster_words(rec, architecture=True, region=True)}, ${rec['hourly_cost']:.4f}/h",
    ]
    if rec.get("binding"):
        header.append(f"held back by: {rec['binding']}")
    if zone:
        header.append(
            f"spot zone: priced in zone ID {zone}; pin it with `zone:` under resources, as "
            f"its name in your account: aws ec2 describe-availability-zones --region "
            f"{rec['region']} --zone-ids {zone} (deepvm launch does this)"
        )
    header += how_to_launch(tasks, paths, name)
    header.append(
        "run: deepvm's own resumable job (python -m deepvm.bench.train); put your training "
        "script in its place"
    )
    texts = {t.role: render(t.config, [*header, f"this task: {t.role}"]) for t in tasks}
    written: list[Path] = []
    try:
        for role, text in texts.items():
            with atomic_output(paths[role]) as tmp:
                tmp.write_text(text)
            written.append(paths[role])
    except (OSError, OutputError):  # one task file without the others is half a cluster
        for done in written:
            done.unlink(missing_ok=True)
        raise
    return list(paths.values())


def _launch_name(stem: str) -> str:
    """A SkyPilot cluster name prefix from a file name: lower-case letters,
    digits and dashes, starting with a letter."""
    cleaned = "".join(c if c.isalnum() else "-" for c in stem.lower()).strip("-")
    return ("deepvm-" + cleaned if not cleaned[:1].isalpha() else cleaned)[:40] or "deepvm"
