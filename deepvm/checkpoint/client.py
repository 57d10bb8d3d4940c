"""What training code calls: :func:`save` and :func:`load` (deepvm.checkpoint).

The tiers come from ``$DEEPVM_CHECKPOINT_TIERS`` (``deepvm launch`` sets it on
every worker) or the ``tiers`` argument, their token from
``$DEEPVM_CHECKPOINT_TOKEN`` or ``token``; the i-th save of a process goes to tier
i mod n (deepvm.checkpoint.protocol). A tier that does not answer within the
retries is skipped with a warning and the version written to the local folder
(``$DEEPVM_CHECKPOINT_DIR``, default ``./deepvm-checkpoints``) instead, so
training never stops for its checkpoint tier; with no tier at all, the first
save says so once. :func:`load` resumes from the
newest complete version anywhere (every tier and the local folder), checking its
SHA-256, and passes over a version that arrives corrupt.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from typing import Any

from deepvm.checkpoint._versions import CapacityError, CorruptVersion, VersionFolder
from deepvm.checkpoint.protocol import (
    DEFAULT_LOCAL_DIR,
    ENV_LOCAL_DIR,
    ENV_TIERS,
    ENV_TOKEN,
    SHA_HEADER,
    auth_headers,
    tier_urls,
)

__all__ = [
    "BACKOFF_S",
    "LOCAL_KEEP",
    "READ_BYTES",
    "RETRIES",
    "TIMEOUT_S",
    "Saved",
    "TierWarning",
    "load",
    "load_bytes",
    "local_folder",
    "put_version",
    "save",
    "save_bytes",
    "tiers_from_env",
    "token_from_env",
]

RETRIES = 3  # attempts per tier and request
BACKOFF_S = 0.2  # then 0.4, 0.8 between attempts
TIMEOUT_S = 60.0  # per request
LOCAL_KEEP = 2
READ_BYTES = 1 << 20  # a download is read, and hashed, in pieces of this size

_saves = itertools.count()
_said_no_tier = False


class TierWarning(UserWarning):
    """A tier did not answer, refused, or sent a corrupt version."""


@dataclass(frozen=True)
class Saved:
    step: int
    where: str  # a tier's URL, or the local folder's path
    size: int
    sha256: str


def tiers_from_env() -> list[str]:
    return tier_urls(os.environ.get(ENV_TIERS, ""))


def token_from_env() -> str | None:
    return os.environ.get(ENV_TOKEN) or None


def local_folder() -> VersionFolder:
    return VersionFolder(os.environ.get(ENV_LOCAL_DIR, DEFAULT_LOCAL_DIR), keep=LOCAL_KEEP)


def save(
    state: Any, step: int, *, tiers: list[str] | None = None, token: str | None = None
) -> Saved:
    """Save ``state`` (anything ``torch.save`` takes) as version ``step``: on its
    tier (round robin), else, warning why, in the local folder."""
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    return save_bytes(buffer.getbuffer(), step, tiers=tiers, token=token)


def save_bytes(
    data: Any, step: int, *, tiers: list[str] | None = None, token: str | None = None
) -> Saved:
    """:func:`save` of bytes already serialised (a bytes-like ``data``)."""
    global _said_no_tier
    if step < 0:
        raise ValueError("a checkpoint's step must be >= 0")
    view = memoryview(data).cast("B")
    digest = hashlib.sha256(view).hexdigest()
    urls = tiers_from_env() if tiers is None else tiers
    if not urls and not _said_no_tier:  # a launch sets the tiers: their absence is news
        _said_no_tier = True
        warnings.warn(
            f"no checkpoint tier is configured (${ENV_TIERS} is empty): versions go to "
            f"the local folder {local_folder().root}, which a preempted node loses",
            TierWarning,
            stacklevel=2,
        )
    if urls:
        url = urls[next(_saves) % len(urls)]
        try:
            _put(url, step, view, digest, _token(token))
            return Saved(step, url, len(view), digest)
        except (CapacityError, CorruptVersion) as exc:  # full, or the bytes arrived damaged
            warnings.warn(
                f"checkpoint tier {url} refused version {step}: {exc}; it goes to local disk",
                TierWarning,
                stacklevel=2,
            )
        except OSError as exc:  # unreachable, or it refused the token
            warnings.warn(
                f"checkpoint tier {url} did not take version {step} ({exc}); it goes to local disk",
                TierWarning,
                stacklevel=2,
            )
    folder = local_folder()
    version = folder.write(step, iter([bytes(view)]), size=len(view), sha256=digest)
    return Saved(step, str(folder.root), version.size, digest)


def put_version(url: str, step: int, data: Any, *, token: str | None = None) -> Saved:
    """Store bytes as version ``step`` on the tier at ``url``, or raise: what a
    move restores onto the new cluster's tier (no local fallback: it must land)."""
    view = memoryview(data).cast("B")
    digest = hashlib.sha256(view).hexdigest()
    _put(url, step, view, digest, _token(token))
    return Saved(step, url, len(view), digest)


def load(
    *, tiers: list[str] | None = None, token: str | None = None, map_location: Any = "cpu"
) -> tuple[Any, int] | None:
    """The newest complete version anywhere as (state, step), or None when there is
    none (a fresh start)."""
    import torch

    found = load_bytes(tiers=tiers, token=token)
    if found is None:
        return None
    data, step = found
    return torch.load(io.BytesIO(data), map_location=map_location, weights_only=False), step


def load_bytes(
    *, tiers: list[str] | None = None, token: str | None = None
) -> tuple[bytes | bytearray, int] | None:
    """The newest complete, uncorrupted version's bytes and step, or None."""
    urls = tiers_from_env() if tiers is None else tiers
    secret = _token(token)
    candidates: list[tuple[int, str, str]] = []  # (step, where, sha256)
    for url in urls:
        try:
            listed = json.loads(_request(url, "GET", "/versions", token=secret))
        except OSError as exc:
            warnings.warn(f"checkpoint tier {url} unreachable ({exc})", TierWarning, stacklevel=2)
            continue
        candidates += [(int(v["step"]), url, str(v["sha256"])) for v in listed]
    folder = local_folder()
    candidates += [(v.step, "", v.sha256) for v in folder.versions()]
    for step, where, digest in sorted(candidates, key=lambda c: c[0], reverse=True):
        try:
            data: bytes | bytearray
            if where:
                data, got = _get(where, step, secret)
            else:
                data = (folder.root / f"{step:012d}.ckpt").read_bytes()
                got = hashlib.sha256(data).hexdigest()
        except OSError as exc:
            warnings.warn(
                f"version {step} on {where or folder.root}: {exc}", TierWarning, stacklevel=2
            )
            continue
        if got != digest:
            warnings.warn(
                f"version {step} from {where or folder.root} is corrupt (SHA-256 mismatch); "
                "trying an older one",
                TierWarning,
                stacklevel=2,
            )
            continue
        return data, step
    return None


# --- HTTP, with bounded retries -------------------------------------------------------


def _token(given: str | None) -> str | None:
    return given if given is not None else token_from_env()


def _put(url: str, step: int, view: memoryview, digest: str, token: str | None) -> None:
    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Length": str(len(view)),
        SHA_HEADER: digest,
    }
    try:
        _request(url, "GET", f"/room?size={len(view)}", token=token)
        _request(url, "PUT", f"/versions/{step}", body=view, headers=headers, token=token)
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise PermissionError(f"it refused the token (${ENV_TOKEN})") from None
        if exc.code == 507:
            raise CapacityError(_message(exc)) from None
        if exc.code == 422:
            raise CorruptVersion(_message(exc)) from None
        raise


def _get(url: str, step: int, token: str | None) -> tuple[bytearray, str]:
    """One version's bytes and their SHA-256, hashed as they arrive (one pass)."""
    return _request(url, "GET", f"/versions/{step}", token=token, read=_read_hashed)


def _read_hashed(response: Any) -> tuple[bytearray, str]:
    size = int(response.headers.get("Content-Length") or 0)
    buffer = bytearray(size)
    view = memoryview(buffer)
    digest = hashlib.sha256()
    got = 0
    while got < size:
        n = response.readinto(view[got : got + READ_BYTES])
        if not n:
            raise ConnectionError(f"the version was cut short at {got} of {size} bytes")
        digest.update(view[got : got + n])
        got += n
    return buffer, digest.hexdigest()


def _request(
    url: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    token: str | None = None,
    read: Any = None,
) -> Any:
    """One request, tried RETRIES times on connection failures and 5xx; an HTTP
    error the tier meant (4xx, 507) is raised at once. The body as bytes, or what
    ``read`` makes of the response."""
    last: OSError | None = None
    for attempt in range(RETRIES):
        if attempt:
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
        request = urllib.request.Request(
            url + path, data=body, method=method, headers={**(headers or {}), **auth_headers(token)}
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return read(response) if read else bytes(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or exc.code == 507:
                raise
            last = exc
        except OSError as exc:  # refused, reset, timed out
            last = exc
    assert last is not None
    raise last


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read())["error"])
    except (ValueError, KeyError, OSError):
        return f"HTTP {exc.code}"
