"""Store benchmark (run by hand: `python benchmarks/store.py`; not in CI).

Three ratios, each measured side by side in one run (docs/ARCHITECTURE.md, "The
store"):

1. `deepvm nightly` on a store that holds a year of nights (365 nightly commits
   fabricated from the first night's rows, each with its own date) against the
   same nightly on a fresh store: CPU, wall and peak RSS of the nightly process
   (target: within 1.3x), with the year as it is and after `deepvm store compact`.
2. DuckDB's count over the year's recommendations (the Delta table joined on the
   commits table, deepvm.store.sql) after compaction against the same count over
   one night (target: within 3x).
3. A whole nightly on a fresh local store with this deepvm (Delta Lake) against
   the deepvm before it (`--baseline-tree`, a checkout of the Parquet-file store,
   by default a git worktree of 061c3e2): the Delta overhead (target: within 1.5x).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE_COMMIT = "061c3e2"  # the last deepvm with the hand-written Parquet store
DATED = ("prices", "flopp", "recommendations", "fleet")


def _nightly(store: Path, date: str) -> list[str]:
    return [sys.executable, "-m", "deepvm", "-q", "nightly", "--store", str(store), "--date", date,
            "--no-compact"]  # fmt: skip


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """CPU s and wall s of one process (run outside the repository, so that `-m
    deepvm` imports the deepvm on the path, not the checkout in the working folder)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def peak_rss(argv: list[str]) -> float:
    """Peak RSS (MiB) of one process, measured alone (getrusage's children peak is
    the largest of all children so far)."""
    code = (
        "import resource, subprocess, sys; "
        f"subprocess.run({argv!r}, check=True, capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def fabricate_year(store: Path, first: dt.date, nights: int) -> None:
    """A commit per night before ``first``, each the first night's rows of every
    dated table with that night's date: what a year of nightlies leaves."""
    from deepvm.schemas import WRITER
    from deepvm.store import TABLES, Store

    view = Store.open(store)
    night = {t: view.rows(t, [first.isoformat()]).to_pandas() for t in DATED}
    for k in range(1, nights):
        day = (first - dt.timedelta(days=k)).isoformat()
        with Store.open(store).transaction(command="nightly") as tx:
            for table, rows in night.items():
                for writer, group in rows.groupby(WRITER):
                    tx.write(table, group[TABLES[table][1].names], partition=day, name=writer)
        if k % 50 == 0:
            print(f"  fabricated {k} nights", flush=True)


def compare(fresh: Path, old: Path, date: str, runs: int, label: str) -> None:
    rows = []
    for k in range(runs):  # alternate, so drift on a shared machine hits both
        shutil.rmtree(fresh, ignore_errors=True)
        f, o = run(_nightly(fresh, date)), run(_nightly(old, date))
        rows.append((f, o))
        print(f"  run {k + 1}: fresh cpu {f[0]:.2f} s wall {f[1]:.2f} s; "
              f"year-old ({label}) cpu {o[0]:.2f} s wall {o[1]:.2f} s")  # fmt: skip
    bf = [min(r[0][i] for r in rows) for i in range(2)]
    bo = [min(r[1][i] for r in rows) for i in range(2)]
    print(f"nightly on a year ({label}), best of {runs}: CPU {bf[0]:.2f} s vs {bo[0]:.2f} s -> "
          f"{bo[0] / bf[0]:.2f}x; wall {bf[1]:.2f} s vs {bo[1]:.2f} s -> {bo[1] / bf[1]:.2f}x "
          "(target <= 1.3x)")  # fmt: skip
    shutil.rmtree(fresh, ignore_errors=True)
    pf, po = peak_rss(_nightly(fresh, date)), peak_rss(_nightly(old, date))
    print(f"peak RSS ({label}): {pf:.0f} MiB vs {po:.0f} MiB -> {po / pf:.2f}x (target <= 1.3x)")


def count_seconds(store: Path, runs: int = 5) -> tuple[int, float]:
    """Rows and best-of-``runs`` seconds of a DuckDB count over the recommendations
    of completed commits (a fresh connection each time, as a downstream reader)."""
    from deepvm.store.sql import duckdb_relation

    best, n = float("inf"), 0
    for _ in range(runs):
        start = time.perf_counter()
        n = duckdb_relation(store, "recommendations").count("*").fetchall()[0][0]
        best = min(best, time.perf_counter() - start)
    return n, best


def baseline_nightly(tree: Path | None, runs: int) -> None:
    made = tree is None
    with tempfile.TemporaryDirectory() as tmp:
        if tree is None:
            tree = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                            BASELINE_COMMIT], check=True, capture_output=True)  # fmt: skip
        try:
            env_old = {**os.environ, "PYTHONPATH": str(tree)}
            rows = []
            for k in range(runs):
                new, old = Path(tmp) / f"new{k}", Path(tmp) / f"old{k}"
                n = run(_nightly(new, "2026-12-01"))
                o = run(_nightly(old, "2026-12-01"), env_old)
                rows.append((n, o))
                if not any(new.rglob("_delta_log")) or any(old.rglob("_delta_log")):
                    raise SystemExit("the baseline run did not use the baseline's deepvm")
                print(
                    f"  run {k + 1}: Delta wall {n[1]:.2f} s cpu {n[0]:.2f} s; "
                    f"Parquet files ({BASELINE_COMMIT}) wall {o[1]:.2f} s cpu {o[0]:.2f} s"
                )
            bn = [min(r[0][i] for r in rows) for i in range(2)]
            bo = [min(r[1][i] for r in rows) for i in range(2)]
            print(f"whole nightly on a fresh local store, best of {runs}: wall {bn[1]:.2f} s vs "
                  f"{bo[1]:.2f} s -> {bn[1] / bo[1]:.2f}x; CPU {bn[0]:.2f} s vs {bo[0]:.2f} s -> "
                  f"{bn[0] / bo[0]:.2f}x (target <= 1.5x)")  # fmt: skip
        finally:
            if made:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], capture_output=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-tree", type=Path, help="a checkout of the previous deepvm")
    args = parser.parse_args()
    today = dt.date(2026, 12, 1)
    first = today - dt.timedelta(days=1)
    with tempfile.TemporaryDirectory() as tmp:
        fresh, old, one = Path(tmp) / "fresh", Path(tmp) / "old", Path(tmp) / "one"
        subprocess.run(_nightly(old, first.isoformat()), check=True, capture_output=True)
        shutil.copytree(old, one)
        start = time.perf_counter()
        fabricate_year(old, first, args.nights)
        files = sum(1 for _ in old.rglob("*.parquet"))
        print(f"year-old store: {args.nights} nights ({time.perf_counter() - start:.0f} s to "
              f"commit), {files} Parquet files")  # fmt: skip
        compare(fresh, old, today.isoformat(), args.runs, "as committed")
        subprocess.run([sys.executable, "-m", "deepvm", "-q", "store", "compact", "--store",
                        str(old), "--before", today.isoformat(), "--retain-hours", "0"],
                       check=True, capture_output=True)  # fmt: skip
        files = sum(1 for _ in old.rglob("*.parquet"))
        print(f"after `deepvm store compact --retain-hours 0`: {files} Parquet files")
        compare(fresh, old, today.isoformat(), args.runs, "compacted")
        year, one_night = count_seconds(old), count_seconds(one)
        print(f"DuckDB count over the recommendations: a year ({year[0]} rows) {year[1]:.3f} s, "
              f"one night ({one_night[0]} rows) {one_night[1]:.3f} s -> "
              f"{year[1] / one_night[1]:.2f}x (target <= 3x)")  # fmt: skip
    baseline_nightly(args.baseline_tree, args.runs)


if __name__ == "__main__":
    main()
