"""Where a store is: a local folder or an object-store prefix, turned into the
table URIs and storage options delta-rs takes (docs/ARCHITECTURE.md, "The store").

S3 takes the standard AWS settings (credentials and region from the environment
or the profile, the endpoint from AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL or the
profile's endpoint_url) and commits with conditional writes (If-None-Match), which
AWS S3, MinIO, R2 and Ceph support; a store without them sets
``AWS_S3_ALLOW_UNSAFE_RENAME=true`` and keeps to one writer at a time. Every
request is bounded by the store's timeout, retries included.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from deepvm.base.config import DEFAULT_STORE, ENV_STORE
from deepvm.base.errors import StoreError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ENV_TIMEOUT",
    "Location",
    "locate",
    "request_timeout",
    "store_uri",
    "timeout_s",
]

ENV_TIMEOUT = "DEEPVM_STORE_TIMEOUT"  # seconds for any one store operation, retries included
DEFAULT_TIMEOUT_S = 60.0
_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss")
_GCS_CREDENTIALS = (
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_SERVICE_ACCOUNT_PATH",
    "GOOGLE_SERVICE_ACCOUNT_KEY",
)
_AZURE_CREDENTIALS = (
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_USE_EMULATOR",
)


def store_uri(uri: str | os.PathLike[str] | None = None) -> str:
    """The store's location: ``uri``, else $DEEPVM_STORE, else ./deepvm-store
    (a local folder, a file:// URI, or an object-store URI such as s3://bucket/prefix)."""
    value = os.fspath(uri) if uri is not None else os.environ.get(ENV_STORE) or DEFAULT_STORE
    if not value.strip():
        raise StoreError("store path is empty: give a folder, e.g. --store ./deepvm-store")
    return value[len("file://") :] if value.startswith("file://") else value


_timeout_given: ContextVar[float | None] = ContextVar("deepvm_store_timeout", default=None)


@contextlib.contextmanager
def request_timeout(seconds: float | None) -> Iterator[None]:
    """Bound every store request of stores located inside the block by ``seconds``
    (the CLI's --timeout); None keeps $DEEPVM_STORE_TIMEOUT, else the default."""
    token = _timeout_given.set(seconds)
    try:
        yield
    finally:
        _timeout_given.reset(token)


def timeout_s() -> float:
    """Seconds any one store request may take, its retries included."""
    given = _timeout_given.get()
    if given is not None:
        return given
    raw = os.environ.get(ENV_TIMEOUT)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise StoreError(f"${ENV_TIMEOUT} is {raw!r}: give a positive number of seconds")
    return value


@dataclass(frozen=True)
class Location:
    """A store's root: ``uri`` as the user gave it, ``local`` for a folder, ``base``
    what delta-rs is given (an absolute path, or the URI)."""

    uri: str
    local: bool
    base: str
    options: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def table_uri(self, table: str) -> str:
        return os.path.join(self.base, table) if self.local else f"{self.base}/{table}"

    @property
    def root(self) -> Path:
        assert self.local
        return Path(self.base)


def locate(uri: str | os.PathLike[str] | None = None) -> Location:
    """The Location of a store URI; checks the scheme and credentials it needs, and
    touches no network."""
    value = store_uri(uri)
    if "://" not in value:
        return Location(value, True, os.path.abspath(value))
    scheme, rest = value.split("://", 1)
    bucket = rest.strip("/").split("/", 1)[0]
    if scheme not in _SCHEMES:
        raise StoreError(
            f"store {value!r}: deepvm's store (Delta Lake) serves local folders and "
            f"{', '.join(s + '://' for s in _SCHEMES)}; give one of those with --store"
        )
    if not bucket:
        raise StoreError(f"store {value!r} names no bucket: give e.g. {scheme}://bucket/prefix")
    base = f"{scheme}://{rest.strip('/')}"
    if scheme in ("s3", "s3a"):
        return Location(value, False, base, _s3_options())
    if scheme == "gs":
        return Location(value, False, base, _gcs_options(value))
    return Location(value, False, base, _azure_options(value))


def _client_options() -> dict[str, str]:
    """object_store's client settings: every request, and its retries, within the
    store's timeout (so an unreachable endpoint fails, it never hangs)."""
    seconds = max(1, round(timeout_s()))
    return {
        "timeout": f"{seconds}s",
        "connect_timeout": f"{min(seconds, 10)}s",
        "max_retries": "3",
        "retry_timeout": f"{seconds}s",
    }


def _s3_options() -> dict[str, str]:
    options = _client_options()
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
    if endpoint:
        options["endpoint_url"] = endpoint
        if endpoint.startswith("http://"):
            options["allow_http"] = "true"
    if region:
        options["region"] = region
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if os.environ.get(key):
            options[key.lower()] = os.environ[key]
    if os.environ.get("AWS_PROFILE") and "aws_access_key_id" not in options:
        options["profile"] = os.environ["AWS_PROFILE"]
    unsafe = os.environ.get("AWS_S3_ALLOW_UNSAFE_RENAME", "").lower() == "true"
    if unsafe:
        options["AWS_S3_ALLOW_UNSAFE_RENAME"] = "true"
    else:  # atomic commits by If-None-Match: AWS S3, MinIO, R2, Ceph
        options["conditional_put"] = os.environ.get("AWS_CONDITIONAL_PUT", "etag")
    return options


def _metadata_allowed() -> bool:
    return os.environ.get("DEEPVM_METADATA", "").lower() not in ("off", "0", "false", "no")


def _gcs_options(uri: str) -> dict[str, str]:
    options = _client_options()
    found = [k for k in _GCS_CREDENTIALS if os.environ.get(k)]
    adc = Path.home() / ".config" / "gcloud" / "application_default_credentials.json"
    if not found and not adc.is_file() and not _metadata_allowed():
        raise StoreError(
            f"store {uri!r}: no Google Cloud credentials (set GOOGLE_APPLICATION_CREDENTIALS "
            "to a service account key file, or run `gcloud auth application-default login`)"
        )
    for key in found:
        options[key.lower()] = os.environ[key]
    return options


def _azure_options(uri: str) -> dict[str, str]:
    options = _client_options()
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or os.environ.get(
        "AZURE_STORAGE_ACCOUNT"
    )
    found = [k for k in _AZURE_CREDENTIALS if os.environ.get(k)]
    if not account or (not found and not _metadata_allowed()):
        raise StoreError(
            f"store {uri!r}: no Azure storage credentials (set AZURE_STORAGE_ACCOUNT_NAME "
            "and AZURE_STORAGE_ACCOUNT_KEY, or AZURE_STORAGE_SAS_KEY)"
        )
    options["account_name"] = account
    for key in found:
        options[key.lower().removeprefix("azure_storage_")] = os.environ[key]
    return options


def _profile_setting(name: str) -> str | None:
    """A setting of the AWS profile in use, where botocore (optional) is installed."""
    try:
        import botocore.session
    except ImportError:
        return None
    with contextlib.suppress(Exception):  # a broken config file: the S3 client reports later
        value = botocore.session.Session().get_scoped_config().get(name)
        return str(value) if value else None
    return None
