"""Compaction and retention (Delta's optimize and vacuum): a finished month's
files become few, rows no reader sees are dropped, files past the retention are
deleted, and every reader sees the same rows before and after."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from deltalake import DeltaTable
from helpers import whole

from deepvm.cli import main
from deepvm.store import Store
from deepvm.store import _commit as commit

JOBS = """
[[job]]
name = "resnet50-3usd"
workload = "resnet50"
budget = 3.0
policies = ["deepvm"]
top = 1

[[job]]
name = "gpt2-6usd"
workload = "gpt2"
budget = 6.0
policies = ["deepvm"]
top = 2
"""
NIGHTS = ("2026-10-31", "2026-11-01", "2026-11-15", "2026-12-01")
KEY = ["snapshot_date", "scenario", "rank"]


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS)
    return path


def nights(store: Path, jobs: Path, *extra: str) -> None:
    for day in NIGHTS:
        argv = ["nightly", "--store", str(store), "--jobs", str(jobs), "--date", day]
        assert main([*argv, *extra, "--json"]) == 0


def every_reader(store: Path) -> dict[str, list[tuple]]:
    """(date, scenario, rank, cost) rows of the recommendations, as each reader sees them."""

    def rows(df: pd.DataFrame) -> list[tuple]:
        df = df.assign(snapshot_date=df["snapshot_date"].astype(str))
        return sorted(df[[*KEY, "hourly_cost"]].itertuples(index=False, name=None))

    return {
        "deepvm": rows(Store.open(store).read("recommendations")),
        "duckdb": rows(whole(store, "recommendations").df()),
        "pandas": rows(DeltaTable(store / "recommendations").to_pandas()),
        "polars": rows(pl.read_delta(str(store / "recommendations")).to_pandas()),
    }


def active_files(store: Path, table: str) -> int:
    return len(DeltaTable(store / table).file_uris())


def test_compact_merges_finished_months_and_every_reader_sees_the_same_rows(tmp_path, jobs, capsys):
    store = tmp_path / "s"
    nights(store, jobs, "--no-compact")
    capsys.readouterr()
    before = every_reader(store)
    assert len({json.dumps(v) for v in before.values()}) == 1  # the readers agree
    files_before = active_files(store, "recommendations")
    argv = ["store", "compact", "--store", str(store), "--before", "2026-12-01", "--json"]
    assert main([*argv, "--retain-hours", "0"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["months"]["recommendations"] == ["2026-11"]  # October is one file already
    assert done["files_vacuumed"]["recommendations"] > 0
    assert active_files(store, "recommendations") < files_before
    assert every_reader(store) == before
    assert main([*argv, "--retain-hours", "0"]) == 0  # nothing left to do
    again = json.loads(capsys.readouterr().out)
    assert not any(again["months"].values()) and every_reader(store) == before
    # a re-run of a compacted date replaces its rows
    argv = ["nightly", "--store", str(store), "--jobs", str(jobs), "--date", "2026-11-01"]
    assert main([*argv, "--no-compact", "--json"]) == 0
    capsys.readouterr()
    after = every_reader(store)
    assert [r[:3] for r in after["deepvm"]] == [r[:3] for r in before["deepvm"]]
    assert len({json.dumps(v) for v in after.values()}) == 1


def test_the_nightly_compacts_finished_months(tmp_path, jobs, capsys):
    store = tmp_path / "s"
    nights(store, jobs)
    out = capsys.readouterr().out
    assert json.loads(out.split("\n}\n")[-2] + "\n}")["compacted"]["recommendations"] == ["2026-11"]
    month = DeltaTable(store / "recommendations").get_add_actions(flatten=True)
    months = pd.Series(month.column("partition.snapshot_month").to_pylist())
    assert months.value_counts().to_dict() == {"2026-10": 1, "2026-11": 1, "2026-12": 1}


def test_rows_of_an_abandoned_commit_are_dropped_after_the_retention(
    tmp_path, jobs, capsys, monkeypatch
):
    """A writer killed before its commit point leaves rows no reader sees; compaction
    drops them once their commit is older than the retention, not before."""
    store = tmp_path / "s"
    nights(store, jobs, "--no-compact")
    capsys.readouterr()
    view = Store.open(store)
    row = view.read("recommendations").drop(columns="snapshot_date").iloc[:1]
    with pytest.raises(KeyboardInterrupt), view.transaction() as tx:
        tx.write("recommendations", row, partition="2026-11-15", name="resnet50-3usd")
        real = commit.write_table

        def die_after_one(*args, **kwargs):
            real(*args, **kwargs)
            raise KeyboardInterrupt  # as a kill would, after the table's commit

        monkeypatch.setattr(commit, "write_table", die_after_one)
    monkeypatch.undo()
    # (the roll-back removed the rows again; plant them as a killed writer leaves them)
    from deltalake import write_deltalake

    from deepvm.model.schemas import to_arrow

    dead = to_arrow("recommendations", row, "2026-11-15", "resnet50-3usd", "20260101T000000Z-dead")
    write_deltalake(str(store / "recommendations"), dead, mode="append")
    seen = every_reader(store)
    assert seen["deepvm"] == seen["duckdb"]  # invisible to the commit-aware readers
    argv = ["store", "compact", "--store", str(store), "--json"]
    assert main([*argv, "--retain-hours", str(1e5)]) == 0  # not old enough yet
    assert json.loads(capsys.readouterr().out)["rows_dropped"]["recommendations"] == 0
    assert main([*argv]) == 0
    assert json.loads(capsys.readouterr().out)["rows_dropped"]["recommendations"] == 1
    assert every_reader(store)["pandas"] == seen["deepvm"]


def test_bad_retention_and_date_are_one_line(tmp_path, jobs, capsys):
    store = tmp_path / "s"
    assert main(["prices", "refresh", "--store", str(store)]) == 0
    capsys.readouterr()
    for extra, named in (
        (["--retain-hours", "-1"], "--retain-hours"),
        (["--before", "2026-13-01"], "2026-13-01"),
    ):
        assert main(["store", "compact", "--store", str(store), *extra]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and named in lines[0]


def test_two_compactions_within_one_second_keep_every_row_readable(
    tmp_path, jobs, capsys, monkeypatch
):
    """Regression: compaction's commits rows were named by the second they were made,
    so pruning the first of two compactions in one second deleted the second's too,
    readers fell back to a table version whose files the vacuum had deleted."""
    import datetime as dt
    import types

    from deepvm.store import maintenance

    store = tmp_path / "s"
    nights(store, jobs, "--no-compact")
    capsys.readouterr()
    before = every_reader(store)
    second = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ticks = iter(range(1, 999_999))

    class Clock(dt.datetime):  # time moves on, a microsecond a call, within one second
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return second + dt.timedelta(microseconds=next(ticks))

    monkeypatch.setattr(
        maintenance, "dt", types.SimpleNamespace(datetime=Clock, timedelta=dt.timedelta, UTC=dt.UTC)
    )
    argv = ["store", "compact", "--store", str(store), "--before", "2026-12-01", "--json"]
    for _ in range(2):
        assert main([*argv, "--retain-hours", "0"]) == 0
    capsys.readouterr()
    assert every_reader(store) == before


def test_the_current_month_is_merged_once_it_holds_eight_files(tmp_path, jobs, capsys):
    """A reader on the 31st opens at most OPEN_MONTH_FILES files of the month more
    than on the 1st: the nightly's compaction merges the month in progress then."""
    from deepvm.store.maintenance import OPEN_MONTH_FILES

    store = tmp_path / "s"
    for day in range(1, OPEN_MONTH_FILES + 1):
        argv = ["-q", "nightly", "--store", str(store), "--jobs", str(jobs), "--no-compact"]
        assert main([*argv, "--date", f"2026-12-{day:02d}"]) == 0
    before = every_reader(store)
    assert active_files(store, "recommendations") == OPEN_MONTH_FILES
    capsys.readouterr()
    argv = ["store", "compact", "--store", str(store), "--before", "2026-12-05", "--json"]
    assert main(argv) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["months"]["recommendations"] == ["2026-12"]
    assert active_files(store, "recommendations") == 1
    assert every_reader(store) == before
