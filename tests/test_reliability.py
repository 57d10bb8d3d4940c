"""The measured loop never breaks, and a failure never half-writes the store:
benchmark -> recommend/flopp/sweep/compare/nightly on one store; a nightly that
fails part-way (bad file, full disk, crash, kill) leaves the store as it was;
colliding names refused; price sources give up within their deadline."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable
from helpers import append_benchmarks, whole
from tests_paths import ROOT

from deepvm.cli import main
from deepvm.store import TABLES, Store

DAY1, DAY2 = "2026-11-30", "2026-12-01"
ONE_JOB = """
[[job]]
name = "resnet50-3usd"
workload = "resnet50"
budget = 3.0
policies = ["deepvm"]
top = 1
"""


def tree_hash(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the hash of its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def what_deepvm_reads(root: Path) -> dict[str, list]:
    """Every table's rows as deepvm reads them (sorted, as text)."""
    store = Store.open(root)
    return {t: sorted(map(str, store.read(t).astype(str).itertuples(index=False))) for t in TABLES}


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(ONE_JOB)
    return path


@pytest.fixture
def night1(tmp_path: Path, jobs: Path) -> Path:
    """A store after one successful night."""
    store = tmp_path / "store"
    code = main(["nightly", "--store", str(store), "--jobs", str(jobs), "--date", DAY1])
    assert code == 0
    return store


# --- the measured loop ------------------------------------------------------------------


def test_benchmark_then_every_planning_command_on_that_store(tmp_path, capsys, jobs):
    """Regression (issue 11): a benchmark of a machine the catalog does not list
    (local:<cpu>) crashed recommend, flopp, sweep, compare and nightly on pandas 3."""
    store = str(tmp_path / "s")
    assert main(["benchmark", "--workload", "tiny", "--steps", "3", "--store", store]) == 0
    capsys.readouterr()
    assert main(["recommend", "--budget", "3", "--store", store, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recommendations"] and out["measurements"]["used"] == []
    assert main(["recommend", "--budget", "3", "--store", store, "--workload", "tiny"]) == 0
    assert "not used: local:" in capsys.readouterr().out  # says which it could not use
    assert main(["flopp", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]
    assert main(["sweep", "--budgets", "1,3", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"]
    argv = ["compare", "--budget", "3", "--work", "1e18", "--store", store, "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["rows"]
    assert main(["nightly", "--store", store, "--jobs", str(jobs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plans"][0]["error"] is None


def test_a_benchmark_recorded_as_a_catalog_type_is_used_and_named(tmp_path, capsys):
    store = str(tmp_path / "s")
    argv = ["benchmark", "--workload", "tiny", "--steps", "3", "--store", store]
    assert main([*argv, "--instance-type", "g4dn.xlarge"]) == 0
    capsys.readouterr()
    argv = ["recommend", "--budget", "3", "--workload", "tiny", "--store", store, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    used = out["measurements"]["used"]
    assert [u["instance_type"] for u in used] == ["g4dn.xlarge"]
    assert used[0]["source"].startswith("benchmark ")
    assert main(["flopp", "--workload", "tiny", "--store", store, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    sources = {r["instance_type"]: r["flops_source"] for r in rows}
    assert sources["g4dn.xlarge"] == "measured" and sources["g6.xlarge"] == "estimate"


def test_throughput_file_for_another_workload_does_not_break_planning(tmp_path, capsys):
    t = tmp_path / "t.csv"
    t.write_text("instance_type,workload,flops\ng4dn.xlarge,gpt2,1e13\nlocal:x,resnet50,1e12\n")
    assert main(["recommend", "--budget", "3", "--throughput", str(t), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "measured" not in {r["flops_source"] for r in out["recommendations"]}
    assert out["measurements"]["not_used"][0]["instance_type"] == "local:x"


# --- a date whole or not at all ------------------------------------------------------------


def test_nightly_with_a_corrupt_file_leaves_the_store_byte_identical(night1, jobs, capsys):
    (bad,) = (night1 / "instances").glob("*.parquet")
    bad.write_bytes(b"")  # zero bytes: what a full disk or a killed copy leaves
    before = tree_hash(night1)
    argv = ["nightly", "--store", str(night1), "--jobs", str(jobs), "--date", DAY2]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'instances'" in err[0] and "deepvm store check" in err[0]
    assert tree_hash(night1) == before


def test_nightly_on_a_full_disk_changes_nothing_a_reader_sees(night1, jobs, capsys, monkeypatch):
    import deltalake

    real, calls = deltalake.write_deltalake, []

    def disk_fills_up(table, data, *args, **kwargs):
        calls.append(table)
        if len(calls) == 3:  # two tables committed; the disk is full at the third
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(table, data, *args, **kwargs)

    monkeypatch.setattr(deltalake, "write_deltalake", disk_fills_up)
    before = what_deepvm_reads(night1)
    argv = ["nightly", "--store", str(night1), "--jobs", str(jobs), "--date", DAY2]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no space left" in err[0] and str(night1) in err[0]
    assert what_deepvm_reads(night1) == before
    # the two tables already committed lost the failed commit's rows again
    for table in ("fleet", "flopp"):
        dates = DeltaTable(night1 / table).to_pandas()["snapshot_date"].astype(str)
        assert set(dates) == {DAY1}


def test_nightly_that_crashes_part_way_publishes_nothing(night1, jobs, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("a bug in the change report")

    monkeypatch.setattr("deepvm.nightly.stages.change_report", crash)
    before = tree_hash(night1)
    with pytest.raises(RuntimeError, match="a bug in the change report"):
        main(["nightly", "--store", str(night1), "--jobs", str(jobs), "--date", DAY2])
    assert tree_hash(night1) == before


KILLED_NIGHT = """
import sys, time
from pathlib import Path
import deepvm.nightly.stages as p
real = p.replan
def slow(*args, **kwargs):
    out = real(*args, **kwargs)          # recommendations staged, not yet published
    Path(sys.argv[1]).write_text("staged")
    time.sleep(120)
    return out
p.replan = slow
from deepvm.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_killed_nightly_leaves_nothing_a_reader_trips_on(night1, jobs, tmp_path):
    before = tree_hash(night1)
    flag = tmp_path / "flag"
    argv = ["nightly", "--store", str(night1), "--jobs", str(jobs), "--date", DAY2]
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_NIGHT, str(flag), *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert tree_hash(night1) == before  # killed before its commit: nothing written


# --- names that become file names ------------------------------------------------------


def test_scenario_names_alike_as_file_names_keep_their_own_rows(tmp_path, capsys):
    """Writers are a column of the Delta tables, not a file name: "a b" and "a/b"
    (one file name in deepvm 0.2, refused there) are two writers now."""
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[[job]]\nname = "a b"\nworkload = "tiny"\nbudget = 3.0\n\n'
        '[[job]]\nname = "a/b"\nworkload = "tiny"\nbudget = 4.0\n'
    )
    store = tmp_path / "s"
    assert main(["nightly", "--store", str(store), "--jobs", str(path)]) == 0
    recs = Store.open(store).read("recommendations")
    assert recs.groupby("scenario")["budget"].first().to_dict() == {"a b": 3.0, "a/b": 4.0}


def test_instance_types_alike_as_file_names_keep_their_own_rows(tmp_path, capsys):
    """Each benchmark run appends a file of its own: two types that are one name
    once made file-safe no longer share (and overwrite) a file."""
    store = str(tmp_path / "s")
    argv = ["benchmark", "--workload", "tiny", "--steps", "3", "--store", store]
    assert main([*argv, "--instance-type", "coll:1"]) == 0
    assert main([*argv, "--instance-type", "coll/1"]) == 0
    capsys.readouterr()
    rows = whole(store, "benchmarks").select("instance_type").df()
    assert sorted(rows["instance_type"]) == ["coll/1", "coll:1"]


def test_machines_appending_at_once_lose_nothing(tmp_path):
    """Regression: a writer's recover() could take another writer's staging folder,
    made but not yet locked, for a dead writer's and remove it."""
    import multiprocessing

    store = str(tmp_path / "s")
    context = multiprocessing.get_context("spawn")
    writers = [
        context.Process(target=append_benchmarks, args=(store, f"machine-{m}", 25))
        for m in range(4)
    ]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
        assert w.exitcode == 0
    rows = whole(store, "benchmarks").select("run_id").df()
    expected = [f"machine-{m}-{k}" for m in range(4) for k in range(25)]
    assert sorted(rows["run_id"]) == sorted(expected)


# --- price sources -------------------------------------------------------------------------


class _Hang(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        time.sleep(30)  # never answers within the deadline


class _NotFound(BaseHTTPRequestHandler):
    hits = 0

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).hits += 1
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize(
    ("source", "variable"), [("azure", "DEEPVM_AZURE_PRICES_URL"), ("gcp", "DEEPVM_GCP_PRICES_URL")]
)
def test_a_hanging_endpoint_gives_up_within_its_timeout(
    tmp_path, monkeypatch, capsys, source, variable
):
    server, url = _serve(_Hang)
    monkeypatch.setenv(variable, url)
    try:
        start = time.monotonic()
        argv = ["prices", "refresh", "--source", source, "--timeout", "2"]
        code = main([*argv, "--store", str(tmp_path / "s")])
        elapsed = time.monotonic() - start
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1 and elapsed < 20  # not 4 attempts x 30 s (a busy machine: slow, not 60 s)
    err = capsys.readouterr().err
    assert "within the 2 s deadline" in err and "no earlier snapshot" in err
    assert not (tmp_path / "s" / "prices").exists()


def test_a_permanent_http_error_is_not_retried(tmp_path, monkeypatch, capsys):
    _NotFound.hits = 0
    server, url = _serve(_NotFound)
    monkeypatch.setenv("DEEPVM_AZURE_PRICES_URL", url)
    store = str(tmp_path / "s")
    try:
        for _ in range(2):  # an empty store: the same exit status every time
            code = main(["prices", "refresh", "--source", "azure", "--store", store])
            assert code == 1
    finally:
        server.shutdown()
        server.server_close()
    assert _NotFound.hits == 2  # one attempt per run: a 404 will not mend
    assert "HTTP 404" in capsys.readouterr().err


def test_a_failed_refresh_on_a_date_with_prices_still_fails(tmp_path, monkeypatch, capsys):
    store = str(tmp_path / "s")
    assert main(["prices", "refresh", "--store", store, "--date", DAY1]) == 0
    capsys.readouterr()
    before = tree_hash(tmp_path / "s")
    server, url = _serve(_NotFound)
    monkeypatch.setenv("DEEPVM_AZURE_PRICES_URL", url)
    try:
        argv = ["prices", "refresh", "--source", "azure", "--store", store, "--date", DAY1]
        assert main([*argv, "--json"]) == 1
    finally:
        server.shutdown()
        server.server_close()
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] is True and out["stale"] is True and "HTTP 404" in out["error"]
    assert tree_hash(tmp_path / "s") == before  # the date keeps what it had


def test_nightly_names_an_unreachable_source(tmp_path, monkeypatch, jobs, capsys):
    server, url = _serve(_NotFound)
    monkeypatch.setenv("DEEPVM_AZURE_PRICES_URL", url)
    store = str(tmp_path / "s")
    assert main(["prices", "refresh", "--store", store, "--date", DAY1]) == 0
    argv = ["nightly", "--store", store, "--jobs", str(jobs), "--date", DAY2]
    try:
        code = main([*argv, "--source", "azure", "--regions", "eastus"])
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    # every region of the carried snapshot is planned; the source is named as the cause
    assert code == 1 and "price source 'azure' unreachable" in err and "HTTP 404" in err
    assert "no prices for region" not in err


# --- output that tools read ---------------------------------------------------------------


def _no_constants(text: str) -> object:
    raise AssertionError(f"{text} is not JSON")


def test_json_never_prints_nan(capsys):
    # without --work the makespan and total cost are unknown: null, not NaN
    assert main(["recommend", "--budget", "3", "--json", "--policy", "all"]) == 0
    out = capsys.readouterr().out
    recs = json.loads(out, parse_constant=_no_constants)["recommendations"]
    assert recs and all(r["expected_makespan_h"] is None for r in recs)
    assert main(["sweep", "--budgets", "0.05,3", "--json"]) == 0
    json.loads(capsys.readouterr().out, parse_constant=_no_constants)


def test_noisy_benchmark_is_flagged_in_the_stored_rows(tmp_path):
    from deepvm.bench._measure import Measurement
    from deepvm.bench.run import BenchmarkResult, benchmark_frame, identify
    from deepvm.records.results import write_benchmarks

    noisy = Measurement(
        workload="tiny",
        device="cpu",
        dtype="float32",
        batch_size=8,
        warmup=1,
        step_times_s=(0.01, 0.01, 0.01, 0.03, 0.03),
        flops_per_step=1e6,
        wall_s=1.0,
    )
    frame = benchmark_frame([BenchmarkResult("tiny", "ok", noisy)], identify("bench-x"))
    write_benchmarks(frame, Store.open(tmp_path))
    rows = whole(tmp_path, "benchmarks").select("warning").fetchall()
    assert rows[0][0] is not None and rows[0][0].startswith("noisy: step time p90/p10 = 3.00")
    quiet = Measurement("tiny", "cpu", "float32", 8, 1, (0.01, 0.0101, 0.0102), 1e6, 1.0)
    assert (
        benchmark_frame([BenchmarkResult("tiny", "ok", quiet)], identify("b"))["warning"]
        .isna()
        .all()
    )


def test_superlinear_speedups_are_not_fitted_and_negative_r2_is_warned(tmp_path, capsys):
    from deepvm.performance.fitting import Fit, fit_warnings
    from deepvm.performance.overhead import SpeedupModel

    scaling = tmp_path / "s.csv"
    scaling.write_text(
        "instance_type,workload,n_nodes,speedup\n"
        "g,w,1,1\ng,w,2,5.0\ng,w,4,3.0\ng,w,8,4\n"  # 5x on 2 nodes: a bad 1-node run
    )
    assert main(["fit", "--scaling", str(scaling)]) == 1
    assert "speedup 5 at 2 nodes is above the node count" in capsys.readouterr().err
    flat = Fit("g", "w", SpeedupModel("linear", {}), 1.0, 1.0, -0.5, 3, selected=True)
    assert "r2 = -0.5 < 0" in fit_warnings([flat])[0]


def test_a_foreign_parquet_file_in_a_table_folder_is_not_read(night1, capsys):
    """Delta reads the files its log names: a stray file changes no answer."""
    foreign = night1 / "prices" / f"snapshot_month={DAY1[:7]}" / "part-other.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(foreign)
    before = what_deepvm_reads(night1)
    assert main(["recommend", "--budget", "3", "--store", str(night1), "--json"]) == 0
    capsys.readouterr()
    after = what_deepvm_reads(night1)
    assert after["prices"] == before["prices"] and foreign.exists()


def test_a_read_only_store_is_refused_before_any_work(tmp_path, capsys):
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)]).returncode:
        pytest.skip("mounting a tmpfs needs privileges this machine does not give")
    try:
        store = mount / "store"
        assert main(["prices", "refresh", "--store", str(store)]) == 0
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        capsys.readouterr()
        assert main(["recommend", "--budget", "3", "--store", str(store)]) == 2
        err = capsys.readouterr().err
        assert "is not writable" in err and str(store) in err
    finally:
        subprocess.run(["umount", str(mount)], check=False)
