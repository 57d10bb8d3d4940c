"""Measuring as Prefect flows: a benchmark on the worker's machine, and the
benchmarks fanned out over a fleet of workers."""

from __future__ import annotations

from typing import Annotated, Any, cast

from prefect import flow, get_run_logger, task
from pydantic import Field

from deepvm.performance.workloads import WorkloadName
from flows.forms import (
    DEFAULT_WORKLOAD_CHOICE,
    ONE_TYPE,
    InstanceTypeName,
    StoreUri,
)
from flows.runs import refusals_fail_in_one_line, store_of
from flows.tasks import (
    compute_flopp_task,
    refit_task,
)

__all__ = ["benchmark", "benchmark_fleet"]


@flow(name="benchmark", log_prints=True)
@refusals_fail_in_one_line
def benchmark(
    workloads: Annotated[
        list[WorkloadName], Field(min_length=1, description="sample workloads to measure")
    ] = [DEFAULT_WORKLOAD_CHOICE],  # noqa: B006
    instance_type: Annotated[
        InstanceTypeName | None,
        Field(description="record as this type (default: cloud metadata)"),
        ONE_TYPE,
    ] = None,
    store: StoreUri = None,
) -> list[dict[str, object]]:
    """Measure the machine this flow runs on (its work pool's worker).

    Args:
        workloads: sample workloads to measure.
        instance_type: record as this instance type (default: cloud metadata).
        store: store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker.
    """
    from deepvm.bench.run import benchmark_frame, identify, run_benchmarks
    from deepvm.records.results import write_benchmarks

    opened = store_of(store).ensure_writable()  # before minutes of measuring
    hardware = identify(instance_type)
    names = [str(w) for w in workloads]
    results = task(name="run-benchmarks")(run_benchmarks)(names, progress=False)
    frame = benchmark_frame(results, hardware)
    write_benchmarks(frame, opened)
    return frame.to_dict("records")


@flow(name="benchmark-fleet", log_prints=True)
@refusals_fail_in_one_line
def benchmark_fleet(
    instance_types: Annotated[
        list[InstanceTypeName],
        Field(
            min_length=1,
            description="instance types to measure: each on its work queue, named after it",
        ),
    ],
    workloads: Annotated[
        list[WorkloadName], Field(min_length=1, description="sample workloads to measure")
    ] = [DEFAULT_WORKLOAD_CHOICE],  # noqa: B006
    store: StoreUri = None,
    deployment: Annotated[
        str, Field(description="the benchmark deployment to run, flow/deployment")
    ] = "benchmark/benchmark",
    timeout_s: Annotated[
        float, Field(gt=0, le=86400, description="how long to wait for every benchmark, s")
    ] = 3600.0,
) -> dict[str, object]:
    """Measure each instance type on a machine of that type: run the benchmark
    deployment once per type on the work queue named after it (where the workers of
    machines of that type listen), wait for them all, then refit the overhead models
    and recompute FLOPP.

    Args:
        instance_types: instance types to measure; each on its work queue, named after it.
        workloads: sample workloads to measure.
        store: store URI shared by every worker; default $DEEPVM_STORE.
        deployment: the benchmark deployment to run, flow/deployment.
        timeout_s: how long to wait for every benchmark, seconds.
    """
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    logger = get_run_logger()
    opened = store_of(store).ensure_writable()
    parameters: dict[str, Any] = {"workloads": [str(w) for w in workloads], "store": opened.uri}
    runs = {
        itype: cast(
            FlowRun,
            run_deployment(deployment, parameters=parameters, work_queue_name=itype, timeout=0),
        ).id
        for itype in instance_types
    }
    logger.info("benchmarks queued: %s", ", ".join(runs))
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    with get_client(sync_client=True) as client:
        while len(states) < len(runs) and time.monotonic() < deadline:
            for itype, run_id in runs.items():
                state = client.read_flow_run(run_id).state
                if state is not None and state.is_final():
                    states[itype] = state.type.value
            time.sleep(1)
    missing = [t for t in runs if t not in states]
    failed = {t: s for t, s in states.items() if s != "COMPLETED"}
    refitted = refit_task(opened)
    catalog_workloads = [str(w) for w in workloads]
    flopp_files = (
        compute_flopp_task(opened, catalog_workloads, None) if opened.has("prices") else []
    )
    if missing:
        logger.error("no result within %.0f s from: %s", timeout_s, ", ".join(missing))
    for itype, ended in failed.items():
        logger.error("benchmark on %s ended %s", itype, ended)
    if missing or failed:
        raise RuntimeError(
            f"benchmarks not completed: {', '.join([*missing, *failed])} (is a worker "
            "listening on each type's queue?)"
        )
    return {"measured": list(runs), "refitted": refitted, "flopp_files": len(flopp_files)}
