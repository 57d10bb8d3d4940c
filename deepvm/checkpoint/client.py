"""What training code calls: :func:`save` and :func:`load` (deepvm.checkpoint).

The tiers come from ``$DEEPVM_CHECKPOINT_TIERS`` (``deepvm launch`` sets it on
every worker) or the ``tiers`` argument; the i-th save of a process goes to tier
i mod n (deepvm.checkpoint.protocol). A tier that does not answer within the
retries is skipped with a warning and the version written to the local folder
(``$DEEPVM_CHECKPOINT_DIR``, default ``./deepvm-checkpoints``) instead, so
training never stops for its checkpoint tier. :func:`load` resumes from the
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

from deepvm.checkpoint.protocol import (
    DEFAULT_LOCAL_DIR,
    ENV_LOCAL_DIR,
    ENV_TIERS,
    SHA_HEADER,
    tier_urls,
)
from deepvm.checkpoint.versions import CapacityError, CorruptVersion, VersionFolder

RETRIES = 3  # attempts per tier and request
BACKOFF_S = 0.2  # then 0.4, 0.8 between attempts
TIMEOUT_S = 60.0  # per request
LOCAL_KEEP = 2

_saves = itertools.count()


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


def local_folder() -> VersionFolder:
    return VersionFolder(os.environ.get(ENV_LOCAL_DIR, DEFAULT_LOCAL_DIR), keep=LOCAL_KEEP)


def save(state: Any, step: int, *, tiers: list[str] | None = None) -> Saved:
    """Save ``state`` (anything ``torch.save`` takes) as version ``step``: on its
    tier (round robin), else, warning why, in the local folder."""
    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    return save_bytes(buffer.getbuffer(), step, tiers=tiers)


def save_bytes(data: Any, step: int, *, tiers: list[str] | None = None) -> Saved:
    """:func:`save` of bytes already serialised (a bytes-like ``data``)."""
    if step < 0:
        raise ValueError("a checkpoint's step must be >= 0")
    view = memoryview(data).cast("B")
    digest = hashlib.sha256(view).hexdigest()
    urls = tiers_from_env() if tiers is None else tiers
    if urls:
        url = urls[next(_saves) % len(urls)]
        try:
            _put(url, step, view, digest)
            return Saved(step, url, len(view), digest)
        except (CapacityError, CorruptVersion) as exc:  # full, or the bytes arrived damaged
            warnings.warn(
                f"checkpoint tier {url} refused version {step}: {exc}; it goes to local disk",
                TierWarning,
                stacklevel=2,
            )
        except OSError as exc:
            warnings.warn(
                f"checkpoint tier {url} unreachable ({exc}); version {step} goes to local disk",
                TierWarning,
                stacklevel=2,
            )
    folder = local_folder()
    version = folder.write(step, iter([bytes(view)]), size=len(view), sha256=digest)
    return Saved(step, str(folder.root), version.size, digest)


def load(*, tiers: list[str] | None = None, map_location: Any = "cpu") -> tuple[Any, int] | None:
    """The newest complete version anywhere as (state, step), or None when there is
    none (a fresh start)."""
    import torch

    found = load_bytes(tiers=tiers)
    if found is None:
        return None
    data, step = found
    return torch.load(io.BytesIO(data), map_location=map_location, weights_only=False), step


def load_bytes(*, tiers: list[str] | None = None) -> tuple[bytes, int] | None:
    """The newest complete, uncorrupted version's bytes and step, or None."""
    urls = tiers_from_env() if tiers is None else tiers
    candidates: list[tuple[int, str, str]] = []  # (step, where, sha256)
    for url in urls:
        try:
            listed = json.loads(_request(url, "GET", "/versions"))
        except OSError as exc:
            warnings.warn(f"checkpoint tier {url} unreachable ({exc})", TierWarning, stacklevel=2)
            continue
        candidates += [(int(v["step"]), url, str(v["sha256"])) for v in listed]
    folder = local_folder()
    candidates += [(v.step, "", v.sha256) for v in folder.versions()]
    for step, where, digest in sorted(candidates, key=lambda c: c[0], reverse=True):
        try:
            data = _get(where, step) if where else (folder.root / f"{step:012d}.ckpt").read_bytes()
        except OSError as exc:
            warnings.warn(
                f"version {step} on {where or folder.root}: {exc}", TierWarning, stacklevel=2
            )
            continue
        if hashlib.sha256(data).hexdigest() != digest:
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


def _put(url: str, step: int, view: memoryview, digest: str) -> None:
    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Length": str(len(view)),
        SHA_HEADER: digest,
    }
    try:
        _request(url, "GET", f"/room?size={len(view)}")
        _request(url, "PUT", f"/versions/{step}", body=view, headers=headers)
    except urllib.error.HTTPError as exc:
        if exc.code == 507:
            raise CapacityError(_message(exc)) from None
        if exc.code == 422:
            raise CorruptVersion(_message(exc)) from None
        raise


def _get(url: str, step: int) -> bytes:
    return _request(url, "GET", f"/versions/{step}")


def _request(
    url: str,
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> bytes:
    """One request, tried RETRIES times on connection failures and 5xx; an HTTP
    error the tier meant (4xx, 507) is raised at once."""
    last: OSError | None = None
    for attempt in range(RETRIES):
        if attempt:
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
        request = urllib.request.Request(
            url + path, data=body, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return bytes(response.read())
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
