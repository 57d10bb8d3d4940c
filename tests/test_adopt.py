"""deepvm adopt: what a registered job runs on now, and the nightly's stay-or-move
for it (issue 27 part)."""

from __future__ import annotations

import json

import pytest

from deepvm.cli import main
from deepvm.pipeline import change_report
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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["adopt", "nope"], "job 'nope' has no plan on 2026-12-01; its jobs: bert-paper"),
        (["adopt", "gpt2-6usd", "--rank", "9"], "--rank 9 is not one"),
        (["adopt", "gpt2-6usd", "--rank", "0"], "--rank 0 must be 1 or more"),
        (["adopt", "gpt2-6usd", "--started", "yesterday"], "--started 'yesterday' is not a time"),
        (["adopt", "gpt2-6usd", "--started", "2999-01-01T00:00Z"], "is in the future"),
        (["adopt", "gpt2-6usd", "--work-done", "-1"], "argument --work-done"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(store, capsys, argv, message):
    assert main([*argv, "--store", store]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not Store.open(store).has("running")


def test_adopt_needs_a_plan_in_the_store(tmp_path, capsys):
    assert main(["adopt", "gpt2-6usd", "--store", str(tmp_path / "empty")]) == 2
    assert "run `deepvm nightly --store URI` first" in capsys.readouterr().err


def test_the_change_report_says_stay_or_move_for_running_jobs(store, capsys):
    # resnet50-3usd runs tonight's cluster: stay. gpt2-6usd runs deepvm's #2 alone
    # (a p4d.24xlarge, faster than the fleet's share for it): moving loses time.
    assert main(["adopt", "resnet50-3usd", "--store", store, "-q"]) == 0
    assert main(["adopt", "gpt2-6usd", "--store", store, "--rank", "2", "-q"]) == 0
    assert main(["nightly", "--store", store, "--date", "2026-12-02", "-q"]) == 0
    capsys.readouterr()
    report = change_report(Store.open(store), "2026-12-02").set_index("scenario")
    same = report.loc["resnet50-3usd"]
    assert same["decision"] == "stay" and "the cluster it runs on" in same["decision_reason"]
    moved = report.loc["gpt2-6usd"]
    assert moved["decision"] == "stay" and moved["gain"] < 0
    assert moved["migration_h"] > 0 and moved["migration_usd"] > 0
    assert "p4d.24xlarge" in moved["running_cluster"]
    assert report["decision"].isna()["bert-paper-10usd"]  # not adopted
