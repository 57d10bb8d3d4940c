"""Listings: --format table|json|csv and --columns, for every command that
prints rows (one place, so every command checks them alike)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from deepvm.base.errors import DeepvmError
from deepvm.cli._output import json_safe, table_text

__all__ = ["FORMATS", "add_format", "output_format", "print_listing", "render_listing"]

FORMATS = ("table", "json", "csv")


def add_format(p: argparse.ArgumentParser, *, json_help: str = "print one JSON object") -> None:
    """--json, --format and --columns for a command that lists rows."""
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", help=f"{json_help} (the same as --format json)")
    g.add_argument(
        "--format",
        choices=FORMATS,
        help="table (default), json, or csv (one row per line, every field; "
        "pandas.read_csv reads it)",
    )
    g.add_argument(
        "--columns",
        metavar="NAME,NAME",
        help="the columns of the table or CSV, in order (default: a narrow table, or every "
        "field in CSV); a name it does not know lists the ones it does",
    )


def output_format(args: argparse.Namespace) -> str:
    """table, json or csv: --json is --format json."""
    chosen = getattr(args, "format", None)
    if getattr(args, "json", False):
        if chosen not in (None, "json"):
            raise DeepvmError(f"--json and --format {chosen} ask for two formats: give one")
        chosen = "json"
    if chosen == "json" and getattr(args, "columns", None) is not None:
        raise DeepvmError(
            f"--columns {args.columns!r} picks the columns of a table or CSV; the JSON has "
            "every field: drop --columns, or use --format csv"
        )
    return chosen or "table"


def print_listing(
    args: argparse.Namespace,
    rows: Sequence[dict[str, Any]],
    table_columns: Sequence[tuple[str, str]],
    csv_keys: Sequence[str],
    *,
    header: str | None = None,
) -> None:
    """Print ``render_listing``."""
    sys.stdout.write(render_listing(args, rows, table_columns, csv_keys, header=header))


def render_listing(
    args: argparse.Namespace,
    rows: Sequence[dict[str, Any]],
    table_columns: Sequence[tuple[str, str]],
    csv_keys: Sequence[str],
    *,
    header: str | None = None,
) -> str:
    """``rows`` as an aligned table (``table_columns``: key and header) or as CSV
    (``csv_keys``, the raw fields); --columns picks any of the rows' keys instead.
    ``header``: a line above the table (not the CSV). Rendered whole, so that a
    command checks its options (a bad --columns) before it writes or prints."""
    import io

    fmt = output_format(args)
    known = list(dict.fromkeys([*csv_keys, *dict(table_columns), *(k for r in rows for k in r)]))
    picked = _picked_columns(getattr(args, "columns", None), known)
    out = io.StringIO()
    if header is not None and fmt == "table":
        out.write(header + "\n")
    if fmt == "csv":
        import csv

        keys = picked or list(csv_keys)
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(keys)
        for r in rows:
            writer.writerow([_csv_cell(r.get(k)) for k in keys])
        return out.getvalue()
    columns = [(k, k) for k in picked] if picked else list(table_columns)  # as the user named them
    out.write(table_text(list(rows), columns) + "\n")
    return out.getvalue()


def _picked_columns(text: str | None, known: Sequence[str]) -> list[str]:
    if text is None:
        return []
    picked = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in picked if c not in known]
    if unknown or not picked:
        raise DeepvmError(
            f"--columns {text!r}: {', '.join(unknown) or 'no column'} is not a column here; "
            f"choose from {', '.join(known)}"
        )
    return picked


def _csv_cell(value: Any) -> Any:
    """CSV cells: numbers as they are, nothing for None and NaN, nested values as JSON."""
    value = json_safe(value)
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value
