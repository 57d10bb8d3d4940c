"""deepvm adopt: what a registered job runs on now, and the nightly's stay-or-move
for it (issue 27 part)."""

from __future__ import annotations

import json

import pytest

from deepvm.cli import main
from deepvm.nightly.stages import change_report
from deepvm.store import Store
from tests.helpers import whole


@pytest.fixture
def store(tmp_path, capsys):
    uri = str(tmp_path / "s")
    assert main(["nightly", "--store", uri, "--date", "2026-12-01", "-q"]) == 0
    capsys.readouterr()
    return uri


def test_adopt_records_the_fleet_plans_cluster(store, capsys):
    assert main(["adopt", "resnet50-3usd", "--store", store, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fleet = whole(store, "fleet").df().set_index("scenario").loc["resnet50-3usd"]
    assert out["source"] == "fleet" and out["plan_date"] == "2026-12-01"
    assert (out["worker_type"], out["n_workers"]) == (fleet["worker_type"], fleet["n_workers"])
    rows = whole(store, "running").df()
    assert list(rows["scenario"]) == ["resnet50-3usd"] and rows["work_done_flops"].isna().all()


def test_adopt_a_rank_and_estimate_the_work_from_the_start(store, capsys):
    argv = ["adopt", "gpt2-6usd", "--store", store, "--rank", "2", "--json"]
    assert main([*argv, "--started", "2026-12-01T00:00Z"]) == 0
    out = json.loads(capsys.readouterr().out)
    recs = whole(store, "recommendations").df()
    second = recs[(recs["scenario"] == "gpt2-6usd") & (recs["policy"] == "deepvm")]
    second = second[second["rank"] == 2].iloc[0]
    assert out["source"] == "deepvm #2" and out["worker_type"] == second["worker_type"]
    # At least four days (it is later than 2026-12-05) at the cluster's goodput.
    assert out["work_done_flops"] >= 4 * 86400 * second["goodput_flops"] * 0.999


MIXED_TIERING = "tiering: 9 x g5.xlarge (8 spot, 1 od) in us-west-2"  # tiering is all spot


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["adopt", "nope"], "job 'nope' has no plan on 2026-12-01; its jobs: bert-paper"),
        (["adopt", "gpt2-6usd", "--rank", "9"], "--rank 9 is not one"),
        (["adopt", "gpt2-6usd", "--rank", "0"], "--rank 0 must be 1 or more"),
        (["adopt", "gpt2-6usd", "--started", "yesterday"], "--started 'yesterday' is not a time"),
        (["adopt", "gpt2-6usd", "--started", "2999-01-01T00:00Z"], "is in the future"),
        (["adopt", "gpt2-6usd", "--work-done", "-1"], "argument --work-done"),
        (
            ["adopt", "gpt2-6usd", "--cluster", "tiering: 2 x g9.xlarge spot in us-east-1"],
            "the catalog of 2026-12-01 has no g9.xlarge in us-east-1 for gpt2",
        ),
        (["adopt", "gpt2-6usd", "--cluster", "9 g5"], "is not a cluster as deepvm writes it"),
        (["adopt", "gpt2-6usd", "--cluster", MIXED_TIERING], "has 9 spot nodes, not 8"),
        (
            ["adopt", "gpt2-6usd", "--cluster", "tiering: 9 x g5.xlarge (8 spot, 1 od) in x"],
            "has no g5.xlarge in x",
        ),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(store, capsys, argv, message):
    assert main([*argv, "--store", store]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not Store.open(store).has("running")


def test_adopt_a_cluster_given_in_deepvms_words(store, capsys):
    words = "single_anchor: 9 x g5.xlarge (8 spot, 1 od) in us-west-2"
    assert main(["adopt", "gpt2-6usd", "--store", store, "--cluster", words, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"] == "given" and (out["worker_type"], out["n_spot"]) == ("g5.xlarge", 8)
    assert out["hourly_cost"] > 0 and out["throughput_flops"] > 0  # priced and planned
    row = whole(store, "running").df().iloc[0]
    assert row["checkpoint_interval_s"] > 0  # spot nodes checkpoint


def test_a_scenarios_file_may_say_what_runs(store, capsys, tmp_path):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        ALONE + 'running = "tiering: 2 x p3.8xlarge spot + 1 x t3.xlarge in us-east-1"\n'
    )
    job = fleet_jobs(capsys, store, "--jobs", str(jobs))["resnet50-3usd"]
    assert job["decision"] == "move" and job["running_cluster"].startswith("tiering: 2 x p3.8x")
    jobs.write_text(ALONE + 'running = "2 x p3"\n')
    assert main(["fleet", "--jobs", str(jobs)]) == 2
    assert "running: '2 x p3' is not a cluster" in capsys.readouterr().err


def test_adopt_needs_a_plan_in_the_store(tmp_path, capsys):
    assert main(["adopt", "gpt2-6usd", "--store", str(tmp_path / "empty")]) == 2
    assert "run `deepvm nightly --store URI` first" in capsys.readouterr().err


def test_the_change_report_says_stay_or_move_for_running_jobs(store, capsys, tmp_path):
    # gpt2-6usd runs deepvm's second cluster (a p4d.24xlarge, faster than the
    # fleet's share for it): the plan keeps it there. resnet50-3usd runs deepvm's
    # third (2 x p3.8xlarge): alone, tonight's plan moves it to a p4d.24xlarge.
    assert main(["adopt", "gpt2-6usd", "--store", store, "--rank", "2", "-q"]) == 0
    assert main(["nightly", "--store", store, "--date", "2026-12-02", "-q"]) == 0
    report = change_report(Store.open(store), "2026-12-02").set_index("scenario")
    stays = report.loc["gpt2-6usd"]
    assert (
        stays["decision"] == "stay" and stays["decision_reason"] == "stays on its running cluster"
    )
    assert "p4d.24xlarge" in stays["running_cluster"]
    assert report["decision"].isna()["bert-paper-10usd"]  # not adopted
    (tmp_path / "alone.toml").write_text(ALONE)
    assert main(["adopt", "resnet50-3usd", "--store", store, "--rank", "3", "-q"]) == 0
    argv = ["nightly", "--store", store, "--date", "2026-12-03", "-q"]
    assert main([*argv, "--jobs", str(tmp_path / "alone.toml")]) == 0
    capsys.readouterr()
    moved = change_report(Store.open(store), "2026-12-03").set_index("scenario").loc[
        "resnet50-3usd"
    ]  # fmt: skip
    assert moved["decision"] == "move" and moved["gain"] > 0.05
    assert moved["migration_h"] > 0 and moved["migration_usd"] > 0 and moved["break_even_h"] > 0
    assert "p3.8xlarge" in moved["running_cluster"] and "saves" in moved["decision_reason"]


# --- the fleet plan knows what runs ---------------------------------------------------


def fleet_jobs(capsys, store, *argv):
    capsys.readouterr()
    assert main(["fleet", "--store", store, "--json", *argv]) == 0
    return {j["scenario"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}


ALONE = '[[job]]\nname = "resnet50-3usd"\nworkload = "resnet50"\nbudget = 3.0\n'


def test_a_running_job_stays_unless_moving_pays(store, capsys, tmp_path):
    (tmp_path / "alone.toml").write_text(ALONE)
    alone = ["--jobs", str(tmp_path / "alone.toml")]
    before = fleet_jobs(capsys, store, *alone)["resnet50-3usd"]
    # Adopted on deepvm's third cluster (2 x p3.8xlarge), far below its best: it moves.
    assert main(["adopt", "resnet50-3usd", "--store", store, "--rank", "3", "-q"]) == 0
    moved = fleet_jobs(capsys, store, *alone)["resnet50-3usd"]
    assert moved["worker_type"] == before["worker_type"] == "p4d.24xlarge"
    assert moved["decision"] == "move" and moved["running_cluster"].startswith("tiering: 2 x p3.8x")
    assert moved["note"] == moved["decision_reason"] and "saves" in moved["note"]
    assert moved["value"] < before["value"]  # net of the move
    capsys.readouterr()
    assert main(["fleet", "--store", store, *alone]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "running" in table[1] and "moves (+" in table[3]
    # A threshold above the move's gain keeps it where it runs.
    strict = fleet_jobs(capsys, store, *alone, "--min-gain", "0.9")["resnet50-3usd"]
    assert strict["worker_type"] == "p3.8xlarge"
    assert strict["note"] == "stays on its running cluster"
    # Adopted on the plan's own cluster: it stays, at its value.
    assert main(["adopt", "resnet50-3usd", "--store", store, "-q"]) == 0
    stays = fleet_jobs(capsys, store, *alone)["resnet50-3usd"]
    assert stays["note"] == "stays on its running cluster" and stays["value"] == before["value"]


def test_a_running_job_keeps_its_quota_and_the_others_plan_around_it(store, capsys):
    # gpt2-6usd on a p4d.24xlarge (deepvm's #2 alone): 96 P spot vCPUs in us-east-1.
    assert main(["adopt", "gpt2-6usd", "--store", store, "--rank", "2", "-q"]) == 0
    assert main(["adopt", "resnet50-3usd", "--store", store, "-q"]) == 0
    jobs = fleet_jobs(capsys, store)
    assert jobs["gpt2-6usd"]["note"] == "stays on its running cluster"
    assert jobs["gpt2-6usd"]["worker_type"] == "p4d.24xlarge"
    p4d = [j for j in jobs.values() if j["worker_type"] == "p4d.24xlarge"]
    assert len(p4d) == 2  # two p4d.24xlarge (192 vCPUs): a third would pass the P quota


def test_a_running_cluster_over_budget_moves_unless_the_job_keeps_it(store, capsys, tmp_path):
    assert main(["adopt", "resnet50-3usd", "--store", store, "-q"]) == 0  # $2.63/h
    jobs = tmp_path / "jobs.toml"  # tonight, its budget is $2/h
    jobs.write_text('[[job]]\nname = "resnet50-3usd"\nworkload = "resnet50"\nbudget = 2.0\n')
    job = fleet_jobs(capsys, store, "--jobs", str(jobs))["resnet50-3usd"]
    assert job["hourly_cost"] <= 2.0 and "over its $2/h budget: it moves" in job["note"]
    jobs.write_text(jobs.read_text() + "keep_running = true\n")
    job = fleet_jobs(capsys, store, "--jobs", str(jobs))["resnet50-3usd"]
    assert job["worker_type"] == "p4d.24xlarge" and job["note"] == "stays on its running cluster"
