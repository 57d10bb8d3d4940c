"""Where the store's bytes live: a local folder or an object store (s3://, gs://,
az://, or any scheme pyarrow or fsspec serves), behind the few operations the
store needs (docs/ARCHITECTURE.md, "The store").

Paths here are relative to the store's root and use ``/``. A local folder keeps
the guarantees of rename(2) and flock(2); an object store has neither, so the
store publishes there by copying staged objects into place after a journal
object is written (see :mod:`deepvm.store`); every object is written with one
PUT, so it is whole or absent.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from deepvm.errors import StoreError

_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


@dataclass(frozen=True)
class Entry:
    """One name in a listed folder."""

    name: str
    is_dir: bool
    mtime: float  # seconds since the epoch (0 where the store does not say)


class Files(Protocol):
    """The operations the store uses, on paths relative to its root."""

    uri: str
    local: bool

    def location(self, rel: str) -> str: ...
    def listdir(self, rel: str) -> list[Entry]: ...
    def walk(self, rel: str) -> list[str]: ...
    def exists(self, rel: str) -> bool: ...
    def read_table(self, rel: str) -> pa.Table: ...
    def read_metadata(self, rel: str) -> dict[bytes, bytes]: ...
    def write_table(self, rel: str, table: pa.Table) -> None: ...
    def write_bytes(self, rel: str, data: bytes) -> None: ...
    def read_bytes(self, rel: str) -> bytes: ...
    def move(self, src: str, dst: str) -> bool: ...
    def delete(self, rel: str) -> None: ...
    def delete_dir(self, rel: str) -> None: ...
    def error(self, exc: OSError, rel: str, doing: str) -> StoreError: ...


def open_files(uri: str) -> Files:
    """The file system for a store URI: a local path (or file://), else an
    object store. No network is touched until the first operation."""
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    if "://" not in uri:
        if not uri.strip():
            raise StoreError("store path is empty: give a folder, e.g. --store ./deepvm-store")
        return LocalFiles(uri)
    scheme, rest = uri.split("://", 1)
    base = rest.strip("/")
    if not base:
        raise StoreError(f"store {uri!r} names no bucket: give e.g. {scheme}://bucket/prefix")
    return ObjectFiles(uri.rstrip("/"), _object_filesystem(scheme, base, uri), base)


def _object_filesystem(scheme: str, base: str, uri: str) -> pafs.FileSystem:
    if scheme in ("s3", "s3a"):
        return _s3(base.split("/", 1)[0])
    try:
        filesystem, _ = pafs.FileSystem.from_uri(uri)
        return filesystem
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OSError):
        pass
    try:  # any other scheme fsspec serves (an optional package)
        import fsspec

        return pafs.PyFileSystem(pafs.FSSpecHandler(fsspec.filesystem(scheme)))
    except (ImportError, ValueError) as exc:
        raise StoreError(
            f"store {uri!r}: no file system serves {scheme}:// ({exc}); use a local folder, "
            "s3://, gs://, az://, or install the fsspec package for that scheme"
        ) from None


def _s3(bucket: str) -> pafs.FileSystem:
    """S3 from the standard AWS settings: credentials and region from the
    environment or the profile (AWS_PROFILE), the endpoint from AWS_ENDPOINT_URL_S3
    or AWS_ENDPOINT_URL (pyarrow reads neither itself) or the profile's endpoint_url."""
    endpoint = (
        os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or _profile_setting("endpoint_url")
    )
    region = (
        os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or _profile_setting("region")
    )
    if region is None and endpoint is None:
        with contextlib.suppress(OSError, ValueError):
            region = pafs.resolve_s3_region(bucket)
    # Small objects go up in one PUT (no multipart upload for a few kilobytes).
    options: dict[str, object] = {"allow_delayed_open": True}
    if endpoint:
        options["endpoint_override"] = endpoint
    if region:
        options["region"] = region
    return pafs.S3FileSystem(**options)


def _profile_setting(name: str) -> str | None:
    """A setting of the AWS profile in use, where botocore (optional) is installed."""
    try:
        import botocore.session
    except ImportError:
        return None
    with contextlib.suppress(Exception):  # a broken config file: pyarrow reports later
        value = botocore.session.Session().get_scoped_config().get(name)
        return str(value) if value else None
    return None


class LocalFiles:
    """A store in a local folder."""

    local = True

    def __init__(self, root: str) -> None:
        self.uri = root
        self.root = Path(root)

    def location(self, rel: str) -> str:
        return str(self.root / rel) if rel else str(self.root)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def listdir(self, rel: str) -> list[Entry]:
        try:
            with os.scandir(self.root / rel) as found:
                return [Entry(e.name, e.is_dir(), 0.0) for e in found]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def walk(self, rel: str) -> list[str]:
        top = self.root / rel
        out: list[str] = []
        for folder, _, names in os.walk(top):
            prefix = os.path.relpath(folder, self.root).replace(os.sep, "/")
            out.extend(f"{prefix}/{n}" for n in names)
        return out

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def read_table(self, rel: str) -> pa.Table:
        return pq.read_table(self.root / rel)

    def read_metadata(self, rel: str) -> dict[bytes, bytes]:
        return dict(pq.read_schema(self.root / rel).metadata or {})

    def write_table(self, rel: str, table: pa.Table) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)

    def write_bytes(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def read_bytes(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def move(self, src: str, dst: str) -> bool:
        """Rename ``src`` over ``dst`` (atomic); False when ``src`` is gone."""
        source = Path(src) if os.path.isabs(src) else self.root / src
        if not source.exists():
            return False
        final = self.root / dst
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, final)
        return True

    def delete(self, rel: str) -> None:
        path = self.root / rel
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # a day folder emptied by compaction
            path.parent.rmdir()

    def delete_dir(self, rel: str) -> None:
        import shutil

        shutil.rmtree(self.root / rel, ignore_errors=True)

    @contextmanager
    def lock(self, rel: str, *, wait: bool = True) -> Iterator[IO[bytes] | None]:
        """flock(2) on a file (created if absent, in a folder that must exist: a
        vanished folder is never made again) for the block: yields the open lock
        file, or None when ``wait`` is false and another process holds it."""
        with open(self.root / rel, "ab") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except OSError:
                yield None
                return
            yield f

    def error(self, exc: OSError, rel: str, doing: str) -> StoreError:
        """An OS failure as one line that says what to do."""
        where = self.location(rel)
        if exc.errno in _DISK_FULL:
            return StoreError(
                f"no space left on the device while {doing} {where!r}: free space "
                "there or use another --store; nothing was published"
            )
        if exc.errno in _READ_ONLY:
            return StoreError(
                f"store {self.uri!r} is not writable ({exc.strerror}): fix its "
                "permissions or use another --store"
            )
        return StoreError(f"{doing} {where!r} failed: {exc.strerror or exc}")


class ObjectFiles:
    """A store under a bucket and prefix of an object store."""

    local = False

    def __init__(self, uri: str, filesystem: pafs.FileSystem, base: str) -> None:
        self.uri = uri
        self.fs = filesystem
        self.base = base

    def _path(self, rel: str) -> str:
        return f"{self.base}/{rel}" if rel else self.base

    def location(self, rel: str) -> str:
        return f"{self.uri}/{rel}" if rel else self.uri

    def listdir(self, rel: str) -> list[Entry]:
        selector = pafs.FileSelector(self._path(rel), allow_not_found=True)
        return [
            Entry(
                info.base_name,
                info.type == pafs.FileType.Directory,
                info.mtime.timestamp() if info.mtime is not None else 0.0,
            )
            for info in self.fs.get_file_info(selector)
        ]

    def walk(self, rel: str) -> list[str]:
        selector = pafs.FileSelector(self._path(rel), allow_not_found=True, recursive=True)
        # Some file systems answer with a leading "/" (fsspec's memory://): compare without.
        base = self.base.strip("/") + "/"
        return [
            info.path.lstrip("/")[len(base) :]
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File and info.path.lstrip("/").startswith(base)
        ]

    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self._path(rel)).type == pafs.FileType.File

    def read_table(self, rel: str) -> pa.Table:
        return pq.read_table(self._path(rel), filesystem=self.fs)

    def read_metadata(self, rel: str) -> dict[bytes, bytes]:
        with self.fs.open_input_file(self._path(rel)) as f:
            return dict(pq.read_schema(f).metadata or {})

    def write_table(self, rel: str, table: pa.Table) -> None:
        pq.write_table(table, self._path(rel), filesystem=self.fs)

    def write_bytes(self, rel: str, data: bytes) -> None:
        with self.fs.open_output_stream(self._path(rel)) as f:
            f.write(data)

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self._path(rel)) as f:
            return bytes(f.read())

    def move(self, src: str, dst: str) -> bool:
        """Copy ``src`` over ``dst`` (one server-side copy: ``dst`` is the old
        object or the new one, never a mix); the staged ``src`` is removed with its
        transaction. False when ``src`` is gone."""
        try:
            self.fs.copy_file(self._path(src), self._path(dst))
        except FileNotFoundError:
            return False
        return True

    def delete(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_file(self._path(rel))

    def delete_dir(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.delete_dir(self._path(rel))

    def error(self, exc: OSError, rel: str, doing: str) -> StoreError:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        hint = "check the bucket, the credentials and AWS_ENDPOINT_URL, or use another --store"
        if "NO_SUCH_BUCKET" in first or "does not exist" in first:
            hint = "create the bucket first, or use another --store"
        elif "ACCESS_DENIED" in first or "Forbidden" in first:
            hint = "check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID) and the bucket policy"
        return StoreError(f"{doing} {self.location(rel)!r} failed ({first}): {hint}")
