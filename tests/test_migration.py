"""Moving a running job: the migration cost's terms and the stay/move decision,
against hand-computed cases for each objective (issue 27)."""

from __future__ import annotations

import math

import pytest

from deepvm.base.config import DEFAULT_MIN_GAIN
from deepvm.planner.fleet.migration import Side, decide, migration_cost

# Old: 100 TFLOP/s for $4/h, 10 Gbps, checkpoints every 1,800 s. Work left: 3.6e18
# FLOPs, i.e. 10 h on the old cluster.
OLD = Side(1e14, 4.0, 10.0, efficiency=1.0, checkpoint_interval_s=1800.0)
LEFT = 3.6e18


def test_the_terms_by_hand():
    new = Side(2e14, 6.0, 25.0)
    cost = migration_cost(OLD, new, checkpoint_gb=12.5, restart_s=300.0)
    # 12.5 GB = 100 Gbit over the slower side's 10 Gbps: 10 s each way.
    assert cost.transfer_s == pytest.approx(20.0)
    # Half an interval of the old cluster's work, redone at 200 TFLOP/s.
    assert cost.lost_flops == pytest.approx(900 * 1e14)
    assert cost.lost_s == pytest.approx(450.0)
    # $4/h while saving (10 s); $6/h while restoring, restarting, redoing (760 s).
    assert cost.usd == pytest.approx(4 * 10 / 3600 + 6 * 760 / 3600)
    assert cost.hours == pytest.approx((20 + 300 + 450) / 3600)


def test_an_all_on_demand_cluster_loses_nothing_but_the_transfer():
    old = Side(1e14, 4.0, 10.0)  # no checkpoint interval: no spot nodes
    cost = migration_cost(old, Side(2e14, 6.0, 25.0), checkpoint_gb=0.0, restart_s=0.0)
    assert (cost.transfer_s, cost.lost_flops, cost.usd) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("objective", ["throughput", "goodput"])
def test_throughput_moves_when_the_time_saved_beats_the_move(objective):
    new = Side(2e14, 6.0, 25.0)
    d = decide(objective, OLD, new, LEFT, checkpoint_gb=12.5, restart_s=300.0)
    # Stay: 36,000 s. Move: 320 s stalled + (3.6e18 + 9e16) / 2e14 = 18,450 s.
    assert d.gain == pytest.approx((36000 - 18770) / 36000)
    assert d.move and d.verdict == "move"
    # 2e14 (t - 320) - 9e16 = 1e14 t  ->  t = (6.4e16 + 9e16) / 1e14 s.
    assert d.break_even_h == pytest.approx((6.4e16 + 9e16) / 1e14 / 3600)


def test_throughput_stays_when_the_gain_is_within_the_threshold():
    new = Side(1.04e14, 4.0, 10.0)  # 4 % faster
    d = decide("throughput", OLD, new, LEFT, checkpoint_gb=12.5, restart_s=300.0)
    assert 0 < d.gain < DEFAULT_MIN_GAIN and not d.move and "stay" in d.reason


def test_a_short_remainder_does_not_pay_for_the_move():
    new = Side(2e14, 6.0, 25.0)
    d = decide("throughput", OLD, new, 1e16, checkpoint_gb=12.5, restart_s=300.0)
    # 100 s left on the old cluster; moving stalls 320 s first.
    assert d.gain < 0 and not d.move


@pytest.mark.parametrize("objective", ["cost", "paper"])
def test_cost_moves_when_the_dollars_saved_beat_the_move(objective):
    new = Side(1e14, 2.0, 10.0)  # the same speed at half the price
    d = decide(objective, OLD, new, LEFT, checkpoint_gb=12.5, restart_s=300.0)
    cost = migration_cost(OLD, new, checkpoint_gb=12.5, restart_s=300.0)
    stay, go = 40.0, cost.usd + 20.0  # 10 h at $4/h; the move, then 10 h at $2/h
    assert d.gain == pytest.approx((stay - go) / stay) and d.move
    # Saving 2/3600/1e14 $ per FLOP repays cost.usd after that much work.
    assert d.break_even_h == pytest.approx(cost.usd / (2 / 3600 / 1e14) / 1e14 / 3600)


def test_cost_stays_when_the_cheaper_cluster_is_slower_per_dollar():
    new = Side(0.4e14, 1.8, 10.0)  # $1.8/h for 40 % of the work: dearer per FLOP
    d = decide("cost", OLD, new, LEFT, checkpoint_gb=12.5, restart_s=300.0)
    assert d.gain < 0 and not d.move and math.isinf(d.break_even_h)


def test_the_threshold_is_the_callers():
    new = Side(1.04e14, 4.0, 10.0)
    strict = decide("throughput", OLD, new, LEFT, checkpoint_gb=0.0, restart_s=0.0, min_gain=0.0)
    assert strict.move  # any gain moves at a threshold of 0


def test_goodput_prices_the_move_by_useful_work_not_throughput():
    """A faster cluster that loses half its time to preemptions does less useful
    work than the old one: by goodput the job stays, though by throughput it would
    move."""
    new = Side(1.5e14, 6.0, 25.0, efficiency=0.5)
    by_throughput = decide("throughput", OLD, new, LEFT, checkpoint_gb=12.5, restart_s=300.0)
    assert by_throughput.move
    d = decide("goodput", OLD, new, LEFT, checkpoint_gb=12.5, restart_s=300.0)
    # Stay: 36,000 s. Move: 320 s stalled + (3.6e18 + 9e16) / (1.5e14 x 0.5) s.
    assert d.gain == pytest.approx((36000 - (320 + 3.69e18 / 0.75e14)) / 36000)
    assert not d.move and "stay" in d.reason
