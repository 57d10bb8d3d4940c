"""A folder of checkpoint versions, each visible only once complete and verified:
what the tier serves from (the anchor's disk, a remote node's memory) and the
client's local fallback (deepvm.checkpoint.protocol).

A version is ``{step:012d}.ckpt`` beside ``{step:012d}.sha256``; the hash file
is written first and the data renamed into place last, so a version whose data
file exists is complete. Uploads in progress are hidden (``.incoming-*``) and
swept at start-up.
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from deepvm.base.errors import InputError, SourceUnavailableError

__all__ = ["CapacityError", "CorruptVersion", "Upload", "Version", "VersionFolder"]

_DATA = re.compile(r"^(\d{12})\.ckpt$")


class CapacityError(InputError, ValueError):  # ValueError: as before
    """A version that would not fit next to the versions the folder keeps."""


class CorruptVersion(SourceUnavailableError, ValueError):  # ValueError: as before
    """Bytes whose length or SHA-256 is not what the writer said."""


@dataclass(frozen=True)
class Version:
    step: int
    size: int
    sha256: str
    path: Path

    def as_dict(self) -> dict[str, object]:
        return {"step": self.step, "size": self.size, "sha256": self.sha256}


class VersionFolder:
    """Complete versions in ``root``; at most ``keep`` of them (the newest), and
    at most ``capacity_bytes`` together with the uploads in progress."""

    def __init__(self, root: str | Path, *, keep: int, capacity_bytes: int | None = None):
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        self.capacity_bytes = capacity_bytes
        self._lock = threading.Lock()
        self._reserved: dict[str, int] = {}
        for stale in self.root.glob(".incoming-*"):  # a writer that died mid-upload
            stale.unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------------

    def versions(self) -> list[Version]:
        """The complete versions, newest first."""
        out = []
        for path in self.root.iterdir():
            found = _DATA.match(path.name)
            if not found:
                continue
            try:
                digest = path.with_suffix(".sha256").read_text().strip()
                size = path.stat().st_size
            except OSError:  # removed meanwhile
                continue
            out.append(Version(int(found.group(1)), size, digest, path))
        return sorted(out, key=lambda v: v.step, reverse=True)

    def newest(self) -> Version | None:
        found = self.versions()
        return found[0] if found else None

    def get(self, step: int) -> Version | None:
        return next((v for v in self.versions() if v.step == step), None)

    def used_bytes(self) -> int:
        return sum(v.size for v in self.versions())

    # -- writing -------------------------------------------------------------------

    @contextmanager
    def reserve(self, size: int) -> Iterator[str]:
        """Room for one upload of ``size`` bytes, or CapacityError: the newest
        keep - 1 versions (what stays once the new one is in) and the other
        uploads in progress must fit beside it."""
        token = uuid.uuid4().hex
        with self._lock:
            self.check_room(size)
            self._reserved[token] = size
        try:
            yield token
        finally:
            with self._lock:
                self._reserved.pop(token, None)

    def check_room(self, size: int) -> None:
        """CapacityError unless ``size`` more bytes fit (see :meth:`reserve`)."""
        if self.capacity_bytes is None:
            return
        staying = sum(v.size for v in self.versions()[: self.keep - 1])
        busy = sum(self._reserved.values())
        if staying + busy + size > self.capacity_bytes:
            raise CapacityError(
                f"a checkpoint of {_gb(size)} does not fit: the tier holds "
                f"{_gb(staying + busy)} of {_gb(self.capacity_bytes)} for the versions it "
                f"keeps ({self.keep}); give it more memory or disk (--capacity-gb), "
                "keep fewer versions (--versions), or shrink the checkpoint"
            )

    @contextmanager
    def upload(self, step: int, *, size: int, sha256: str) -> Iterator[Upload]:
        """Room for one version (:meth:`reserve`) and a hidden file to stream it
        into; :meth:`Upload.finish` publishes it, and whatever is not published is
        removed on leaving."""
        with self.reserve(size):
            upload = Upload(self, step, size, sha256)
            try:
                yield upload
            finally:
                upload.discard()

    def write(self, step: int, chunks: Iterable[bytes], *, size: int, sha256: str) -> Version:
        """Store one version from ``chunks``; visible only when all ``size`` bytes
        arrived and their SHA-256 is ``sha256`` (else CorruptVersion, nothing kept).
        Then the oldest versions beyond ``keep`` are removed."""
        with self.upload(step, size=size, sha256=sha256) as upload:
            for chunk in chunks:
                upload.add(chunk)
            return upload.finish()

    def _publish(
        self, step: int, incoming: Path, received: int, size: int, got: str, want: str
    ) -> Version:
        """Make an upload a version if it is whole and its hash is the one sent."""
        if received != size:
            raise CorruptVersion(f"version {step}: {received} bytes arrived of {size}")
        if got != want.lower():
            raise CorruptVersion(f"version {step}: SHA-256 {got} is not the {want} sent")
        data = self.root / f"{step:012d}.ckpt"
        sidecar = data.with_suffix(".sha256")
        with self._lock:
            sidecar.write_text(got + "\n")
            os.replace(incoming, data)  # visible from here, complete and verified
            for old in self.versions()[self.keep :]:
                old.path.unlink(missing_ok=True)
                old.path.with_suffix(".sha256").unlink(missing_ok=True)
        return Version(step, size, got, data)


class Upload:
    """One version on its way in: chunks are hashed and written to a hidden file
    as they arrive (the tier streams a request body through it). The hash and the
    write each run in a thread of their own, fed the same chunks (both release the
    GIL), so receiving, hashing and writing overlap: the bytes are read once, as
    they come."""

    QUEUED = 64  # chunks in flight per thread: backpressure on a fast sender

    def __init__(self, folder: VersionFolder, step: int, size: int, sha256: str):
        self.folder, self.step, self.size, self.sha256 = folder, step, size, sha256
        self.path = folder.root / f".incoming-{step}-{uuid.uuid4().hex}"
        self._file: BinaryIO = open(self.path, "wb")  # noqa: SIM115 (closed in finish/discard)
        self._hash = hashlib.sha256()
        self.received = 0
        self._queues: list[queue.Queue[bytes | None]] = []
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        for sink in (self._hash.update, self._file.write):
            chunks: queue.Queue[bytes | None] = queue.Queue(self.QUEUED)
            worker = threading.Thread(target=self._drain, args=(chunks, sink), daemon=True)
            worker.start()
            self._queues.append(chunks)
            self._threads.append(worker)

    def _drain(self, chunks: queue.Queue[bytes | None], sink: Callable[[bytes], object]) -> None:
        while (chunk := chunks.get()) is not None:
            if not self._errors:
                try:
                    sink(chunk)
                except BaseException as exc:  # a full disk: finish() raises it
                    self._errors.append(exc)

    def add(self, chunk: bytes) -> None:
        self.received += len(chunk)
        if self.received > self.size:
            raise CorruptVersion(f"version {self.step}: more than the {self.size} bytes sent")
        for chunks in self._queues:
            chunks.put(chunk)

    def _join(self) -> None:
        for chunks in self._queues:
            chunks.put(None)
        for worker in self._threads:
            worker.join()
        self._queues, self._threads = [], []
        self._file.close()

    def finish(self) -> Version:
        self._join()
        if self._errors:
            raise self._errors[0]
        return self.folder._publish(
            self.step, self.path, self.received, self.size, self._hash.hexdigest(), self.sha256
        )

    def discard(self) -> None:
        self._join()
        self.path.unlink(missing_ok=True)


def _gb(n: int) -> str:
    return f"{n / 1e9:.3g} GB"
