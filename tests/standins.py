"""Stand-in ``sky``, ``aws`` and ``torchrun`` executables for the launch tests: each
records its call (argv, and for ``sky launch`` the task and the secrets it got)
in ``calls.jsonl`` and answers as the real tool does. ``sky launch`` runs the
task's ``run`` script for real, once per node, each node on its own loopback
address (127.0.0.N) with SkyPilot's variables set (SKYPILOT_NODE_IPS, _RANK,
_NUM_NODES) and its own home and memory folder (``/dev/shm`` in the script is
the node's ``shm`` folder), so a tier task really serves and a workers task really starts
torchrun (the stand-in one, unless a test keeps the real torchrun). ``sky down``
kills a cluster's processes.

Faults, by environment variable of the launching process:
FAKE_SKY_DISABLED=aws,...   ``sky check`` says the cloud is disabled
FAKE_SKY_FAIL=CLUSTER,...   ``sky launch`` of that cluster exits 1
FAKE_SKY_NORUN=CLUSTER,...  ``sky launch`` of that cluster starts nothing (never healthy)
FAKE_AWS=missing|fail       the AWS CLI is not installed / fails (no credentials)
FAKE_AWS_UNKNOWN=ZONE_ID    the account has no such zone
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

SKY = r"""
import json, os, signal, subprocess, sys
import yaml

STATE = os.environ["FAKE_SKY_STATE"]
LABELS = {"aws": "AWS", "gcp": "GCP", "azure": "Azure"}


def record(entry):
    with open(os.path.join(STATE, "calls.jsonl"), "a") as out:
        out.write(json.dumps(entry) + "\n")


def clusters():
    path = os.path.join(STATE, "clusters.json")
    return json.load(open(path)) if os.path.exists(path) else {"next": 10, "up": {}}


def save(state):
    with open(os.path.join(STATE, "clusters.json"), "w") as out:
        json.dump(state, out)


def listed(name):
    return [v for v in os.environ.get(name, "").split(",") if v]


def stop(info):
    for pid in info.get("pids", []):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


argv = sys.argv[1:]
command = argv[0]
if command == "check":
    record({"tool": "sky", "argv": argv})
    cloud = argv[1]
    if cloud in listed("FAKE_SKY_DISABLED"):
        print(f"  {LABELS[cloud]}: disabled")
        print(f"    Reason [compute]: {LABELS[cloud]} credentials are not set. Run aws configure.")
    else:
        print(f"  {LABELS[cloud]}: enabled [compute, storage]")
    sys.exit(0)
if command == "launch":
    cluster = argv[argv.index("--cluster") + 1]
    given = {}
    for i, word in enumerate(argv):
        if word in ("--secret", "--env"):
            key, _, value = argv[i + 1].partition("=")
            given[key] = value if "=" in argv[i + 1] else os.environ.get(key)
    task = yaml.safe_load(open(argv[-1]))
    record({"tool": "sky", "argv": argv, "task": task, "given": given})
    envs = {**(task.get("envs") or {}), **(task.get("secrets") or {})}
    envs.update({k: v for k, v in given.items() if v is not None})
    missing = [k for k, v in envs.items() if v is None]
    if missing:  # as SkyPilot: a null env or secret must be given
        print(f"ValueError: Environment variable {missing[0]!r} is None.", file=sys.stderr)
        sys.exit(1)
    if cluster in listed("FAKE_SKY_FAIL"):
        print("sky.exceptions.ResourcesUnavailableError: Failed to provision all possible "
              "launchable resources.", file=sys.stderr)
        sys.exit(1)
    state = clusters()
    info = state["up"].get(cluster)
    if info is None:
        nodes = int(task.get("num_nodes", 1))
        info = {"ips": [f"127.0.0.{state['next'] + i}" for i in range(nodes)], "pids": []}
        state["next"] += nodes
    stop(info)  # a relaunch runs the task afresh on the cluster's nodes
    info["pids"] = []
    if cluster not in listed("FAKE_SKY_NORUN"):
        for rank, ip in enumerate(info["ips"]):
            home = os.path.join(STATE, cluster, f"node-{rank}")
            os.makedirs(home, exist_ok=True)
            env = {**os.environ, **{k: str(v) for k, v in envs.items()}, "HOME": home}
            env.update(SKYPILOT_NODE_IPS="\n".join(info["ips"]), SKYPILOT_NODE_RANK=str(rank),
                       SKYPILOT_NUM_NODES=str(len(info["ips"])))
            log = open(os.path.join(home, "run.log"), "ab")
            # each node's memory is its own, as on real nodes: not this machine's
            # /dev/shm, which every node here (and any other test run) would share
            run = task["run"].replace("/dev/shm", os.path.join(home, "shm"))
            job = subprocess.Popen(["bash", "-c", run], env=env, cwd=home,
                                   stdout=log, stderr=log, start_new_session=True)
            info["pids"].append(job.pid)
    state["up"][cluster] = info
    save(state)
    print("Job submitted, ID: 1")
    sys.exit(0)
if command == "status":
    cluster = argv[-1]
    record({"tool": "sky", "argv": argv})
    info = clusters()["up"].get(cluster)
    if info is None:
        print(f"Cluster {cluster} not found.", file=sys.stderr)
        sys.exit(1)
    print(info["ips"][0])
    sys.exit(0)
if command == "down":
    cluster = argv[-1]
    record({"tool": "sky", "argv": argv})
    state = clusters()
    stop(state["up"].pop(cluster, {}))
    save(state)
    print(f"Terminating cluster {cluster}...done.")
    sys.exit(0)
print(f"stand-in sky: {argv} is not known", file=sys.stderr)
sys.exit(2)
"""

AWS = r"""
import json, os, sys

STATE = os.environ["FAKE_SKY_STATE"]
argv = sys.argv[1:]
with open(os.path.join(STATE, "calls.jsonl"), "a") as out:
    out.write(json.dumps({"tool": "aws", "argv": argv}) + "\n")
zone = argv[argv.index("--zone-ids") + 1]
if os.environ.get("FAKE_AWS") == "fail":
    print("Unable to locate credentials. You can configure credentials by running "
          "\"aws configure\".", file=sys.stderr)
    sys.exit(253)
if zone == os.environ.get("FAKE_AWS_UNKNOWN"):
    print("An error occurred (InvalidParameterValue) when calling the "
          f"DescribeAvailabilityZones operation: The zone ID '{zone}' is not valid.",
          file=sys.stderr)
    sys.exit(254)
region = argv[argv.index("--region") + 1]
# this account's names are shifted from the IDs: use1-az1 -> us-east-1b
print(region + "abcdef"[int(zone.rsplit("az", 1)[1]) % 6])
"""

TORCHRUN = r"""
import json, os, sys

STATE = os.environ["FAKE_SKY_STATE"]
keys = ("MASTER_ADDR", "DEEPVM_CHECKPOINT_TIERS", "DEEPVM_CHECKPOINT_TOKEN", "SKYPILOT_NODE_RANK",
        "DEEPVM_NODES")
with open(os.path.join(STATE, "calls.jsonl"), "a") as out:
    out.write(json.dumps({"tool": "torchrun", "argv": sys.argv[1:],
                          "env": {k: os.environ.get(k) for k in keys}}) + "\n")
"""


def install(bin_dir: Path, *, torchrun: bool = True, aws: bool = True) -> None:
    """Write the stand-ins into ``bin_dir`` (run by this interpreter), beside links
    to this environment's ``deepvm`` (and, with ``torchrun=False``, its real
    torchrun): ``bin_dir`` is all a test's PATH needs besides /usr/bin and /bin, so
    the real ``sky`` this environment has (the skypilot test dependency) stays out."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    own = Path(sys.executable).parent
    for name in ("deepvm",) if torchrun else ("deepvm", "torchrun"):
        (bin_dir / name).symlink_to(own / name)
    tools = {"sky": SKY}
    if aws:
        tools["aws"] = AWS
    if torchrun:
        tools["torchrun"] = TORCHRUN
    for name, body in tools.items():
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)


def calls(state: Path, tool: str | None = None) -> list[dict]:
    path = state / "calls.jsonl"
    if not path.exists():
        return []
    found = [json.loads(line) for line in path.read_text().splitlines()]
    return [c for c in found if tool is None or c["tool"] == tool]


def stop_all(state: Path) -> None:
    """Kill every process a stand-in ``sky launch`` started (test teardown)."""
    path = state / "clusters.json"
    if not path.exists():
        return
    for info in json.loads(path.read_text())["up"].values():
        for pid in info["pids"]:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
