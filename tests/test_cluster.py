"""One cluster type (deepvm.model.cluster.Cluster) from which the store's columns, the
JSON contracts and the words derive."""

import dataclasses
import math

import pytest

from deepvm.model.cluster import CLUSTER_FIELDS, Cluster, cluster_words
from deepvm.model.schemas import table_schema
from deepvm.planner.recommendation import Alternative, Recommendation


@pytest.mark.parametrize("table", ["recommendations", "fleet"])
def test_the_store_tables_carry_the_cluster_fields_with_their_types(table):
    schema = table_schema(table)
    names = schema.names
    at = names.index(CLUSTER_FIELDS[0])
    assert tuple(names[at : at + len(CLUSTER_FIELDS)]) == CLUSTER_FIELDS
    kinds = {"str": "string", "str | None": "string", "int": "int64", "float": "double"}
    for f in dataclasses.fields(Cluster):
        assert str(schema.field(f.name).type) == kinds[str(f.type)]


def test_recommendations_and_alternatives_are_clusters(capsys):
    import json

    from deepvm.cli import main

    assert issubclass(Recommendation, Cluster) and issubclass(Alternative, Cluster)
    assert main(["recommend", "--budget", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["recommendations"][0]
    assert list(first)[:2] == ["policy", "rank"]
    assert tuple(list(first)[2 : 2 + len(CLUSTER_FIELDS)]) == CLUSTER_FIELDS
    assert set(CLUSTER_FIELDS) <= set(first["cheaper"]) and "budget" in first["cheaper"]


def test_fleet_rows_carry_the_cluster_fields(capsys):
    import json

    from deepvm.cli import main

    assert main(["fleet", "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    for job in jobs:
        assert set(CLUSTER_FIELDS) <= set(job)
        cluster = Cluster.from_mapping(job)
        assert (cluster is None) == (not job["planned"])


def test_words_and_identity():
    c = Cluster(
        "us-east-1", "use1-az1", "single_anchor", "g4dn.xlarge", 33, 32, 1, None, 0, 6.9, 5e14
    )
    assert c.words() == "33 x g4dn.xlarge (32 spot, 1 od)"
    assert c.words(architecture=True, region=True) == (
        "single_anchor: 33 x g4dn.xlarge (32 spot, 1 od) in us-east-1"
    )
    tier = dataclasses.replace(
        c, architecture="tiering", n_spot=33, n_on_demand=0, remote_type="t3.xlarge", n_remote=1
    )
    assert tier.words() == "33 x g4dn.xlarge spot + 1 x t3.xlarge"
    cheaper = dataclasses.replace(c, hourly_cost=1.0, throughput_flops=math.nan)
    assert cheaper.identity() == c.identity() and tier.identity() != c.identity()
    assert cluster_words({"worker_type": None}) == "unplanned"
    assert Cluster.from_mapping({**c.as_dict(), "zone": float("nan")}) == dataclasses.replace(
        c, zone=None
    )
