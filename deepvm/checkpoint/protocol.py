"""What the checkpoint tier and its clients agree on (docs/ARCHITECTURE.md,
"The checkpoint tier").

HTTP, one version per training step:

* ``PUT /versions/{step}``: the checkpoint's bytes, with ``Content-Length`` and
  ``X-Deepvm-Sha256`` (hex). The tier streams them to a hidden file, then makes
  the version visible only when every byte arrived and the SHA-256 matches
  (201); a short or corrupt upload is dropped (422); one that would not fit the
  tier's capacity next to the versions it keeps is refused before a byte is
  stored (507). Then the oldest versions beyond the newest ``k`` are removed.
* ``GET /versions``: the complete versions, newest first (JSON).
* ``GET /versions/latest`` and ``GET /versions/{step}``: one version's bytes,
  with ``X-Deepvm-Step`` and ``X-Deepvm-Sha256``; the client checks the hash.
* ``GET /room?size=N``: whether N bytes would fit now (200, else 507 with the
  reason); a client asks before uploading, so a full tier costs no transfer.
* ``GET /health``: versions held, bytes used, capacity.

Every request carries ``Authorization: Bearer TOKEN``, the token the launch
generated (``$DEEPVM_CHECKPOINT_TOKEN`` on the tier and on every worker); the
tier compares it in constant time and answers 401, reading and writing nothing,
to a request without it. A tier's port is open to the internet (SkyPilot's
``ports``), so the token is what keeps it the job's.

Several tiers (Tiering's remote nodes): the client puts its i-th save on tier
i mod n, and each tier keeps ceil(k / n) versions, so the newest k versions are
spread over the nodes (their memory together holds k checkpoints, as the planner
sized them) and losing one node loses at most ceil(k / n) of them.
"""

from __future__ import annotations

import math

__all__ = [
    "DEFAULT_LOCAL_DIR",
    "DEFAULT_PORT",
    "ENV_LOCAL_DIR",
    "ENV_TIERS",
    "ENV_TOKEN",
    "MEMORY_DIR",
    "SHA_HEADER",
    "STEP_HEADER",
    "auth_headers",
    "tier_urls",
    "versions_per_tier",
]

DEFAULT_PORT = 8470
SHA_HEADER = "X-Deepvm-Sha256"
STEP_HEADER = "X-Deepvm-Step"
# Set by `deepvm launch` on every worker: the tiers' base URLs, comma-separated.
ENV_TIERS = "DEEPVM_CHECKPOINT_TIERS"
# The tier's shared secret (deepvm launch generates it; SkyPilot passes it as a secret).
ENV_TOKEN = "DEEPVM_CHECKPOINT_TOKEN"
# Where a client writes when no tier answers (and reads from when resuming).
ENV_LOCAL_DIR = "DEEPVM_CHECKPOINT_DIR"
DEFAULT_LOCAL_DIR = "deepvm-checkpoints"
# Where a tier node keeps its versions by default: the node's memory (`deepvm
# checkpoint serve --dir`, and the folder `deepvm launch`'s tier task serves).
MEMORY_DIR = "/dev/shm/deepvm-checkpoints"


def versions_per_tier(versions: int, tiers: int) -> int:
    """How many versions each of ``tiers`` nodes keeps so that together they hold
    the newest ``versions``."""
    return max(1, math.ceil(versions / max(1, tiers)))


def tier_urls(text: str) -> list[str]:
    """``10.0.0.5:8470,http://10.0.0.6:8470`` as base URLs (``http://`` added)."""
    urls = []
    for part in text.split(","):
        part = part.strip().rstrip("/")
        if part:
            urls.append(part if "://" in part else f"http://{part}")
    return urls


def auth_headers(token: str | None) -> dict[str, str]:
    """The header a request to a tier carries (none without a token)."""
    return {"Authorization": f"Bearer {token}"} if token else {}
