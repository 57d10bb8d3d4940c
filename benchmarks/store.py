"""Store benchmark (run by hand: `python benchmarks/store.py`; not in CI).

A `deepvm nightly` on a fresh store against the same nightly on a store that
holds a year of nights (365 dates fabricated by copying the first night's
partitions of every dated table), each in a fresh process, side by side:
CPU seconds, wall seconds and peak RSS of the nightly process, as ratios
(target: within 1.3x). Then the README's DuckDB query over the year's
recommendations, as the store holds them (one file per job per day).
"""

from __future__ import annotations

import argparse
import datetime as dt
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

DATED = ("prices", "flopp", "recommendations", "fleet")


def run_nightly(store: Path, date: str) -> tuple[float, float, float]:
    """CPU s, wall s and peak RSS (MiB) of one `deepvm nightly` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "deepvm", "nightly", "--store", str(store), "--date", date],
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, after.ru_maxrss / 1024  # children's peak: the largest so far


def fabricate_year(store: Path, first: dt.date, nights: int) -> None:
    """Copy the first night's partitions to the nights before it."""
    for table in DATED:
        column = {"prices": "snapshot_date"}.get(table, "snapshot_date")
        source = store / table / f"{column}={first.isoformat()}"
        for k in range(1, nights):
            day = (first - dt.timedelta(days=k)).isoformat()
            shutil.copytree(source, store / table / f"{column}={day}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    today = dt.date(2026, 12, 1)
    with tempfile.TemporaryDirectory() as tmp:
        fresh, old = Path(tmp) / "fresh", Path(tmp) / "old"
        subprocess.run(
            [sys.executable, "-m", "deepvm", "nightly", "--store", str(old), "--date",
             (today - dt.timedelta(days=1)).isoformat()],
            check=True, capture_output=True,
        )  # fmt: skip
        fabricate_year(old, today - dt.timedelta(days=1), args.nights)
        files = sum(1 for _ in old.rglob("*.parquet"))
        print(f"year-old store: {args.nights} nights, {files} Parquet files")
        rows = []
        for k in range(args.runs):  # alternate, so drift on a shared machine hits both
            shutil.rmtree(fresh, ignore_errors=True)
            f = run_nightly(fresh, today.isoformat())
            o = run_nightly(old, today.isoformat())
            rows.append((f, o))
            print(
                f"  run {k + 1}: fresh cpu {f[0]:.2f} s wall {f[1]:.2f} s; "
                f"year-old cpu {o[0]:.2f} s wall {o[1]:.2f} s"
            )
        best_f = [min(r[0][i] for r in rows) for i in range(2)]
        best_o = [min(r[1][i] for r in rows) for i in range(2)]
        print(
            f"nightly, best of {args.runs}: CPU {best_f[0]:.2f} s vs {best_o[0]:.2f} s -> "
            f"{best_o[0] / best_f[0]:.2f}x; wall {best_f[1]:.2f} s vs {best_o[1]:.2f} s -> "
            f"{best_o[1] / best_f[1]:.2f}x (target <= 1.3x)"
        )
        peak_fresh = _peak(fresh, today.isoformat())
        peak_old = _peak(old, today.isoformat())
        print(
            f"peak RSS: {peak_fresh:.0f} MiB vs {peak_old:.0f} MiB -> "
            f"{peak_old / peak_fresh:.2f}x (target <= 1.3x)"
        )
        query = (
            f"select snapshot_date, scenario, hourly_cost from "
            f"'{old}/recommendations/**/*.parquet' where policy = 'deepvm' and rank = 1"
        )
        start = time.perf_counter()
        n = len(duckdb.sql(query).df())
        seconds = time.perf_counter() - start
        print(f"DuckDB over a year of recommendations: {n} rows in {seconds:.2f} s")


def _peak(store: Path, date: str) -> float:
    """Peak RSS of one nightly in a process of its own (getrusage's children peak is
    the largest of all children so far, so each is measured alone)."""
    code = (
        "import resource, subprocess, sys; "
        f"subprocess.run([sys.executable, '-m', 'deepvm', 'nightly', '--store', {str(store)!r}, "
        f"'--date', {date!r}], check=True, capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


if __name__ == "__main__":
    main()
