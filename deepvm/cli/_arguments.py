"""Argument types every command shares: numbers within bounds, dates, names and
paths, the caps on what one command may ask for, the library's parameter names as
flags, and the parser whose usage errors are one line (exit status 2)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any, NoReturn

from deepvm.base.config import (
    MAX_CHECKPOINT_GB,
    MAX_HOURLY_COST,
    MAX_NAME_LENGTH,
    MAX_NODES_CAP,
    MAX_RESTART_S,
    MAX_WORK_FLOPS,
)
from deepvm.base.errors import DeepvmError

__all__ = [
    "BUDGET",
    "CHECKPOINT_GB",
    "EXIT_BAD_INPUT",
    "FLAG_NAMES",
    "MAX_LOCAL_RANKS",
    "MAX_SIMULATED_RUNS",
    "MAX_STEPS",
    "MAX_TIMEOUT_S",
    "MIN_GAIN",
    "NODE_COUNT",
    "NON_NEGATIVE",
    "POSITIVE",
    "RESTART_S",
    "SMALL_COUNT",
    "TEAM_BUDGET",
    "WORK_FLOPS",
    "Parser",
    "date_text",
    "flag_name",
    "join_negative_values",
    "name_text",
    "number",
    "path_text",
]

EXIT_BAD_INPUT = 2

# Caps on what one command may ask for (a request past them is a mistake, and
# would run for hours or exhaust memory).
MAX_SIMULATED_RUNS = 1_000_000

MAX_STEPS = 100_000

MAX_TIMEOUT_S = 3600.0

MAX_LOCAL_RANKS = 64

# The library's parameter names as the CLI spells them (errors name the flag).
FLAG_NAMES = {
    "policies": "--policy",
    "work_flops": "--work",
    "time_limit_s": "--time-limit",
    "snapshot_date": "--date",
    "timeout_s": "--timeout",
    "team_budget": "--team-budget",
}


def flag_name(param: str) -> str:
    return FLAG_NAMES.get(param, "--" + param.replace("_", "-"))


class Parser(argparse.ArgumentParser):
    """Usage errors as one ``deepvm: error:`` line (exit 2), like every other error."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see '{self.prog} --help')"
        self.exit(EXIT_BAD_INPUT, f"deepvm: error: {message}{hint}\n")


def number(
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    integer: bool = False,
) -> Callable[[str], float]:
    """An argparse type: a finite number within bounds (NaN and inf refused);
    ``integer`` accepts 1e3 but not 1.5."""
    bounds = [
        f"{op} {limit:,.10g}"
        for op, limit in ((">", gt), (">=", ge), ("<", lt), ("<=", le))
        if limit is not None
    ]
    kind = "a whole number" if integer else "a finite number"
    wanted = kind + (" " + " and ".join(bounds) if bounds else "")

    def parse(text: str) -> Any:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        ok = math.isfinite(value) and not (integer and value != int(value))
        ok = ok and (gt is None or value > gt) and (ge is None or value >= ge)
        ok = ok and (lt is None or value < lt) and (le is None or value <= le)
        if not ok:
            raise argparse.ArgumentTypeError(f"{text!r} must be {wanted}")
        return int(value) if integer else value

    return parse


def date_text(text: str) -> str:
    """An argparse type: a YYYY-MM-DD date."""
    from deepvm.base.names import check_date

    try:
        return check_date(text)
    except DeepvmError:
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a date as YYYY-MM-DD, e.g. 2026-12-03"
        ) from None


def name_text(text: str) -> str:
    """An argparse type: a name that becomes a store file name (not blank, not over-long)."""
    if not text.strip() or len(text) > MAX_NAME_LENGTH:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is {len(text)} characters long; use 1 to {MAX_NAME_LENGTH}"
        )
    return text


def path_text(text: str) -> str:
    """An argparse type: a file or folder path, not empty (an empty one would read
    as not given)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is empty: give a path")
    return text


POSITIVE = number(gt=0)

BUDGET = number(gt=0, le=MAX_HOURLY_COST)  # USD/h

TEAM_BUDGET = number(ge=0, le=MAX_HOURLY_COST)  # USD/h: 0 allowed (nothing runs)

WORK_FLOPS = number(gt=0, le=MAX_WORK_FLOPS)

# A running job's least gain to move: a share of the remaining time or cost, 0 to 1.
MIN_GAIN = number(ge=0, le=1)

CHECKPOINT_GB = number(ge=0, le=MAX_CHECKPOINT_GB)

RESTART_S = number(ge=0, le=MAX_RESTART_S)

NON_NEGATIVE = number(ge=0)

SMALL_COUNT = number(ge=1, le=1000, integer=True)  # --top, checkpoint versions

NODE_COUNT = number(ge=1, le=MAX_NODES_CAP, integer=True)


def join_negative_values(argv: list[str]) -> list[str]:
    """``--opt -1e9`` and ``--budgets -1:3:1`` as ``--opt=-1e9``: argparse takes a
    value that starts with '-' for an option unless it looks like a plain number."""
    out: list[str] = []
    for token in argv:
        if (
            out
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and re.match(r"^-(?:[\d.]|inf|nan)", token, re.IGNORECASE)
        ):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out
