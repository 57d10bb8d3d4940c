"""The nightly loop a team relies on (issue 35): one answer per running job per
night, the same in the fleet plan, its notes, the change report, the JSON and the
artifact; what-if runs that leave the nightly record alone; stable plans on
unchanged prices; prices that round-trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepvm.cli import main
from deepvm.nightly.stages import change_report
from deepvm.render.report import change_report_markdown
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
    argv = ["nightly", "--store", store, "--date", "2026-12-02", "--jobs", jobs, "--json"]
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
    assert main(["fleet", "--store", store, "--jobs", jobs]) == 0
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
        assert main(["fleet", "--jobs", jobs, "--cloud", "azure", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        plans.append({j["scenario"]: (j["region"], j["hourly_cost"]) for j in out["jobs"]})
    assert plans[0] == plans[1] == plans[2]
    # jobs in name order take the first region of the tie-break order that has room
    assert [plans[0][f"{n}-bert"][0] for n in "abc"] == ["eastus2", "northcentralus", "westus3"]


AWS_CATALOG = SHIPPED.parent / "catalog-aws.csv"


def test_a_source_of_one_cloud_keeps_the_other_clouds_in_the_night(tmp_path, capsys):
    """Regression: `nightly --source FILE` with one cloud's prices dropped the other
    two clouds from the night (BERT moved from Azure at $0.12/h to AWS)."""
    uri = str(tmp_path / "store")
    assert main(["nightly", "--store", uri, "--date", "2026-12-01", "-q"]) == 0
    before = {j: c for j, c in _fleet_clouds(uri, "2026-12-01").items()}
    argv = ["nightly", "--store", uri, "--date", "2026-12-02", "--source", str(AWS_CATALOG)]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    night = json.loads(capsys.readouterr().out)
    prices = Store.open(uri).read("prices", partitions=["2026-12-02"])
    assert set(prices["provider"]) == {"aws", "gcp", "azure"}
    assert _fleet_clouds(uri, "2026-12-02") == before  # nothing moved for a missing cloud
    assert before["bert-paper-10usd"] == "azure"
    assert night["prices"]["carried"].startswith("azure, gcp kept from the 2026-12-01 snapshot")


def _fleet_clouds(uri: str, date: str) -> dict[str, str]:
    rows = Store.open(uri).read("fleet", partitions=[date])
    return dict(zip(rows["scenario"], rows["cloud"], strict=True))


def test_the_nightly_plans_on_the_dates_refreshed_snapshot(tmp_path, capsys):
    """Regression: `prices refresh --source FILE` then `nightly` wrote a second
    snapshot of the date and planned on the shipped one; `prices show` did not say
    which snapshot plans read."""
    uri = str(tmp_path / "store")
    lines = AWS_CATALOG.read_text().splitlines()
    # the refreshed prices differ from the shipped ones: p4d.24xlarge costs 3x on demand
    (tmp_path / "dear.csv").write_text(
        "\n".join(_priced(line, 3.0) if ",p4d.24xlarge," in line else line for line in lines)
    )
    refresh = ["prices", "refresh", "--store", uri, "--source", str(tmp_path / "dear.csv")]
    assert main([*refresh, "--date", "2026-12-01", "-q"]) == 0
    assert main(["nightly", "--store", uri, "--date", "2026-12-01", "-q"]) == 0
    opened = Store.open(uri)
    from deepvm.records.inputs import catalog_from_store

    planned = catalog_from_store(opened, "2026-12-01").instances.set_index(
        ["region", "instance_type"]
    )  # what the night's plans read
    got = planned.loc[("us-east-1", "p4d.24xlarge"), "ondemand_price"]
    assert got == pytest.approx(3 * _ondemand("p4d.24xlarge", "us-east-1"))
    assert opened.writers("prices", "2026-12-01") == ["file:dear.csv"]  # one snapshot
    capsys.readouterr()
    assert main(["prices", "show", "--store", uri, "--match", "p4d"]) == 0
    assert capsys.readouterr().out.startswith("snapshot 2026-12-01 from file:dear.csv (in use")
    # an explicit source refreshes again: the newest refresh is the one in use
    assert main(["nightly", "--store", uri, "--date", "2026-12-01", "--source", "snapshot"]) == 0
    assert Store.open(uri).writers("prices", "2026-12-01") == ["file:dear.csv", "snapshot"]
    capsys.readouterr()
    assert main(["prices", "show", "--store", uri, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["in_use"] == "snapshot" and shown["replaced"] == ["file:dear.csv"]


def _priced(line: str, factor: float) -> str:
    import csv
    import io

    header = next(x for x in AWS_CATALOG.read_text().splitlines() if x.startswith("provider"))
    row = next(csv.DictReader(io.StringIO(header + "\n" + line)))
    row["ondemand_price"] = str(float(row["ondemand_price"]) * factor)
    out = io.StringIO()
    csv.DictWriter(out, fieldnames=list(row), lineterminator="").writerow(row)
    return out.getvalue()


def _ondemand(itype: str, region: str) -> float:
    from deepvm.catalog import load_catalog

    rows = load_catalog().instances
    return float(rows[(rows["instance_type"] == itype) & (rows["region"] == region)][
        "ondemand_price"
    ].iloc[0])  # fmt: skip


def test_a_catalog_written_as_csv_plans_as_the_one_it_came_from(tmp_path, capsys):
    """Regression: `catalog --format csv` left out the quota key columns, so a
    catalog exported and fed back planned Azure spot with no quota at all."""
    assert main(["catalog", "--format", "csv"]) == 0
    (tmp_path / "catalog.csv").write_text(capsys.readouterr().out)
    assert main(["fleet", "--json"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert main(["fleet", "--json", "--catalog", str(tmp_path / "catalog.csv")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["usage"] == want["usage"]
    assert [j["worker_type"] for j in got["jobs"]] == [j["worker_type"] for j in want["jobs"]]
    assert got["objective_value"] == pytest.approx(want["objective_value"], rel=1e-9)


def test_workloads_show_the_flops_per_sample_total_work_needs(capsys):
    assert main(["workloads", "--json"]) == 0
    rows = {w["name"]: w for w in json.loads(capsys.readouterr().out)["workloads"]}
    assert rows["resnet50"]["train_flops_per_sample"] == pytest.approx(2.43e10, rel=0.01)
    assert main(["workloads"]) == 0
    table = capsys.readouterr().out
    assert "train FLOPs/sample" in table.splitlines()[0] and "2.43e+10" in table


def test_finish_ends_a_running_job_and_the_nightly_stops_weighing_it(store, capsys):
    assert main(["adopt", "gpt2-6usd", "--store", store, "-q"]) == 0
    assert main(["finish", "gpt2-6usd", "--store", store]) == 0
    assert "gpt2-6usd no longer runs (it ran tiering:" in capsys.readouterr().out
    assert main(["nightly", "--store", store, "--date", "2026-12-02", "-q"]) == 0
    report = change_report(Store.open(store), "2026-12-02").set_index("scenario")
    assert report["decision"].isna().all()  # no job runs: nothing to stay or move
    assert main(["finish", "gpt2-6usd", "--store", store]) == 2
    assert "job 'gpt2-6usd' does not run (the running jobs: none)" in capsys.readouterr().err


def test_the_nightly_takes_the_planning_options_the_fleet_takes(store, capsys):
    argv = ["nightly", "--store", store, "--date", "2026-12-02", "--cloud", "azure", "--json"]
    capsys.readouterr()
    assert main(argv) == 0
    night = json.loads(capsys.readouterr().out)
    clouds = {j["cloud"] for j in night["fleet"]["jobs"] if j["planned"]}
    assert clouds == {"azure"}
    assert main(["nightly", "--store", store, "--date", "2026-12-03", "--cloud", "ibm"]) == 2
    assert "ibm" in capsys.readouterr().err


# What Prefect's content column shows at 1440 px without scrolling, in characters.
TABLE_WIDTH = 110


def table_width(markdown: str) -> int:
    """A Markdown table's width as rendered: its columns' widest cells and their
    separators (3 characters a column)."""
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]
    columns = max(len(r) for r in rows)
    return sum(max(len(r[i]) for r in rows if i < len(r)) for i in range(columns)) + 3 * columns


def test_every_artifact_table_fits_prefects_content_column(store, tmp_path, capsys):
    """Regression: artifact tables were wider than Prefect's content column at
    1440 px and hid their key columns; each table now keeps to TABLE_WIDTH, with
    the long text (clusters in words, reasons) listed below it."""
    from deepvm.planner.fleet.plan import plan_fleet
    from deepvm.planner.inputs import Inputs
    from deepvm.records.jobs import load_jobs
    from deepvm.render.report import fleet_markdown, recommendations_markdown

    assert main(["adopt", "gpt2-6usd", "--store", store, "--rank", "3", "-q"]) == 0
    assert main(["adopt", "resnet50-3usd", "--store", store, "--rank", "2", "-q"]) == 0
    capsys.readouterr()
    assert main(["nightly", "--store", store, "--date", "2026-12-02"]) == 0
    night = capsys.readouterr().out
    recs = Store.open(store).read("recommendations", partitions=["2026-12-02"])
    deadline = recs[recs["scenario"] == "resnet50-90-epochs-by-deadline"]
    documents = {
        "change report": night,
        "fleet": fleet_markdown(plan_fleet(load_jobs(), Inputs.load())),
        "recommendations": recommendations_markdown("r", deadline),
    }
    for name, text in documents.items():
        tables = [t for t in text.split("\n\n") if t.startswith("|")]
        assert tables, name
        for table in tables:
            assert table_width(table) <= TABLE_WIDTH, (name, table)
    # the key columns are there: the move's decision and cost, the deadline
    assert "| job | stay or move | gain | move costs | pays after |" in night
    assert "deadline" in documents["fleet"] and "makespan" in documents["recommendations"]
    assert "- **resnet50-3usd**: runs tiering: 14 x g4dn.xlarge" in night


def every_command() -> list[list[str]]:
    """Every command and subcommand of the parser, as argv prefixes."""
    import argparse

    from deepvm.cli import build_parser

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
        found = [prefix] if prefix else []
        for action in parser._actions:  # argparse keeps subcommands only here
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += walk(sub, [*prefix, name])
        return found

    return walk(build_parser(), [])


def test_every_help_page_runs(capsys):
    """Regression: `deepvm checkpoint serve --help` ended in a traceback (a bare %
    in its help text, which argparse formats)."""
    commands = every_command()
    assert ["checkpoint", "serve"] in commands and ["launch"] in commands
    for argv in commands:
        assert main([*argv, "--help"]) == 0, argv
        assert capsys.readouterr().out.startswith(f"usage: deepvm {' '.join(argv)}")
