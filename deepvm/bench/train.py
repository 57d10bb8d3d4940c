"""A small data-parallel training job that checkpoints through deepvm.checkpoint
and resumes from the newest complete version: what a launched cluster can run
to check its wiring (rendezvous, checkpoint tier), and what the end-to-end test
kills a worker of. Run it under torchrun::

    torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 --rdzv-backend=c10d \\
        --rdzv-endpoint=$MASTER_ADDR:29500 -m deepvm.bench.train --workload tiny \\
        --steps 200 --checkpoint-every 20

Every rank loads the newest version at start (the tiers in
$DEEPVM_CHECKPOINT_TIERS, else the local folder), rank 0 saves every
``--checkpoint-every`` steps, and with ``--out`` rank 0 writes the final model
state there. The batches are synthetic and fixed, so a run that is killed and
resumed ends with the same weights as one that is not.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from deepvm import checkpoint
    from deepvm.bench._models import build_model
    from deepvm.performance.workloads import get_workload

    parser = argparse.ArgumentParser(prog="python -m deepvm.bench.train")
    parser.add_argument("--workload", default="tiny")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    parser.add_argument("--checkpoint-every", type=int, default=10, metavar="STEPS")
    parser.add_argument("--step-delay-s", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--out", help="rank 0 writes the final model state here (torch.save)")
    args = parser.parse_args(argv)
    get_workload(args.workload)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")  # env://
    rank = dist.get_rank()
    cuda = torch.cuda.is_available()
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu"
    torch.set_num_threads(1)
    torch.manual_seed(0)
    sample = build_model(args.workload)
    model = DistributedDataParallel(
        sample.model.to(device).train(), device_ids=[device] if cuda else None
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = sample.make_batch(args.batch, device)
    start = 0
    resumed = checkpoint.load(map_location=device)
    if resumed is not None:
        state, start = resumed
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        print(f"rank {rank}: resumed from version {start}", file=sys.stderr, flush=True)
    for step in range(start, args.steps):
        optimizer.zero_grad(set_to_none=True)
        model(**batch).loss.backward()
        optimizer.step()
        done = step + 1
        if rank == 0 and args.checkpoint_every and done % args.checkpoint_every == 0:
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict()}
            checkpoint.save(state, done)
        time.sleep(args.step_delay_s)
    if rank == 0 and args.out:
        torch.save(model.module.state_dict(), args.out)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
