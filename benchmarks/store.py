"""Store benchmark (run by hand: `python benchmarks/store.py`; not in CI).

A `deepvm nightly` on a fresh store against the same nightly on a store that
holds a year of nights (365 dates fabricated from the first night's files of
every dated table, each file rewritten with its own date), each in a fresh
process, side by side: CPU seconds, wall seconds and peak RSS of the nightly
process, as ratios (target: within 1.3x), on the year as daily files
(`--no-compact`) and after `deepvm store compact`. Then the README's DuckDB
query over the year's recommendations before and after compaction (the same
rows; one file per job per day against one file per month).
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
import pyarrow as pa
import pyarrow.parquet as pq

DATED = ("prices", "flopp", "recommendations", "fleet")


def _nightly(store: Path, date: str) -> list[str]:
    return [sys.executable, "-m", "deepvm", "nightly", "--store", str(store), "--date", date,
            "--no-compact"]  # fmt: skip


def run_nightly(store: Path, date: str) -> tuple[float, float, float]:
    """CPU s, wall s and peak RSS (MiB) of one `deepvm nightly` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(_nightly(store, date), check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, after.ru_maxrss / 1024  # children's peak: the largest so far


def fabricate_year(store: Path, first: dt.date, nights: int) -> None:
    """The first night's files of every dated table, for each night before it,
    with that night's date in their date column and their file name."""
    day1 = first.isoformat()
    for table in DATED:
        for source in store.glob(f"{table}/snapshot_month=*/part-{day1}-*.parquet"):
            data = pq.read_table(source)
            meta = data.schema.metadata
            index = data.schema.get_field_index("snapshot_date")
            for k in range(1, nights):
                day = first - dt.timedelta(days=k)
                rows = data.set_column(
                    index, "snapshot_date", pa.array([day] * len(data), pa.date32())
                ).replace_schema_metadata(meta)
                target = store / table / f"snapshot_month={day.isoformat()[:7]}"
                target.mkdir(exist_ok=True)
                pq.write_table(rows, target / source.name.replace(day1, day.isoformat()))


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
        query = (
            f"select snapshot_date, scenario, hourly_cost from "
            f"'{old}/recommendations/**/*.parquet' where policy = 'deepvm' and rank = 1"
        )
        _compare(fresh, old, today.isoformat(), args.runs, "daily files")
        daily = _query(query)  # after the nightlies above wrote today's rows
        subprocess.run(
            [sys.executable, "-m", "deepvm", "store", "compact", "--store", str(old),
             "--before", today.isoformat()],
            check=True, capture_output=True,
        )  # fmt: skip
        files = sum(1 for _ in old.rglob("*.parquet"))
        print(f"after `deepvm store compact`: {files} Parquet files")
        monthly = _query(query)
        assert daily[0] == monthly[0], "compaction changed the rows the query sees"
        _compare(fresh, old, today.isoformat(), args.runs, "compacted")
        print(
            f"DuckDB over a year of recommendations ({daily[0]} rows): daily files "
            f"{daily[1]:.3f} s, compacted {monthly[1]:.3f} s -> {daily[1] / monthly[1]:.1f}x faster"
        )


def _query(query: str, runs: int = 3) -> tuple[int, float]:
    """Rows and best-of-``runs`` seconds of a DuckDB query."""
    best, n = float("inf"), 0
    for _ in range(runs):
        start = time.perf_counter()
        n = len(duckdb.sql(query).df())
        best = min(best, time.perf_counter() - start)
    return n, best


def _compare(fresh: Path, old: Path, date: str, runs: int, label: str) -> None:
    rows = []
    for k in range(runs):  # alternate, so drift on a shared machine hits both
        shutil.rmtree(fresh, ignore_errors=True)
        f = run_nightly(fresh, date)
        o = run_nightly(old, date)
        rows.append((f, o))
        print(
            f"  run {k + 1}: fresh cpu {f[0]:.2f} s wall {f[1]:.2f} s; "
            f"year-old ({label}) cpu {o[0]:.2f} s wall {o[1]:.2f} s"
        )
    best_f = [min(r[0][i] for r in rows) for i in range(2)]
    best_o = [min(r[1][i] for r in rows) for i in range(2)]
    print(
        f"nightly on a year of {label}, best of {runs}: CPU {best_f[0]:.2f} s vs "
        f"{best_o[0]:.2f} s -> {best_o[0] / best_f[0]:.2f}x; wall {best_f[1]:.2f} s vs "
        f"{best_o[1]:.2f} s -> {best_o[1] / best_f[1]:.2f}x (target <= 1.3x)"
    )
    peak_fresh = _peak(fresh, date)
    peak_old = _peak(old, date)
    print(
        f"peak RSS ({label}): {peak_fresh:.0f} MiB vs {peak_old:.0f} MiB -> "
        f"{peak_old / peak_fresh:.2f}x (target <= 1.3x)"
    )


def _peak(store: Path, date: str) -> float:
    """Peak RSS of one nightly in a process of its own (getrusage's children peak is
    the largest of all children so far, so each is measured alone)."""
    code = (
        "import resource, subprocess, sys; "
        f"subprocess.run({_nightly(store, date)!r}, check=True, capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


if __name__ == "__main__":
    main()
