"""What a launch started, kept on the launching machine: one folder per launch
under ``$DEEPVM_HOME/launches/NAME`` (default ``~/.deepvm``) with the task files,
the wheel and ``manifest.json`` (docs/ARCHITECTURE.md, "Launching a plan").

The manifest is written before the first cluster is asked for and again after
every step, so whatever runs is named in it, and ``deepvm launch --down NAME``
can tear it down even after a launch that failed half-way. It holds the tier's
token, so the folder is the user's alone (0700, the file 0600).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deepvm.base.config import DEFAULT_HOME, ENV_HOME
from deepvm.base.errors import InputError

__all__ = ["ClusterRecord", "Manifest", "home", "known_launches", "launch_folder", "read"]

MANIFEST = "manifest.json"


@dataclass
class ClusterRecord:
    """One SkyPilot cluster of a launch."""

    name: str
    role: str  # "anchor", "remote" or "workers"
    task_file: str
    state: str = "planned"  # planned -> launching -> up -> down (or failed)
    address: str | None = None
    launch_command: list[str] = field(default_factory=list)


@dataclass
class Manifest:
    """A launch: what it runs, why, at what price, and its clusters, tier first."""

    name: str
    state: str  # "launching", "up", "failed", "down"
    created_at: str
    deepvm_version: str
    source: str  # where the cluster came from: "recommend --budget 10, deepvm #1", a fleet plan
    job: str | None
    workload: str
    cluster: dict[str, Any]  # the recommendation's fields (deepvm.model.cluster.Cluster and more)
    hourly_cost: float
    zone: str | None  # the zone name the launch pinned (None: region-wide or per-region prices)
    wheel: str
    wheel_sha256: str
    token: str
    clusters: list[ClusterRecord] = field(default_factory=list)
    launched_at: str | None = None
    store: str | None = None
    notes: list[str] = field(default_factory=list)

    def tier_urls(self) -> list[str]:
        from deepvm.checkpoint.protocol import DEFAULT_PORT

        return [
            f"http://{c.address}:{DEFAULT_PORT}"
            for c in self.clusters
            if c.role in ("anchor", "remote") and c.address
        ]

    def as_dict(self, *, secret: bool = False) -> dict[str, Any]:
        """The manifest as JSON-ready values; the token only with ``secret``."""
        out = asdict(self)
        if not secret:
            out["token"] = "(in the manifest file)"
        return out

    def write(self) -> Path:
        """Write atomically into the launch's folder (the token: owner only)."""
        folder = launch_folder(self.name)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / MANIFEST
        tmp = folder / f".{MANIFEST}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(self.as_dict(secret=True), out, indent=2)
            out.write("\n")
        os.replace(tmp, path)
        return path


def home() -> Path:
    return Path(os.environ.get(ENV_HOME) or DEFAULT_HOME).expanduser()


def launch_folder(name: str) -> Path:
    return home() / "launches" / name


def known_launches() -> list[Manifest]:
    """Every launch this machine made, oldest first."""
    root = home() / "launches"
    found = [read(p.parent.name) for p in sorted(root.glob(f"*/{MANIFEST}"))]
    return sorted(found, key=lambda m: m.created_at)


def read(name: str) -> Manifest:
    """The manifest of launch ``name``; an unknown name is an InputError that
    lists the known ones."""
    path = launch_folder(name) / MANIFEST
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        names = sorted(p.parent.name for p in (home() / "launches").glob(f"*/{MANIFEST}"))
        known = f"known: {', '.join(names)}" if names else "this machine has launched none"
        raise InputError(f"no launch named {name!r} under {home()} ({known})") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"launch manifest {str(path)!r} cannot be read: {exc}") from None
    raw["clusters"] = [ClusterRecord(**c) for c in raw.get("clusters", [])]
    return Manifest(**raw)
