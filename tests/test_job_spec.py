"""One job specification (deepvm.base.config.JobSpec) for the CLI, the scenarios file,
the flows and the library: the same fields, the same checks, the same answer."""

from __future__ import annotations

import json

import pytest

import deepvm
from deepvm.base.config import JOB_OPTIONS, JobSpec
from deepvm.base.errors import InputError, ParameterError
from deepvm.cli import main
from deepvm.records.jobs import OPTIONAL, load_jobs


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("top", 0, "top 0 must be a whole number >= 1"),
        ("restart_s", float("nan"), "restart_s nan must be a finite number >= 0"),
        ("work_flops", -1.0, "work_flops -1 must be a finite number > 0"),
        ("objective", "fastest", "objective 'fastest' must be one of"),
        ("policies", ("cheapest",), "policies 'cheapest' is not a policy"),
        ("max_nodes", 2.5, "max_nodes 2.5 must be a whole number"),
    ],
)
def test_fields_are_checked_and_named(field, value, message):
    with pytest.raises(ParameterError, match=message) as caught:
        JobSpec(**{field: value})
    assert caught.value.param == field


def test_the_scenarios_file_takes_every_job_option_by_name(tmp_path):
    assert {"restart_s", "max_nodes", "work_flops", "deadline_h"} <= set(OPTIONAL)
    assert len(OPTIONAL) == len(JOB_OPTIONS) - 1  # every field but workload (required)
    path = tmp_path / "jobs.toml"
    path.write_text(
        '[[job]]\nname = "j"\nworkload = "gpt2"\nbudget = 6.0\nrestart_s = 600\n'
        "max_nodes = 32\ntop = 2\n"
    )
    (job,) = load_jobs(path)
    assert job.spec == JobSpec(
        workload="gpt2", restart_s=600, max_nodes=32, top=2, policies=("all",)
    )
    path.write_text('[[job]]\nname = "j"\nworkload = "gpt2"\nbudget = 6.0\nmax_nodes = 0\n')
    with pytest.raises(InputError, match=r"job 1 \(j\): max_nodes 0 must be a whole number"):
        load_jobs(path)


def test_cli_and_library_plan_the_same_job(capsys):
    argv = ["recommend", "--budget", "5", "--workload", "gpt2", "--top", "2", "--json"]
    assert main([*argv, "--max-nodes", "24", "--restart-s", "600"]) == 0
    cli = json.loads(capsys.readouterr().out)["recommendations"]
    spec = JobSpec(workload="gpt2", top=2, max_nodes=24, restart_s=600)
    lib = deepvm.recommend(5.0, spec).recommendations
    assert [(r["worker_type"], r["n_workers"], r["architecture"]) for r in cli] == [
        (r.worker_type, r.n_workers, r.architecture) for r in lib
    ]
    assert all(r.n_workers <= 24 for r in lib)
    # keyword options replace the spec's fields
    (first,) = deepvm.recommend(5.0, spec, top=1).recommendations
    assert (first.worker_type, first.n_workers) == (lib[0].worker_type, lib[0].n_workers)
    with pytest.raises(TypeError, match="unknown job option"):
        deepvm.recommend(5.0, colour="red")


def test_the_scenarios_file_reads_the_old_names_of_work_and_deadline(tmp_path, caplog):
    """One vocabulary (``work_flops``, ``deadline_h``, as JobSpec and the JSON say);
    a file written with the old ``total_work``/``deadline_hours`` plans the same job
    and is told to rename them."""
    head = '[[job]]\nname = "j"\nworkload = "resnet50"\nbudget = 4.0\nobjective = "cost"\n'
    new, old = tmp_path / "new.toml", tmp_path / "old.toml"
    new.write_text(head + "work_flops = 2.8e18\ndeadline_h = 12\n")
    old.write_text(head + "total_work = 2.8e18\ndeadline_hours = 12\n")
    (by_new,) = load_jobs(new)
    assert not caplog.records
    with caplog.at_level("WARNING", logger="deepvm"):
        (by_old,) = load_jobs(old)
    assert by_old == by_new and by_new.spec.work_flops == 2.8e18 and by_new.spec.deadline_h == 12
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "total_work is the old name of work_flops" in said
    assert "deadline_hours is the old name of deadline_h" in said


def test_the_jobs_file_is_given_by_jobs_and_by_its_old_name(tmp_path, capsys):
    """`--jobs FILE` (issue 38: a registered job is a job); `--scenarios`, its old
    name, still works and says so."""
    path = tmp_path / "jobs.toml"
    path.write_text('[[job]]\nname = "mine"\nworkload = "gpt2"\nbudget = 6.0\n')
    assert main(["fleet", "--jobs", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert [j["scenario"] for j in json.loads(captured.out)["jobs"]] == ["mine"]
    assert "--scenarios" not in captured.err
    assert main(["fleet", "--scenarios", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    assert [j["scenario"] for j in json.loads(captured.out)["jobs"]] == ["mine"]
    assert "--scenarios is now --jobs" in captured.err
