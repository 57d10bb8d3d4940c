"""Launch specs: a recommended cluster as SkyPilot task YAML (docs/ARCHITECTURE.md,
"The command line").

One task per group of like nodes, each a file SkyPilot launches as a cluster:

* the workers (``num_nodes``, ``instance_type``, ``use_spot``, ``region``);
* Single Anchor's on-demand anchor, a second task of one on-demand node, which
  is the rendezvous (torchrun's rank 0) that outlives spot preemptions;
* Tiering's remote tier, a second task of on-demand CPU nodes that hold the
  checkpoints.

The cloud and region are the cluster's (``cloud: aws``, ``gcp`` or ``azure``).
GCP sells T4 and V100 attached to an n1 host, which the catalog names together
(``n1-standard-16+2xV100``): the file gives SkyPilot the host as
``instance_type`` and the GPUs as ``accelerators`` (``V100:2``).

The zone: deepvm's AWS prices are per zone *ID* (``use1-az1``); SkyPilot's
``zone`` takes a zone *name* (``us-east-1a``), and which name is which ID
differs per account. The file names the ID and the command that gives its name.
GCP and Azure prices are per region, so their files name no zone.
The run command is the torchrun line the benchmark documents; replace the module
with your training script.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deepvm.cluster import cluster_words
from deepvm.errors import OutputError
from deepvm.output_files import atomic_output

RDZV_PORT = 29500


def sky_tasks(rec: Mapping[str, Any], *, workload: str) -> dict[str, dict[str, Any]]:
    """The SkyPilot tasks of one recommendation (``Recommendation.as_dict()``), by
    role: ``workers``, and ``anchor`` (Single Anchor) or ``remote`` (Tiering)."""
    region, itype, cloud = rec["region"], rec["worker_type"], rec.get("cloud") or "aws"
    anchor = rec["architecture"] == "single_anchor" and rec["n_on_demand"] > 0
    spot_nodes = rec["n_spot"]
    worker_nodes = spot_nodes if anchor else rec["n_workers"]
    name = f"deepvm-{workload}"
    envs = {"DEEPVM_WORKLOAD": workload, "DEEPVM_NODES": str(rec["n_workers"])}
    if rec.get("zone"):
        envs["DEEPVM_ZONE_ID"] = rec["zone"]
    tasks: dict[str, dict[str, Any]] = {}
    if worker_nodes:
        tasks["workers"] = {
            "name": f"{name}-workers",
            "num_nodes": int(worker_nodes),
            "resources": _resources(cloud, region, itype, use_spot=spot_nodes > 0),
            "envs": {**envs, **({"MASTER_ADDR": "<the anchor's IP>"} if anchor else {})},
            "setup": "pip install deepvm",
            "run": _run(rank_offset=1 if anchor else 0, master="$MASTER_ADDR" if anchor else None),
        }
    if anchor:
        tasks["anchor"] = {
            "name": f"{name}-anchor",
            "num_nodes": 1,
            "resources": _resources(cloud, region, itype, use_spot=False),
            "envs": envs,
            "setup": "pip install deepvm",
            "run": _run(rank_offset=0, master=None),
        }
    if rec.get("remote_type") and rec.get("n_remote"):
        tasks["remote"] = {
            "name": f"{name}-remote",
            "num_nodes": int(rec["n_remote"]),
            "resources": _resources(cloud, region, rec["remote_type"], use_spot=False),
            "envs": {"DEEPVM_ROLE": "checkpoint tier"},
            # The workers write checkpoints to these nodes' memory (tmpfs).
            "setup": "sudo mkdir -p /dev/shm/deepvm-checkpoints",
            "run": "echo checkpoint tier up on $(hostname -I); sleep infinity",
        }
    return tasks


def _resources(cloud: str, region: str, instance_type: str, *, use_spot: bool) -> dict[str, Any]:
    host, plus, gpus = instance_type.partition("+")
    out: dict[str, Any] = {"cloud": cloud, "region": region, "instance_type": host}
    if plus:  # a GCP n1 host with its GPUs: "n1-standard-16+2xV100" -> V100:2
        count, _, model = gpus.partition("x")
        out["accelerators"] = f"{model}:{count}"
    return {**out, "use_spot": use_spot}


def _run(*, rank_offset: int, master: str | None) -> str:
    """torchrun over the task's nodes (SkyPilot sets SKYPILOT_NODE_IPS/RANK/NUM_NODES);
    with an anchor, rank 0 is the anchor and the workers follow it."""
    head = master or '$(echo "$SKYPILOT_NODE_IPS" | head -n1)'
    rank = f"$((SKYPILOT_NODE_RANK + {rank_offset}))" if rank_offset else "$SKYPILOT_NODE_RANK"
    return (
        f"MASTER_ADDR={head}\n"
        f'torchrun --nnodes="$DEEPVM_NODES" --nproc-per-node="${{SKYPILOT_NUM_GPUS_PER_NODE:-1}}" '
        f'--node-rank="{rank}" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:{RDZV_PORT}" '
        f'-m deepvm.bench.scaling --workload "$DEEPVM_WORKLOAD" --global-batch 256 --steps 50 '
        f"--out scaling.csv\n"
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


def write_sky_yaml(
    path: str | Path, rec: Mapping[str, Any], *, workload: str, title: str
) -> list[Path]:
    """Write the recommendation's tasks (the workers at ``path``); returns the files."""
    tasks = sky_tasks(rec, workload=workload)
    paths = task_paths(path, list(tasks))
    others = [f"{role}: {paths[role].name}" for role in tasks if role != "workers"]
    zone = rec.get("zone")
    header = [
        title,
        f"{cluster_words(rec, architecture=True, region=True)}, ${rec['hourly_cost']:.4f}/h",
    ]
    if rec.get("binding"):
        header.append(f"held back by: {rec['binding']}")
    if zone:
        header.append(
            f"spot zone: {zone} is an AZ ID; SkyPilot's `zone` takes its name in your account: "
            f"aws ec2 describe-availability-zones --region {rec['region']} --zone-ids {zone}"
        )
    if others:
        header.append("launch each task as its own cluster: " + ", ".join(others))
    header.append(
        "run: the benchmark's torchrun line; put your training script in place of "
        "`-m deepvm.bench.scaling ...`"
    )
    texts = {role: render(task, [*header, f"this task: {role}"]) for role, task in tasks.items()}
    written: list[Path] = []
    try:
        for role, text in texts.items():
            with atomic_output(paths[role]) as tmp:
                tmp.write_text(text)
            written.append(paths[role])
    except (OSError, OutputError):  # one task file without the others is half a cluster
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return list(paths.values())
