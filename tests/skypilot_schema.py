"""Task files checked by SkyPilot itself (``sky.Task.from_yaml_config``, the
pinned ``skypilot`` test dependency), in a subprocess so that importing SkyPilot
touches neither the test process nor the user's ``~/.sky``.

SkyPilot checks an instance type, region and zone against its catalogs, which it
would download; the check instead gets them from the copies of SkyPilot's own
catalog rows the repository ships (datasets/sources), written in SkyPilot's
layout into a scratch runtime folder (``SKY_RUNTIME_DIR``). A null env or secret
is given a value, as ``--env`` / ``--secret`` would at launch."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from tests_paths import ROOT

SOURCES = ROOT / "datasets" / "sources"
COLUMNS = [
    "InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo",
    "Price", "SpotPrice", "Region", "AvailabilityZone",
]  # fmt: skip

CHECK = r"""
import json, sys
import yaml
import sky

results = {}
for path in sys.argv[1:]:
    config = yaml.safe_load(open(path))
    envs = [(k, "given-at-launch") for k, v in (config.get("envs") or {}).items() if v is None]
    secrets = [(k, "given") for k, v in (config.get("secrets") or {}).items() if v is None]
    try:
        task = sky.Task.from_yaml_config(config, env_overrides=envs, secrets_overrides=secrets)
        (resources,) = task.resources
        results[path] = {"ok": True, "nodes": task.num_nodes, "cloud": str(resources.cloud),
                         "instance_type": resources.instance_type, "zone": resources.zone,
                         "region": resources.region, "use_spot": resources.use_spot}
    except Exception as exc:
        results[path] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(results))
"""


def _rows(path: Path) -> list[dict[str, str]]:
    text = "".join(line for line in path.read_text().splitlines(True) if not line.startswith("#"))
    return list(csv.DictReader(io.StringIO(text)))


def _write(path: Path, rows: list[dict[str, object]], columns: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def runtime(folder: Path) -> Path:
    """A SkyPilot runtime folder whose catalogs are the shipped SkyPilot rows."""
    catalogs = folder / ".sky" / "catalogs" / "v8"
    aws = _rows(SOURCES / "aws-vms-skypilot-v8.csv")
    _write(catalogs / "aws" / "vms.csv", aws, [*list(aws[0]), "AvailabilityZone"])
    azure = _rows(SOURCES / "azure-gpu-vms-skypilot-v8-fork.csv")
    _write(catalogs / "azure" / "vms.csv", azure, list(azure[0]))
    gcp: list[dict[str, object]] = []
    for name in ("gcp-host-vms", "gcp-n1-hosts", "gcp-g2-hosts"):
        for row in _rows(SOURCES / f"{name}-skypilot-v8.csv"):
            model, _, count = (row.get("pairs_with") or "").partition("x")
            zones = (row.get("Zones") or "a;b;c").split(";")
            for zone in zones:
                gcp.append({
                    **row, "AcceleratorName": model if name != "gcp-n1-hosts" else "",
                    "AcceleratorCount": count if name != "gcp-n1-hosts" else "",
                    "AvailabilityZone": f"{row['Region']}-{zone}",
                })  # fmt: skip
    for row in _rows(SOURCES / "gcp-gpu-attach-skypilot-v8.csv"):
        for zone in row["Zones"].split(";"):
            gcp.append({**row, "InstanceType": "", "AvailabilityZone": f"{row['Region']}-{zone}"})
    _write(catalogs / "gcp" / "vms.csv", gcp, COLUMNS)
    return folder


def validate(files: list[Path], folder: Path) -> dict[str, dict]:
    """SkyPilot's verdict on each task file: {"ok": True, resources...} or the error."""
    env = {**os.environ, "SKY_RUNTIME_DIR": str(runtime(folder)), "HOME": str(folder)}
    done = subprocess.run(
        [sys.executable, "-c", CHECK, *map(str, files)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
