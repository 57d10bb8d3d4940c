"""Answers a team can trust (issue 24): interruption buckets and regional spot
savings from AWS's Spot Instance Advisor feed, the spot price in context, every
figure labelled with what it is, and published multi-node scaling."""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from deepvm.catalog import load_catalog
from deepvm.cli import main
from deepvm.performance.flopp import load_throughput, merge_measurements, node_throughput
from deepvm.performance.overhead import SpeedupModel, shipped_overhead_table
from deepvm.store import Store
from tests.helpers import whole

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "datasets" / "sources"
FEED = SOURCES / "aws-spot-advisor-feed-2025-06-28.json"


def feed() -> dict:
    return json.loads(FEED.read_text())


# --- interruption buckets and savings from the feed -------------------------------


def test_the_catalogs_buckets_and_savings_are_the_feeds_row_for_row():
    raw = feed()
    labels = {r["index"]: r["label"] for r in raw["ranges"]}
    rows = load_catalog().instances
    rows = rows[rows["provider"] == "aws"]  # the feed is AWS's
    assert len(rows) == 105
    for r in rows.itertuples():
        entry = raw["spot_advisor"][r.region]["Linux"][r.instance_type]
        assert (r.interruption_bucket, r.regional_saving_pct) == (labels[entry["r"]], entry["s"])
        assert (r.interruption_source, r.interruption_date) == ("aws-spot-advisor", "2025-06-28")
    by = rows.set_index(["region", "instance_type"])["interruption_bucket"]
    # the examples: the estimates said >20 % for all three
    assert by["us-east-1", "p4d.24xlarge"] == "10-15%"
    assert by["us-east-1", "p4de.24xlarge"] == "<5%"
    assert by["eu-west-1", "g4dn.xlarge"] == "5-10%"


def test_a_type_the_feed_lacks_keeps_its_estimate_labelled_as_one(monkeypatch):
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_catalog

    full = build_catalog.advisor_rows()
    monkeypatch.setattr(
        build_catalog,
        "advisor_rows",
        lambda: {k: v for k, v in full.items() if k != ("us-east-1", "p5.48xlarge")},
    )
    rows = {(r["region"], r["instance_type"]): r for r in build_catalog.catalog_rows()}
    lacking = rows["us-east-1", "p5.48xlarge"]
    assert lacking["interruption_source"] == "estimate" and lacking["interruption_date"] == ""
    assert lacking["interruption_bucket"] == ">20%"  # aws-instance-specs.csv's estimate
    assert lacking["regional_saving_pct"] == ""
    assert rows["us-west-2", "p5.48xlarge"]["interruption_source"] == "aws-spot-advisor"


# --- the spot-advisor source --------------------------------------------------------


def serve(body: bytes, delay_s: float = 0.0):
    class Handler(BaseHTTPRequestHandler):
        hits: ClassVar[list] = []

        def log_message(self, *args):
            pass

        def do_GET(self):
            Handler.hits.append(self.path)
            time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, Handler, f"http://127.0.0.1:{server.server_address[1]}/spot-advisor-data.json"


def test_spot_advisor_refresh_parses_the_feed_and_plans_use_the_newest(tmp_path, capsys):
    store = str(tmp_path / "s")
    assert main(["prices", "refresh", "--store", store, "--date", "2026-12-01", "-q"]) == 0
    capsys.readouterr()
    raw = feed()
    raw["spot_advisor"]["us-east-1"]["Linux"]["p4d.24xlarge"] = {"r": 0, "s": 80}
    server, handler, url = serve(json.dumps(raw).encode())
    try:
        argv = ["prices", "refresh", "--source", "spot-advisor", "--store", store]
        argv += ["--spot-advisor-url", url, "--date", "2026-12-02", "--json"]
        assert main(argv) == 0
    finally:
        server.shutdown()
        server.server_close()
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == 14962 and not out["failed"] and handler.hits
    rows = whole(store, "spot_advisor").df()
    p4d = rows[(rows["region"] == "us-east-1") & (rows["instance_type"] == "p4d.24xlarge")]
    assert p4d[["interruption_bucket", "interruption_rate", "savings_pct"]].values.tolist() == [
        ["<5%", 0.025, 80.0]
    ]
    assert main(["recommend", "--budget", "3", "--store", store, "--json", "--top", "1"]) == 0
    first = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert first["worker_type"] == "p4d.24xlarge"
    assert (first["interruption_bucket"], first["regional_saving_pct"]) == ("<5%", 80.0)
    assert first["interruption_date"] == pd.Timestamp.now("UTC").date().isoformat()


def test_a_failing_or_slow_feed_keeps_the_last_good_snapshot(tmp_path, capsys):
    store = str(tmp_path / "s")
    assert main(["prices", "refresh", "--store", store, "--date", "2026-12-01", "-q"]) == 0
    good = ["prices", "refresh", "--source", "spot-advisor", "--store", store, "-q"]
    assert main([*good, "--spot-advisor-url", str(FEED), "--date", "2026-12-01"]) == 0
    capsys.readouterr()
    server, handler, url = serve(b'{"not": "a feed"}')
    try:
        argv = [*good, "--spot-advisor-url", url, "--date", "2026-12-02", "--json"]
        assert main(argv) == 1  # a parse failure: not retried
    finally:
        server.shutdown()
        server.server_close()
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] and "spot_advisor" in out["error"] and out["kept"] == "2026-12-01"
    assert len(handler.hits) == 1
    server, handler, url = serve(FEED.read_bytes(), delay_s=3.0)
    try:
        began = time.monotonic()
        argv = [*good, "--spot-advisor-url", url, "--date", "2026-12-02", "--timeout", "1"]
        assert main([*argv, "--json"]) == 1
        assert time.monotonic() - began < 2.5  # the deadline, not the server, ends it
    finally:
        server.shutdown()
        server.server_close()
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] and "deadline" in out["error"] and out["kept"] == "2026-12-01"
    assert Store.open(store).partitions("spot_advisor") == ["2026-12-01"]


# --- the spot price in context ------------------------------------------------------


def test_the_shipped_p4d_price_is_flagged_and_regional_prices_change_the_3_dollar_answer(
    tmp_path, capsys
):
    store = str(tmp_path / "s")
    assert main(["recommend", "--budget", "3", "--top", "1", "--json", "--store", store]) == 0
    zone = json.loads(capsys.readouterr().out)
    first = zone["recommendations"][0]
    assert (first["worker_type"], first["region"], first["zone"]) == (
        "p4d.24xlarge",
        "us-east-1",
        "use1-az1",
    )
    assert first["spot_outlier"] is True and first["regional_saving_pct"] == 67
    assert first["spot_saving_pct"] == pytest.approx(100 * (1 - 2.4655 / 21.957642))
    stored = whole(store, "recommendations").df()
    assert stored["spot_outlier"].tolist() == [True]
    assert main(["recommend", "--budget", "3", "--top", "1"]) == 0
    table = capsys.readouterr().out
    assert "warning: p4d.24xlarge spot in use1-az1 is 89% below on-demand" in table
    assert "average saving in us-east-1 is 67%" in table
    argv = ["recommend", "--budget", "3", "--top", "1", "--json", "--spot-price", "regional"]
    assert main(argv) == 0
    regional = json.loads(capsys.readouterr().out)
    other = regional["recommendations"][0]
    assert other["worker_type"] != "p4d.24xlarge" and other["spot_outlier"] is False
    assert "regional average" in other["price_source"]
    # the regional price of a g4dn.xlarge spot node: on-demand x (1 - its saving)
    row = load_catalog(region=other["region"]).instances.set_index("instance_type")
    od, saving = row.loc[other["worker_type"], ["ondemand_price", "regional_saving_pct"]]
    remote = row.loc[other["remote_type"], "ondemand_price"] if other["remote_type"] else 0
    assert other["hourly_cost"] == pytest.approx(
        other["n_spot"] * od * (1 - saving / 100) + other["n_remote"] * remote, rel=1e-4
    )


# --- what each figure is ------------------------------------------------------------


def test_every_flops_source_appears_where_it_should(tmp_path):
    catalog = load_catalog(region="us-east-1")

    def figure(itype, measured=None):
        f = node_throughput(catalog, "resnet50", measured)
        k = list(catalog.table["instance_type"][f.row]).index(itype)
        return f.flops_source[k], f.flops_basis[k], f.flops_date[k]

    assert figure("p3.2xlarge") == (
        "published",
        "Lambda: ResNet-50, mixed precision, 1 x V100 16GB",
        "2024-07-24",
    )
    kind, basis, _ = figure("g5.xlarge")
    assert kind == "transferred" and basis.endswith("transferred: A10 -> A10G")
    kind, basis, _ = figure("p4d.24xlarge")
    assert kind == "transferred" and "A100 40GB PCIe -> A100 40GB SXM4" in basis
    assert "1 -> 8 GPUs" in basis
    kind, basis, date = figure("g4dn.xlarge")  # T4: no published row
    assert kind == "estimate" and "share of peak" in basis and date is None
    t = tmp_path / "t.csv"
    t.write_text("instance_type,workload,flops\ng4dn.xlarge,resnet50,9e12\n")
    benchmark = pd.DataFrame(
        {
            "instance_type": ["g5.xlarge"],
            "workload": ["resnet50"],
            "flops": [1.1e13],
            "source": ["benchmark 2026-11-30"],
            "source_date": ["2026-11-30"],
        }
    )
    measured = merge_measurements(benchmark, load_throughput(t))
    assert figure("g4dn.xlarge", measured) == ("file", "file t.csv", None)
    assert figure("g5.xlarge", measured) == ("measured", "benchmark 2026-11-30", "2026-11-30")
    # the bert rows are another task: transferred even on Lambda's own GPU
    f = node_throughput(catalog, "bert-base")
    k = list(catalog.table["instance_type"][f.row]).index("p3.2xlarge")
    assert f.flops_source[k] == "transferred" and "SQuAD fine-tuning" in f.flops_basis[k]


def test_recommend_explains_where_the_first_clusters_figures_come_from(capsys):
    assert main(["recommend", "--budget", "50", "--top", "1", "--json", "--cloud", "aws"]) == 0
    out = json.loads(capsys.readouterr().out)
    inputs = out["inputs"]
    assert set(inputs) == {"throughput", "scaling", "price", "interruptions"}
    first = out["recommendations"][0]
    assert inputs["throughput"]["source"] == first["flops_source"] in ("published", "transferred")
    assert inputs["scaling"]["source"] == "published"  # p4de on ResNet-50: MLPerf's own GPU
    assert "MLPerf Training" in inputs["scaling"]["basis"]
    assert inputs["price"] == {
        "source": "skypilot-catalog-v8@00148f2a",
        "basis": f"spot zone {first['zone']}",
        "date": "2025",
    }
    assert inputs["interruptions"]["date"] == "2025-06-28"
    assert main(["recommend", "--budget", "50", "--top", "1", "--cloud", "aws"]) == 0
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if x.startswith("deepvm #1's figures: "))
    for part in ("throughput ", "scaling published (MLPerf", "price skypilot", "interruptions"):
        assert part in line
    assert main(["recommend", "--budget", "3", "--columns", "rank,flops_source,flops_basis"]) == 0
    assert "transferred" in capsys.readouterr().out


# --- published multi-node scaling ---------------------------------------------------


def mlperf() -> pd.DataFrame:
    return pd.read_csv(SOURCES / "mlperf-training-resnet-bert.csv", skiprows=1)


def ttt(system: str, benchmark: str, rnd: str) -> float:
    d = mlperf()
    row = d[(d["system"] == system) & (d["benchmark"] == benchmark) & (d["round"] == rnd)]
    assert len(row) == 1, (system, benchmark, rnd)
    return float(row["ttt_minutes_olympic_mean"].iloc[0])


# (instance type, workload) -> [(n, speedup)] recomputed here from the results file
POINTS = {
    ("p5.48xlarge", "resnet50"): [
        (2, ttt("XE9680x8H100-SXM-80GB", "resnet", "v3.1")
         / ttt("2xXE9680x8H100-SXM-80GB", "resnet", "v3.1")),
        (4, ttt("dgxh100_preview", "resnet", "v2.1") / ttt("dgxh100_n4_preview", "resnet", "v2.1")),
        (8, ttt("eos_ngc23.09_mxnet", "resnet", "v3.1")
         / ttt("eos_n8_ngc23.09_mxnet", "resnet", "v3.1")),
    ],
    ("p4de.24xlarge", "bert-base"): [
        (n, ttt("HPE-ProLiant-XL675d-Gen10-Plus_A100-SXM-80GB_pytorch", "bert", "v2.1")
         / ttt(f"HPE-ProLiant-XL675d-Gen10-Plus_A100-SXM-80GB_{n}N_pytorch", "bert", "v2.1"))
        for n in (2, 4, 8, 16)
    ],
}  # fmt: skip


def shipped_model(itype: str, workload: str) -> tuple[SpeedupModel, float]:
    rows = {(r["instance_type"], r["workload"]): r for r in shipped_overhead_table().records()}
    row = rows[itype, workload]
    kind = row["model"]
    params = {p: float(row[p]) for p in ("a", "b", "c", "p", "alpha", "beta") if row.get(p)}
    return SpeedupModel(kind, params), float(row["fit_rmse"])


@pytest.mark.parametrize("key", list(POINTS))
def test_the_shipped_mlperf_fits_reproduce_the_speedups_they_came_from(key):
    model, rmse = shipped_model(*key)
    assert 0 < rmse < 0.5
    for n, observed in POINTS[key]:
        assert abs(float(model(n)) - observed) <= 2.5 * rmse, (key, n, observed, float(model(n)))
    # the example: two 8-GPU H100 nodes train ResNet-50 1.78x as fast
    if key == ("p5.48xlarge", "resnet50"):
        assert POINTS[key][0][1] == pytest.approx(1.777, abs=1e-3)


def test_a_p5_plan_at_2_and_4_nodes_uses_the_mlperf_fit(tmp_path, capsys):
    rows = load_catalog().instances
    mine = rows[(rows["region"] == "us-east-1")]
    mine = mine[mine["instance_type"].isin(["p5.48xlarge", "t3.xlarge"])]
    catalog = tmp_path / "p5.csv"
    mine.to_csv(catalog, index=False)
    quotas = tmp_path / "q.csv"
    quotas.write_text(
        "quota_group,market,vcpus\nP,on_demand,4000\nP,spot,4000\nstandard,on_demand,256\n"
        "standard,spot,256\n"
    )
    model, _ = shipped_model("p5.48xlarge", "resnet50")
    seen = {}
    for budget in (40, 75):  # p5 spot in us-east-1: $17.63/h a node
        argv = ["recommend", "--budget", str(budget), "--catalog", str(catalog), "--top", "1"]
        assert main([*argv, "--quotas", str(quotas), "--json"]) == 0
        first = json.loads(capsys.readouterr().out)["recommendations"][0]
        seen[first["n_workers"]] = first
    assert set(seen) == {2, 4}
    node = seen[2]["throughput_flops"] / float(model(2))
    for n, rec in seen.items():
        assert rec["overhead_source"] == "published" and "MLPerf" in rec["overhead_basis"]
        assert rec["throughput_flops"] == pytest.approx(node * float(model(n)), rel=1e-9)
        assert rec["throughput_flops"] < 0.95 * n * node  # not linear


def test_live_prices_take_the_rate_of_their_own_region():
    """Regression: a live source's spot rows took one region's shipped rate for a
    type in every region, though the Advisor's buckets differ by region."""
    from deepvm.catalog.sources import fill_interruption_rates

    prices = pd.DataFrame(
        {
            "region": ["us-east-1", "us-west-2"],
            "instance_type": ["p4d.24xlarge", "p4d.24xlarge"],
            "market": ["spot", "spot"],
        }
    )
    assert fill_interruption_rates(prices)["interruption_rate"].tolist() == [0.125, 0.30]


def test_the_nightly_fetches_the_feed_when_asked_and_survives_its_failure(tmp_path, capsys):
    store = str(tmp_path / "s")
    argv = ["nightly", "--store", store, "--json", "--no-compact"]
    assert main([*argv, "--date", "2026-12-01", "--spot-advisor-url", str(FEED)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["spot_advisor"] == {
        "source": str(FEED),
        "failed": False,
        "rows": 14962,
        "error": None,
        "kept": None,
    }
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main([*argv, "--date", "2026-12-02", "--spot-advisor-url", str(bad)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["spot_advisor"]["kept"] == "2026-12-01"
    assert "warning: the Spot Instance Advisor feed failed" in captured.err
    assert Store.open(store).partitions("spot_advisor") == ["2026-12-01"]
    assert main([*argv, "--date", "2026-12-03"]) == 0  # not asked: not fetched
    assert json.loads(capsys.readouterr().out)["spot_advisor"] is None


def test_the_shipped_catalog_flags_two_spot_outliers_against_the_regional_saving():
    """The threshold is a fraction of the regional average spot price (on-demand x
    (1 - the regional saving)), not of on-demand: of 264 priced spot rows, the two
    zones far below their region's average (docs/ARCHITECTURE.md) and no others."""
    from deepvm.catalog.common import spot_outliers

    table = load_catalog().table
    flagged = spot_outliers(table)
    named = {
        (str(table["instance_type"][k]), str(table["region"][k]))
        for k in range(len(table))
        if flagged[k]
    }
    assert named == {("p4d.24xlarge", "us-east-1"), ("p5.48xlarge", "us-west-2")}


def test_a_request_that_times_out_at_the_fetchs_deadline_says_so():
    """The request's timeout is what is left of the fetch's deadline, so the socket's
    timeout and the deadline's end come together: on a busy machine the socket's won
    (CI at 591daef) and the error read "timed out", not the deadline that ended it.
    Here the request runs under a deadline in its own thread, with no watcher to race."""
    from deepvm.catalog import http

    server, _handler, url = serve(FEED.read_bytes(), delay_s=1.0)
    try:
        http._deadline.end = time.monotonic() + 0.3
        with pytest.raises(http.TransientSourceError, match="deadline"):
            http.get_json(url)
    finally:
        del http._deadline.end
        server.shutdown()
        server.server_close()
