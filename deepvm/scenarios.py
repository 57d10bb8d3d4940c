"""Registered training jobs (``datasets/scenarios.toml``): what the nightly run re-plans."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from deepvm._datasets import dataset_path
from deepvm.errors import InputError
from deepvm.names import MAX_NAME_LENGTH, file_safe
from deepvm.planner.objectives import OBJECTIVES
from deepvm.planner.policies import POLICIES
from deepvm.workloads import WORKLOADS

REQUIRED = ("name", "workload", "budget")
OPTIONAL = (
    "checkpoint_gb",
    "checkpoint_versions",
    "objective",
    "policies",
    "top",
    "deadline_hours",
    "total_work",
)


# The library's parameter names as the scenarios file (and the flows) spell them.
_KEYS = {"work_flops": "total_work", "deadline_h": "deadline_hours"}


def scenario_key(param: str) -> str:
    """A library parameter (``deadline_h``) by its scenarios-file key (``deadline_hours``)."""
    return _KEYS.get(param, param)


@dataclass(frozen=True)
class Scenario:
    name: str
    workload: str
    budget: float
    checkpoint_gb: float | None = None
    checkpoint_versions: int = 2
    objective: str = "throughput"
    policies: tuple[str, ...] = ("all",)
    top: int = 3
    # The training run (objective cost needs total_work; deadline_hours is the
    # cost objective's bound on the expected makespan).
    deadline_hours: float | None = None
    total_work: float | None = None


def default_scenarios_path() -> Path:
    return dataset_path("scenarios.toml")


def load_scenarios(path: str | Path | None = None) -> list[Scenario]:
    """Read and validate the jobs; errors name the file and the entry."""
    source = Path(path) if path is not None else default_scenarios_path()
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
    seen: dict[str, str] = {}  # file-safe name -> name: each job names a store file
    out = []
    for k, job in enumerate(jobs, 1):
        label = f"scenarios file {str(source)!r}: job {k}"
        if isinstance(job, dict) and isinstance(job.get("name"), str):
            label += f" ({job['name']})"
        out.append(_scenario(job, label))
        name = out[-1].name
        other = seen.setdefault(file_safe(name), name)
        if other == name and len(seen) < len(out):
            raise InputError(f"{label}: duplicate name {name!r}")
        if other != name:
            raise InputError(
                f"{label}: names {other!r} and {name!r} are the same once made file-safe "
                "(they would share one store file); rename one"
            )
    return out


def _number(job: dict[str, object], key: str, label: str, *, positive: bool) -> float | None:
    value = job.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{label}: {key}={value!r} is not a number")
    if (value <= 0) if positive else (value < 0):
        raise InputError(f"{label}: {key}={value!r} must be {'> 0' if positive else '>= 0'}")
    return float(value)


def _scenario(job: object, label: str) -> Scenario:
    if not isinstance(job, dict):
        raise InputError(f"{label}: must be a table of keys")
    missing = [k for k in REQUIRED if k not in job]
    if missing:
        raise InputError(f"{label}: missing {', '.join(missing)}")
    unknown = sorted(set(job) - set(REQUIRED) - set(OPTIONAL))
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
    if not isinstance(workload, str) or workload not in WORKLOADS:
        raise InputError(
            f"{label}: unknown workload {workload!r}; known: {', '.join(sorted(WORKLOADS))}"
        )
    objective = job.get("objective", "throughput")
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise InputError(f"{label}: objective {objective!r} must be one of {', '.join(OBJECTIVES)}")
    policies = job.get("policies", ["all"])
    policies = [policies] if isinstance(policies, str) else policies
    known = ", ".join((*POLICIES, "all"))
    if not isinstance(policies, list) or not policies:
        raise InputError(
            f"{label}: policies={policies!r} must be a policy name or a list of them ({known})"
        )
    bad = [p for p in policies if p not in (*POLICIES, "all")]
    if bad:
        raise InputError(f"{label}: unknown policy {bad[0]!r}; known: {known}")
    top = job.get("top", 3)
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise InputError(f"{label}: top={top!r} must be an integer >= 1")
    versions = job.get("checkpoint_versions", 2)
    if not isinstance(versions, int) or isinstance(versions, bool) or versions < 1:
        raise InputError(f"{label}: checkpoint_versions={versions!r} must be an integer >= 1")
    budget = _number(job, "budget", label, positive=True)
    assert budget is not None
    work = _number(job, "total_work", label, positive=True)
    deadline = _number(job, "deadline_hours", label, positive=True)
    if objective == "cost" and work is None:
        raise InputError(f"{label}: objective cost needs total_work (FLOPs)")
    if deadline is not None and objective != "cost":
        raise InputError(f"{label}: deadline_hours applies to objective cost")
    return Scenario(
        name=name.strip(),
        workload=str(workload),
        budget=budget,
        checkpoint_gb=_number(job, "checkpoint_gb", label, positive=False),
        checkpoint_versions=versions,
        objective=str(objective),
        policies=tuple(policies),
        top=top,
        deadline_hours=deadline,
        total_work=work,
    )
