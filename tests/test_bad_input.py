"""Bad input, every command: exit status 2, one ``deepvm: error:`` line that names
the bad value, nothing on stdout, and a store and working directory left exactly
as they were (hashed before and after)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from deepvm.cli import main

LONG = "x" * 200
SIMULATED = ["simulate", "preemption", "--n-spot", "2", "--interruption-rate", "0.1"]


def tree_hash(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".deepvm-staging.lock"  # the empty store-wide guard
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store with prices and a recommendation, and bad input files."""
    base = tmp_path_factory.mktemp("bad-input")
    store = base / "store"
    assert main(["prices", "refresh", "--store", str(store), "--date", "2026-12-01"]) == 0
    assert main(["recommend", "--budget", "3", "--store", str(store)]) == 0
    header = (
        "provider,region,instance_type,quota_group,vcpus,memory_gib,network_gbps,"
        "accelerator_name,accelerator_count,ondemand_price,spot_price,peak_flops\n"
    )
    made = {
        "fractional.csv": header + "aws,r,g1,G,4,16,10,T4,1.5,0.5,0.2,6.5e13\n",
        "absurd.csv": header + "aws,r,g1,G,4,16,10,T4,1,0.5,0.2,1e20\n",
        "negative.csv": header + "aws,r,g1,G,4,16,10,T4,1,-1,0.2,6.5e13\n",
        "columns.csv": "instance_type,price\ng1,1\n",
        "throughput.csv": "instance_type,workload,flops\ng4dn.xlarge,resnet50,nan\n",
        "quotas.csv": "quota_group,market,vcpus\nG,reserved,4\n",
        "bad.toml": "[[job]\nname =",
        "policies.toml": '[[job]]\nname = "j"\nworkload = "tiny"\nbudget = 3.0\npolicies = 5\n',
        "twice.toml": '[[job]]\nname = "a b"\nworkload = "tiny"\nbudget = 3.0\n\n'
        '[[job]]\nname = "a b"\nworkload = "tiny"\nbudget = 4.0\n',
        "gpt3.toml": '[[job]]\nname = "j"\nworkload = "gpt3"\nbudget = 3.0\n',
        "plain.txt": "not a folder\n",
        "priority.toml": '[[job]]\nname = "j"\nworkload = "tiny"\nbudget = 3.0\npriority = 1e308\n',
        "throughput-absurd.csv": "instance_type,workload,flops\ng4dn.xlarge,resnet50,1e40\n",
        "saturation-absurd.csv": "bandwidth_gbps,workers\n1e308,1e308\n",
        "quotas-fraction.csv": "quota_group,market,vcpus\nG,spot,1.5\n",
        "checkpoint.toml": '[[workload]]\nname = "w"\ntrain_flops_per_sample = 1e9\n'
        "parameters = 1000\naccelerator_memory_gib = 4\ncheckpoint_gb = 1e308\n",
        "budget.toml": '[[job]]\nname = "j"\nworkload = "tiny"\nbudget = 1e308\n',
        "number.csv": "name,train_flops_per_sample,parameters,accelerator_memory_gib\n"
        "5,1e9,1000,4\n",
        "memory.toml": '[[workload]]\nname = "w"\ntrain_flops_per_sample = 1e9\n'
        "parameters = 1000\naccelerator_memory_gib = true\n",
    }
    for name, text in made.items():
        (base / name).write_text(text)
    (base / "folder").mkdir()
    (base / "launch-remote.yaml").mkdir()  # where --sky-yaml launch.yaml's remote task goes
    return {"store": str(store), "dir": str(base)}


# (argv, a fragment of the error line). {store} and {dir} are filled in.
CASES: list[tuple[list[str], str]] = [
    # recommend: numbers
    (["recommend", "--budget", "-1"], "'-1'"),
    (["recommend", "--budget", "nan"], "'nan'"),
    (["recommend", "--budget", "inf"], "'inf'"),
    (["recommend", "--budget", "abc"], "'abc' is not a number"),
    (["recommend", "--budget", "0.001"], "$0.001/h is below the cheapest"),
    (["recommend", "--budget", "3", "--top", "0"], "--top: '0'"),
    (["recommend", "--budget", "3", "--top", "1.5"], "--top: '1.5'"),
    (["recommend", "--budget", "3", "--restart-s", "nan"], "--restart-s: 'nan'"),
    (["recommend", "--budget", "3", "--time-limit", "-5"], "--time-limit: '-5'"),
    (["recommend", "--budget", "3", "--time-limit=-5"], "--time-limit: '-5'"),
    (["recommend", "--budget", "3", "--max-nodes", "0"], "--max-nodes: '0'"),
    (["recommend", "--budget", "3", "--checkpoint-gb", "-2"], "--checkpoint-gb: '-2'"),
    (["recommend", "--budget", "3", "--checkpoint-versions", "0"], "--checkpoint-versions: '0'"),
    (["recommend", "--budget", "3", "--work", "0"], "--work: '0'"),
    (["recommend", "--budget", "3", "--work", "-1e9"], "--work: '-1e9'"),
    (["recommend", "--budget", "3", "--work", "inf"], "--work: 'inf'"),
    (["recommend", "--budget", "3", "--epochs", "5"], "--dataset-size"),
    (["recommend", "--budget", "3", "--work", "1e18", "--epochs", "5"], "--work 1e+18"),
    (["recommend", "--budget", "3", "--deadline-h", "5"], "--deadline-h 5"),
    # recommend: names and files
    (["recommend", "--budget", "3", "--objective", "bogus"], "'bogus'"),
    (["recommend", "--budget", "3", "--policy", "cheapest"], "'cheapest'"),
    (["recommend", "--budget", "3", "--workload", "gpt3"], "'gpt3'"),
    (["recommend", "--budget", "3", "--catalog", "/nope.csv"], "/nope.csv"),
    (["recommend", "--budget", "3", "--catalog", "{dir}/folder"], "/folder' is a folder"),
    (["recommend", "--budget", "3", "--catalog", "{dir}/columns.csv"], "lacks column"),
    (["recommend", "--budget", "3", "--catalog", "{dir}/fractional.csv"], "=1.5 must be a whole"),
    (["recommend", "--budget", "3", "--catalog", "{dir}/absurd.csv"], "peak_flops=1e+20"),
    (["recommend", "--budget", "3", "--catalog", "{dir}/negative.csv"], "ondemand_price=-1"),
    (["recommend", "--budget", "3", "--throughput", "{dir}/throughput.csv"], "flops"),
    (["recommend", "--budget", "3", "--quotas", "{dir}/quotas.csv"], "'reserved'"),
    (["recommend", "--budget", "3", "--store", "{dir}/plain.txt"], "plain.txt' is a file"),
    (["recommend", "--budget", "3", "--store", "{dir}/plain.txt/s"], "which is a file"),
    (["recommend", "--budget", "3", "--store", "s3://bucket/x"], "s3://"),
    (["recommend", "--budget", "3", "--store", "{store}", "--scenario", LONG], "200 characters"),
    (["recommend"], "--budget"),
    # sweep and compare
    (["sweep", "--budgets", "0:1e6:0.1"], "10,000,000 budgets"),
    (["sweep", "--budgets", "5:1:1"], "'5:1:1'"),
    (["sweep", "--budgets", "-1:3:1"], "'-1:3:1'"),
    (["sweep", "--budgets", "a,b"], "'a,b'"),
    (["sweep", "--budgets", "1,nan"], "'1,nan'"),
    (["sweep", "--budgets", "1,2", "--out", "x.csv"], "'x.csv'"),
    (["sweep", "--budgets", "1,2", "--out", "{dir}/plain.txt/x.parquet"], "which is a file"),
    (["sweep", "--budgets", "1,2", "--plot", "x.jpg"], "'x.jpg'"),
    (["compare", "--budget", "3"], "--work"),
    (["compare", "--budget", "3", "--work", "-1"], "--work: '-1'"),
    (
        ["compare", "--budget", "3", "--work", "1e18", "--out", "{dir}/folder"],
        "/folder' must end in .parquet",
    ),
    # catalog and flopp
    (["catalog", "--max-price", "nan"], "--max-price: 'nan'"),
    (["catalog", "--kind", "tpu"], "'tpu'"),
    (["catalog", "--catalog", "/nope.csv"], "/nope.csv"),
    (["flopp", "--workload", "gpt3"], "'gpt3'"),
    (["flopp", "--market", "reserved"], "'reserved'"),
    (["flopp", "--store", "{dir}/plain.txt"], "plain.txt' is a file"),
    # benchmark
    (["benchmark", "--workload", "tiny", "--device", "cuda"], "'cuda' is not available"),
    (["benchmark", "--workload", "tiny", "--device", "gpu"], "'gpu'"),
    (["benchmark", "--workload", "tiny", "--device", "cuda:7"], "'cuda:7'"),
    (["benchmark", "--warmup", "-1"], "--warmup: '-1'"),
    (["benchmark", "--steps", "1"], "--steps: '1'"),
    (["benchmark", "--batch-size", "0"], "--batch-size: '0'"),
    (["benchmark", "--workload", "gpt3"], "'gpt3'"),
    (["benchmark", "--workload", "tiny", "--instance-type", LONG], "200 characters"),
    (["benchmark", "--workload", "tiny", "--store", "{dir}/plain.txt/s"], "which is a file"),
    # benchmark-scaling
    (["benchmark-scaling", "--nodes", "2,3"], "'2,3'"),
    (["benchmark-scaling", "--nodes", "a"], "'a'"),
    (["benchmark-scaling", "--nodes", "1,1000"], "'1,1000'"),
    (["benchmark-scaling", "--steps", "0"], "--steps: '0'"),
    # simulate
    (
        [
            "simulate",
            "preemption",
            "--n-spot",
            "4",
            "--interruption-rate",
            "0.1",
            "--work-hours",
            "1",
            "--hourly-cost",
            "-3",
        ],
        "--hourly-cost: '-3'",
    ),
    (
        [
            "simulate",
            "preemption",
            "--n-spot",
            "4",
            "--interruption-rate",
            "0.1",
            "--work-hours",
            "1",
            "--seed",
            "-1",
        ],
        "--seed: '-1'",
    ),
    (
        [
            "simulate",
            "preemption",
            "--n-spot",
            "4",
            "--interruption-rate",
            "0.1",
            "--work-hours",
            "inf",
        ],
        "--work-hours: 'inf'",
    ),
    (
        [
            "simulate",
            "preemption",
            "--n-spot",
            "4",
            "--interruption-rate",
            "0.1",
            "--work-hours",
            "1",
            "--runs",
            "1e9",
        ],
        "--runs: '1e9'",
    ),
    (
        [
            "simulate",
            "preemption",
            "--n-spot",
            "4",
            "--interruption-rate",
            "1.5",
            "--work-hours",
            "1",
        ],
        "--interruption-rate: '1.5'",
    ),
    (
        [
            "simulate",
            "preemption",
            "--n-spot",
            "-1",
            "--interruption-rate",
            "0.1",
            "--work-hours",
            "1",
        ],
        "--n-spot: '-1'",
    ),
    (["simulate", "preemption", "--n-spot", "4"], "--interruption-rate"),
    (["simulate", "preemption", "--instance-type", "nope", "--work-hours", "1"], "'nope'"),
    (
        ["simulate", "preemption", "--instance-type", "g4dn.xlarge", "--work", "nan"],
        "--work: 'nan'",
    ),
    # prices
    (["prices", "refresh", "--store", "{store}", "--date", "typo"], "--date: 'typo'"),
    (["prices", "refresh", "--store", "{store}", "--date", "2026-13-45"], "'2026-13-45'"),
    (["prices", "refresh", "--store", "{store}", "--source", "bogus"], "'bogus'"),
    (["prices", "refresh", "--store", "{store}", "--timeout", "0"], "--timeout: '0'"),
    (["prices", "refresh", "--store", "{store}", "--source", "skypilot"], "--skypilot-csv"),
    (["prices", "refresh", "--store", "{store}", "--regions", ","], "--regions ','"),
    (["prices", "show", "--store", "{dir}/plain.txt"], "plain.txt' is a file"),
    # nightly
    (["nightly", "--store", "{store}", "--date", "typo"], "--date: 'typo'"),
    (["nightly", "--store", "{store}", "--jobs", "{dir}/folder"], "/folder' is a folder"),
    (["nightly", "--store", "{store}", "--jobs", "{dir}/bad.toml"], "not valid TOML"),
    (["nightly", "--store", "{store}", "--jobs", "{dir}/policies.toml"], "policies 5 must be"),
    (["nightly", "--store", "{store}", "--jobs", "{dir}/twice.toml"], "duplicate name 'a b'"),
    (["nightly", "--store", "{store}", "--jobs", "{dir}/gpt3.toml"], "'gpt3'"),
    (["nightly", "--store", "{store}", "--timeout", "-1"], "--timeout: '-1'"),
    (["nightly", "--store", "{dir}/plain.txt"], "plain.txt' is a file"),
    # fit
    (["fit", "--store", "{store}"], "no scaling rows"),
    (["fit", "--scaling", "/nope.csv"], "/nope.csv"),
    (["fit", "--scaling", "/nope.csv", "--plot", "{dir}/plain.txt"], "plain.txt' is a file"),
    # fleet
    (["fleet", "--jobs", "{dir}/priority.toml"], "priority=1e+308 must be a number from"),
    (["fleet", "--team-budget", "-1"], "--team-budget: '-1'"),
    (["fleet", "--columns", "job,bogus"], "bogus is not a column"),
    (["fleet", "--json", "--columns", "job"], "--columns 'job' picks the columns"),
    # workloads files
    (["workloads", "--workloads", "{dir}/number.csv"], "name='5' is a number"),
    (["workloads", "--workloads", "{dir}/memory.toml"], "accelerator_memory_gib=True is not"),
    (["recommend", "--budget", "3", "--workloads", "{dir}/number.csv"], "name='5' is a number"),
    # output options: nothing reaches stdout before the error
    (["recommend", "--budget", "3", "--columns", "policy,bogus"], "bogus is not a column"),
    (["recommend", "--budget", "3", "--format", "json", "--columns", "bogus"], "--columns"),
    (["catalog", "--columns", "bogus"], "bogus is not a column"),
    (["sweep", "--budgets", "1,2", "--columns", "bogus", "--out", "s.parquet"], "bogus is not"),
    (
        ["compare", "--budget", "3", "--work", "1e18", "--columns", "bogus", "--plot", "c.png"],
        "bogus is not a column",
    ),
    (["catalog", "--format", "csv", "--columns", ","], "no column"),
    # launch files: every one checked before any is written
    (["recommend", "--budget", "3", "--sky-yaml", "{dir}/launch.yaml"], "(remote task)"),
    (["recommend", "--budget", "3", "--sky-yaml", "{dir}/launch.txt"], "must end in .yaml"),
    # a new store is not made for a night refused
    (["nightly", "--store", "{dir}/fresh-store", "--source", "bogus"], "'bogus'"),
    # numbers at the edge of range, on every command that plans (they overflowed)
    (["recommend", "--budget", "3", "--checkpoint-gb", "1e308"], "--checkpoint-gb: '1e308'"),
    (["recommend", "--budget", "3", "--work", "1e308"], "--work: '1e308'"),
    (["recommend", "--budget", "3", "--restart-s", "1e308"], "--restart-s: '1e308'"),
    (["recommend", "--budget", "1e308"], "--budget: '1e308'"),
    (["sweep", "--budgets", "1,1e308"], "budgets go up to"),
    (["sweep", "--budgets", "1,2", "--checkpoint-gb", "1e308"], "--checkpoint-gb: '1e308'"),
    (["compare", "--budget", "3", "--work", "1e18", "--checkpoint-gb", "1e308"], "'1e308'"),
    (["compare", "--budget", "3", "--work", "1e18", "--deadline-h", "1e308"], "'1e308'"),
    (["fleet", "--team-budget", "1e308"], "--team-budget: '1e308'"),
    (["fleet", "--jobs", "{dir}/budget.toml"], "budget=1e+308 must be"),
    ([*SIMULATED, "--work-hours", "1e308"], "--work-hours: '1e308'"),
    ([*SIMULATED, "--work-hours", "1", "--checkpoint-stall-s", "0"], "--checkpoint-interval-s"),
    ([*SIMULATED, "--work-hours", "1", "--workload", "gpt2"], "--workload describes a config"),
    # file values past any plausible range (one ended in a failed verification)
    (["recommend", "--budget", "3", "--throughput", "{dir}/throughput-absurd.csv"], "1e+40"),
    (["recommend", "--budget", "3", "--saturation", "{dir}/saturation-absurd.csv"], "1e+308"),
    (["recommend", "--budget", "3", "--quotas", "{dir}/quotas-fraction.csv"], "vcpus=1.5"),
    (["workloads", "--workloads", "{dir}/checkpoint.toml"], "checkpoint_gb=1e+308"),
    # a source's own option given for another source was ignored
    (["prices", "refresh", "--store", "{store}", "--skypilot-csv", "v.csv"], "the skypilot price"),
    (
        ["prices", "refresh", "--store", "{store}", "--spot-advisor-url", "f.json"],
        "--source spot-advisor",
    ),
    (["nightly", "--store", "{store}", "--skypilot-csv", "v.csv"], "the skypilot price"),
    (["nightly", "--store", "{store}", "--team-budget", "1e308"], "--team-budget: '1e308'"),
    (["nightly", "--store", "{store}", "--spot-advisor-url", ""], "--spot-advisor-url: '' is"),
    # empty paths read as "not given" before
    (["recommend", "--budget", "3", "--catalog", ""], "--catalog: '' is empty"),
    (["recommend", "--budget", "3", "--sky-yaml", ""], "--sky-yaml '' must end in .yaml"),
    (["recommend", "--budget", "3", "--columns", ""], "no column is not a column"),
    (["fleet", "--sky-yaml", ""], "--sky-yaml '' is empty"),
    (["fleet", "--jobs", ""], "--jobs/--scenarios: '' is empty"),
    (["sweep", "--budgets", "1,2", "--out", ""], "--out '' must end in .parquet"),
    (["workloads", "--workloads", ""], "--workloads: '' is empty"),
    (["fit", "--scaling", ""], "--scaling: '' is empty"),
    # a cloud the catalog lacks
    (["recommend", "--budget", "3", "--cloud", "oracle"], "no instance types of cloud 'oracle'"),
    # the command itself
    (["bogus"], "'bogus'"),
]


@pytest.mark.parametrize(("argv", "fragment"), CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input(files, capsys, monkeypatch, argv, fragment):
    store, folder = Path(files["store"]), Path(files["dir"])
    monkeypatch.setenv("DEEPVM_STORE", str(store))  # commands that default to a store
    monkeypatch.chdir(folder)
    before = tree_hash(folder)  # the store is in it
    argv = [a.format(**files) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("deepvm: error: ") and fragment in lines[0], lines[0]
    assert captured.out == ""
    assert tree_hash(folder) == before
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [
        "folder", "launch-remote.yaml", "store"
    ]  # fmt: skip


def test_the_table_is_large_and_covers_every_command():
    assert len(CASES) >= 60
    commands = {argv[0] for argv, _ in CASES}
    assert commands >= {
        "recommend", "sweep", "compare", "catalog", "flopp", "benchmark",
        "benchmark-scaling", "simulate", "prices", "nightly", "fit", "fleet", "workloads",
    }  # fmt: skip
