"""The store's commits (docs/ARCHITECTURE.md, "The store"): whole nights for every
reader under concurrent writers, kills at every commit step, compaction during a
nightly, and migration from the earlier layout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from deltalake import DeltaTable
from helpers import assert_whole_for_plain_readers, plain_readers, whole
from tests_paths import ROOT

from deepvm.cli import main
from deepvm.model.schemas import COMMIT_ID
from deepvm.store import TABLES, Store

JOBS = """
[[job]]
name = "resnet50-3usd"
workload = "resnet50"
budget = 3.0
policies = ["deepvm"]
top = 2

[[job]]
name = "gpt2-6usd"
workload = "gpt2"
budget = 6.0
policies = ["deepvm", "cost_first"]
top = 1
"""
NIGHT_TABLES = ("instances", "prices", "flopp", "recommendations", "fleet")
DATED = ("prices", "flopp", "recommendations", "fleet")
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPVM_METADATA": "off"}


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS)
    return path


def nightly_argv(store: Path, jobs: Path, date: str, *extra: str) -> list[str]:
    # --source: every run refreshes the date's prices too (by default a re-run keeps
    # them), so a run of the date rewrites every table of the night
    argv = ["nightly", "--store", str(store), "--jobs", str(jobs), "--date", date]
    return [*argv, "--source", "snapshot", *extra]


def deepvm_process(argv: list[str], prelude: str = "", env: dict | None = None) -> subprocess.Popen:
    code = f"import sys\n{prelude}\nfrom deepvm.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, "-q", *argv],
        cwd=ROOT,
        env=env or ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def commits_by_date(store: Path) -> dict[str, set[str]]:
    """Per date, the commits whose rows deepvm reads, across the night's tables."""
    view = Store.open(store)
    out: dict[str, set[str]] = {}
    for table in DATED:
        rows = view.rows(table).to_pandas()
        for date, group in rows.groupby(TABLES[table][0]):
            out.setdefault(str(date), set()).update(group[COMMIT_ID])
    return out


def night_shape(store: Path, date: str) -> dict[str, int]:
    view = Store.open(store)
    return {t: len(view.read(t, [date])) for t in DATED}


def test_two_nightlies_at_once_each_date_is_one_whole_night(tmp_path, jobs):
    store = tmp_path / "s"
    assert main(nightly_argv(store, jobs, "2026-12-01")) == 0
    reference = night_shape(store, "2026-12-01")
    runs = [
        deepvm_process(nightly_argv(store, jobs, "2026-12-02", "--no-compact")),
        deepvm_process(nightly_argv(store, jobs, "2026-12-02", "--no-compact")),
        deepvm_process(nightly_argv(store, jobs, "2026-12-03", "--no-compact")),
    ]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
    by_date = commits_by_date(store)
    assert sorted(by_date) == ["2026-12-01", "2026-12-02", "2026-12-03"]
    assert all(len(commits) == 1 for commits in by_date.values()), by_date
    for date in by_date:
        assert night_shape(store, date) == reference
    # Downstream readers through the Delta tables and the commits table see the same.
    for table in DATED:
        column = TABLES[table][0]
        seen = whole(store, table).df()
        assert seen.groupby(column)[COMMIT_ID].nunique().eq(1).all()
        assert sorted(seen[COMMIT_ID].unique()) == sorted(
            Store.open(store).rows(table).to_pandas()[COMMIT_ID].unique()
        )
        commits = pl.read_delta(str(store / "commits")).filter(pl.col("table_name") == table)
        newest = commits.sort(["committed_at", COMMIT_ID]).group_by(["date", "writer"]).last()
        joined = pl.read_delta(str(store / table)).join(
            newest.select(COMMIT_ID, "date", "writer"),
            left_on=[COMMIT_ID, column, "writer"],
            right_on=[COMMIT_ID, "date", "writer"],
        )
        assert joined.height == len(seen)
    # Plain Delta readers of the newest versions see the same rows: each run's table
    # commit replaced the date whole, and the run that won wrote again where the
    # other's landed last.
    assert_whole_for_plain_readers(store, NIGHT_TABLES)


KILL_AFTER_APPENDS = """
import os, signal
import deepvm.store._commit as commit
real = commit.write_table
calls = []
def append(location, table, *args, **kwargs):
    version = real(location, table, *args, **kwargs)
    calls.append(table)
    if len(calls) == {n}:
        os.kill(os.getpid(), signal.SIGKILL)
    return version
commit.write_table = append
"""


@pytest.mark.parametrize("n", range(1, len(NIGHT_TABLES) + 2))
def test_a_nightly_killed_after_each_commit_step(tmp_path, jobs, n):
    """Killed after its n-th append (one per table, then the commits table):
    readers see the previous night until the commit point, the whole new one after
    it; the next run of that date leaves one whole night."""
    store = tmp_path / "s"
    date = "2026-12-01"
    assert main(nightly_argv(store, jobs, date)) == 0
    (before,) = commits_by_date(store)[date]
    shape = night_shape(store, date)
    run = deepvm_process(
        nightly_argv(store, jobs, date, "--no-compact"), KILL_AFTER_APPENDS.format(n=n)
    )
    run.communicate(timeout=300)
    assert run.returncode == -9
    (seen,) = commits_by_date(store)[date]
    if n <= len(NIGHT_TABLES):  # before the commit point: the previous night
        assert seen == before
    else:  # the commits table has it: the whole new night
        assert seen != before
    assert night_shape(store, date) == shape
    # A plain Delta reader sees every table's date once, whole: the killed run's
    # where its table commit landed, the previous night's elsewhere.
    assert_whole_for_plain_readers(store, NIGHT_TABLES, same_as_deepvm=n > len(NIGHT_TABLES))
    # Another date's night pins every table past the killed run's writes: deepvm
    # still reads the previous night of the killed date, whole.
    assert main(nightly_argv(store, jobs, "2026-12-02", "--no-compact")) == 0
    assert commits_by_date(store)[date] == {seen}
    assert night_shape(store, date) == shape
    for table in DATED:  # and so does the whole view (regression: it read none)
        rows = whole(store, table).filter(f"{TABLES[table][0]} = '{date}'").df()
        assert set(rows[COMMIT_ID]) == {seen} and len(rows) == shape[table], table
    # Compaction puts the winner's rows back in place once the killed commit is
    # older than the retention: plain readers then read what deepvm reads.
    assert main(["-q", "store", "compact", "--store", str(store), "--retain-hours", "0"]) == 0
    assert commits_by_date(store)[date] == {seen}
    assert_whole_for_plain_readers(store, NIGHT_TABLES)
    assert main(nightly_argv(store, jobs, date)) == 0
    (after,) = commits_by_date(store)[date]
    assert after not in (before, seen) and night_shape(store, date) == shape
    assert_whole_for_plain_readers(store, NIGHT_TABLES)


KILL_INSIDE_A_COMMIT = """
import os, signal, uuid
import deltalake, pyarrow.parquet as pq
def write(target, data, **kwargs):
    # delta-rs writes a commit's data files first, then its log entry: killed in
    # between, the files lie in the table's folder with no log entry naming them
    filesystem = target.to_pyarrow_dataset().filesystem  # the table's folder or prefix
    name = f"snapshot_month=2026-12/part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(data, name, filesystem=filesystem)
    os.kill(os.getpid(), signal.SIGKILL)
deltalake.write_deltalake = write
"""


def test_a_nightly_killed_inside_one_tables_commit(tmp_path, jobs):
    """The data files of an unfinished Delta commit are in the folder, not in the
    log: no Delta reader sees them, and deepvm's readers see the previous night."""
    store = tmp_path / "s"
    date = "2026-12-01"
    assert main(nightly_argv(store, jobs, date)) == 0
    before = commits_by_date(store)[date]
    seen = plain_readers(store, "fleet")
    run = deepvm_process(nightly_argv(store, jobs, date, "--no-compact"), KILL_INSIDE_A_COMMIT)
    run.communicate(timeout=300)
    assert run.returncode == -9
    assert len(list((store / "fleet" / "snapshot_month=2026-12").glob("*.parquet"))) == 2
    assert plain_readers(store, "fleet") == seen
    assert commits_by_date(store)[date] == before
    assert_whole_for_plain_readers(store, NIGHT_TABLES)


def test_a_rerun_replaces_each_table_in_one_delta_commit(tmp_path, jobs):
    """A re-run of a date removes the rows it supersedes and adds its own in one
    Delta commit per table (delta-rs's overwrite with a predicate): no version of
    any table holds the date twice or not at all."""
    store = tmp_path / "s"
    for date in ("2026-12-01", "2026-12-02"):
        assert main(nightly_argv(store, jobs, date, "--no-compact")) == 0
    versions = {t: DeltaTable(store / t).version() for t in NIGHT_TABLES}
    assert main(nightly_argv(store, jobs, "2026-12-01", "--no-compact")) == 0
    for table in NIGHT_TABLES:
        history = [h for h in DeltaTable(store / table).history() if h["version"] > versions[table]]
        assert len(history) == 1, (table, history)
        assert history[0]["operationParameters"]["mode"] == "Overwrite", table
        for version in range(versions[table], versions[table] + 2):
            rows = DeltaTable(store / table, version=version).to_pandas()
            column = TABLES[table][0] or "writer"
            per_date = rows.groupby([column, "writer"])[COMMIT_ID].nunique()
            assert per_date.eq(1).all(), (table, version)
            if table != "instances":
                dates = {str(d) for d in rows[column]}
                assert dates == {"2026-12-01", "2026-12-02"}, (table, version)
    assert_whole_for_plain_readers(store, NIGHT_TABLES)


def test_compaction_while_a_nightly_rewrites_a_date_of_that_month(tmp_path, jobs):
    """Regression (deepvm 0.2 lost every table's rows of the date)."""
    store = tmp_path / "s"
    for date in ("2026-11-01", "2026-11-02", "2026-11-03"):
        assert main(nightly_argv(store, jobs, date, "--no-compact")) == 0
    shape = night_shape(store, "2026-11-02")
    rewrites = deepvm_process(nightly_argv(store, jobs, "2026-11-02", "--no-compact"))
    for _ in range(3):  # November is finished before 2026-12-01: compacted meanwhile
        assert (
            main(["-q", "store", "compact", "--store", str(store), "--before", "2026-12-01"]) == 0
        )
    _, err = rewrites.communicate(timeout=300)
    assert rewrites.returncode == 0, err
    assert main(["-q", "store", "compact", "--store", str(store), "--before", "2026-12-01"]) == 0
    by_date = commits_by_date(store)
    assert all(len(c) == 1 for c in by_date.values()) and len(by_date) == 3
    for date in by_date:
        assert night_shape(store, date) == shape
        for table in DATED:
            seen = whole(store, table).filter(f"{TABLES[table][0]} = '{date}'").df()
            assert len(seen) == shape[table]
    assert_whole_for_plain_readers(store, NIGHT_TABLES)


LEGACY = ROOT / "tests" / "data" / "store-v1-v2"


def as_rows(df: pd.DataFrame) -> list[str]:
    return sorted(map(str, df.sort_index(axis=1).astype(str).itertuples(index=False)))


def test_migrating_a_schema_1_and_2_store_keeps_every_row(tmp_path, capsys):
    store = tmp_path / "legacy"
    shutil.copytree(LEGACY / "store", store)
    assert main(["recommend", "--budget", "3", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"deepvm store migrate --store {store}" in err[0]
    assert main(["store", "migrate", "--store", str(store), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"]["recommendations"] == 8 and report["rows"]["prices"] == 1050
    view = Store.open(store)
    for table in ("spot_advisor", "running"):  # tables added since: none before
        assert view.read(table).empty
    for table in set(TABLES) - {"spot_advisor", "running"}:
        expected = pd.read_parquet(LEGACY / "expected" / f"{table}.parquet")
        read = view.read(table)
        added = [c for c in read.columns if c not in expected.columns]  # since: nulls
        assert read[added].isna().all().all(), table
        assert as_rows(read[list(expected.columns)]) == as_rows(expected), table
        assert len(whole(store, table).df()) == len(expected)
    assert not [p for p in store.rglob("part-2026-*.parquet")]  # the old files are gone
    assert not (store / "prices" / "snapshot_date=2026-11-03").exists() or not any(
        (store / "prices" / "snapshot_date=2026-11-03").iterdir()
    )
    assert main(["store", "migrate", "--store", str(store)]) == 0
    assert "nothing to migrate" in capsys.readouterr().out
    assert main(["-q", "recommend", "--budget", "3", "--store", str(store), "--json"]) == 0


def test_compaction_after_a_rerun_of_one_migrated_date_keeps_the_others(tmp_path, capsys):
    """Regression: pruning the commits rows of a superseded date deleted every date
    of that commit and writer, and a migration is one commit of many dates: after a
    re-run of one migrated date and a compaction, the other dates were gone."""
    store = tmp_path / "legacy"
    shutil.copytree(LEGACY / "store", store)
    assert main(["-q", "store", "migrate", "--store", str(store)]) == 0
    before = Store.open(store).read("prices")
    refresh = ["prices", "refresh", "--store", str(store), "--date", "2026-11-01"]
    assert main(["-q", *refresh, "--source", "snapshot"]) == 0
    assert main(["-q", "store", "compact", "--store", str(store), "--retain-hours", "0"]) == 0
    after = Store.open(store).read("prices")
    others = {d for d in before["snapshot_date"].astype(str)} - {"2026-11-01"}
    assert len(others) >= 3
    keep = before[before["snapshot_date"].astype(str).isin(others)]
    now = after[after["snapshot_date"].astype(str).isin(others)]
    assert as_rows(now) == as_rows(keep)
    assert (after["snapshot_date"].astype(str) == "2026-11-01").any()
    capsys.readouterr()


def test_the_readmes_store_readers_run_as_written(tmp_path, jobs):
    """The README's DuckDB, polars and pandas readers, each as its own script, run
    to their end. (pyarrow can abort at interpreter exit after a dataset scan,
    apache/arrow#34314, so the script's last line, not its exit status, is checked.)"""
    assert main(nightly_argv(tmp_path / "deepvm-store", jobs, "2026-12-01")) == 0
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Reading the store from") : readme.index("## Development")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    checks = [
        "assert len(recommendations.to_table()) > 0 and fleet.height > 0",
        "assert len(prices) > 0",
    ]
    assert len(blocks) == len(checks)
    for block, check in zip(blocks, checks, strict=True):
        done = subprocess.run(
            [sys.executable, "-c", f"{block}\n{check}\nprint('readme-example-ran')\n"],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.stdout.splitlines()[-1:] == ["readme-example-ran"], done.stderr
    # the `deepvm store sql` example prints what the README shows
    (shown,) = re.findall(r"```\n\$ (deepvm store sql .*?)\n(.*?)\n```", section, re.S)
    printed = subprocess.run(
        [sys.executable, "-m", "deepvm", *shown[0].split()[1:]],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert printed.stdout.strip() == shown[1].strip(), printed.stderr


def test_the_run_that_completes_last_holds_the_table_when_the_other_wrote_last(
    tmp_path, monkeypatch
):
    """Two runs of one date at once: A's table commit lands, then B's whole commit,
    then A's commit point. A is the newest completed commit (deepvm reads it), but
    B's rows landed in the table after A's: A writes its rows again, so a plain
    reader reads A too."""
    from deepvm.store import _commit as commit

    def rows(run: str) -> pd.DataFrame:
        names = TABLES["scaling"][1].names
        row = {name: None for name in names}
        row.update(run_id=run, instance_type="g5.xlarge", workload="resnet50", n_nodes=1)
        return pd.DataFrame([row] * (2 if run == "A" else 3))

    store = Store.open(tmp_path / "s")
    real = commit.write_table
    state = {"b_done": False}

    def write_table(location, table, *args, **kwargs):
        version = real(location, table, *args, **kwargs)
        if table == "scaling" and not state["b_done"]:
            state["b_done"] = True  # B runs whole between A's table commit and its commit point
            with Store.open(tmp_path / "s").transaction() as b:
                b.write("scaling", rows("B"), partition="2026-12-01", name="w")
        return version

    monkeypatch.setattr(commit, "write_table", write_table)
    with store.transaction() as a:
        a.write("scaling", rows("A"), partition="2026-12-01", name="w")
    monkeypatch.undo()
    assert set(Store.open(tmp_path / "s").read("scaling")["run_id"]) == {"A"}
    plain = DeltaTable(tmp_path / "s" / "scaling").to_pandas()
    assert list(plain["run_id"]) == ["A", "A"]
    # Regression: the whole view pinned the newest version the commits record (B's,
    # which A's rewrite after its commit point superseded, recorded nowhere), and
    # showed no rows of the date.
    assert sorted(whole(tmp_path / "s", "scaling").df()["run_id"]) == ["A", "A"]
    assert_whole_for_plain_readers(tmp_path / "s", ["scaling"])
