"""Compaction: a finished month's daily files become one file per table, every
reader (deepvm, DuckDB, pandas, polars) sees the same rows before and after, and
version-1 day folders are read and moved."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from deepvm.cli import main
from deepvm.store import TABLES, Store

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
        argv = ["nightly", "--store", str(store), "--scenarios", str(jobs), "--date", day]
        assert main([*argv, *extra, "--json"]) == 0


def every_reader(store: Path) -> dict[str, list[tuple]]:
    """(date, scenario, rank, cost) rows of the recommendations, as each reader sees them."""
    glob = f"{store}/recommendations/**/*.parquet"

    def rows(df: pd.DataFrame) -> list[tuple]:
        df = df.assign(snapshot_date=df["snapshot_date"].astype(str))
        return sorted(df[[*KEY, "hourly_cost"]].itertuples(index=False, name=None))

    polars = pytest.importorskip("polars")
    return {
        "deepvm": rows(Store.open(store).read("recommendations")),
        "duckdb": rows(duckdb.sql(f"select * from '{glob}'").df()),
        "pandas": rows(pd.read_parquet(store / "recommendations")),
        "polars": rows(polars.read_parquet(glob, hive_partitioning=True).to_pandas()),
    }


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".deepvm-staging.lock"
    }


def test_compact_merges_finished_months_and_every_reader_sees_the_same_rows(tmp_path, jobs, capsys):
    store = tmp_path / "store"
    nights(store, jobs, "--no-compact")
    before = every_reader(store)
    assert len(before["deepvm"]) == 3 * len(NIGHTS)
    assert all(rows == before["deepvm"] for rows in before.values())

    assert main(["store", "compact", "--store", str(store), "--before", "2026-12-01"]) == 0
    out = capsys.readouterr().out
    assert "recommendations: 6 files -> 2 (2026-10, 2026-11)" in out
    folder = store / "recommendations"
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*.parquet")) == [
        "snapshot_month=2026-10/part-compacted.parquet",
        "snapshot_month=2026-11/part-compacted.parquet",
        "snapshot_month=2026-12/part-2026-12-01-gpt2-6usd.parquet",
        "snapshot_month=2026-12/part-2026-12-01-resnet50-3usd.parquet",
    ]
    assert every_reader(store) == before
    assert Store.open(store).partitions("recommendations") == list(NIGHTS)
    assert Store.open(store).read("recommendations", ["2026-11-15"])["rank"].tolist() == [1, 2, 1]

    # nothing left to do: the second run changes no byte
    same = tree(store)
    assert main(["store", "compact", "--store", str(store), "--before", "2026-12-01"]) == 0
    assert "nothing to compact" in capsys.readouterr().out
    assert tree(store) == same

    # a re-run of a compacted night replaces its rows, for every reader
    argv = ["nightly", "--store", str(store), "--scenarios", str(jobs), "--date", "2026-11-15"]
    assert main([*argv, "--no-compact", "--json"]) == 0
    again = every_reader(store)
    assert again == before
    month = pq.read_table(folder / "snapshot_month=2026-11" / "part-compacted.parquet")
    assert sorted(set(month.column("snapshot_date").to_pylist())) == [
        pd.Timestamp("2026-11-01").date()
    ]


def test_the_nightly_compacts_finished_months(tmp_path, jobs, capsys):
    store = tmp_path / "store"
    nights(store, jobs)
    out = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")
    assert out["compacted"]["recommendations"] == ["2026-11"]
    assert out["compact_error"] is None
    names = sorted(p.name for p in (store / "recommendations").rglob("*.parquet"))
    assert names.count("part-compacted.parquet") == 2  # October (at 11-01) and November
    assert len(every_reader(store)["duckdb"]) == 3 * len(NIGHTS)


def _as_version_1(store: Path) -> None:
    """Rewrite the store as deepvm 0.1 wrote it: day folders, the date only in the path."""
    for path in list(store.rglob("part-*.parquet")):
        table = path.parts[len(store.parts)]
        if table == "instances":
            continue
        data = pq.read_table(path)
        column = TABLES[table][0]
        day = path.name[len("part-") : len("part-") + 10]
        key = path.name[len("part-") + 11 : -len(".parquet")]
        meta = {**data.schema.metadata, b"schema_version": b"1"}
        old = data.drop_columns([column]).replace_schema_metadata(meta)
        target = store / table / f"{column}={day}"
        target.mkdir(parents=True, exist_ok=True)
        pq.write_table(old, target / f"part-{key}.parquet")
        path.unlink()
        if not any(path.parent.iterdir()):
            path.parent.rmdir()


def test_version_1_day_folders_are_read_and_moved(tmp_path, jobs, capsys):
    store = tmp_path / "store"
    nights(store, jobs, "--no-compact")
    expected = every_reader(store)["deepvm"]
    _as_version_1(store)
    assert not list(store.rglob("*_month=*"))
    old = Store.open(store)  # deepvm reads the old layout as before
    assert sorted(old.read("recommendations")[KEY].itertuples(index=False, name=None)) == [
        r[:3] for r in expected
    ]
    assert old.partitions("prices") == list(NIGHTS)
    capsys.readouterr()
    assert main(["store", "check", "--store", str(store)]) == 0
    assert "in the old day-folder layout" in capsys.readouterr().out

    # a night on the new code replaces a version-1 file of the same writer and date
    argv = ["nightly", "--store", str(store), "--scenarios", str(jobs), "--date", "2026-12-01"]
    assert main([*argv, "--no-compact", "--json"]) == 0
    assert not (store / "recommendations" / "snapshot_date=2026-12-01").exists()

    assert main(["store", "compact", "--store", str(store), "--before", "2026-12-01"]) == 0
    assert not list(store.rglob("*_date=*/*.parquet"))
    assert every_reader(store) == {k: expected for k in ("deepvm", "duckdb", "pandas", "polars")}


def test_a_bad_file_stops_compaction_and_changes_nothing(tmp_path, jobs, capsys):
    store = tmp_path / "store"
    nights(store, jobs, "--no-compact")
    bad = store / "fleet" / "snapshot_month=2026-11" / "part-2026-11-02-fleet.parquet"
    bad.write_bytes(b"PAR1")
    same = tree(store)
    capsys.readouterr()
    assert main(["store", "compact", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("deepvm: error:")]
    assert len(errors) == 1 and "part-2026-11-02-fleet.parquet" in errors[0]
    assert tree(store) == same
    assert main(["store", "compact", "--store", str(store), "--before", "2026-13-01"]) == 2
    assert "--before" in capsys.readouterr().err
