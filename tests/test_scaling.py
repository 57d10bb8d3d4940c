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
