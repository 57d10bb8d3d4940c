"""The architecture registry: node roles, and the costs and quota limits that
follow from them, as the design states them."""

import math

import numpy as np
import pytest
from helpers import cpu_row, gpu_row, job, make_fleet

from deepvm.planner import architectures as arch
from deepvm.planner._constraints import violations
from deepvm.planner.candidates import Config, hourly_cost, node_limits, worker_cost


def names_broken(*args) -> list[str]:  # type: ignore[no-untyped-def]
    """The names of the limits a configuration breaks."""
    return [v.name for v in violations(*args)]


@pytest.mark.parametrize(
    ("a", "n", "spot", "on_demand"),
    [
        (arch.SINGLE_ANCHOR, 5, 4, 1),
        (arch.TIERING, 5, 5, 0),
        (arch.ON_DEMAND, 5, 0, 5),
        (arch.OBJECT_STORE, 5, 5, 0),
    ],
)
def test_node_roles(a, n, spot, on_demand):
    assert a.n_spot(n) == spot and a.n_on_demand(n) == on_demand
    assert Config(a.name, 0, n).n_spot == spot


def test_costs_follow_the_roles_whatever_the_registry_order():
    fleet = make_fleet([gpu_row("g", 1.0, 0.3), cpu_row("c", 0.2)])
    n = np.array([1, 3, 8], dtype=np.int32)
    want = {
        "single_anchor": 1.0 + (n - 1) * 0.3,
        "tiering": n * 0.3,
        "on_demand": n * 1.0,
        "spot_object_store": n * 0.3 + fleet.object_store_usd_per_hour,
    }
    for name, expected in want.items():
        codes = np.full(len(n), arch.code(name), dtype=np.int8)
        got = worker_cost(fleet, codes, np.zeros(len(n), dtype=np.int32), n)
        assert got == pytest.approx(expected)
        # by name (Config) and by code (candidates) agree
        assert hourly_cost(fleet, Config(name, 0, 3)) == pytest.approx(expected[1])


def test_quota_limits_per_architecture():
    fleet = make_fleet(
        [gpu_row("g", 1.0, 0.3, vcpus=4)], quotas={("G", "spot"): 16, ("G", "on_demand"): 8}
    )
    limits = node_limits(fleet, max_nodes=100)
    # 16 spot vCPUs: 4 spot nodes (+1 anchor); 8 on-demand vCPUs: 2 nodes
    assert limits["single_anchor"][0] == 5
    assert limits["tiering"][0] == 4 and limits["spot_object_store"][0] == 4
    assert limits["on_demand"][0] == 2
    assert names_broken(fleet, job(), Config("single_anchor", 0, 5), math.inf) == []
    assert names_broken(fleet, job(), Config("single_anchor", 0, 6), math.inf) == ["spot quota"]
    assert names_broken(fleet, job(), Config("on_demand", 0, 3), math.inf) == ["on-demand quota"]


def test_an_anchor_needs_its_on_demand_quota():
    fleet = make_fleet([gpu_row("g", 1.0, 0.3, vcpus=8)], quotas={("G", "on_demand"): 4})
    assert node_limits(fleet)["single_anchor"][0] == 0


def test_unknown_architecture_is_named():
    with pytest.raises(ValueError, match="unknown architecture 'ring'"):
        arch.architecture("ring")
