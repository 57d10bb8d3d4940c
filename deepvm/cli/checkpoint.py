"""``deepvm checkpoint serve``: the checkpoint tier a launched cluster runs
(deepvm.checkpoint)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from deepvm.checkpoint.protocol import DEFAULT_PORT
from deepvm.cli.common import number, progress
from deepvm.config import DEFAULT_CHECKPOINT_VERSIONS
from deepvm.errors import DeepvmError

MEMORY_DIR = "/dev/shm/deepvm-checkpoints"
# The share of the folder's free space the tier may fill (the planner sizes a
# remote node's memory the same way: docs/ARCHITECTURE.md, "Architectures").
CAPACITY_FRACTION = 0.8


def add_parsers(sub: Any) -> None:
    ck = sub.add_parser("checkpoint", help="the checkpoint tier of a launched cluster")
    cks = ck.add_subparsers(dest="checkpoint_command", required=True, metavar="ACTION")
    serve = cks.add_parser(
        "serve",
        help="serve checkpoint versions over HTTP (the anchor's disk or a remote node's memory)",
        description="Accept checkpoint uploads (PUT /versions/STEP), make each version visible "
        "only once complete and its SHA-256 matches, keep the newest --versions, refuse "
        "uploads beyond --capacity-gb, serve the newest complete version (GET "
        "/versions/latest). Training code talks to it through deepvm.checkpoint.",
    )
    serve.add_argument(
        "--dir",
        default=MEMORY_DIR,
        metavar="DIR",
        help=f"where versions live (default: {MEMORY_DIR}, the node's memory; on a Single "
        "Anchor, a folder on the anchor's disk)",
    )
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on (default: all)")
    serve.add_argument(
        "--port",
        type=number(ge=1, le=65535, integer=True),
        default=DEFAULT_PORT,
        help=f"port (default: {DEFAULT_PORT})",
    )
    serve.add_argument(
        "--versions",
        type=number(ge=1, integer=True),
        default=DEFAULT_CHECKPOINT_VERSIONS,
        metavar="K",
        help=f"versions kept, the newest (default: {DEFAULT_CHECKPOINT_VERSIONS})",
    )
    serve.add_argument(
        "--capacity-gb",
        type=number(gt=0),
        metavar="GB",
        help=f"the most the versions may hold together (default: {CAPACITY_FRACTION:.0%} of "
        "the folder's free space)",
    )


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from deepvm.checkpoint.server import serve

    root = Path(args.dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DeepvmError(f"--dir {args.dir!r} cannot be created ({exc.strerror})") from None
    capacity = (
        int(args.capacity_gb * 1e9)
        if args.capacity_gb is not None
        else int(shutil.disk_usage(root).free * CAPACITY_FRACTION)
    )
    progress(
        f"checkpoint tier on {args.host}:{int(args.port)}: {root}, keeps {int(args.versions)} "
        f"versions in {capacity / 1e9:.3g} GB"
    )
    port = int(args.port)
    serve(root, host=args.host, port=port, keep=int(args.versions), capacity_bytes=capacity)
    return 0
