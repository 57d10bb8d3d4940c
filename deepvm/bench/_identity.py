"""What machine this is: instance type (flag, cloud metadata, or local CPU model),
accelerators, CPU, memory and software versions.

Cloud metadata is asked with a short timeout: AWS IMDSv2 (a PUT for a session
token, then the instance type), then GCP and Azure. ``DEEPVM_METADATA=off``
disables every probe (as ``AWS_EC2_METADATA_DISABLED=true`` does for AWS); the
endpoints follow ``AWS_EC2_METADATA_SERVICE_ENDPOINT``, ``DEEPVM_GCP_METADATA_URL``
and ``DEEPVM_AZURE_METADATA_URL`` so tests can serve them on loopback.
"""

from __future__ import annotations

import os
import platform
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass

__all__ = [
    "AWS_DEFAULT_ENDPOINT",
    "AZURE_DEFAULT_URL",
    "ENV_INSTANCE_TYPE",
    "GCP_DEFAULT_URL",
    "METADATA_TIMEOUT_S",
    "Hardware",
    "aws_instance_type",
    "azure_vm_size",
    "cloud_instance_type",
    "cpu_model",
    "detect",
    "gcp_machine_type",
    "memory_gib",
]

METADATA_TIMEOUT_S = 0.3
ENV_INSTANCE_TYPE = "DEEPVM_INSTANCE_TYPE"
AWS_DEFAULT_ENDPOINT = "http://169.254.169.254"
GCP_DEFAULT_URL = "http://metadata.google.internal/computeMetadata/v1/instance/machine-type"
AZURE_DEFAULT_URL = (
    "http://169.254.169.254/metadata/instance/compute/vmSize?api-version=2021-02-01&format=text"
)


@dataclass(frozen=True)
class Hardware:
    instance_type: str
    hostname: str
    device: str
    accelerator_name: str
    accelerator_count: int
    cpu_model: str
    cpu_cores: int
    memory_gib: float
    torch_version: str
    cuda_version: str


def _http(url: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> str | None:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=METADATA_TIMEOUT_S) as response:
            return response.read().decode().strip() or None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _disabled(flag: str) -> bool:
    return os.environ.get(flag, "").strip().lower() in ("1", "true", "yes", "off")


def aws_instance_type() -> str | None:
    """IMDSv2: a session token by PUT, then the instance type with it."""
    if _disabled("AWS_EC2_METADATA_DISABLED"):
        return None
    base = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", AWS_DEFAULT_ENDPOINT).rstrip("/")
    token = _http(
        f"{base}/latest/api/token",
        method="PUT",
        headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"},
    )
    if token is None:
        return None
    return _http(
        f"{base}/latest/meta-data/instance-type", headers={"X-aws-ec2-metadata-token": token}
    )


def gcp_machine_type() -> str | None:
    value = _http(
        os.environ.get("DEEPVM_GCP_METADATA_URL", GCP_DEFAULT_URL),
        headers={"Metadata-Flavor": "Google"},
    )
    return value.rsplit("/", 1)[-1] if value else None  # projects/…/machineTypes/a2-highgpu-1g


def azure_vm_size() -> str | None:
    return _http(
        os.environ.get("DEEPVM_AZURE_METADATA_URL", AZURE_DEFAULT_URL), headers={"Metadata": "true"}
    )


def cloud_instance_type() -> str | None:
    if os.environ.get("DEEPVM_METADATA", "").strip().lower() == "off":
        return None
    for probe in (aws_instance_type, gcp_machine_type, azure_vm_size):
        found = probe()
        if found:
            return found
    return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def memory_gib() -> float:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return round(pages / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return float("nan")


def detect(instance_type: str | None = None, device: str = "cpu") -> Hardware:
    """``instance_type`` wins; else $DEEPVM_INSTANCE_TYPE (what a worker started on
    a machine of known type declares); else cloud metadata; else ``local:<cpu model>``."""
    import torch

    cpu = cpu_model()
    declared = os.environ.get(ENV_INSTANCE_TYPE, "").strip() or None
    name = instance_type or declared or cloud_instance_type() or f"local:{cpu}"
    if device.startswith("cuda"):
        accelerator = torch.cuda.get_device_name(0)
        count = torch.cuda.device_count()
    else:
        accelerator, count = "", 0
    return Hardware(
        instance_type=name,
        hostname=socket.gethostname(),
        device=device,
        accelerator_name=accelerator,
        accelerator_count=count,
        cpu_model=cpu,
        cpu_cores=os.cpu_count() or 1,
        memory_gib=memory_gib(),
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda or "",
    )
