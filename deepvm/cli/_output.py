"""What commands print: aligned text tables, JSON (NaN as null), number words and
progress lines on stderr (silenced by -q). Below every other module of the CLI."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "QUIET",
    "dollars_text",
    "fmt",
    "hours_text",
    "json_safe",
    "json_text",
    "money_text",
    "print_json",
    "progress",
    "stepwise_progress",
    "table_text",
    "tflops",
]

QUIET = False  # -q: no progress lines on stderr (set once by main)


def table_text(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    """A plain aligned text table; ``columns`` are (key, header)."""
    cells = [[fmt(r.get(k)) for k, _ in columns] for r in rows]
    widths = [max([len(h)] + [len(c[n]) for c in cells]) for n, (_, h) in enumerate(columns)]
    lines = ["  ".join(h.ljust(w) for (_, h), w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


def fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def tflops(x: float) -> str:
    return f"{x / 1e12:.2f}"


def print_json(obj: Any) -> None:
    """One JSON object; NaN and infinities become null (they are not JSON)."""
    sys.stdout.write(json_text(obj))


def json_text(obj: Any) -> str:
    return json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n"


def json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def hours_text(value: float) -> str:
    return "-" if value != value else f"{value:.3g} h"  # NaN: no work given


def dollars_text(value: float) -> str:
    return "-" if value != value else f"${value:,.2f}"


def progress(message: str) -> None:
    """A progress line on stderr (long work), unless -q."""
    if not QUIET:
        print(message, file=sys.stderr, flush=True)


def stepwise_progress(
    after_s: float = 1.0,
    every_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    *,
    terminal_only: bool = True,
) -> Callable[[str], None]:
    """Progress lines for work told as "step: how far" (deepvm.planner.fleet.plan's
    ``Progress``): none in its first ``after_s`` (quick work prints nothing), then
    each new step's first line and a line of the same step every ``every_s``. Only
    where stderr is a terminal, as git shows its progress: a log or a pipe (and a
    one-line error after long work) keeps to the lines that say what was done."""
    if terminal_only and not sys.stderr.isatty():
        return lambda _message: None
    began = clock()
    last_step, last_at = "", -math.inf

    def tell(message: str) -> None:
        nonlocal last_step, last_at
        now = clock()
        step = message.split(":", 1)[0]
        if now - began < after_s or (step == last_step and now - last_at < every_s):
            return
        last_step, last_at = step, now
        progress(message)

    return tell


def money_text(usd_per_hour: float | None) -> str | None:
    return None if usd_per_hour is None else f"{usd_per_hour:.4f}"
