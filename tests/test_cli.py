"""The `deepvm` command: the --json contract, the table, bad input, the store."""

import itertools
import json
import os
import subprocess
import sys

import duckdb
import pandas as pd
import pytest
from tests_paths import PAPER, PAPER_ARGS, ROOT

from deepvm.cli import main
from deepvm.performance.flopp import shipped_published
from deepvm.planner.candidates import ARCHITECTURES
from tests.helpers import whole

REC_KEYS = {
    "policy",
    "rank",
    "architecture",
    "worker_type",
    "n_workers",
    "n_spot",
    "n_on_demand",
    "remote_type",
    "n_remote",
    "hourly_cost",
    "throughput_flops",
    "objective_value",
}


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_recommend_json_contract(capsys):
    out = run_json(capsys, "recommend", "--budget", "3", "--json", "--policy", "all")
    assert out["budget"] == 3 and out["objective"] == "throughput"
    recs = out["recommendations"]
    assert {r["policy"] for r in recs} == {
        "deepvm",
        "deepvm_noscale",
        "cost_first",
        "performance_first",
        "on_demand",
    }
    for r in recs:
        assert set(r) >= REC_KEYS
        assert r["architecture"] in ARCHITECTURES
        assert r["n_spot"] + r["n_on_demand"] == r["n_workers"]
        assert 0 < r["hourly_cost"] <= 3 + 1e-9
        if r["architecture"] == "tiering":
            assert r["remote_type"] and r["n_remote"] >= 1 and r["n_on_demand"] == 0
        else:
            assert r["remote_type"] is None and r["n_remote"] == 0
        if r["architecture"] == "single_anchor":
            assert r["n_on_demand"] == 1
        if r["architecture"] == "on_demand":
            assert r["n_spot"] == 0
        assert r["objective_value"] == pytest.approx(r["throughput_flops"])
    deepvm = [r for r in recs if r["policy"] == "deepvm"]
    assert [r["rank"] for r in deepvm] == [1, 2, 3]
    # ranked best first; deepvm is at least as fast as every other policy's pick
    assert deepvm[0]["throughput_flops"] >= max(r["throughput_flops"] for r in recs) * (1 - 1e-9)
    assert all(
        a["throughput_flops"] >= b["throughput_flops"] * (1 - 1e-9)
        for a, b in itertools.pairwise(deepvm)
    )


def test_recommend_throughput_is_model_times_flops(capsys):
    from deepvm.catalog import load_catalog
    from deepvm.performance.overhead import resolve_models, shipped_overhead_table

    out = run_json(capsys, "recommend", "--budget", "5", "--top", "6", "--json")
    catalog = load_catalog().instances.set_index(["region", "instance_type"])
    published = shipped_published()
    figures = dict(
        zip(
            zip(published.table["instance_type"], published.table["workload"], strict=True),
            published.table["flops"],
            strict=True,
        )
    )
    assert {r["flops_source"] for r in out["recommendations"]} == {"transferred", "estimate"}
    for r in out["recommendations"]:
        model = resolve_models([r["worker_type"]], "resnet50", [shipped_overhead_table()])[
            r["worker_type"]
        ]
        if r["flops_source"] == "estimate":  # peak x the share published figures reach
            assert (r["worker_type"], "resnet50") not in figures
            row = catalog.loc[(r["region"], r["worker_type"])]
            per_gpu = row["peak_flops"] / row["accelerator_count"]
            f = row["peak_flops"] * published.share("resnet50", per_gpu)[0]
        else:
            f = figures[r["worker_type"], "resnet50"]
        assert r["throughput_flops"] == pytest.approx(f * model([r["n_workers"]])[0])
        assert r["overhead_source"] == model.source


def test_paper_objective_and_scenario(capsys):
    out = run_json(
        capsys,
        "recommend",
        "--budget",
        "4",
        "--json",
        "--objective",
        "paper",
        "--top",
        "1",
        *PAPER_ARGS,
    )
    (r,) = out["recommendations"]
    assert r["architecture"] in ("single_anchor", "tiering")
    spot = {"g3s.xlarge": 0.225, "g4dn.xlarge": 0.1578, "g5.xlarge": 0.3018}[r["worker_type"]]
    assert r["objective_value"] == pytest.approx(3600 * r["throughput_flops"] / spot)
    assert r["flops_source"] == "file"  # the paper scenario's --throughput file


def test_recommend_table_output(capsys):
    assert main(["recommend", "--budget", "3"]) == 0
    text = capsys.readouterr().out
    assert "deepvm" in text and "TFLOP/s" in text and "$/h" in text


def test_store_written_and_read_by_duckdb(tmp_path, capsys):
    store = tmp_path / "store"
    for _ in range(2):  # same scenario twice the same day: replaced, not duplicated
        assert (
            main(["recommend", "--budget", "3", "--store", str(store), "--json", "--policy", "all"])
            == 0
        )
    assert main(["recommend", "--budget", "6", "--store", str(store), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out.split("\n}\n")[-2] + "\n}")
    df = whole(store, "recommendations").df()
    assert sorted(df["budget"].unique()) == [3.0, 6.0]
    three = df[df["budget"] == 3.0]
    assert len(three) == len(three.drop_duplicates(["policy", "rank"]))
    assert set(three["policy"]) == {
        "deepvm",
        "deepvm_noscale",
        "cost_first",
        "performance_first",
        "on_demand",
    }
    six = df[df["budget"] == 6.0].sort_values("rank")
    assert six["worker_type"].tolist() == [r["worker_type"] for r in printed["recommendations"]]
    assert "snapshot_date" in df.columns and df["status"].eq("optimal").all()
    from deltalake import DeltaTable

    table = DeltaTable(store / "recommendations")
    assert table.metadata().configuration["deepvm.schemaVersion"] == "3"
    # the rows the second run superseded are deleted, not only hidden
    assert table.to_pandas().shape[0] == len(df)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("provider,region,instance_type\naws,r,x\n", "lacks column(s) quota_group"),
        (None, "ondemand_price=-1 must be > 0"),
    ],
)
def test_bad_catalog(tmp_path, capsys, rows, message):
    path = tmp_path / "cat.csv"
    if rows is None:
        df = pd.read_csv(PAPER / "catalog.csv")
        df.loc[2, "ondemand_price"] = -1
        df.to_csv(path, index=False)
    else:
        path.write_text(rows)
    store = tmp_path / "store"
    assert main(["recommend", "--budget", "3", "--catalog", str(path), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(path) in err
    if rows is None:
        assert "row 3 (instance_type=g5.xlarge)" in err
    assert not store.exists()


def test_unknown_workload(capsys, tmp_path):
    assert (
        main(
            ["recommend", "--budget", "3", "--workload", "alexnet", "--store", str(tmp_path / "s")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "unknown workload 'alexnet'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_custom_workload_from_throughput_file(capsys, tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("instance_type,workload,flops\ng5.xlarge,mymodel,2e13\n")
    out = run_json(
        capsys,
        "recommend",
        "--budget",
        "3",
        "--json",
        "--workload",
        "mymodel",
        "--throughput",
        str(f),
        "--checkpoint-gb",
        "1",
    )
    measured = [r for r in out["recommendations"] if r["worker_type"] == "g5.xlarge"]
    assert all(r["flops_source"] == "measured" for r in measured)


def test_budget_below_cheapest(capsys, tmp_path):
    assert main(["recommend", "--budget", "0.2", "--store", str(tmp_path / "s"), *PAPER_ARGS]) == 2
    err = capsys.readouterr().err.strip()
    # cheapest: 1 spot g4dn.xlarge (0.1578) + 1 t3.xlarge remote (0.1664) = 0.3242
    assert "cheapest feasible cluster" in err and "0.3242" in err and "0.33" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["recommend", "--budget", "-1"], "--budget: '-1' must be a finite number > 0"),
        (["recommend", "--budget", "3", "--policy", "cheapest"], "--policy 'cheapest' is not a"),
        (["recommend", "--budget", "3", "--catalog", "/nope.csv"], "does not exist"),
        (["sweep", "--budgets", "5:1:1"], "START:STOP:STEP"),
        (["recommend", "--budget", "3", "--checkpoint-gb", "-2"], "--checkpoint-gb: '-2'"),
    ],
)
def test_bad_arguments(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_quota_and_throughput_files(capsys, tmp_path):
    q = tmp_path / "q.csv"
    q.write_text("quota_group,market,vcpus\nG,reserved,4\n")
    assert main(["recommend", "--budget", "3", "--quotas", str(q)]) == 2
    assert "row 1: market='reserved'" in capsys.readouterr().err
    t = tmp_path / "t.csv"
    t.write_text("instance_type,workload,flops\ng5.xlarge,resnet50,abc\n")
    assert main(["recommend", "--budget", "3", "--throughput", str(t)]) == 2
    assert "flops='abc' is not a number" in capsys.readouterr().err


def test_sweep_json_and_parquet(capsys, tmp_path):
    out_file = tmp_path / "sweep.parquet"
    out = run_json(
        capsys, "sweep", "--budgets", "0.5:3.1:0.5", "--json", "--out", str(out_file), *PAPER_ARGS
    )
    assert out["budgets"] == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    rows = out["results"]
    assert {r["policy"] for r in rows} == {
        "deepvm",
        "deepvm_noscale",
        "cost_first",
        "performance_first",
        "on_demand",
    }
    top = [r for r in rows if r["policy"] == "deepvm" and r["budget"] == 3.0]
    assert top[0]["normalized"] == pytest.approx(1.0)
    for r in rows:
        assert r["hourly_cost"] <= r["budget"] + 1e-9
        assert r["normalized"] <= 1 + 1e-9 or r["policy"] != "deepvm"
    deepvm = sorted((r for r in rows if r["policy"] == "deepvm"), key=lambda r: r["budget"])
    assert all(
        a["throughput_flops"] <= b["throughput_flops"] + 1e-6 for a, b in itertools.pairwise(deepvm)
    )
    df = duckdb.sql(f"select * from '{out_file}'").df()
    assert len(df) == len(rows)
    # every output of a sweep carries the cluster as deepvm.model.cluster.Cluster has it
    from deepvm.model.cluster import CLUSTER_FIELDS

    assert set(CLUSTER_FIELDS) <= set(df.columns) and set(CLUSTER_FIELDS) <= set(rows[0])
    assert (df["n_spot"] + df["n_on_demand"] == df["n_workers"]).all()
    assert set(df["cloud"]) == {"aws"}


def test_sweep_matches_recommend_per_budget(capsys):
    out = run_json(
        capsys, "sweep", "--budgets", "1,2.2,3.7", "--json", "--policy", "deepvm", *PAPER_ARGS
    )
    for row in out["results"]:
        rec = run_json(
            capsys, "recommend", "--budget", str(row["budget"]), "--json", "--top", "1", *PAPER_ARGS
        )["recommendations"][0]
        assert rec["throughput_flops"] == pytest.approx(row["throughput_flops"])
        assert rec["hourly_cost"] == pytest.approx(row["hourly_cost"])


def test_catalog_and_flopp_commands(capsys, tmp_path):
    out = run_json(capsys, "catalog", "--kind", "gpu", "--json")
    names = {r["instance_type"] for r in out["instances"]}
    assert {"g4dn.xlarge", "g5.48xlarge", "p5.48xlarge", "g6e.xlarge"} <= names
    out = run_json(capsys, "flopp", "--json", "--market", "spot", "--store", str(tmp_path))
    values = [r["flopp"] for r in out["rows"]]
    assert values == sorted(values, reverse=True)
    r = out["rows"][0]
    assert r["flopp"] == pytest.approx(3600 * r["achieved_flops"] / r["usd_per_hour"])
    stored = whole(tmp_path, "flopp").df()
    assert len(stored) == len(out["rows"]) and set(stored["market"]) == {"spot"}


def test_readme_main_command_as_subprocess(tmp_path):
    readme = (ROOT / "README.md").read_text()
    head = readme[:800]
    assert "deepvm recommend --budget 3" in head and "pytest" in head
    env = {k: v for k, v in os.environ.items() if k != "DEEPVM_STORE"}
    done = subprocess.run(
        [sys.executable, "-m", "deepvm", "recommend", "--budget", "3"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "deepvm" in done.stdout and "Running HiGHS" not in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "deepvm", "recommend", "--budget", "3", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert json.loads(done.stdout)["recommendations"][0]["rank"] == 1


def test_the_readmes_command_outputs_are_what_the_commands_print(tmp_path, monkeypatch):
    """Every ```text block of the README that starts with `$ deepvm ...` shows that
    command's output on the shipped data, exactly."""
    import re
    import shlex

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPVM_STORE", raising=False)
    blocks = re.findall(
        r"```text\n\$ (deepvm [^\n]*)\n(.*?)```", (ROOT / "README.md").read_text(), re.S
    )
    assert len(blocks) >= 2
    for command, shown in blocks:
        done = subprocess.run(
            [sys.executable, "-m", *shlex.split(command)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == shown, command


def test_global_flags_after_the_command_name(capsys, tmp_path):
    """-q and -v work after the command too (they were refused there)."""
    from deepvm.cli import _output as output

    assert main(["recommend", "--budget", "3", "--json", "-q"]) == 0
    assert output.QUIET is True
    json.loads(capsys.readouterr().out)
    assert main(["prices", "show", "--store", str(tmp_path / "none"), "-v"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("deepvm: error: ")
    assert main(["-q", "recommend", "--budget", "3", "--json"]) == 0
    capsys.readouterr()
