"""What people see: --format table|json|csv and --columns on every listing command
(CSV read back by pandas), -q and -v, and `deepvm` alone."""

from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest

from deepvm.cli import main

JOBS = """
[[job]]
name = "a"
workload = "resnet50"
budget = 3.0

[[job]]
name = "b"
workload = "gpt2"
budget = 6.0
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("s") / "store"
    assert main(["prices", "refresh", "--store", str(path), "--date", "2026-12-01"]) == 0
    return str(path)


def listings(store: str, jobs: str) -> dict[str, tuple[list[str], str]]:
    """command -> (argv, the JSON key holding its rows)."""
    return {
        "recommend": (["recommend", "--budget", "10", "--top", "2"], "recommendations"),
        "sweep": (["sweep", "--budgets", "2:6:2"], "results"),
        "compare": (["compare", "--budget", "5", "--work", "1e19"], "rows"),
        "fleet": (["fleet", "--jobs", jobs], "jobs"),
        "catalog": (["catalog", "--match", "g5"], "instances"),
        "flopp": (["flopp", "--workload", "gpt2"], "rows"),
        "workloads": (["workloads"], "workloads"),
        "prices show": (["prices", "show", "--store", store, "--match", "p4"], "prices"),
    }


@pytest.mark.parametrize(
    "command",
    ["recommend", "sweep", "compare", "fleet", "catalog", "flopp", "workloads", "prices show"],
)
def test_csv_holds_the_json_rows(command, store, tmp_path, capsys):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    argv, key = listings(store, str(jobs))[command]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)[key]
    assert main([*argv, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[key] == rows
    assert main([*argv, "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(frame) == len(rows) > 0
    assert set(rows[0]) - {"cheaper", "faster"} <= set(frame.columns)
    for column in ("hourly_cost", "usd_per_hour", "vcpus", "parameters"):
        if column in rows[0]:
            expected = [r[column] for r in rows]
            assert frame[column].tolist() == pytest.approx(expected, nan_ok=True)
            break
    else:
        pytest.fail(f"{command}: no numeric column to compare")


def test_columns_choose_the_table_and_csv(capsys):
    argv = ["recommend", "--budget", "10", "--columns", "rank,zone,binding,worker_type"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["rank", "zone", "binding", "worker_type"]
    assert "P spot quota" in lines[3]
    assert main([*argv, "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(frame.columns) == ["rank", "zone", "binding", "worker_type"]


def test_an_unknown_column_lists_the_known_ones(capsys):
    assert main(["catalog", "--columns", "region,price"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "price is not a column" in err[0] and "spot_zone" in err[0]


def test_two_formats_are_refused(capsys):
    assert main(["workloads", "--json", "--format", "csv"]) == 2
    assert "give one" in capsys.readouterr().err


def test_recommend_table_is_narrow_and_shows_where_and_why(capsys):
    assert main(["recommend", "--budget", "10"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = out[1]
    for column in ("region", "zone", "architecture", "cluster", "$/h", "TFLOP/s", "held back by"):
        assert column in header
    assert max(len(line) for line in out[1:5]) <= 160  # Azure's and GCP's names are long
    assert any("next cheaper" in line for line in out)
    assert any("next faster" in line and "needs $" in line for line in out)


def test_deepvm_alone_prints_help(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "usage: deepvm" in out and "recommend" in out and "-q, --quiet" in out


def test_quiet_drops_progress_and_verbose_adds_the_traceback(tmp_path, capsys):
    store = str(tmp_path / "s")
    assert main(["recommend", "--budget", "3", "--store", store]) == 0
    assert "wrote" in capsys.readouterr().err
    assert main(["-q", "recommend", "--budget", "3", "--store", store]) == 0
    assert capsys.readouterr().err == ""
    assert main(["recommend", "--budget", "0.01"]) == 2
    plain = capsys.readouterr().err
    assert "Traceback" not in plain and len(plain.strip().splitlines()) == 1
    assert main(["-v", "recommend", "--budget", "0.01"]) == 2
    verbose = capsys.readouterr().err
    assert "Traceback" in verbose and verbose.strip().splitlines()[-1] == plain.strip()


def test_stepwise_progress_is_quiet_at_first_then_a_line_a_step_and_every_few_seconds(capsys):
    """Fleet planning tells every job and step (deepvm.planner.fleet.plan.Progress);
    the CLI shows none of it in the first second (a quick plan prints nothing),
    then each step's first line, and a line of one step every five seconds."""
    from deepvm.cli._output import stepwise_progress

    now = [0.0]
    tell = stepwise_progress(clock=lambda: now[0], terminal_only=False)
    for t, message in [
        (0.2, "each job alone: 1 of 9 jobs"),  # in the first second: nothing
        (1.1, "each job alone: 2 of 9 jobs"),  # then the step's first line
        (3.0, "each job alone: 3 of 9 jobs"),  # the same step within 5 s: nothing
        (6.2, "each job alone: 4 of 9 jobs"),  # 5 s after its last line
        (6.3, "the fleet program: 9 candidate clusters"),  # a new step at once
        (6.4, "the fleet program: again"),
    ]:
        now[0] = t
        tell(message)
    assert capsys.readouterr().err.splitlines() == [
        "each job alone: 2 of 9 jobs",
        "each job alone: 4 of 9 jobs",
        "the fleet program: 9 candidate clusters",
    ]


def test_fleet_tells_its_progress_on_a_terminal_and_quiet_drops_it(tmp_path, capsys, monkeypatch):
    """deepvm fleet on long work prints what it is doing on stderr where stderr is a
    terminal (each step; the JSON on stdout untouched); -q drops it, and so does
    a stderr that is no terminal (a log, a pipe, these tests). The clock stands
    in: every look at it is a second later, so the plan counts as long work."""
    import sys

    from deepvm.cli import _output

    looks = iter(range(10**6))
    real = _output.stepwise_progress
    monkeypatch.setattr(
        "deepvm.cli._fleet.stepwise_progress",
        lambda: real(clock=lambda: float(next(looks))),
    )
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(JOBS)
    argv = ["fleet", "--jobs", str(jobs), "--json"]
    assert main(argv) == 0  # not a terminal
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "optimal" and captured.err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "optimal"
    lines = captured.err.splitlines()
    assert lines[:2] == [
        "each job alone: 1 of 2 jobs",  # the second within 5 s of it: not shown
        "the candidates across the fleet: pruning those of 2 jobs",
    ]
    assert re.fullmatch(
        r"the fleet program: [\d,]+ candidate clusters of 2 jobs, time limit 30 s", lines[2]
    )
    assert len(lines) == 3
    assert main(["-q", *argv]) == 0
    assert capsys.readouterr().err == ""
