"""Scaling runs with real DDP (gloo) at world sizes 1 and 2 of the tiny workload."""

import json

import pytest

pytest.importorskip("torch")

from deepvm.bench.scaling import measure_scaling, scaling_frame
from deepvm.cli import main
from tests.helpers import whole


def test_ddp_world_sizes_1_and_2():
    points = measure_scaling("tiny", [1, 2], steps=5, progress=False)
    assert [p.n_nodes for p in points] == [1, 2]
    assert all(p.duration_s > 0 for p in points)
    df = scaling_frame(points, "tiny", "g4dn.xlarge")
    assert df.loc[df["n_nodes"] == 1, "speedup"].item() == 1.0
    two = df.loc[df["n_nodes"] == 2].iloc[0]
    assert two["speedup"] == pytest.approx(points[0].duration_s / points[1].duration_s)


def test_cli_writes_scaling_rows(tmp_path, capsys):
    assert (
        main(
            [
                "benchmark-scaling",
                "--workload",
                "tiny",
                "--nodes",
                "1,2",
                "--steps",
                "3",
                "--instance-type",
                "g4dn.xlarge",
                "--store",
                str(tmp_path),
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)["results"]
    assert [r["n_nodes"] for r in out] == [1, 2]
    rows = whole(tmp_path, "scaling").df()
    assert sorted(rows["n_nodes"]) == [1, 2] and set(rows["source"]) == {"measured"}


def test_nodes_must_include_one(capsys):
    assert main(["benchmark-scaling", "--nodes", "2,4"]) == 2
    assert "include 1" in capsys.readouterr().err


class SlowStart:
    """A stand-in training step whose first steps are slow, more of them for a
    larger batch (allocation and kernel selection scale with it): what made the
    1-rank run, with the whole batch, time steps that the 2-rank run had left behind."""

    def __init__(self, slow_steps: int) -> None:
        self.slow_steps, self.calls = slow_steps, 0

    def __call__(self) -> None:
        import time

        self.calls += 1
        time.sleep(0.03 if self.calls <= self.slow_steps else 0.003)


@pytest.mark.parametrize("slow_steps", [1, 4, 7])
def test_every_world_size_is_timed_on_its_settled_steps(slow_steps):
    from deepvm.bench.scaling import WARMUP_STEPS, timed_duration

    one_rank, two_ranks = SlowStart(slow_steps), SlowStart(max(1, slow_steps // 2))
    durations = []
    for stand_in in (one_rank, two_ranks):
        for _ in range(WARMUP_STEPS):
            stand_in()
        durations.append(timed_duration(stand_in, lambda: None, lambda s: s, 16))
    # Both runs are timed at their settled step (3 ms): equal work, equal durations,
    # whatever each had left of its slow start. One clock around all 16 steps gave
    # the 1-rank run up to 5 slow steps of 30 ms: 0.19 s against 0.05 s.
    for duration in durations:
        assert duration == pytest.approx(16 * 0.003, rel=0.5)


def test_the_duration_is_agreed_across_ranks():
    from deepvm.bench.scaling import timed_duration

    calls = []
    duration = timed_duration(lambda: calls.append(1), lambda: None, lambda s: 0.25, 4)
    assert duration == 1.0 and len(calls) == 4  # every step takes the slowest rank's time
