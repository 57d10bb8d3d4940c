"""`deepvm nightly`, registered jobs, the change report, the table docs."""

import json
import re

import pytest
from tests_paths import ROOT

from deepvm.base.errors import InputError
from deepvm.cli import main
from deepvm.nightly.prices import refresh_prices
from deepvm.nightly.stages import change_report
from deepvm.records.jobs import load_jobs
from deepvm.store import Store, describe_tables
from tests.helpers import whole


def test_readme_table_docs_match_the_schemas():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"<!-- tables:begin -->\n(.*)<!-- tables:end -->", readme, re.S)
    assert section is not None and section.group(1) == describe_tables()


def test_nightly_cli_twice_and_change_report(tmp_path, capsys):
    store = str(tmp_path)
    assert main(["nightly", "--store", store, "--date", "2026-12-01", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["prices"]["stale"] is False and all(p["error"] is None for p in first["plans"])
    # A first plan is no change: nothing to compare it with.
    assert all(not c["changed"] and c["previous_date"] is None for c in first["changes"])
    assert main(["nightly", "--store", store, "--date", "2026-12-01", "--json"]) == 0
    capsys.readouterr()
    recs = whole(store, "recommendations").df()
    assert not recs.duplicated(["snapshot_date", "scenario", "policy", "rank"]).any()
    # the next day p4d.24xlarge spot in us-east-1 costs 6x as much: the plan changes
    shipped = (ROOT / "datasets" / "catalog-aws.csv").read_text().splitlines()
    dearer = []
    for line in shipped:
        cells = line.split(",")
        if cells[1:3] == ["us-east-1", "p4d.24xlarge"]:
            cells[12] = f"{float(cells[12]) * 6:.4f}"
        dearer.append(",".join(cells))
    catalog = tmp_path / "dearer.csv"
    catalog.write_text("\n".join(dearer) + "\n")
    assert (
        main(["nightly", "--store", store, "--date", "2026-12-02", "--source", str(catalog)]) == 0
    )
    text = capsys.readouterr().out
    assert "change report" in text
    changes = change_report(Store.open(store), "2026-12-02").set_index("scenario")
    assert (changes["previous_date"] == "2026-12-01").all()
    # The cost-objective job leaves the dearer p4d spot nodes.
    row = changes.loc["resnet50-90-epochs-by-deadline"]
    assert "p4d.24xlarge" in row["old_cluster"] and "us-east-1" in row["old_cluster"]
    assert row["changed"] and not (
        "p4d.24xlarge" in row["new_cluster"] and "us-east-1" in row["new_cluster"]
    )
    # The report compares the fleet plans the nights wrote.
    fleet = whole(store, "fleet").df()
    assert sorted(fleet["snapshot_date"].astype(str).unique()) == ["2026-12-01", "2026-12-02"]
    tonight = fleet[fleet["snapshot_date"].astype(str) == "2026-12-02"].set_index("scenario")
    assert set(tonight.index) == set(changes.index)
    assert (tonight["hourly_cost"] == changes["new_hourly_cost"].reindex(tonight.index)).all()


def test_nightly_reports_a_job_that_cannot_be_planned(tmp_path, capsys):
    jobs = tmp_path / "jobs.toml"
    jobs.write_text(
        '[[job]]\nname = "ok"\nworkload = "resnet50"\nbudget = 3\n\n'
        '[[job]]\nname = "poor"\nworkload = "resnet50"\nbudget = 0.05\n'
    )
    assert main(["nightly", "--store", str(tmp_path / "s"), "--jobs", str(jobs)]) == 0
    assert "job poor not planned: budget $0.05/h is below" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[job]]\nname = "a"\nworkload = "resnet50"\n', "job 1 (a): missing budget"),
        ('[[job]]\nname = "a"\nworkload = "alexnet"\nbudget = 3\n', "unknown workload 'alexnet'"),
        ('[[job]]\nname = "a"\nworkload = "gpt2"\nbudget = -3\n', "budget=-3 must be a positive"),
        (
            '[[job]]\nname = "a"\nworkload = "gpt2"\nbudget = 3\ncolour = "red"\n',
            "unknown key(s) colour",
        ),
        (
            '[[job]]\nname = "a"\nworkload = "gpt2"\nbudget = 3\n[[job]]\nname = "a"\n'
            'workload = "gpt2"\nbudget = 4\n',
            "job 2 (a): duplicate name 'a'",
        ),
        ("[[job]\n", "is not valid TOML"),
    ],
)
def test_bad_scenarios(tmp_path, capsys, text, message):
    path = tmp_path / "jobs.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(message)):
        load_jobs(path)
    assert main(["nightly", "--store", str(tmp_path / "s"), "--jobs", str(path)]) == 2
    assert not (tmp_path / "s").exists()


def test_shipped_scenarios_load():
    jobs = load_jobs()
    assert {j.name for j in jobs} == {
        "resnet50-3usd",
        "gpt2-6usd",
        "bert-paper-10usd",
        "resnet50-90-epochs-by-deadline",
    }
    deadline = next(j for j in jobs if j.spec.objective == "cost")
    assert deadline.spec.work_flops == 2.8e18 and deadline.spec.deadline_h == 12


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('objective = "cost"', "objective cost needs work_flops"),
        ("deadline_h = 5", "deadline_h 5 applies to objective cost"),
        ("deadline_hours = 5", "deadline_h 5 applies to objective cost"),  # the old name
        ('objective = "cost"\nwork_flops = 1e18\ntotal_work = 1e18', "give only work_flops"),
    ],
)
def test_scenario_work_and_deadline_are_checked(tmp_path, extra, message):
    path = tmp_path / "s.toml"
    path.write_text(f'[[job]]\nname = "a"\nworkload = "resnet50"\nbudget = 3.0\n{extra}\n')
    with pytest.raises(InputError, match=message):
        load_jobs(path)


def test_nightly_plans_the_cost_job_with_its_deadline(tmp_path, capsys):
    assert main(["nightly", "--store", str(tmp_path), "--date", "2026-12-01", "--json"]) == 0
    capsys.readouterr()
    rows = (
        whole(tmp_path, "recommendations")
        # deepvm_noscale plans as if nodes scaled linearly (the paper's baseline
        # without the overhead model): its plans may miss the deadline they aimed at.
        .filter("scenario = 'resnet50-90-epochs-by-deadline' and policy != 'deepvm_noscale'")
        .select("expected_makespan_h, deadline_h, work_flops, expected_total_cost")
        .fetchall()
    )
    assert rows and all(m <= d and w == 2.8e18 and c > 0 for m, d, w, c in rows)


def test_refresh_retries_with_exponential_backoff(tmp_path, monkeypatch):
    from deepvm.catalog import sources
    from deepvm.nightly.prices import PriceSourceError

    class Down:
        name = "down"

        def fetch(self):
            raise TimeoutError("read timed out")

    monkeypatch.setitem(sources.EXTRA_SOURCES, "down", Down)
    slept = []
    with pytest.raises(PriceSourceError, match="no earlier snapshot"):
        refresh_prices(Store.open(tmp_path), "down", retries=3, backoff_s=0.5, sleep=slept.append)
    assert slept == [0.5, 1.0, 2.0]
    assert not (tmp_path / "prices").exists()
