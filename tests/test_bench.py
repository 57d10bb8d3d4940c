"""Benchmarks: real training steps, FLOP counts against analytic values, rows."""

import json
import sys

import pytest

torch = pytest.importorskip("torch")  # the bench extra; CI installs it

from deepvm.bench import MissingExtraError, require_torch  # noqa: E402
from deepvm.bench import run as bench_run  # noqa: E402
from deepvm.bench._measure import count_step_flops, measure  # noqa: E402
from deepvm.bench._models import build_model  # noqa: E402
from deepvm.cli import main  # noqa: E402
from deepvm.store import Store  # noqa: E402
from tests.helpers import whole  # noqa: E402


def test_resnet50_flops_match_analytic():
    # 8.1 GFLOP forward per 224x224 image; forward + backward is three times that.
    sample = build_model("resnet50")
    per_image = count_step_flops(sample, 1, "cpu")
    assert per_image == pytest.approx(3 * 8.1e9, rel=0.05)
    assert count_step_flops(sample, 2, "cpu") == pytest.approx(2 * per_image, rel=1e-6)


def test_gpt2_flops_match_analytic():
    sample = build_model("gpt2")
    params = sum(p.numel() for p in sample.model.parameters())
    assert params == pytest.approx(124.4e6, rel=0.01)
    layers, d_model, tokens = 12, 768, 512
    # 6 N per token for the weights (the LM head shares wte) + attention scores and
    # values: 4 T^2 d per layer forward, times 3 for forward + backward.
    analytic = 6 * params * tokens + 12 * layers * tokens * tokens * d_model
    assert count_step_flops(sample, 1, "cpu") == pytest.approx(analytic, rel=0.05)


def test_measure_tiny_real_steps():
    m = measure("tiny", steps=4, warmup=1, progress=False)
    assert m.steps == 4 and m.dtype == "float32" and m.device == "cpu"
    assert all(t > 0 for t in m.step_times_s)
    assert m.step_time_p10_s <= m.step_time_median_s <= m.step_time_p90_s
    assert m.achieved_flops == pytest.approx(m.flops_per_step / m.step_time_median_s)
    # two linear layers, batch 64: forward 2 x 64 x (64x128 + 128x2); backward twice
    # that, less the first layer's input gradient (the batch needs none)
    forward = 2 * 64 * (64 * 128 + 128 * 2)
    assert m.flops_per_step == pytest.approx(3 * forward - 2 * 64 * 64 * 128, rel=1e-6)


def test_weights_change_during_training():
    sample = build_model("tiny")
    before = [p.detach().clone() for p in sample.model.parameters()]
    m = measure("tiny", steps=2, warmup=1, progress=False)
    assert m.steps == 2
    # measure builds its own model; train this one the same way to see that a step steps
    opt = torch.optim.AdamW(sample.model.parameters(), lr=1e-2)
    loss = sample.model(**sample.make_batch(8, "cpu")).loss
    loss.backward()
    opt.step()
    assert any(
        not torch.equal(a, b) for a, b in zip(before, sample.model.parameters(), strict=True)
    )


def test_failed_workload_is_recorded_and_others_run(monkeypatch, capsys, tmp_path):
    real = bench_run.measure

    def flaky(name, **kw):
        if name == "resnet18":
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(name, **kw)

    monkeypatch.setattr(bench_run, "measure", flaky)
    code = main(
        [
            "benchmark",
            "--workload",
            "tiny",
            "--workload",
            "resnet18",
            "--steps",
            "3",
            "--json",
            "--store",
            str(tmp_path),
            "--instance-type",
            "g4dn.xlarge",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    by_name = {r["workload"]: r for r in out["results"]}
    assert by_name["tiny"]["status"] == "ok" and by_name["resnet18"]["status"] == "failed"
    assert set(by_name["tiny"]) == set(out["results"][0])
    rows = whole(tmp_path, "benchmarks").df()
    failed = rows[rows["workload"] == "resnet18"].iloc[0]
    assert "out of memory" in failed["error"]
    # all failed: non-zero exit
    assert main(["benchmark", "--workload", "resnet18", "--steps", "3", "--json"]) == 1


def test_measured_throughput_reaches_flopp_and_planner(capsys, tmp_path):
    store = str(tmp_path / "store")
    assert (
        main(
            [
                "benchmark",
                "--workload",
                "tiny",
                "--steps",
                "3",
                "--instance-type",
                "g4dn.xlarge",
                "--store",
                store,
                "--json",
            ]
        )
        == 0
    )
    achieved = json.loads(capsys.readouterr().out)["results"][0]["achieved_flops"]
    assert main(["flopp", "--workload", "tiny", "--store", store, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    g4dn = [r for r in rows if r["instance_type"] == "g4dn.xlarge"]
    assert {r["flops_source"] for r in g4dn} == {"measured"}
    assert g4dn[0]["achieved_flops"] == pytest.approx(achieved)
    others = {r["flops_source"] for r in rows if r["instance_type"] != "g4dn.xlarge"}
    assert others <= {"estimate", "published", "transferred"} and "measured" not in others
    stored = whole(store, "flopp").df()
    assert len(stored) == len(rows)
    assert (
        main(
            [
                "recommend",
                "--budget",
                "3",
                "--workload",
                "tiny",
                "--store",
                store,
                "--json",
                "--policy",
                "cost_first",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    if rec["worker_type"] == "g4dn.xlarge":
        assert rec["flops_source"] == "measured"


def test_a_rerun_is_kept_and_the_newest_run_is_used(capsys, tmp_path):
    from deepvm.records.inputs import latest_measurements

    store = str(tmp_path)
    args = ["benchmark", "--steps", "2", "--instance-type", "x", "--store", store, "--json"]
    assert main([*args, "--workload", "tiny"]) == 0
    assert main([*args, "--workload", "tiny"]) == 0
    rows = whole(store, "benchmarks").df()
    assert len(rows) == 2  # each run its own file: nothing read back and rewritten
    newest = rows.sort_values("measured_at").iloc[-1]
    used = latest_measurements(Store.open(store))
    assert len(used) == 1 and used["flops"].iloc[0] == newest["achieved_flops"]


def test_missing_extra_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'deepvm\[bench\]'"):
        require_torch()
    assert main(["benchmark", "--workload", "tiny"]) == 2
    err = capsys.readouterr().err
    assert "deepvm[bench]" in err and len(err.strip().splitlines()) == 1


def test_unknown_workload_fails_before_running(capsys):
    assert main(["benchmark", "--workload", "alexnet"]) == 2
    assert "unknown workload 'alexnet'" in capsys.readouterr().err
