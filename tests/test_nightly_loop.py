"""The nightly loop a team relies on (issue 35): one answer per running job per
night, the same in the fleet plan, its notes, the change report, the JSON and the
artifact; what-if runs that leave the nightly record alone; stable plans on
unchanged prices; prices that round-trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepvm.cli import main
from deepvm.pipeline import change_report
from deepvm.report import change_report_markdown
from deepvm.store import Store

SHIPPED = Path(__file__).resolve().parent.parent / "datasets" / "scenarios.toml"


@pytest.fixture
def store(tmp_path):
    uri = str(tmp_path / "store")
    assert main(["nightly", "--store", uri, "--date", "2026-12-01", "-q"]) == 0
    return uri


def with_budget(tmp_path: Path, job: str, budget: float) -> str:
    """The shipped jobs, with ``job``'s budget set to ``budget``."""
    text = SHIPPED.read_text()
    head, _, rest = text.partition(f'name = "{job}"')
    line = next(x for x in rest.splitlines() if x.startswith("budget = "))
    path = tmp_path / "jobs.toml"
    path.write_text(head + f'name = "{job}"' + rest.replace(line, f"budget = {budget}", 1))
    return str(path)


def test_a_running_cluster_over_its_budget_moves_everywhere(store, tmp_path, capsys):
    """Regression: the fleet's note said "over its budget: it moves" while the change
    report's running-jobs table said "stay" (it weighed the move again, by gain)."""
    assert main(["adopt", "gpt2-6usd", "--store", store, "-q"]) == 0
    running = Store.open(store).read("running").iloc[-1]
    jobs = with_budget(tmp_path, "gpt2-6usd", round(running["hourly_cost"] * 0.8, 2))
    argv = ["nightly", "--store", store, "--date", "2026-12-02", "--scenarios", jobs, "--json"]
    capsys.readouterr()
    assert main(argv) == 0
    night = json.loads(capsys.readouterr().out)
    fleet = {j["scenario"]: j for j in night["fleet"]["jobs"]}["gpt2-6usd"]
    assert "over its" in fleet["note"] and "it moves" in fleet["note"]
    report = change_report(Store.open(store), "2026-12-02").set_index("scenario")
    assert report.loc["gpt2-6usd", "decision"] == "move"
    assert report.loc["gpt2-6usd", "decision_reason"] == fleet["note"]
    assert fleet["decision"] == "move" and fleet["decision_reason"] == fleet["note"]
    changes = {c["scenario"]: c for c in night["changes"]}["gpt2-6usd"]
    assert changes["decision"] == "move"
    markdown = change_report_markdown(report.reset_index())
    assert "| gpt2-6usd |" in markdown and "stay |" not in markdown.split("gpt2-6usd")[-1][:60]
    capsys.readouterr()
    assert main(["fleet", "--store", store, "--scenarios", jobs]) == 0
    table = capsys.readouterr().out
    assert "moves (over budget)" in table and "stays" not in table


def test_recommend_with_a_store_is_a_what_if_dated_by_its_prices(store, capsys):
    """Regression: `recommend --store`, used to read the store's prices, wrote a
    stray job into the night's record, dated today rather than by the prices."""
    assert main(["recommend", "--budget", "20", "--store", store, "-q"]) == 0
    capsys.readouterr()
    opened = Store.open(store)
    rows = opened.read("recommendations")
    stray = rows[rows["scenario"] == "resnet50-throughput-b20"]
    assert set(stray["snapshot_date"].astype(str)) == {"2026-12-01"}  # the prices' date
    # the night's readers do not see it: adopt lists only the registered jobs
    assert main(["adopt", "nope", "--rank", "1", "--store", store]) == 2
    err = capsys.readouterr().err
    assert "has no plan on 2026-12-01" in err and "resnet50-throughput-b20" not in err
    assert "gpt2-6usd" in err
    assert set(stray["run_kind"]) == {"what-if"}


def bert_jobs(path: Path, order: str) -> str:
    path.write_text(
        "".join(
            f'[[job]]\nname = "{n}-bert"\nworkload = "bert-base"\nbudget = 10.0\n'
            'objective = "paper"\n\n'
            for n in order
        )
    )
    return str(path)


def test_equal_clusters_in_several_regions_are_broken_one_documented_way(tmp_path, capsys):
    """Regression: ties between regions (the same type at the same price in
    eastus2, northcentralus and westus3) were broken by the solver's path, so the
    order of the jobs, or adopting another one, moved a job at the same $/h."""
    plans = []
    for order in ("abc", "cba", "bca"):
        jobs = bert_jobs(tmp_path / f"{order}.toml", order)
        capsys.readouterr()
        assert main(["fleet", "--scenarios", jobs, "--cloud", "azure", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        plans.append({j["scenario"]: (j["region"], j["hourly_cost"]) for j in out["jobs"]})
    assert plans[0] == plans[1] == plans[2]
    # jobs in name order take the first region of the tie-break order that has room
    assert [plans[0][f"{n}-bert"][0] for n in "abc"] == ["eastus2", "northcentralus", "westus3"]
