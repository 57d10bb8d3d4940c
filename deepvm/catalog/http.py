"""Small HTTP helpers for price sources: JSON GETs retried with backoff on
timeouts, throttling (429) and server errors (5xx); other errors fail at once."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

RETRY_STATUS = {429, 500, 502, 503, 504}


class SourceUnavailable(Exception):
    """The source did not answer usefully after its retries."""


def get_json(
    url: str,
    *,
    timeout_s: float = 30.0,
    retries: int = 3,
    backoff_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    last = ""
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return json.loads(response.read().decode())
        except urllib.error.HTTPError as exc:
            if exc.code not in RETRY_STATUS:
                raise SourceUnavailable(f"GET {url}: HTTP {exc.code}") from None
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            last = str(getattr(exc, "reason", exc))
        if attempt < retries:
            sleep(backoff_s * 2**attempt)
    raise SourceUnavailable(f"GET {url}: {last} after {retries + 1} attempts")


def get_text(url: str, *, timeout_s: float = 60.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return str(response.read().decode())
