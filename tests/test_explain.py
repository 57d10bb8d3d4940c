"""What binds a recommendation, and its next cheaper and faster cluster, checked
against the catalog and quotas directly and against plain re-plans."""

from __future__ import annotations

import json

import pytest

from deepvm.catalog import load_catalog
from deepvm.catalog.quotas import load_quotas
from deepvm.cli import main
from deepvm.planner import recommend
from deepvm.planner.inputs import Inputs
from tests.helpers import whole


def first(budget: float, **options):
    result = recommend(budget, **options)
    return next(r for r in result.recommendations if r.policy == "deepvm" and r.rank == 1)


def test_a_quota_binds_at_10_usd():
    rec = first(10.0)
    assert rec.worker_type == "p4d.24xlarge" and rec.hourly_cost < 9.0  # half the budget unused
    catalog = load_catalog().instances
    row = catalog[
        (catalog["instance_type"] == rec.worker_type) & (catalog["region"] == rec.region)
    ].iloc[0]
    limit = load_quotas().limit(row["quota_group"], "spot", rec.region)
    # one node more would break the group's spot quota, and the budget would allow it
    assert (rec.n_spot + 1) * row["vcpus"] > limit
    assert rec.hourly_cost + row["spot_price"] <= 10.0
    assert rec.binding == f"the {row['quota_group']} spot quota in {rec.region} ({limit:g} vCPUs)"


def test_the_budget_binds_at_3_usd():
    rec = first(3.0)
    catalog = load_catalog().instances
    spot = catalog[
        (catalog["instance_type"] == rec.worker_type) & (catalog["region"] == rec.region)
    ]["spot_price"].iloc[0]
    assert rec.hourly_cost + spot > 3.0
    assert rec.binding == "the budget ($3/h)"


def test_the_node_cap_binds():
    # $10/h in us-east-1: two p4d.24xlarge (at $25/h one p5en.48xlarge, since the MLPerf
    # fit for 8-GPU A100 nodes gives two nodes 1.65x, not Amdahl's 1.8x)
    rec = first(10.0, max_nodes=2, inputs=Inputs.load(region="us-east-1"))
    assert rec.n_workers == 2
    assert rec.binding is not None
    assert rec.binding.startswith("the node cap (max_nodes = 2 worker nodes)")
    # three nodes would also break the P spot quota (3 x 96 > 256 vCPUs): both are named
    assert "spot quota" in rec.binding


@pytest.mark.parametrize("budget", [3.0, 10.0, 25.0])
def test_the_alternatives_are_what_plain_re_plans_give(budget):
    rec = first(budget)
    cheaper, faster = rec.cheaper, rec.faster
    assert cheaper is not None and faster is not None
    assert cheaper.hourly_cost < rec.hourly_cost
    assert faster.throughput_flops > rec.throughput_flops and faster.budget > budget
    # the cheaper one is the best below this cluster's cost ...
    below = first(rec.hourly_cost * (1 - 1e-6))
    assert (below.worker_type, below.n_workers, below.hourly_cost) == (
        cheaper.worker_type,
        cheaper.n_workers,
        cheaper.hourly_cost,
    )
    # ... and the faster one the best at the budget it names
    above = first(faster.budget)
    assert (above.worker_type, above.n_workers, above.hourly_cost) == (
        faster.worker_type,
        faster.n_workers,
        faster.hourly_cost,
    )


def test_binding_in_json_and_in_the_store(tmp_path, capsys):

    store = str(tmp_path / "s")
    assert main(["recommend", "--budget", "10", "--json", "--store", store]) == 0
    out = json.loads(capsys.readouterr().out)["recommendations"]
    assert "P spot quota" in out[0]["binding"]
    assert out[0]["faster"]["worker_type"] and out[0]["cheaper"]["hourly_cost"] > 0
    assert out[1]["cheaper"] is None  # alternatives are given for each policy's first
    stored = whole(store, "recommendations").order("rank").select("rank, binding").fetchall()
    assert stored[0] == (1, out[0]["binding"])
