"""Where the shipped data (``datasets/`` in the repository) lives once installed."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def dataset_path(name: str) -> Path:
    """Path of a shipped data file: inside the wheel (``deepvm/_datasets``) or,
    in a source checkout or editable install, the repository's ``datasets/``."""
    for root in (_HERE / "_datasets", _HERE.parent / "datasets"):
        candidate = root / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"shipped dataset {name!r} not found; reinstall deepvm")
