"""``deepvm checkpoint serve``: the checkpoint tier a launched cluster runs
(deepvm.checkpoint)."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
from pathlib import Path
from typing import Any

from deepvm.base.config import DEFAULT_CHECKPOINT_VERSIONS
from deepvm.base.errors import DeepvmError
from deepvm.checkpoint.protocol import DEFAULT_PORT, ENV_TOKEN, MEMORY_DIR
from deepvm.cli._arguments import number
from deepvm.cli._output import progress

__all__ = ["CAPACITY_FRACTION", "add_parsers", "cmd_checkpoint", "private_address"]

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
    serve.add_argument(
        "--host",
        help="address to listen on (default: the node's private address, the one its "
        "default route leaves from; a cloud's public address reaches it through NAT)",
    )
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
        help="the most the versions may hold together (default: "
        f"{CAPACITY_FRACTION * 100:.0f}%% of the folder's free space)",
    )
    serve.add_argument(
        "--no-token",
        action="store_true",
        help=f"serve without a token (only on a network you trust); by default the tier "
        f"takes its token from ${ENV_TOKEN} (deepvm launch sets it) and refuses requests "
        "without it",
    )


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from deepvm.checkpoint.server import serve

    token = os.environ.get(ENV_TOKEN) or None
    if token is None and not args.no_token:
        raise DeepvmError(
            f"the tier needs a token: set ${ENV_TOKEN} (deepvm launch does), or pass "
            "--no-token to serve without one on a network you trust"
        )
    if token is not None and args.no_token:
        raise DeepvmError(f"--no-token with ${ENV_TOKEN} set: unset one of them")
    host = args.host or private_address()
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
        f"checkpoint tier on {host}:{int(args.port)}: {root}, keeps {int(args.versions)} "
        f"versions in {capacity / 1e9:.3g} GB, "
        + ("no token" if token is None else f"token from ${ENV_TOKEN}")
    )
    port = int(args.port)
    serve(root, host=host, port=port, keep=int(args.versions), capacity_bytes=capacity, token=token)
    return 0


def private_address() -> str:
    """The address of the interface the default route leaves from (a UDP socket's
    connect sends nothing); loopback on a machine with no route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: routed, never answered
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"
