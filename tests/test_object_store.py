"""The store on an object store: a real S3-compatible server (moto's) started on
loopback by these tests, reached over HTTP by delta-rs, configured only through
the standard AWS environment (AWS_ENDPOINT_URL, credentials)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from helpers import append_benchmarks, assert_whole_for_plain_readers, whole
from tests_paths import ROOT

from deepvm.cli import main
from deepvm.store import TABLES, Store

pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

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
top = 1
"""


def test_nightly_recommend_fleet_compact_and_check_on_s3(s3, tmp_path, capsys):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    nightly = ["nightly", "--store", s3, "--jobs", str(jobs), "--no-compact", "--date"]
    for day in ("2026-11-29", "2026-11-30", "2026-12-01", "2026-12-01"):  # a re-run replaces
        assert main([*nightly, day]) == 0
    capsys.readouterr()
    store = Store.open(s3)
    recs = store.read("recommendations")
    assert recs.groupby("snapshot_date").size().to_dict() == {
        "2026-11-29": 2,
        "2026-11-30": 2,
        "2026-12-01": 2,
    }
    assert store.partitions("fleet") == ["2026-11-29", "2026-11-30", "2026-12-01"]
    assert main(["recommend", "--budget", "3", "--store", s3, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prices_snapshot"].startswith("store:prices@2026-12-01")
    assert main(["fleet", "--jobs", str(jobs), "--store", s3, "--json"]) == 0
    fleet = json.loads(capsys.readouterr().out)
    assert {j["scenario"] for j in fleet["jobs"]} == {"resnet50-3usd", "gpt2-6usd"}
    before = Store.open(s3).read("recommendations")
    assert len(before) == 9  # recommend --store wrote its run (3 clusters) too

    argv = ["store", "compact", "--store", s3, "--before", "2026-12-01", "--json"]
    assert main([*argv, "--retain-hours", "0"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["months"]["recommendations"] == ["2026-11"]
    assert done["files_vacuumed"]["recommendations"] > 0
    after = Store.open(s3).read("recommendations")
    key = ["snapshot_date", "scenario", "rank"]
    pd.testing.assert_frame_equal(
        after.sort_values(key).reset_index(drop=True),
        before.sort_values(key).reset_index(drop=True),
    )
    # downstream readers: DuckDB over the Delta datasets, polars read_delta
    assert len(whole(s3, "recommendations").df()) == 9
    options = {  # what a user gives polars: the endpoint and credentials
        k: v for k, v in Store.open(s3).location.options.items() if "retr" not in k
    }
    polars = pl.read_delta(f"{s3}/recommendations", storage_options=options)
    assert polars.height == 9 and set(polars["snapshot_month"]) == {"2026-11", "2026-12"}
    assert main(["store", "check", "--store", s3, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]


def test_a_failed_transaction_commits_nothing(s3):
    store = Store.open(s3)
    append_benchmarks(s3, "before", 1)
    with pytest.raises(RuntimeError, match="a bug"), store.transaction() as tx:
        append_benchmarks_in(tx)
        raise RuntimeError("a bug")
    assert Store.open(s3).read("benchmarks")["run_id"].tolist() == ["before-0"]


def append_benchmarks_in(tx: Store) -> None:
    row = {c: None for c in TABLES["benchmarks"][1].names}
    row.update(run_id="x", instance_type="x", workload="tiny", status="ok")
    tx.append("benchmarks", pd.DataFrame([row]), partition="2026-12-01", writer="x")


STALL_S = 300


def test_machines_appending_to_one_bucket_at_once_lose_nothing(s3):
    context = multiprocessing.get_context("spawn")  # delta-rs's runtime does not survive fork
    writers = [
        context.Process(target=append_benchmarks, args=(s3, f"machine-{m}", 25)) for m in range(4)
    ]
    for w in writers:
        w.start()
    # A busy machine is slow, not stuck: wait as long as rows keep arriving, and fail
    # only when none has for STALL_S (a writer that hangs).
    seen, last_progress = -1, time.monotonic()
    while any(w.is_alive() for w in writers):
        time.sleep(2)
        count = len(Store.open(s3).read("benchmarks")) if Store.open(s3).has("benchmarks") else 0
        if count != seen:
            seen, last_progress = count, time.monotonic()
        assert time.monotonic() - last_progress < STALL_S, f"no row arrived for {STALL_S} s"
    assert [w.exitcode for w in writers] == [0, 0, 0, 0]
    rows = whole(s3, "benchmarks").select("run_id").df()
    expected = [f"machine-{m}-{k}" for m in range(4) for k in range(25)]
    assert sorted(rows["run_id"]) == sorted(expected)
    assert sorted(Store.open(s3).read("benchmarks")["run_id"]) == sorted(expected)


@pytest.mark.parametrize(
    "argv",
    [
        ["fleet"],
        ["recommend", "--budget", "3"],
        ["nightly"],
        ["store", "check"],
        ["benchmark", "--workload", "tiny", "--steps", "2"],
    ],
)
def test_a_missing_bucket_is_one_line_and_exit_2(s3, tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--store", "s3://no-such-bucket-here/x"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "'no-such-bucket-here' does not exist" in lines[0]
    assert out == "" and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "argv",
    [
        ["fleet", "--timeout", "3"],
        ["nightly", "--timeout", "3"],
        ["recommend", "--budget", "3", "--timeout", "3"],
        ["store", "check", "--timeout", "3"],
        ["recommend", "--budget", "3"],  # $DEEPVM_STORE_TIMEOUT
    ],
)
def test_an_unreachable_endpoint_fails_within_the_timeout(s3, capsys, monkeypatch, argv):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    if "--timeout" not in argv:
        monkeypatch.setenv("DEEPVM_STORE_TIMEOUT", "3")
    start = time.monotonic()
    assert main([*argv, "--store", s3]) == 2
    assert time.monotonic() - start < 30  # the default of 60 s would take longer
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "cannot be reached" in lines[0] and s3 in lines[0]


@pytest.mark.parametrize(
    ("uri", "named"), [("gs://team/x", "GOOGLE_APPLICATION_CREDENTIALS"), ("az://team/x", "AZURE")]
)
def test_gcs_and_azure_without_credentials_are_one_line(uri, named, capsys, monkeypatch):
    for key in list(os.environ):
        if key.startswith(("GOOGLE_", "AZURE_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", "/nonexistent")  # no gcloud application-default file
    for argv in (["fleet"], ["store", "check"], ["nightly"]):
        start = time.monotonic()
        assert main([*argv, "--store", uri]) == 2
        assert time.monotonic() - start < 30  # no retrying for minutes
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and named in lines[0] and uri in lines[0]


def test_an_unknown_scheme_is_named(capsys):
    assert main(["recommend", "--budget", "3", "--store", "ftp://host/x"]) == 2
    err = capsys.readouterr().err
    assert "ftp://host/x" in err and "s3://" in err


def test_migrating_a_store_on_s3(s3, capsys):
    legacy = ROOT / "tests" / "data" / "store-v1-v2"
    bucket, prefix = s3[len("s3://") :].split("/", 1)
    client = boto3.client("s3")
    for path in (legacy / "store").rglob("*.parquet"):
        client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(legacy / 'store')}")
    assert main(["fleet", "--store", s3]) == 2
    assert "deepvm store migrate" in capsys.readouterr().err
    assert main(["store", "migrate", "--store", s3]) == 0
    view = Store.open(s3)
    for table in set(TABLES) - {"spot_advisor", "running"}:  # spot_advisor: added since
        expected = pd.read_parquet(legacy / "expected" / f"{table}.parquet")
        assert len(view.read(table)) == len(expected), table
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    assert not [k for k in keys if "part-2026-" in k or "compacted" in k]


def test_local_and_s3_stores_hold_the_same_rows(s3, tmp_path: Path):
    local = tmp_path / "local"
    for where in (str(local), s3):
        assert main(["prices", "refresh", "--store", where, "--date", "2026-12-01"]) == 0
    for table in ("prices", "instances"):
        a, b = Store.open(local).read(table), Store.open(s3).read(table)
        drop = [c for c in ("fetched_at",) if c in a.columns]
        assert a.drop(columns=drop).equals(b.drop(columns=drop))
    shutil.rmtree(local)


def test_plain_delta_readers_see_whole_nights_on_s3(s3, tmp_path):
    """On S3 as on a folder: after a re-run, a run killed between two tables'
    commits, two runs of one date at once and a compaction, delta-rs, polars and
    DuckDB reading the newest versions see each date once per writer, whole."""
    from test_store_commits import (
        KILL_AFTER_APPENDS,
        KILL_INSIDE_A_COMMIT,
        NIGHT_TABLES,
        deepvm_process,
        nightly_argv,
    )

    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the endpoint and credentials too
    for date in ("2026-12-01", "2026-12-02", "2026-12-01"):
        assert main(nightly_argv(s3, jobs, date, "--no-compact")) == 0
    assert_whole_for_plain_readers(s3, NIGHT_TABLES)
    killed = deepvm_process(
        nightly_argv(s3, jobs, "2026-12-02", "--no-compact"), KILL_AFTER_APPENDS.format(n=2), env
    )
    killed.communicate(timeout=300)
    assert killed.returncode == -9
    assert_whole_for_plain_readers(s3, NIGHT_TABLES, same_as_deepvm=False)
    runs = [
        deepvm_process(nightly_argv(s3, jobs, "2026-12-02", "--no-compact"), env=env)
        for _ in range(2)
    ]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
    assert_whole_for_plain_readers(s3, NIGHT_TABLES)
    inside = deepvm_process(
        nightly_argv(s3, jobs, "2026-12-02", "--no-compact"), KILL_INSIDE_A_COMMIT, env
    )
    inside.communicate(timeout=300)
    assert inside.returncode == -9
    assert_whole_for_plain_readers(s3, NIGHT_TABLES)
    # a compaction beside a nightly of the same month
    beside = deepvm_process(nightly_argv(s3, jobs, "2026-12-01", "--no-compact"), env=env)
    assert main(["-q", "store", "compact", "--store", s3, "--before", "2027-01-01"]) == 0
    _, err = beside.communicate(timeout=300)
    assert beside.returncode == 0, err
    assert_whole_for_plain_readers(s3, NIGHT_TABLES)
    assert main(["-q", "store", "compact", "--store", s3, "--retain-hours", "0"]) == 0
    assert_whole_for_plain_readers(s3, NIGHT_TABLES)
