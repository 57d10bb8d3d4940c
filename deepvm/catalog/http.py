"""How price sources talk to the network: one attempt per request, bounded by
the fetch's deadline, and every failure classified as worth another try
(timeouts, throttling, 5xx, a dropped connection) or not (a name that does not
resolve, another HTTP error, an answer that does not parse). The retries and the
one total deadline per fetch live in :func:`fetch_with_deadline`."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from deepvm.base.errors import SourceUnavailableError

__all__ = [
    "MAX_REQUEST_TIMEOUT_S",
    "RETRY_STATUS",
    "SourceUnavailable",
    "T",
    "TransientSourceError",
    "fetch_with_deadline",
    "get_json",
    "get_text",
    "is_transient",
    "request_timeout_s",
]

# Throttling and server errors: the next attempt may well succeed.
RETRY_STATUS = {408, 429, 500, 502, 503, 504}
# No single request waits longer than this, even with a long deadline.
MAX_REQUEST_TIMEOUT_S = 30.0

T = TypeVar("T")
_deadline = threading.local()


class SourceUnavailable(SourceUnavailableError):
    """The source failed in a way another attempt will not mend."""


class TransientSourceError(SourceUnavailable):
    """A failure another attempt may mend: a timeout, throttling, a 5xx."""


def request_timeout_s() -> float:
    """Seconds the next request may take: what is left of the fetch's deadline."""
    end = getattr(_deadline, "end", None)
    if end is None:
        return MAX_REQUEST_TIMEOUT_S
    left = end - time.monotonic()
    if left <= 0:
        raise TransientSourceError("the fetch's deadline has passed")
    return min(MAX_REQUEST_TIMEOUT_S, left)


def _open(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=request_timeout_s()) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the response's socket
        kind = TransientSourceError if exc.code in RETRY_STATUS else SourceUnavailable
        raise kind(f"GET {url}: HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, socket.gaierror):  # DNS: the name does not resolve
            raise SourceUnavailable(f"GET {url}: cannot resolve the host ({reason})") from None
        if isinstance(reason, TimeoutError):
            raise _timed_out(url, reason) from None
        if isinstance(reason, ConnectionError | OSError):
            raise TransientSourceError(f"GET {url}: {reason}") from None
        raise SourceUnavailable(f"GET {url}: {reason}") from None
    except TimeoutError as exc:
        raise _timed_out(url, exc) from None
    except ConnectionError as exc:
        raise TransientSourceError(f"GET {url}: {type(exc).__name__}: {exc}") from None


def _timed_out(url: str, exc: TimeoutError) -> TransientSourceError:
    """A request that timed out. Its timeout is what was left of the fetch's deadline
    (request_timeout_s), so where that has passed, the deadline ended it: said so,
    whichever of the socket and the deadline's watcher noticed first."""
    end = getattr(_deadline, "end", None)
    if end is not None and time.monotonic() >= end - 1e-3:
        return TransientSourceError(f"GET {url}: no answer within the fetch's deadline")
    return TransientSourceError(f"GET {url}: {type(exc).__name__}: {exc}")


def get_json(url: str) -> Any:
    """One GET, parsed as JSON (a parse failure is not retried)."""
    body = _open(url)
    try:
        return json.loads(body.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceUnavailable(f"GET {url}: the answer is not JSON ({exc})") from None


def get_text(url: str) -> str:
    return _open(url).decode()


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed (botocore's errors included)."""
    if isinstance(exc, TransientSourceError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, SourceUnavailable):
        return False
    module = type(exc).__module__
    if module.startswith(("botocore", "urllib3")):
        name = type(exc).__name__
        if name in ("ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"):
            return True
        if name == "EndpointConnectionError":
            return not isinstance(getattr(exc, "__context__", None), socket.gaierror)
        response = getattr(exc, "response", None) or {}
        code = str(response.get("Error", {}).get("Code", ""))
        status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return status in RETRY_STATUS or "Throttl" in code or code == "RequestLimitExceeded"
    return False


def fetch_with_deadline(fetch: Callable[[], T], timeout_s: float) -> T:
    """``fetch()`` in a worker thread that gives up after ``timeout_s`` seconds,
    whatever the fetch is doing (a hung socket, a slow SDK); every request it
    makes sees the deadline through :func:`request_timeout_s`."""
    result: list[T] = []
    failure: list[BaseException] = []
    end = time.monotonic() + timeout_s

    def work() -> None:
        _deadline.end = end
        try:
            result.append(fetch())
        except BaseException as exc:  # handed to the caller's thread below
            failure.append(exc)

    worker = threading.Thread(target=work, name="deepvm-price-fetch", daemon=True)
    worker.start()
    worker.join(max(0.0, end - time.monotonic()))
    if worker.is_alive():
        raise TransientSourceError(f"no answer within the {timeout_s:g} s deadline")
    if failure:
        raise failure[0]
    return result[0]
