"""The flows' forms: the field types the Prefect UI renders and checks before a
run starts, and the names errors use for the library's parameters."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field

from deepvm.base.config import ALL_POLICIES, DEFAULT_WORKLOAD, MAX_HOURLY_COST, POLICIES
from deepvm.base.errors import ParameterError
from deepvm.performance.workloads import WorkloadName, parse_work
from deepvm.records.jobs import OLD_KEYS

__all__ = [
    "DEFAULT_WORKLOAD_CHOICE",
    "EVERY_POLICY",
    "FLOW_NAMES",
    "MAX_RANK",
    "ONE_TYPE",
    "PETA",
    "DateText",
    "FleetTimeLimit",
    "InstanceTypeName",
    "MinGain",
    "NightlySource",
    "OneType",
    "PolicyName",
    "PriceSource",
    "RegionName",
    "SkyPilotCsv",
    "SpotAdvisorUrl",
    "StoreUri",
    "TeamBudget",
    "WorkloadsPath",
    "as_text",
    "flow_name",
    "old_names",
    "pflop",
]


class OneType:
    """Annotated metadata: an optional number's JSON schema as one type,
    ``{"type": ["number", "null"]}`` with its bounds, not ``anyOf`` a bounded number
    or null. The UI's form then refuses a bad value by the bound it breaks ("-5 is
    less than or equal to the minimum of 0"), not "-5 is not valid under any of the
    given schemas"."""

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> Any:
        schema = handler(core_schema)
        options = schema.get("anyOf")
        if isinstance(options, list) and len(options) == 2:
            values = [o for o in options if o.get("type") != "null"]
            if len(values) == 1 and isinstance(values[0].get("type"), str):
                del schema["anyOf"]
                schema.update(values[0])
                schema["type"] = [values[0]["type"], "null"]
        return schema


ONE_TYPE = OneType()

MAX_RANK = 100  # a night keeps a job's top few: a rank past this is a typo (2e18 -> 218)


def as_text(value: object) -> object:
    """A number given to a text field, as its text (``2000.0`` -> ``"2000.0"``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return value


def pflop(text: str) -> float:
    """``work_pflop``: a bare number is PFLOP; with a unit, the unit's (read whole)."""
    bare = text.strip()
    try:
        return parse_work(f"{float(bare)!r} PFLOP", "work_pflop")
    except ValueError:
        return parse_work(bare, "work_pflop")


def old_names(**pairs: tuple[Any, Any]) -> tuple[Any, ...]:
    """Each field's value from its name or its old name (``work_flops=(value,
    value_by_old_name)``), in the order given; both at once is refused."""
    old_of = {new: old for old, new in OLD_KEYS.items()}
    values = []
    for new, (value, old_value) in pairs.items():
        if value is not None and old_value is not None:
            raise ParameterError(
                new, value, f"and {old_of[new]} (its old name) are both given: give {new} only"
            )
        values.append(old_value if value is None else value)
    return tuple(values)


StoreUri = Annotated[
    str | None,
    Field(description="store URI; default $DEEPVM_STORE, else ./deepvm-store on the worker"),
    ONE_TYPE,
]
# The choices the UI's form offers for policies.
PolicyName = StrEnum("PolicyName", {str(p): str(p) for p in (ALL_POLICIES, *POLICIES)})  # type: ignore[misc]
DateText = Annotated[
    str | None,
    Field(
        pattern=r"^\d{4}-\d{2}-\d{2}$",
        description="snapshot date, YYYY-MM-DD (default: today, UTC)",
    ),
    ONE_TYPE,
]
TeamBudget = Annotated[
    float | None,
    Field(
        ge=0,
        le=MAX_HOURLY_COST,
        allow_inf_nan=False,
        description="the most all jobs' clusters may cost together, USD/h (default: none)",
    ),
    ONE_TYPE,
]
FleetTimeLimit = Annotated[
    float,
    Field(
        gt=0,
        allow_inf_nan=False,
        description="the fleet solve's time limit, seconds: past it, the best plan so far "
        "(a few hundred jobs, or jobs that all differ, may need minutes for a proof)",
    ),
]
MinGain = Annotated[
    float,
    Field(
        ge=0,
        le=1,
        description="a running job moves only when the move saves more than this share of its "
        "remaining time or cost",
    ),
]
WorkloadsPath = Annotated[
    str | None,
    Field(description="your own workloads (CSV or TOML), which the jobs may name"),
    ONE_TYPE,
]
PriceSource = Annotated[
    str,
    Field(
        description="snapshot, aws, gcp, azure, skypilot (give skypilot_csv), a catalog file path, "
        "or (refresh-prices) spot-advisor: AWS's Spot Instance Advisor feed"
    ),
]
NightlySource = Annotated[
    str | None,
    Field(
        description="snapshot, aws, gcp, azure, skypilot (give skypilot_csv) or a catalog file "
        "path; a source that prices some clouds only keeps the others' newest rows (default: "
        "the date's own refresh, if refresh-prices made one, else the shipped snapshot)"
    ),
    ONE_TYPE,
]
SpotAdvisorUrl = Annotated[
    str | None,
    Field(
        description="AWS's Spot Instance Advisor feed (its public URL, or a saved copy on the "
        "worker): refresh-prices with source spot-advisor reads it (default: the public "
        "URL); the nightly fetches it before planning when given"
    ),
    ONE_TYPE,
]
SkyPilotCsv = Annotated[
    str | None,
    Field(
        description="price_source skypilot: the SkyPilot catalog CSV (vms.csv), a path on "
        "the worker or an http(s) URL"
    ),
    ONE_TYPE,
]
# A region as the clouds spell them (us-east-1, eastus, us-central1): checked in the
# form, so an empty or mistyped entry fails before the run starts.
RegionName = Annotated[str, Field(pattern=r"^[a-z]+[a-z0-9-]*[a-z0-9]$", max_length=40)]
# An instance type, which is also a work queue's name (g5.xlarge, Standard_NC24ads_A100_v4).
InstanceTypeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=120)]
PETA = 1e15
DEFAULT_WORKLOAD_CHOICE = WorkloadName(DEFAULT_WORKLOAD)
EVERY_POLICY = PolicyName(ALL_POLICIES)

# The library's parameter names as these flows call them (errors name the field).
FLOW_NAMES = {
    "timeout_s": "price_timeout_s",
    "workloads": "workloads_path",
    "source": "price_source",
    "scenarios": "scenarios_path",
    "regions": "price_regions",
    "time_limit_s": "fleet_time_limit_s",
}


def flow_name(param: str) -> str:
    return FLOW_NAMES.get(param, param)
