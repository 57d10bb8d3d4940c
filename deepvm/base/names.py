"""Names that become file names in the store (scenarios, instance types, price
sources, workloads) and the dates that become partition values: checked once,
here, without importing the store (and pyarrow)."""

from __future__ import annotations

import datetime as dt
import re

from deepvm.base.config import MAX_NAME_LENGTH
from deepvm.base.errors import InputError, ParameterError

__all__ = ["check_date", "check_name"]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check_name(name: str, what: str) -> str:
    """A writer's name in the store (a scenario, a price source): not empty, not
    over-long."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{what} name {name!r} must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise InputError(
            f"{what} name {name[:40]!r}... is {len(name)} characters long; "
            f"use at most {MAX_NAME_LENGTH}"
        )
    return name


def check_date(value: str, what: str = "date") -> str:
    """A YYYY-MM-DD date (a partition value; anything else would sort wrongly)."""
    if isinstance(value, str) and _DATE.match(value):
        try:
            dt.date.fromisoformat(value)
            return value
        except ValueError:
            pass
    raise ParameterError(what, value, "must be a date as YYYY-MM-DD, e.g. 2026-12-03")
