"""End to end against a real Prefect server: deploy from prefect.yaml to a process
work pool, start a worker, trigger runs through the REST API as the UI does, wait
for Completed, read the Parquet with DuckDB."""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from deepvm.catalog import load_catalog as _load_catalog
from deepvm.records.jobs import load_jobs
from tests.helpers import whole

# Prices in the shipped snapshot: every on-demand price and every spot price.
SHIPPED_PRICE_ROWS = len(_load_catalog().instances) + int(
    _load_catalog().instances["spot_price"].notna().sum()
)

ROOT = Path(__file__).resolve().parents[2]
# Instance types with a worker of their own (a machine of that type, in production).
TYPE_QUEUES = ("g4dn.xlarge", "p3.2xlarge")
PREFECT = shutil.which("prefect") or f"{sys.executable} -m prefect"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-home")
    store = tmp_path_factory.mktemp("store")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        "DEEPVM_REPO": str(ROOT),
        "DEEPVM_STORE": str(store),
        "DEEPVM_METADATA": "off",
        "PYTHONUNBUFFERED": "1",
    }
    logs = home / "server.log"
    procs = []
    with open(logs, "w") as log:
        procs.append(
            subprocess.Popen(
                [*PREFECT.split(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        wait_until(lambda: _healthy(api), 120, "the Prefect server")

        def run(*a):
            return subprocess.run(
                [*PREFECT.split(), *a],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=180,
            )

        made = run("work-pool", "create", "deepvm-process", "--type", "process")
        assert made.returncode == 0, made.stdout + made.stderr
        deployed = run("--no-prompt", "deploy", "--all")
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        # The general worker takes the default queue; one worker per instance type
        # takes that type's queue and declares the type (as on a machine of it).
        workers = [("worker.log", "default", {})] + [
            (f"worker-{t}.log", t, {"DEEPVM_INSTANCE_TYPE": t}) for t in TYPE_QUEUES
        ]
        for log_name, queue, extra in workers:
            with open(home / log_name, "w") as wlog:  # the child keeps its own handle
                command = [*PREFECT.split(), "worker", "start", "--pool", "deepvm-process"]
                procs.append(
                    subprocess.Popen(
                        [*command, "--work-queue", queue],
                        env={**env, **extra},
                        cwd=ROOT,
                        stdout=wlog,
                        stderr=subprocess.STDOUT,
                    )
                )
        yield api, store, home
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)  # reap it: an unreaped Popen warns (an error here)


def _healthy(api: str) -> bool:
    try:
        return httpx.get(f"{api}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def call(method: str, url: str, **kwargs) -> httpx.Response:
    """One API call; a busy SQLite-backed server answers 503 for a moment under
    load, which Prefect's own clients retry too."""
    for _ in range(20):
        response = httpx.request(method, url, timeout=30, **kwargs)
        if response.status_code not in (502, 503, 504):
            break
        time.sleep(1)
    response.raise_for_status()
    return response


def trigger(api: str, flow: str, deployment: str, parameters: dict) -> str:
    """What the UI's 'Run' button does: create a flow run of the deployment."""
    dep = call("GET", f"{api}/deployments/name/{flow}/{deployment}")
    run = call(
        "POST",
        f"{api}/deployments/{dep.json()['id']}/create_flow_run",
        json={"parameters": parameters},
    )
    return run.json()["id"]


def wait_final(api: str, run_id: str, home: Path, timeout: float = 240) -> str:
    def state():
        body = call("GET", f"{api}/flow_runs/{run_id}").json()
        kind = (body.get("state") or {}).get("type")
        return kind if kind in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

    try:
        return wait_until(state, timeout, f"flow run {run_id}")
    except AssertionError:
        print((home / "worker.log").read_text()[-5000:])
        raise


def test_deployments_exist_with_schedule(server):
    api, _, _ = server
    nightly = call("GET", f"{api}/deployments/name/nightly/nightly").json()
    (schedule,) = nightly["schedules"]
    assert schedule["schedule"]["cron"] == "0 3 * * *"
    assert schedule["schedule"]["timezone"] == "UTC"
    for flow, name in (
        ("recommend", "recommend"),
        ("benchmark", "benchmark"),
        ("refresh-prices", "refresh-prices"),
        ("benchmark-fleet", "benchmark-fleet"),
        ("fleet", "fleet"),
    ):
        dep = call("GET", f"{api}/deployments/name/{flow}/{name}").json()
        assert dep["work_pool_name"] == "deepvm-process" and dep["schedules"] == []
    schema = call("GET", f"{api}/deployments/name/recommend/recommend").json()[
        "parameter_openapi_schema"
    ]
    assert schema["properties"]["budget"]["exclusiveMinimum"] == 0  # the UI form validates


def test_recommend_and_nightly_through_the_api(server):
    api, store, home = server
    run = trigger(
        api,
        "recommend",
        "recommend",
        {"budget": 4.5, "workload": "gpt2", "scenario": "from-ui", "top": 2},
    )
    assert wait_final(api, run, home) == "COMPLETED"
    recs = whole(store, "recommendations").filter("scenario = 'from-ui'").df()
    assert len(recs) > 0 and (recs["hourly_cost"] <= 4.5 + 1e-9).all()
    assert set(recs["workload"]) == {"gpt2"}

    for _ in range(2):  # the same date twice: replaced, never duplicated
        run = trigger(api, "nightly", "nightly", {"snapshot_date": "2026-12-01"})
        assert wait_final(api, run, home) == "COMPLETED"
    recs = whole(store, "recommendations").filter("snapshot_date = '2026-12-01'").df()
    assert set(recs["scenario"]) == {j.name for j in load_jobs()}  # every registered job
    assert len(load_jobs()) == 4
    assert not recs.duplicated(["scenario", "policy", "rank"]).any()
    prices = whole(store, "prices").filter("snapshot_date = '2026-12-01'").count("*").df()
    prices.columns = ["n"]
    assert int(prices["n"].iloc[0]) == SHIPPED_PRICE_ROWS
    artifacts = call(
        "POST",
        f"{api}/artifacts/filter",
        json={"artifacts": {"key": {"any_": ["deepvm-nightly-changes"]}}},
    ).json()
    assert artifacts and "change report" in artifacts[0]["data"]
    fleet = whole(store, "fleet").filter("snapshot_date = '2026-12-01'").df()
    assert set(fleet["scenario"]) == {j.name for j in load_jobs()}


def test_benchmark_fleet_runs_each_type_on_its_own_queue(server):
    api, store, home = server
    run = trigger(
        api,
        "benchmark-fleet",
        "benchmark-fleet",
        {"instance_types": list(TYPE_QUEUES), "workloads": ["tiny"], "timeout_s": 600},
    )
    assert wait_final(api, run, home, timeout=600) == "COMPLETED"
    rows = whole(store, "benchmarks").select("instance_type, status").df()
    # Each worker recorded its own type: the run reached the queue named after it.
    assert sorted(rows["instance_type"]) == sorted(TYPE_QUEUES)
    assert set(rows["status"]) == {"ok"}
