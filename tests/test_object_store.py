"""The store on an object store: a real S3-compatible server (moto's) started on
loopback by these tests, reached over HTTP by pyarrow's S3 client, configured
only through the standard AWS environment (AWS_ENDPOINT_URL, credentials)."""

from __future__ import annotations

import json
import logging
import multiprocessing
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from helpers import append_benchmarks

from deepvm.cli import main
from deepvm.results import today_utc
from deepvm.store import STAGING_DIR, Store, to_arrow

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

BUCKET = "deepvm-team"
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


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, request) -> str:
    """A fresh prefix in the bucket; the environment a user's shell would have."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = boto3.client("s3")
    if BUCKET not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
        client.create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/{request.node.name}"


def _fs(endpoint: str) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(endpoint_override=endpoint, allow_delayed_open=True)


def _keys(s3: str) -> list[str]:
    bucket, prefix = s3[len("s3://") :].split("/", 1)
    pages = (
        boto3.client("s3")
        .get_paginator("list_objects_v2")
        .paginate(Bucket=bucket, Prefix=prefix + "/")
    )
    keys = (o["Key"][len(prefix) + 1 :] for p in pages for o in p.get("Contents", []))
    # pyarrow leaves an empty marker object where it deleted a folder's last object
    return sorted(k for k in keys if not k.endswith("/"))


def test_nightly_recommend_fleet_and_compact_on_s3(s3, s3_endpoint, tmp_path, capsys):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    nightly = ["nightly", "--store", s3, "--scenarios", str(jobs), "--no-compact", "--date"]
    for day in ("2026-11-29", "2026-11-30", "2026-12-01"):
        assert main([*nightly, day]) == 0
    # a re-run of a date replaces its rows
    assert main([*nightly, "2026-12-01"]) == 0
    capsys.readouterr()
    keys = _keys(s3)
    assert not [k for k in keys if k.startswith(STAGING_DIR)]
    assert "recommendations/snapshot_month=2026-11/part-2026-11-30-gpt2-6usd.parquet" in keys

    store = Store.open(s3)
    recs = store.read("recommendations")
    assert sorted(recs.groupby("snapshot_date").size().to_dict().items()) == [
        ("2026-11-29", 2),
        ("2026-11-30", 2),
        ("2026-12-01", 2),
    ]
    assert store.partitions("fleet") == ["2026-11-29", "2026-11-30", "2026-12-01"]

    assert main(["recommend", "--budget", "3", "--store", s3, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prices_snapshot"].startswith("store:prices@2026-12-01")
    assert main(["fleet", "--scenarios", str(jobs), "--store", s3, "--json"]) == 0
    fleet = json.loads(capsys.readouterr().out)
    assert {j["scenario"] for j in fleet["jobs"]} == {"resnet50-3usd", "gpt2-6usd"}
    recs = Store.open(s3).read("recommendations")  # recommend --store wrote its run too
    assert len(recs) == 9

    assert main(["store", "compact", "--store", s3, "--before", "2026-12-01", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["months"]["recommendations"] == ["2026-11"]
    assert done["files_merged"]["recommendations"] == 4
    keys = _keys(s3)
    november = [k for k in keys if k.startswith("recommendations/snapshot_month=2026-11/")]
    assert november == ["recommendations/snapshot_month=2026-11/part-compacted.parquet"]
    after = Store.open(s3).read("recommendations")
    key = ["snapshot_date", "scenario", "rank"]
    pd.testing.assert_frame_equal(
        after.sort_values(key).reset_index(drop=True), recs.sort_values(key).reset_index(drop=True)
    )

    # pyarrow reads the compacted store as-is: the month from the path, the date from the files
    bucket_path = s3[len("s3://") :]
    table = pq.read_table(f"{bucket_path}/recommendations", filesystem=_fs(s3_endpoint))
    rows = table.to_pandas()
    assert len(rows) == 9
    assert set(rows["snapshot_month"].astype(str)) == {"2026-11", "2026-12", today_utc()[:7]}
    assert set(rows["snapshot_date"].astype(str)) == {
        "2026-11-29",
        "2026-11-30",
        "2026-12-01",
        today_utc(),
    }
    assert main(["store", "check", "--store", s3, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"]

    # a re-run of a compacted date replaces its rows in the month file too
    assert main([*nightly, "2026-11-30"]) == 0
    again = Store.open(s3).read("recommendations")
    assert again.groupby("snapshot_date").size().to_dict()["2026-11-30"] == 2
    table = pq.read_table(f"{bucket_path}/recommendations", filesystem=_fs(s3_endpoint))
    assert table.num_rows == 9  # what a plain reader sees: no duplicate rows


def test_a_failed_transaction_publishes_nothing_and_a_dead_one_is_rolled_forward(s3, monkeypatch):
    store = Store.open(s3)
    rows = pd.DataFrame(
        {
            "region": ["r"],
            "instance_type": ["a"],
            "workload": ["w"],
            "market": ["spot"],
            "achieved_flops": [1.0],
            "usd_per_hour": [1.0],
            "flopp": [3600.0],
            "flops_source": ["published:lambda"],
        }
    )
    with pytest.raises(RuntimeError, match="killed"), store.transaction() as tx:
        tx.write("flopp", rows, partition="2026-12-01", name="w1")
        raise RuntimeError("killed")
    assert _keys(s3) == []

    # What a writer killed after its journal and its first copy leaves behind.
    files = store.files
    folder = f"{STAGING_DIR}/dead-writer"
    finals = [f"flopp/snapshot_month=2026-12/part-2026-12-01-w{k}.parquet" for k in (1, 2)]
    for k in range(len(finals)):
        files.write_table(f"{folder}/{k}.parquet.partial", to_arrow("flopp", rows, "2026-12-01"))
    files.write_table(finals[0], to_arrow("flopp", rows, "2026-12-01"))
    journal = {"moves": [[f"{folder}/{k}.parquet.partial", f] for k, f in enumerate(finals)]}
    files.write_bytes(f"{folder}/PUBLISH.json", json.dumps(journal).encode())
    assert len(store.read("flopp")) == 1
    store.recover()  # the journal is fresh: its writer may still be publishing
    assert len(store.read("flopp")) == 1
    monkeypatch.setattr("deepvm.store.ROLL_FORWARD_AFTER_S", 0.0)
    time.sleep(1.1)  # object times have one-second precision
    store.recover()
    assert len(store.read("flopp")) == 2
    assert not [k for k in _keys(s3) if k.startswith(STAGING_DIR)]


def test_machines_appending_to_one_bucket_at_once_lose_nothing(s3):
    context = multiprocessing.get_context("spawn")  # children inherit the AWS_* settings
    writers = [
        context.Process(target=append_benchmarks, args=(s3, f"machine-{m}", 8)) for m in range(3)
    ]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
        assert w.exitcode == 0
    rows = Store.open(s3).read("benchmarks")
    assert len(rows) == 24 and rows["run_id"].nunique() == 24


def test_a_missing_bucket_is_one_line_and_exit_2(s3, tmp_path, capsys):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    argv = ["nightly", "--store", "s3://no-such-bucket-here/x", "--scenarios", str(jobs)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-bucket-here" in err[0] and "create the bucket" in err[0]


def test_an_unknown_scheme_is_named(tmp_path, capsys):
    assert main(["store", "check", "--store", "nosuchscheme://x/y"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nosuchscheme://" in err[0]


def test_local_and_s3_stores_hold_the_same_rows(s3, tmp_path: Path):
    """The same writes give the same reads on both."""
    rows = pd.DataFrame(
        {
            "run_id": ["r", "r"],
            "instance_type": ["g", "g"],
            "workload": ["w", "w"],
            "n_nodes": [1, 2],
            "duration_s": [10.0, 5.5],
            "speedup": [1.0, 1.8],
            "source": ["measured", "measured"],
            "measured_at": [pd.Timestamp("2026-12-01", tz="UTC")] * 2,
        }
    )
    reads = []
    for uri in (s3, str(tmp_path / "local")):
        store = Store.open(uri)
        store.write("scaling", rows, partition="2026-11-02", name="a")
        store.write("scaling", rows.head(1), partition="2026-12-01", name="a")
        store.compact(before="2026-12-01")
        store.write("scaling", rows.head(1), partition="2026-11-02", name="a")  # replaces
        reads.append(store.read("scaling").sort_values(["run_date", "n_nodes"]))
    pd.testing.assert_frame_equal(reads[0].reset_index(drop=True), reads[1].reset_index(drop=True))
    assert len(reads[0]) == 2


def test_a_scheme_that_fsspec_serves_is_a_store_too():
    """memory:// has no pyarrow file system: it goes through fsspec, with the same
    layout, replacement and compaction."""
    pytest.importorskip("fsspec")
    rows = pd.DataFrame(
        {
            "run_id": ["r"],
            "instance_type": ["g"],
            "workload": ["w"],
            "n_nodes": [1],
            "duration_s": [1.0],
            "speedup": [1.0],
            "source": ["measured"],
            "measured_at": [pd.Timestamp("2026-12-01", tz="UTC")],
        }
    )
    store = Store.open("memory://deepvm-test/team")
    assert not store.local
    store.write("scaling", rows, partition="2026-11-02", name="a")
    store.write("scaling", rows.assign(n_nodes=2), partition="2026-11-02", name="a")  # replaces
    store.write("scaling", rows, partition="2026-12-01", name="a")
    assert store.compact(before="2026-12-01").months["scaling"] == ["2026-11"]
    assert sorted(store.files.walk("scaling")) == [
        "scaling/run_month=2026-11/part-compacted.parquet",
        "scaling/run_month=2026-12/part-2026-12-01-a.parquet",
    ]
    read = store.read("scaling").sort_values("run_date")
    assert read[["run_date", "n_nodes"]].values.tolist() == [["2026-11-02", 2], ["2026-12-01", 1]]
