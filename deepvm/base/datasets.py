"""Where the shipped data (``datasets/`` in the repository) lives once installed."""

from __future__ import annotations

from pathlib import Path

__all__ = ["dataset_path"]

_PACKAGE = Path(__file__).resolve().parent.parent  # deepvm/


def dataset_path(name: str) -> Path:
    """Path of a shipped data file: inside the wheel (``deepvm/_datasets``) or,
    in a source checkout or editable install, the repository's ``datasets/``."""
    for root in (_PACKAGE / "_datasets", _PACKAGE.parent / "datasets"):
        candidate = root / name
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"shipped dataset {name!r} not found; reinstall deepvm")
