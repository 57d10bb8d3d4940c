"""Store benchmark (run by hand: `python benchmarks/store.py`; not in CI).

Ratios, each measured side by side in one run (docs/ARCHITECTURE.md, "The
store"), on a store holding a year of nights (365 nightly commits fabricated from
the first night's rows, each with its own date, ending on the 30th of a month,
its log dated as a real year's; then compacted as the nightly compacts: every
finished month into one file, the month in progress once it holds 8):

1. `deepvm nightly` as it ships (it compacts after it commits) on the year
   against the same nightly on a fresh store: CPU, wall and peak RSS of the
   nightly process (target: within 1.2x).
2. Counting a year of recommendations against one night, the plain Delta
   reader's way (the newest version as a pyarrow dataset in DuckDB) and the
   commits-joined way (deepvm.store.sql.duckdb_relation), on the 31st and on
   the 1st (target: within 3x).
3. A whole nightly, then a re-run of its date (append + delete before, one
   overwrite per table now), on a fresh store with this deepvm against the deepvm
   before it (`--baseline-tree`, a checkout; by default a git worktree of
   be08102), on a local folder and on S3 (moto's server on loopback)
   (target: within 1.1x).
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
BASELINE_COMMIT = "be08102"  # the last deepvm that appended, then deleted superseded rows
DATED = ("prices", "flopp", "recommendations", "fleet")


def _nightly(store: Path | str, date: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "deepvm", "-q", "nightly", "--store", str(store), "--date", date,
            "--source", "snapshot", *extra]  # fmt: skip


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
    from deepvm.model.schemas import WRITER
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


def age_log(store: Path, last: dt.date) -> None:
    """Date each fabricated night's Delta commits as a real year's would be: a night
    ``k`` days before ``last`` committed ``k + 1`` days ago (the log's timestamps,
    which compaction's look back over the retention reads), rather than all in the
    last minute."""
    import json

    now = dt.datetime.now(dt.UTC)
    for log in store.glob("*/_delta_log/*.json"):
        lines = log.read_text().splitlines()
        changed = False
        for i, line in enumerate(lines):
            entry = json.loads(line)
            info = entry.get("commitInfo")
            keys = json.loads(info.get("deepvm.keys") or "[]") if info else []
            dates = {d for d, _ in keys if d}
            if len(dates) != 1:
                continue
            (day,) = dates
            age = (last - dt.date.fromisoformat(day)).days + 1
            info["timestamp"] = int((now - dt.timedelta(days=age)).timestamp() * 1000)
            lines[i] = json.dumps(entry, separators=(",", ":"))
            changed = True
        if changed:
            log.write_text("\n".join(lines) + "\n")


def compare(fresh: Path, old: Path, date: str, runs: int, label: str) -> None:
    rows = []
    for k in range(runs):  # alternate, so drift on a shared machine hits both
        shutil.rmtree(fresh, ignore_errors=True)
        f, o = run(_nightly(fresh, date)), run(_nightly(old, date))
        rows.append((f, o))
        print(f"  run {k + 1}: fresh cpu {f[0]:.2f} s wall {f[1]:.2f} s; "
              f"year ({label}) cpu {o[0]:.2f} s wall {o[1]:.2f} s")  # fmt: skip
    bf = [min(r[0][i] for r in rows) for i in range(2)]
    bo = [min(r[1][i] for r in rows) for i in range(2)]
    print(f"nightly with compaction on a year ({label}), best of {runs}: CPU {bf[0]:.2f} s vs "
          f"{bo[0]:.2f} s -> {bo[0] / bf[0]:.2f}x; wall {bf[1]:.2f} s vs {bo[1]:.2f} s -> "
          f"{bo[1] / bf[1]:.2f}x (target <= 1.2x)")  # fmt: skip
    shutil.rmtree(fresh, ignore_errors=True)
    pf, po = peak_rss(_nightly(fresh, date)), peak_rss(_nightly(old, date))
    print(f"peak RSS ({label}): {pf:.0f} MiB vs {po:.0f} MiB -> {po / pf:.2f}x (target <= 1.2x)")


def count_seconds(store: Path, way: str, runs: int = 5) -> tuple[int, float]:
    """Rows and best-of-``runs`` seconds of a DuckDB count over the recommendations
    (a fresh connection each time, as a downstream reader): ``plain``, the table's
    newest version as it is; ``whole``, joined on the commits table."""
    import duckdb
    from deltalake import DeltaTable

    from deepvm.store.sql import duckdb_relation

    best, n = float("inf"), 0
    for _ in range(runs):
        start = time.perf_counter()
        if way == "plain":
            con = duckdb.connect()
            con.register("r", DeltaTable(store / "recommendations").to_pyarrow_dataset())
            n = con.sql("select count(*) from r").fetchall()[0][0]
        else:
            n = duckdb_relation(store, "recommendations").count("*").fetchall()[0][0]
        best = min(best, time.perf_counter() - start)
    return n, best


def counts(year: Path, one: Path, label: str) -> None:
    for way in ("plain", "whole"):
        y, o = count_seconds(year, way), count_seconds(one, way)
        print(f"count of the recommendations, {way} reader ({label}): a year ({y[0]} rows) "
              f"{y[1]:.3f} s, one night ({o[0]} rows) {o[1]:.3f} s -> {y[1] / o[1]:.2f}x "
              "(target <= 3x)")  # fmt: skip


def moto_server() -> tuple[subprocess.Popen, dict[str, str]]:
    """moto's S3 server on loopback and the environment that reaches it."""
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.2)
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    client.create_bucket(Bucket="bench")
    return server, env


def baseline_nightly(tree: Path | None, runs: int) -> None:
    made = tree is None
    server, s3_env = moto_server()
    with tempfile.TemporaryDirectory() as tmp:
        if tree is None:
            tree = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                            BASELINE_COMMIT], check=True, capture_output=True)  # fmt: skip
        try:
            for where in ("local", "s3"):
                env_new = {**os.environ, "PYTHONPATH": str(ROOT)}
                env_old = {**os.environ, "PYTHONPATH": str(tree)}
                if where == "s3":
                    env_new.update(s3_env)
                    env_old.update(s3_env)
                rows = []
                for k in range(runs):
                    pair = []
                    for name, env in (("new", env_new), ("old", env_old)):
                        store = (f"s3://bench/{name}{k}" if where == "s3"
                                 else str(Path(tmp) / f"{name}{k}"))  # fmt: skip
                        first = run(_nightly(store, "2026-12-01", "--no-compact"), env)
                        again = run(_nightly(store, "2026-12-01", "--no-compact"), env)
                        pair.append((first[0] + again[0], first[1] + again[1]))
                    rows.append(pair)
                    print(f"  {where} run {k + 1}: this deepvm cpu {pair[0][0]:.2f} s wall "
                          f"{pair[0][1]:.2f} s; {BASELINE_COMMIT} cpu {pair[1][0]:.2f} s wall "
                          f"{pair[1][1]:.2f} s")  # fmt: skip
                bn = [min(r[0][i] for r in rows) for i in range(2)]
                bo = [min(r[1][i] for r in rows) for i in range(2)]
                print(f"a night and its re-run on a fresh {where} store, best of {runs}: CPU "
                      f"{bn[0]:.2f} s vs {bo[0]:.2f} s -> {bn[0] / bo[0]:.2f}x; wall {bn[1]:.2f} s "
                      f"vs {bo[1]:.2f} s -> {bn[1] / bo[1]:.2f}x (target <= 1.1x)")  # fmt: skip
        finally:
            server.terminate()
            if made:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(tree)], capture_output=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-tree", type=Path, help="a checkout of the previous deepvm")
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()
    last = dt.date(2026, 12, 30)  # the year's last night: the 31st's nightly comes next
    with tempfile.TemporaryDirectory() as tmp:
        fresh, year, one = Path(tmp) / "fresh", Path(tmp) / "year", Path(tmp) / "one"
        subprocess.run(_nightly(year, last.isoformat(), "--no-compact"), check=True,
                       capture_output=True)  # fmt: skip
        shutil.copytree(year, one)
        start = time.perf_counter()
        fabricate_year(year, last, args.nights)
        age_log(year, last)
        compact = [sys.executable, "-m", "deepvm", "-q", "store", "compact", "--store", str(year),
                   "--retain-hours", "0", "--before"]  # fmt: skip
        subprocess.run([*compact, "2026-12-01"], check=True, capture_output=True)
        files = sum(1 for _ in year.rglob("*.parquet"))
        print(f"year store: {args.nights} nights ({time.perf_counter() - start:.0f} s to commit), "
              f"every month compacted (December at 8 files): {files} Parquet files")  # fmt: skip
        counts(year, one, "on the 31st: December merged at 8 files, as the nightly does")
        compare(fresh, year, "2026-12-31", args.runs, "on the 31st")
        subprocess.run([*compact, "2027-01-01"], check=True, capture_output=True)
        counts(year, one, "on the 1st: every month compacted")
    if not args.skip_baseline:
        baseline_nightly(args.baseline_tree, args.runs)


if __name__ == "__main__":
    main()
