"""Each flow under prefect_test_harness, against a real temporary store."""

from pathlib import Path

import pytest
from deltalake import DeltaTable

from deepvm.catalog import load_catalog as _load_catalog
from deepvm.catalog import sources
from deepvm.catalog.sources import SnapshotSource
from deepvm.store import Store
from flows import deepvm_flows as f
from flows import runs
from tests.helpers import stopped_just_under, whole

# Prices in the shipped snapshot: every on-demand price and every spot price.
SHIPPED_PRICE_ROWS = len(_load_catalog().instances) + int(
    _load_catalog().instances["spot_price"].notna().sum()
)


class FlakySource:
    """Fails a number of times, then serves the snapshot."""

    name = "flaky"
    calls = 0
    failures = 99

    def fetch(self):
        FlakySource.calls += 1
        if FlakySource.calls <= FlakySource.failures:
            raise ConnectionError("503 Service Unavailable")
        return SnapshotSource().fetch()


@pytest.fixture
def flaky(monkeypatch):
    FlakySource.calls, FlakySource.failures = 0, 99
    monkeypatch.setitem(sources.EXTRA_SOURCES, "flaky", FlakySource)
    monkeypatch.setattr("deepvm.nightly.prices.DEFAULT_BACKOFF_S", 0.01)
    return FlakySource


def test_refresh_prices_flow(tmp_path):
    out = f.refresh_prices(store=str(tmp_path), snapshot_date="2026-12-01")
    assert out == {"stale": False, "rows": SHIPPED_PRICE_ROWS, "source": "snapshot"}
    rows = whole(tmp_path, "prices").df()
    assert len(rows) == SHIPPED_PRICE_ROWS and not rows["stale"].any()


def test_failing_source_retries_then_falls_back_stale(tmp_path, flaky):
    f.refresh_prices(store=str(tmp_path), snapshot_date="2026-12-01")
    before = whole(tmp_path, "prices").df()
    out = f.refresh_prices(source="flaky", store=str(tmp_path), snapshot_date="2026-12-02")
    assert out["stale"] is True and out["rows"] == SHIPPED_PRICE_ROWS
    assert flaky.calls == 4  # the first try and three retries
    rows = whole(tmp_path, "prices").df()
    old = rows[rows["snapshot_date"].astype(str) == "2026-12-01"]
    new = rows[rows["snapshot_date"].astype(str) == "2026-12-02"]
    assert len(old) == len(before) and not old["stale"].any()  # nothing lost
    assert len(new) == SHIPPED_PRICE_ROWS and new["stale"].all()
    # a source that recovers on the third try gives fresh prices
    flaky.calls, flaky.failures = 0, 2
    out = f.refresh_prices(source="flaky", store=str(tmp_path), snapshot_date="2026-12-03")
    assert out["stale"] is False and flaky.calls == 3


def test_failing_source_with_nothing_to_fall_back_to_fails(tmp_path, flaky):
    from prefect.states import State

    state = f.refresh_prices(source="flaky", store=str(tmp_path), return_state=True)
    assert isinstance(state, State) and state.is_failed()
    assert not (tmp_path / "prices").exists()


def test_recommend_flow_publishes_artifact(tmp_path):
    from prefect.client.orchestration import get_client

    recs = f.recommend(
        budget=4.0,
        workload="resnet50",
        policies=["deepvm", "on_demand"],
        top=2,
        scenario="ui-test",
        store=str(tmp_path),
    )
    assert [(r["policy"], r["rank"]) for r in recs] == [
        ("deepvm", 1),
        ("deepvm", 2),
        ("on_demand", 1),
        ("on_demand", 2),
    ]
    stored = whole(tmp_path, "recommendations").df()
    assert set(stored["scenario"]) == {"ui-test"} and len(stored) == 4

    import asyncio

    async def artifact():
        async with get_client() as client:
            return await client.read_latest_artifacts()

    keys = {a.key for a in asyncio.run(artifact())}
    assert "recommendations-ui-test" in keys


def test_recommend_flow_validates_parameters(tmp_path):
    from prefect.states import State

    state = f.recommend(budget=-1.0, store=str(tmp_path), return_state=True)
    assert isinstance(state, State) and state.is_failed()


def test_nightly_twice_same_date_no_duplicates(tmp_path):
    store = str(tmp_path)
    first = f.nightly(store=store, snapshot_date="2026-12-01")
    assert first["planned"] == [
        "resnet50-3usd",
        "gpt2-6usd",
        "bert-paper-10usd",
        "resnet50-90-epochs-by-deadline",
    ]
    second = f.nightly(store=store, snapshot_date="2026-12-01")
    assert second["failed"] == {}
    recs = whole(store, "recommendations").df()
    keys = ["snapshot_date", "scenario", "policy", "rank"]
    assert not recs.duplicated(keys).any() and len(recs) > 0
    prices = whole(store, "prices").df()
    assert len(prices) == SHIPPED_PRICE_ROWS
    third = f.nightly(store=store, snapshot_date="2026-12-02")
    assert third["changed"] == []  # same prices, same answers
    assert third["compacted"] == {}  # no month has ended yet
    # the first night of a month compacts the month before
    fourth = f.nightly(store=store, snapshot_date="2027-01-01")
    assert fourth["compacted"]["recommendations"] == ["2026-12"]
    files = DeltaTable(tmp_path / "recommendations").get_add_actions(flatten=True)
    months = files.column("partition.snapshot_month").to_pylist()
    assert sorted(months) == ["2026-12", "2027-01"]  # December's nights are one file
    recs = whole(store, "recommendations").df()
    assert sorted(recs["snapshot_date"].astype(str).unique()) == [
        "2026-12-01",
        "2026-12-02",
        "2027-01-01",
    ]
    assert not recs.duplicated(keys).any()


def test_fit_overhead_flow(tmp_path):
    import pandas as pd

    from deepvm.performance.overhead import SpeedupModel
    from deepvm.store import Store

    nodes = [1, 2, 4, 8]
    s = SpeedupModel("amdahl", {"p": 0.9})(nodes)
    rows = pd.DataFrame(
        {
            "run_id": "r",
            "instance_type": "g5.xlarge",
            "workload": "resnet50",
            "n_nodes": nodes,
            "duration_s": 100 / s,
            "speedup": s,
            "source": "measured",
            "measured_at": pd.Timestamp("2026-12-01", tz="UTC"),
        }
    )
    Store.open(tmp_path).write("scaling", rows, partition="2026-12-01", name="g5")
    assert f.fit_overhead(store=str(tmp_path)) == 5
    assert f.fit_overhead(store=str(tmp_path)) is None  # nothing newer than the fit


def test_forms_offer_choices_and_describe_every_field():
    from prefect.utilities.callables import parameter_schema

    from deepvm.performance.workloads import WORKLOADS

    schema = parameter_schema(f.recommend).model_dump_for_openapi()
    props, defs = schema["properties"], schema["definitions"]
    workload_ref = props["workload"]["$ref"].split("/")[-1]
    assert set(defs[workload_ref]["enum"]) == set(WORKLOADS)
    policy_ref = props["policies"]["items"]["$ref"].split("/")[-1]
    assert "gpt3" not in defs[policy_ref]["enum"] and "deepvm" in defs[policy_ref]["enum"]
    for name in ("budget", "work_pflop", "epochs", "dataset_size", "deadline_h", "store"):
        assert props[name].get("description"), name
    bench = parameter_schema(f.benchmark).model_dump_for_openapi()
    assert bench["properties"]["workloads"]["items"]["$ref"].endswith("WorkloadName")
    every = (f.nightly, f.refresh_prices, f.benchmark, f.benchmark_fleet, f.fleet, f.recommend)
    for flow in every:
        fields = parameter_schema(flow).model_dump_for_openapi()["properties"]
        assert all(p.get("description") for p in fields.values()), flow.name


@pytest.mark.parametrize(
    ("flow", "params", "field"),
    [
        ("nightly", {"price_regions": [""]}, "price_regions"),
        ("nightly", {"price_regions": []}, "price_regions"),
        ("refresh_prices", {"regions": ["us east 1"]}, "regions"),
        ("benchmark", {"instance_type": "g5 xlarge"}, "instance_type"),
        ("benchmark_fleet", {"instance_types": ["", "g5.xlarge"]}, "instance_types"),
    ],
)
def test_form_fields_refuse_names_that_cannot_be_regions_or_types(tmp_path, flow, params, field):
    """Checked by the form before the run starts: nothing is written."""
    from prefect.exceptions import ParameterTypeError

    with pytest.raises(ParameterTypeError, match=field):
        getattr(f, flow)(store=str(tmp_path / "s"), **params)
    assert not (tmp_path / "s").exists()


def test_recommend_flow_refuses_an_unknown_workload_before_running(tmp_path):
    from prefect.exceptions import ParameterTypeError

    with pytest.raises(ParameterTypeError, match="workload: Input should be 'resnet18'"):
        f.recommend(budget=3.0, workload="gpt3", store=str(tmp_path))
    assert not tmp_path.joinpath("recommendations").exists()


def test_work_in_pflop_survives_the_form_and_errors_name_flow_fields(tmp_path):
    recs = f.recommend(
        budget=3.0, objective="cost", work_pflop=2000, top=1, policies=["deepvm"],
        store=str(tmp_path),
    )  # fmt: skip
    assert recs[0]["work_flops"] == pytest.approx(2e18)
    with pytest.raises(ValueError, match="deadline_h 5 applies to objective cost"):
        f.recommend(budget=3.0, deadline_h=5, store=str(tmp_path))


def test_the_recommend_flow_speaks_the_jobs_vocabulary_and_reads_old_names(tmp_path):
    """``work_flops`` and ``deadline_h``, as JobSpec, the scenarios file and the
    JSON say; an API caller's ``total_work``/``deadline_hours`` still plan the same."""
    store = str(tmp_path)
    new = f.recommend(budget=3.0, objective="cost", work_flops=2e18, deadline_h=400,
                      top=1, policies=["deepvm"], scenario="new", store=store)  # fmt: skip
    old = f.recommend(budget=3.0, objective="cost", total_work=2e18, deadline_hours=400,
                      top=1, policies=["deepvm"], scenario="old", store=store)  # fmt: skip
    assert new[0]["work_flops"] == old[0]["work_flops"] == 2e18
    keys = ("worker_type", "n_workers", "expected_makespan_h")
    assert [new[0][k] for k in keys] == [old[0][k] for k in keys]
    with pytest.raises(ValueError, match=r"deadline_h 9 and deadline_hours \(its old name\) are"):
        f.recommend(budget=3.0, objective="cost", work_flops=2e18, deadline_h=9,
                    deadline_hours=9, store=store)  # fmt: skip


def test_nightly_writes_one_fleet_plan_within_the_shared_quotas(tmp_path):
    store = str(tmp_path)
    out = f.nightly(store=store, snapshot_date="2026-12-01", team_budget=9.0)
    assert out["fleet_status"] == "optimal"
    fleet = whole(store, "fleet").df()
    assert len(fleet) == 4 and set(fleet["status"]) == {"optimal"}
    assert fleet["hourly_cost"].fillna(0).sum() <= 9.0 + 1e-9
    # The shipped quotas: 128 G spot vCPUs in us-east-1, which the solo plans overrun.
    spot = (fleet["n_spot"].fillna(0) * 4).where(fleet["worker_type"] == "g4dn.xlarge", 0)
    assert spot.sum() <= 128


def test_fleet_flow_publishes_an_artifact(tmp_path):
    from prefect.client.orchestration import get_client

    plan = f.fleet(store=str(tmp_path), team_budget=6.0, snapshot_date="2026-12-01")
    assert plan["status"] == "optimal" and plan["hourly_cost"] <= 6.0 + 1e-9
    assert plan["jobs"][0]["scenario"] == "resnet50-3usd"
    assert any(j["binding"] for j in plan["jobs"])  # $6/h cannot pay for every solo plan

    async def artifact():
        async with get_client() as client:
            from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["deepvm-fleet"]))
            )
            return found[0].data

    import asyncio

    text = asyncio.run(artifact())
    assert "# deepvm fleet plan" in text and "resnet50-3usd" in text


def test_the_forms_take_the_fleet_time_limit_and_the_log_says_what_it_left_unproven(
    tmp_path, monkeypatch, caplog
):
    """The nightly planned the fleet at 30 s whatever the team's size, and a plan
    the limit stopped left no line in the run's log. The nightly and fleet forms
    now take the limit, and such a plan is a warning; a limit of 0 is refused."""
    import logging

    caplog.set_level(logging.INFO)
    limits = stopped_just_under(monkeypatch)
    store = str(tmp_path)
    f.nightly(store=store, snapshot_date="2026-12-01", fleet_time_limit_s=240.0)
    f.fleet(store=store, snapshot_date="2026-12-01", fleet_time_limit_s=90.0)
    assert limits == [240.0, 90.0]
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("prefect.flow_runs") and r.levelno == logging.WARNING
    ]
    unproven = "no plan is worth more than 344.27 (0.0015 % more); raise fleet_time_limit_s"
    assert sum(unproven in m for m in warned) == 2, warned
    state = f.fleet(store=store, fleet_time_limit_s=0.0, return_state=True)
    assert state.is_failed()
    assert limits == [240.0, 90.0]  # refused before planning


def test_a_fleet_run_from_the_ui_is_a_what_if_beside_the_night(tmp_path):
    """Regression (issue 35): the fleet deployment run with another team budget
    replaced that date's nightly plan, and the next night's "what moved" compared
    against the what-if."""
    from deepvm.nightly.stages import change_report
    from deepvm.store import Store

    store = str(tmp_path)
    f.nightly(store=store, snapshot_date="2026-12-01")
    night = whole(store, "fleet").df().sort_values("scenario")
    plan = f.fleet(store=store, team_budget=1.0, snapshot_date="2026-12-01")  # a what-if
    assert plan["hourly_cost"] <= 1.0 + 1e-9
    f.nightly(store=store, snapshot_date="2026-12-02")
    report = change_report(Store.open(store), "2026-12-02").set_index("scenario")
    # unchanged prices and jobs: against the night before (not the what-if), nothing moved
    assert not report["changed"].any()
    assert set(report["previous_date"]) == {"2026-12-01"}
    rows = whole(store, "fleet").df()
    rows = rows[rows["snapshot_date"].astype(str) == "2026-12-01"]
    kept = rows[rows["run_kind"] == "nightly"].sort_values("scenario")
    assert list(kept["run_id"]) == list(night["run_id"])  # the night's plan, untouched
    assert set(rows["run_kind"]) == {"nightly", "what-if"}


SKYPILOT_VMS = Path(__file__).parents[1] / "data" / "skypilot-vms.csv"


def test_nightly_from_the_form_with_the_skypilot_source(tmp_path):
    """Regression: the flows offered the skypilot source, which always failed
    because the form could not pass its file. Now the file is a form field."""
    store = str(tmp_path)
    out = f.nightly(
        store=store,
        snapshot_date="2026-12-01",
        price_source="skypilot",
        skypilot_csv=str(SKYPILOT_VMS),
    )
    assert out["stale_prices"] is False and out["price_error"] is None
    prices = whole(store, "prices").df()
    aws = prices[prices["provider"] == "aws"]  # the SkyPilot file's cloud; the others kept
    assert set(aws["source"].str.split(":").str[0]) == {"skypilot"}
    assert set(prices["provider"]) == {"aws", "gcp", "azure"}
    listed = {line.split(",")[0] for line in SKYPILOT_VMS.read_text().splitlines()[1:]}
    assert set(aws["instance_type"]) <= listed
    refreshed = f.refresh_prices(
        store=store, snapshot_date="2026-12-02", source="skypilot", skypilot_csv=str(SKYPILOT_VMS)
    )
    assert refreshed["stale"] is False and refreshed["rows"] == 8


def test_the_skypilot_source_without_its_file_names_the_form_field(tmp_path):
    with pytest.raises(ValueError, match=r"^skypilot_csv is needed by the skypilot price source"):
        f.nightly(store=str(tmp_path), snapshot_date="2026-12-01", price_source="skypilot")
    assert not (tmp_path / "prices").exists()  # refused before anything was written


def test_the_nightly_flow_runs_pipeline_nightly_with_each_stage_a_task(tmp_path, monkeypatch):
    """One nightly: the flow is deepvm.nightly.stages.nightly with a stage runner, so the
    flow and the CLI run the same sequence."""
    from deepvm.nightly import stages as pipeline

    ran: list[str] = []
    real = runs.as_task

    def recording(name, stage, /, *args, **kwargs):
        ran.append(name)
        return real(name, stage, *args, **kwargs)

    monkeypatch.setattr(runs, "as_task", recording)
    calls: list[object] = []
    nightly = pipeline.nightly

    def spy(*args, **kwargs):
        calls.append(kwargs.get("run"))
        return nightly(*args, **kwargs)

    monkeypatch.setattr(pipeline, "nightly", spy)
    f.nightly(store=str(tmp_path), snapshot_date="2026-12-01")
    assert calls == [recording]
    assert ran == [
        "refresh-prices",
        "compute-flopp",
        "refit-overhead",
        "load-inputs",
        "replan",
        "plan-fleet",
        "change-report",
        "compact-store",
    ]


def _artifact_text(key: str) -> str:
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactCollectionFilter, ArtifactCollectionFilterKey

    async def read() -> str:  # the newest artifact of the key (other tests publish it too)
        async with get_client() as client:
            found = await client.read_latest_artifacts(
                artifact_filter=ArtifactCollectionFilter(
                    key=ArtifactCollectionFilterKey(any_=[key])
                )
            )
            return str(found[0].data)

    return asyncio.run(read())


@pytest.mark.parametrize("typed", ["2e18", "2e18 FLOPs", "2000 PFLOP", "2 EFLOP"])
def test_the_work_field_is_read_whole_and_echoed_with_makespan_and_cost(tmp_path, typed):
    """Typed into the UI's number field, 2e18 became 218; `work` is text, read whole,
    and the artifact echoes the work, the makespan and the total cost."""
    recs = f.recommend(
        budget=3.0, objective="cost", work=typed, top=1, policies=["deepvm"],
        scenario="typed", store=str(tmp_path),
    )  # fmt: skip
    assert recs[0]["work_flops"] == pytest.approx(2e18)
    text = _artifact_text("recommendations-typed")
    assert "Work: 2e+18 FLOPs (2,000 PFLOP)." in text
    makespan, total = recs[0]["expected_makespan_h"], recs[0]["expected_total_cost"]
    assert f"{makespan:.3g} h" in text and f"${total:,.2f}" in text
    assert f"| {recs[0]['region']} |" in text  # region, and the zone beside it
    with pytest.raises(ValueError, match=r"^work '2e18x' is not a training work"):
        f.recommend(budget=3.0, objective="cost", work="2e18x", store=str(tmp_path))
    with pytest.raises(ValueError, match="work and work_pflop both give the work"):
        f.recommend(budget=3.0, objective="cost", work="2e18", work_pflop=2000.0)


def test_the_fleet_and_nightly_artifacts_show_makespan_cost_and_fit_narrow_tables(tmp_path):
    f.nightly(store=str(tmp_path), snapshot_date="2026-12-01")
    text = _artifact_text("deepvm-nightly-changes")
    assert "First night: 4 jobs planned, no earlier plan to compare with." in text
    assert "meets 12 h" in text and "2.87 h" in text
    widest = max(len(line.split("|")) - 2 for line in text.splitlines() if line.startswith("|"))
    assert widest <= 10  # columns per table: the change report had 11 in one table
    jobs = tmp_path / "jobs.toml"
    jobs.write_text('[[job]]\nname = "j"\nworkload = "gpt9"\nbudget = 3.0\n')
    with pytest.raises(ValueError, match=r"declare your own in a workloads file: workloads_path"):
        f.fleet(store=str(tmp_path), scenarios_path=str(jobs))


def test_a_refused_run_fails_in_one_line_without_a_traceback(tmp_path, caplog):
    """The run's state carries the one line; its log has no traceback (Prefect logged
    one for the flow, and one more for a failing task); Python callers still get
    the exception."""
    import logging

    caplog.set_level(logging.INFO)
    state = f.recommend(budget=0.001, store=str(tmp_path), return_state=True)
    assert state.is_failed()
    assert state.message.startswith("budget $0.001/h is below the cheapest feasible cluster")
    assert "raise budget to at least" in state.message and "--budget" not in state.message
    runs = [r for r in caplog.records if r.name.startswith("prefect.flow_runs")]
    assert any(r.getMessage() == state.message for r in runs)
    assert not [r for r in runs if r.exc_info], "a traceback was logged"
    with pytest.raises(ValueError, match="below the cheapest feasible cluster"):
        f.recommend(budget=0.001, store=str(tmp_path))
    with pytest.raises(ValueError, match="is a file, not a folder"):
        f.fleet(store=str(SKYPILOT_VMS))  # a store error outside any task: one line too


ADVISOR_FEED = Path(__file__).resolve().parents[2] / "datasets" / "sources"
ADVISOR_FEED = ADVISOR_FEED / "aws-spot-advisor-feed-2025-06-28.json"


def test_the_spot_advisor_feed_from_the_refresh_and_nightly_forms(tmp_path):
    store = str(tmp_path)
    out = f.refresh_prices(
        store=store,
        snapshot_date="2026-12-01",
        source="spot-advisor",
        spot_advisor_url=str(ADVISOR_FEED),
    )
    assert out["rows"] == 14962
    not_a_feed = tmp_path / "saved.json"
    not_a_feed.write_text('{"instance_types": {}}')
    with pytest.raises(
        ValueError, match=r"^the Spot Instance Advisor feed failed .*keeps 2026-12-01"
    ):
        f.refresh_prices(
            store=store,
            snapshot_date="2026-12-02",
            source="spot-advisor",
            spot_advisor_url=str(not_a_feed),
        )
    with pytest.raises(ValueError, match=r"^spot advisor feed .* is neither an http\(s\) URL"):
        f.refresh_prices(
            store=store, source="spot-advisor", spot_advisor_url=str(tmp_path / "missing.json")
        )
    night = f.nightly(store=store, snapshot_date="2026-12-03", spot_advisor_url=str(ADVISOR_FEED))
    assert night["price_error"] is None
    assert Store.open(store).partitions("spot_advisor") == ["2026-12-01", "2026-12-03"]
    recs = whole(store, "recommendations").df()
    spot = recs[recs["n_spot"] > 0]
    aws = spot["region"].isin(["us-east-1", "us-west-2", "eu-west-1"])
    assert aws.any() and set(spot[aws]["interruption_source"]) == {"aws-spot-advisor"}
    assert set(spot[aws]["interruption_date"]) == {"2025-06-28"}
    # GCP and Azure publish no interruption rates: their spot rows say estimate.
    assert set(spot[~aws]["interruption_source"]) <= {"estimate"}


def test_the_adopt_flow_records_what_runs_and_refuses_in_one_line(tmp_path):
    store = str(tmp_path)
    f.nightly(store=store, snapshot_date="2026-12-01")
    out = f.adopt(job="gpt2-6usd", rank=2, work_done="1e18", store=store)
    assert out["source"] == "deepvm #2" and out["work_done_flops"] == pytest.approx(1e18)
    rows = whole(store, "running").df()
    assert list(rows["scenario"]) == ["gpt2-6usd"]
    with pytest.raises(ValueError, match=r"^job 'nope' has no plan on 2026-12-01"):
        f.adopt(job="nope", store=store)
    assert len(whole(store, "running").df()) == 1  # nothing written


EVERY_FLOW = ("nightly", "refresh_prices", "recommend", "benchmark", "benchmark_fleet", "fleet",
              "adopt", "finish", "fit_overhead")  # fmt: skip


def test_a_bad_optional_value_is_refused_by_the_rule_it_breaks():
    """Regression (issue 35): an optional field's schema was `anyOf` a bounded value
    or null, so the form refused -5 with "-5 is not valid under any of the given
    schemas"; each is now one type with its bounds."""
    from jsonschema import Draft202012Validator
    from prefect.utilities.callables import parameter_schema

    for name in EVERY_FLOW:
        props = parameter_schema(getattr(f, name)).model_dump_for_openapi()["properties"]
        assert not [k for k, v in props.items() if "anyOf" in v], name
    schema = parameter_schema(f.recommend).model_dump_for_openapi()
    said = [e.message for e in Draft202012Validator(schema).iter_errors({"deadline_h": -5})]
    assert said == ["-5 is less than or equal to the minimum of 0"]


@pytest.mark.parametrize(
    ("flow", "field", "typed"),
    [("adopt", "rank", 218), ("recommend", "top", 218), ("recommend", "work_pflop", "2e18")],
)
def test_what_a_number_field_makes_of_2e18_is_refused(tmp_path, flow, field, typed):
    """Regression (issue 35): typed into a number field, 2e18 became 218 and ran.
    rank and top are bounded below 218; work_pflop is text, read whole (2e18 PFLOP is
    more work than any)."""
    from prefect.exceptions import ParameterTypeError

    base = {"job": "j"} if flow == "adopt" else {"budget": 3.0, "objective": "cost"}
    with pytest.raises((ParameterTypeError, ValueError), match=field):
        getattr(f, flow)(store=str(tmp_path / "s"), **base, **{field: typed})
    assert not (tmp_path / "s").exists()


def test_the_adopt_form_takes_a_start_and_finish_ends_the_job(tmp_path):
    store = str(tmp_path)
    f.nightly(store=store, snapshot_date="2026-12-01")
    out = f.adopt(job="gpt2-6usd", started="2026-12-01T00:00Z", store=store)
    assert out["work_done_flops"] > 0  # estimated from the start
    ended = f.finish(job="gpt2-6usd", store=store)
    assert ended["finished"] is True and ended["worker_type"] == out["worker_type"]
    with pytest.raises(ValueError, match="does not run"):
        f.finish(job="gpt2-6usd", store=store)


def test_the_nightly_loop_end_to_end(tmp_path):
    """Issue 35's loop: the team's jobs, two nights, a UI-style what-if fleet run
    between them, an adopted job going over its budget: the report says it moves
    everywhere (plan, JSON, change report, artifact), the what-if leaves the night
    as it was, and a night on unchanged prices moves nothing."""
    from deepvm.store import Store

    store = str(tmp_path / "store")
    f.nightly(store=store, snapshot_date="2026-12-01")
    adopted = f.adopt(job="gpt2-6usd", store=store)
    f.fleet(store=store, team_budget=1.0, snapshot_date="2026-12-01")  # a what-if from the UI
    shipped = (Path(__file__).parents[2] / "datasets" / "scenarios.toml").read_text()
    jobs = tmp_path / "jobs.toml"  # the running cluster is over gpt2's budget now
    over = f"budget = {round(adopted['hourly_cost'] * 0.8, 2)}"
    jobs.write_text(shipped.replace('"gpt2"\nbudget = 6.0', f'"gpt2"\n{over}'))
    assert over in jobs.read_text()
    out = f.nightly(store=store, snapshot_date="2026-12-02", scenarios_path=str(jobs))
    rows = Store.open(store).read("fleet", partitions=["2026-12-02"]).set_index("scenario")
    assert rows.loc["gpt2-6usd", "decision"] == "move"
    assert "over its" in rows.loc["gpt2-6usd", "decision_reason"]
    assert out["decisions"] == {"gpt2-6usd": "move"}
    text = _artifact_text("deepvm-nightly-changes")
    assert "| gpt2-6usd | move |" in text and "| gpt2-6usd | stay |" not in text
    # a third night on unchanged prices and jobs: nothing moves, and the running job
    # (still on its old cluster) is told the same
    again = f.nightly(store=store, snapshot_date="2026-12-03", scenarios_path=str(jobs))
    assert again["changed"] == [] and again["decisions"] == {"gpt2-6usd": "move"}
