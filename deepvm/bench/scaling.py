"""Scaling runs: how long a fixed amount of data-parallel training takes at each
world size (PyTorch DDP: gloo on CPU, NCCL on CUDA), and the speedup over one.

The work is fixed: ``global_batch`` samples per step for ``steps`` steps, split
evenly over the ranks, so speedup(n) = duration(1) / duration(n).

On one machine :func:`measure_scaling` spawns the ranks as local processes. On a
cluster, run this module under torchrun once per node count, e.g.

    torchrun --nnodes=4 --nproc-per-node=1 --rdzv-backend=c10d \\
        --rdzv-endpoint=HOST:29500 -m deepvm.bench.scaling --workload resnet50 \\
        --global-batch 256 --steps 50 --out scaling.csv

Rank 0 appends ``instance_type,workload,n_nodes,duration_s`` to --out, the file
``deepvm fit --scaling`` reads.

Checkpoints (deepvm.checkpoint): every rank resumes the model and optimizer from
the newest complete version (on the launched cluster's tier, or the local
folder), and after the timed steps rank 0 saves the state, untimed: each run
continues the last one's training and exercises the tier a launch wires up.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from deepvm.checkpoint.protocol import ENV_LOCAL_DIR
from deepvm.performance.workloads import get_workload

__all__ = [
    "WARMUP_STEPS",
    "ScalingPoint",
    "main",
    "measure_scaling",
    "scaling_frame",
    "timed_duration",
]

# Untimed steps first; then each timed step is timed on its own (the slowest rank's
# time) and a run's duration is steps x the median step. The first steps pay for
# allocations and kernel selection, which grow with the batch, so with a fixed
# warm-up and one clock around all steps the 1-rank run (the whole batch) timed
# slow steps the others had left behind (measured: speedups of 3-4.4x on 2 ranks).
WARMUP_STEPS = 2


@dataclass(frozen=True)
class ScalingPoint:
    n_nodes: int
    duration_s: float


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _train(
    rank: int, world: int, workload: str, steps: int, global_batch: int, threads: int
) -> float:
    """One rank's part; returns the slowest rank's duration of the timed steps
    (the checkpoint load before and save after them untimed)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from deepvm import checkpoint
    from deepvm.bench._measure import autocast
    from deepvm.bench._models import build_model

    cuda = torch.cuda.is_available()
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    torch.set_num_threads(threads)
    torch.manual_seed(0)  # same initial weights on every rank, as DDP expects
    sample = build_model(workload)
    model = DistributedDataParallel(
        sample.model.to(device).train(), device_ids=[device] if cuda else None
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = sample.make_batch(global_batch // world, device)
    resumed = checkpoint.load(map_location=device)
    done = 0
    if resumed is not None and resumed[0].get("workload") == workload:
        state, done = resumed
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(device):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()

    def synchronize() -> None:
        if cuda:
            torch.cuda.synchronize()

    for _ in range(WARMUP_STEPS):
        step()
    synchronize()
    dist.barrier()
    duration = timed_duration(step, synchronize, _slowest, steps)
    if rank == 0:
        state = {"workload": workload, "model": model.module.state_dict()}
        state["optimizer"] = optimizer.state_dict()
        checkpoint.save(state, done + WARMUP_STEPS + steps)
    dist.barrier()
    return duration


def _slowest(seconds: float) -> float:
    """The slowest rank's time for one step (every rank gets the same answer)."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def timed_duration(step: Any, synchronize: Any, slowest: Any, steps: int) -> float:
    """``steps`` x the median time of one step (each the slowest rank's, so every rank
    returns the same): the same rule at every world size, and a few slow steps left
    over from warm-up cannot move it."""
    times = []
    for _ in range(steps):
        began = time.perf_counter()
        step()
        synchronize()
        times.append(slowest(time.perf_counter() - began))
    return steps * statistics.median(times)


def _spawned(
    rank: int,
    world: int,
    port: int,
    workload: str,
    steps: int,
    global_batch: int,
    threads: int,
    results: Any,
) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        duration = _train(rank, world, workload, steps, global_batch, threads)
        if rank == 0:
            results.put(duration)  # a synchronous pipe write: delivered before we exit
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    # Leave without tearing gloo down: its teardown intermittently ends in
    # std::terminate (SIGABRT), which spawn would report as a failed rank.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def measure_scaling(
    workload: str,
    nodes: Sequence[int],
    *,
    steps: int = 20,
    global_batch: int | None = None,
    progress: bool = True,
) -> list[ScalingPoint]:
    """Duration of the same training work at each world size, on this machine."""
    import torch
    import torch.multiprocessing as mp

    spec = get_workload(workload)
    sizes = sorted(set(nodes))
    lcm = math.lcm(*sizes)
    if global_batch is None:
        global_batch = spec.cpu_batch_size * lcm
    if global_batch % lcm:
        raise ValueError(f"global batch {global_batch} must divide evenly over {sizes} ranks")
    gpus = torch.cuda.device_count()
    if gpus and max(sizes) > gpus:
        raise ValueError(f"{max(sizes)} ranks need {max(sizes)} GPUs; this machine has {gpus}")
    cores = os.cpu_count() or 1
    context = mp.get_context("spawn")
    points = []
    # The runs checkpoint (deepvm.checkpoint) into the tiers the environment names,
    # else into a folder of this measurement's own, not the working directory.
    own_folder = ENV_LOCAL_DIR not in os.environ
    with tempfile.TemporaryDirectory(prefix="deepvm-scaling-") as scratch:
        if own_folder:
            os.environ[ENV_LOCAL_DIR] = scratch
        try:
            for world in sizes:
                queue = context.SimpleQueue()
                # Each rank gets an equal share of the cores, as separate nodes would.
                threads = max(1, cores // world)
                if progress:
                    print(
                        f"scaling {workload}: {world} rank(s), {steps} steps of "
                        f"{global_batch} samples ...",
                        file=sys.stderr,
                    )
                mp.start_processes(
                    _spawned,
                    args=(world, _free_port(), workload, steps, global_batch, threads, queue),
                    nprocs=world,
                    join=True,
                    start_method="spawn",
                )
                points.append(ScalingPoint(world, float(queue.get())))
        finally:
            if own_folder:
                os.environ.pop(ENV_LOCAL_DIR, None)
    return points


def scaling_frame(
    points: Sequence[ScalingPoint],
    workload: str,
    instance_type: str | None = None,
    *,
    run_id: str | None = None,
) -> pd.DataFrame:
    """``scaling`` rows; speedup relative to the one-node duration."""
    from deepvm.bench._identity import cpu_model

    base = next(p.duration_s for p in points if p.n_nodes == 1)
    name = instance_type or f"local:{cpu_model()}"
    run_id = run_id or uuid.uuid4().hex
    return pd.DataFrame(
        [
            {
                "run_id": run_id,
                "instance_type": name,
                "workload": workload,
                "n_nodes": p.n_nodes,
                "duration_s": p.duration_s,
                "speedup": base / p.duration_s,
                "source": "measured",
                "measured_at": pd.Timestamp(dt.datetime.now(dt.UTC)),
            }
            for p in points
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: one world size, taken from the environment."""
    import torch
    import torch.distributed as dist

    parser = argparse.ArgumentParser(prog="python -m deepvm.bench.scaling")
    parser.add_argument("--workload", default="resnet50")
    parser.add_argument("--global-batch", type=int, required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--instance-type", default=None)
    parser.add_argument("--out", default=None, help="append a CSV row here (rank 0)")
    args = parser.parse_args(argv)
    get_workload(args.workload)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)  # env:// from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        threads = max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
        duration = _train(rank, world, args.workload, args.steps, args.global_batch, threads)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        from deepvm.bench._identity import cloud_instance_type, cpu_model

        name = args.instance_type or cloud_instance_type() or f"local:{cpu_model()}"
        line = f"{name},{args.workload},{world},{duration:.6f}"
        print(line)
        if args.out:
            new = not os.path.exists(args.out)
            with open(args.out, "a") as f:
                if new:
                    f.write("instance_type,workload,n_nodes,duration_s\n")
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
