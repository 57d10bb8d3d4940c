"""Registered training jobs (``datasets/scenarios.toml``): what the nightly run re-plans."""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Mapping
from pathlib import Path

from deepvm.base.config import JOB_OPTIONS, MAX_HOURLY_COST, MAX_NAME_LENGTH, JobSpec, Objective
from deepvm.base.datasets import dataset_path
from deepvm.base.errors import InputError, ParameterError
from deepvm.model.cluster import parse_words
from deepvm.performance.workloads import WORKLOADS, Workload
from deepvm.planner.fleet.types import PRIORITY_RANGE, RegisteredJob, Running

__all__ = [
    "FLEET_KEYS",
    "OLD_KEYS",
    "OPTIONAL",
    "REQUIRED",
    "RETIRED_KEYS",
    "default_jobs_path",
    "load_jobs",
    "log",
]

log = logging.getLogger("deepvm")

REQUIRED = ("name", "workload", "budget")
# Every job option by its JobSpec name: adding a JobSpec field adds a key.
OPTIONAL = tuple(f for f in JOB_OPTIONS if f != "workload")
# Names the file once used for a field: still read (with a warning to rename them).
OLD_KEYS = {"total_work": "work_flops", "deadline_hours": "deadline_h"}
# How the job sits in the team's fleet (deepvm.planner.fleet.plan): its weight, and
# whether it runs at the same time as the others (sharing their quotas).
FLEET_KEYS = ("priority", "fleet", "keep_running", "running")
# Keys the file once took that no longer do anything: read, ignored, logged.
RETIRED_KEYS = {"time_limit_s": "one job is planned exactly: no solver time limit applies"}


def default_jobs_path() -> Path:
    return dataset_path("scenarios.toml")


def load_jobs(
    path: str | Path | None = None, workloads: Mapping[str, Workload] | None = None
) -> list[RegisteredJob]:
    """Read and validate the jobs; errors name the file and the entry. ``workloads``:
    the names a job may use (default: the sample models; with --workloads, also the
    user's)."""
    registry = workloads if workloads is not None else WORKLOADS
    source = Path(path) if path is not None else default_jobs_path()
    if source.is_dir():
        raise InputError(f"scenarios file {str(source)!r} is a folder: give the TOML file")
    try:
        data = tomllib.loads(source.read_text())
    except FileNotFoundError:
        raise InputError(f"scenarios file {str(source)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"scenarios file {str(source)!r} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"scenarios file {str(source)!r} is not valid TOML: {exc}") from None
    jobs = data.get("job")
    if not isinstance(jobs, list) or not jobs:
        raise InputError(f"scenarios file {str(source)!r} has no [[job]] entries")
    seen: set[str] = set()
    out = []
    for k, job in enumerate(jobs, 1):
        label = f"scenarios file {str(source)!r}: job {k}"
        if isinstance(job, dict) and isinstance(job.get("name"), str):
            label += f" ({job['name']})"
        out.append(_scenario(job, label, registry))
        name = out[-1].name
        if name in seen:
            raise InputError(f"{label}: duplicate name {name!r}")
        seen.add(name)
    return out


def _scenario(job: object, label: str, registry: Mapping[str, Workload]) -> RegisteredJob:
    if not isinstance(job, dict):
        raise InputError(f"{label}: must be a table of keys")
    missing = [k for k in REQUIRED if k not in job]
    if missing:
        raise InputError(f"{label}: missing {', '.join(missing)}")
    for key in sorted(set(job) & set(RETIRED_KEYS)):
        log.warning("%s: %s is ignored (%s); remove it", label, key, RETIRED_KEYS[key])
    for old in sorted(set(job) & set(OLD_KEYS)):
        new = OLD_KEYS[old]
        if new in job:
            raise InputError(f"{label}: {old} is the old name of {new}; give only {new}")
        log.warning("%s: %s is the old name of %s; it is still read, rename it", label, old, new)
    known = set(REQUIRED) | set(OPTIONAL) | set(OLD_KEYS) | set(FLEET_KEYS) | set(RETIRED_KEYS)
    unknown = sorted(set(job) - known)
    if unknown:
        raise InputError(f"{label}: unknown key(s) {', '.join(unknown)}")
    name = job["name"]
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{label}: name must be a non-empty string")
    if len(name.strip()) > MAX_NAME_LENGTH:
        raise InputError(
            f"{label}: name is {len(name)} characters long; use at most {MAX_NAME_LENGTH}"
        )
    workload = job["workload"]
    if not isinstance(workload, str) or workload not in registry:
        raise InputError(
            f"{label}: unknown workload {workload!r}; known: {', '.join(sorted(registry))} "
            "(declare your own in a workloads file: {workloads})",
            names=("workloads",),
        )
    budget = job["budget"]
    if (
        isinstance(budget, bool)
        or not isinstance(budget, int | float)
        or not 0 < budget <= MAX_HOURLY_COST
    ):
        raise InputError(
            f"{label}: budget={budget!r} must be a positive number of USD per hour, at most "
            f"{MAX_HOURLY_COST:g}"
        )
    priority = job.get("priority", 1.0)
    low, high = PRIORITY_RANGE
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int | float)
        or not (low <= priority <= high)
    ):
        raise InputError(
            f"{label}: priority={priority!r} must be a number from {low:g} to {high:g} "
            "(priorities weigh jobs against each other)"
        )
    shared = job.get("fleet", True)
    if not isinstance(shared, bool):
        raise InputError(f"{label}: fleet={shared!r} must be true or false")
    keep = job.get("keep_running", False)
    if not isinstance(keep, bool):
        raise InputError(f"{label}: keep_running={keep!r} must be true or false")
    running = None
    if "running" in job:  # the cluster it runs on, in deepvm's words
        try:
            running = Running(parse_words(str(job["running"])))
        except ValueError as exc:
            raise InputError(f"{label}: running: {exc}") from None
    options: dict[str, object] = {
        OLD_KEYS.get(str(k), str(k)): v
        for k, v in job.items()
        if k not in REQUIRED and k not in FLEET_KEYS and k not in RETIRED_KEYS
    }
    policies = options.get("policies", ("all",))  # a registered job shows every policy
    options["policies"] = tuple(policies) if isinstance(policies, list | tuple) else policies
    for where in ("clouds", "regions"):  # TOML lists: the spec's tuples
        value = options.get(where)
        if isinstance(value, list):
            options[where] = tuple(value)
    try:
        spec = JobSpec(workload=workload, **options)  # type: ignore[arg-type]
    except ParameterError as exc:  # the file's keys are the spec's names
        raise InputError(f"{label}: {exc}") from None
    if spec.objective == Objective.COST and spec.work_flops is None:
        raise InputError(f"{label}: objective cost needs work_flops (training FLOPs)")
    return RegisteredJob(
        name.strip(), float(budget), spec, float(priority), shared=shared, keep_running=keep,
        running=running,
    )  # fmt: skip
