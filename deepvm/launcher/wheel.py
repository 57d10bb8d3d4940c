"""deepvm for the nodes of a launch: a wheel of the code this machine runs
(docs/ARCHITECTURE.md, "Launching a plan").

deepvm is on no package index, and the nodes must run the same code as the
machine that planned for them, so the launch builds a wheel from the installed
distribution itself: the ``deepvm`` and ``flows`` packages as they are on disk
(an editable install's working tree included), the shipped data under
``deepvm/_datasets`` as the project's own wheel has it, and the distribution's
metadata (its version, dependencies and extras). Entries carry a fixed date and
a sorted order, so the same code gives the same bytes (the manifest records
their SHA-256).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import zipfile
from collections.abc import Iterator
from pathlib import Path

from deepvm.base.errors import DeepvmError
from deepvm.base.output_files import atomic_output

__all__ = ["build_wheel", "wheel_name"]

DISTRIBUTION = "deepvm"
TAG = "py3-none-any"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: the bytes do not depend on when
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


def wheel_name() -> str:
    """The wheel's file name: the installed version's."""
    return f"{DISTRIBUTION}-{_distribution().version}-{TAG}.whl"


def build_wheel(folder: Path) -> Path:
    """Write this machine's deepvm as a wheel into ``folder``; its path."""
    dist = _distribution()
    version = dist.version
    info = f"{DISTRIBUTION}-{version}.dist-info"
    metadata = dist.read_text("METADATA")
    if not metadata:
        raise DeepvmError(f"the installed {DISTRIBUTION} has no METADATA: reinstall it")
    entries: list[tuple[str, bytes]] = sorted(_package_files())
    entries.append((f"{info}/METADATA", metadata.encode()))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        entries.append((f"{info}/entry_points.txt", entry_points.encode()))
    wheel_info = (
        f"Wheel-Version: 1.0\nGenerator: deepvm.launcher.wheel\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    )
    entries.append((f"{info}/WHEEL", wheel_info.encode()))
    record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in entries)
    entries.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode()))
    target = folder / wheel_name()
    with atomic_output(target) as tmp, zipfile.ZipFile(tmp, "w") as wheel:
        for path, data in entries:
            entry = zipfile.ZipInfo(path, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
    return target


def _distribution() -> importlib.metadata.Distribution:
    try:
        return importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise DeepvmError(
            "deepvm runs from a folder without being installed, so there is nothing to "
            "ship to the nodes: pip install -e . (or pip install .) first"
        ) from None


def _package_files() -> Iterator[tuple[str, bytes]]:
    """(path in the wheel, bytes) of every file the nodes need."""
    for package in ("deepvm", "flows"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        for path, relative in _files(root):
            if package == "deepvm" and relative.parts[0] == "_datasets":
                continue  # added below, from wherever the data lives
            yield f"{package}/{relative.as_posix()}", path.read_bytes()
    from deepvm.base.datasets import dataset_path

    data = dataset_path("catalog-aws.csv").parent  # the installed or checked-out data
    for path, relative in _files(data):
        yield f"deepvm/_datasets/{relative.as_posix()}", path.read_bytes()


def _files(root: Path) -> Iterator[tuple[Path, Path]]:
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if path.is_file() and not (
            _SKIP_DIRS & set(relative.parts) or path.suffix in _SKIP_SUFFIXES
        ):
            yield path, relative


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
