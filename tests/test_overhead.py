import math

import numpy as np
import pytest

from deepvm.base.errors import InputError
from deepvm.performance.overhead import (
    SaturationModel,
    SpeedupModel,
    deepvm_factor,
    load_overhead_table,
    resolve_models,
    shipped_overhead_table,
)


def test_linear_is_n():
    assert SpeedupModel("linear")([1, 2, 7]).tolist() == [1, 2, 7]


def test_amdahl_hand_value():
    s = SpeedupModel("amdahl", {"p": 0.9})([1, 4])
    assert s[0] == 1
    assert s[1] == pytest.approx(1 / (0.1 + 0.9 / 4))  # 3.0769...
    assert s[1] == pytest.approx(3.0769230769)


def test_usl_hand_value():
    s = SpeedupModel("usl", {"alpha": 0.1, "beta": 0.01})([1, 4])
    assert s.tolist()[0] == 1
    assert s[1] == pytest.approx(4 / 1.42)


def test_logistic_hand_values_and_s1_is_one():
    m = SpeedupModel("logistic", {"a": 1.0, "b": 2.0, "c": 4.0})
    s = m([1, 2, 3])
    assert s[0] == 1.0  # s(1) = 1 by definition, not S(1)
    assert s[1] == pytest.approx(2.0)
    assert s[2] == pytest.approx(4 / (1 + math.exp(-1)))


def test_deepvm_factor_and_speedup_hand_values():
    a, b, c = 0.5, 4.0, 10.0
    # n <= b: K = 1, s = n
    assert deepvm_factor([1, 3, 4], a, b).tolist() == [1, 1, 1]
    # n = 6: S = 10 / (1 + e^-1) = 7.310586, L = (a c / 4)(6 - 4) + c / 2 = 7.5
    k6 = deepvm_factor([6], a, b)[0]
    assert k6 == pytest.approx(7.310585786 / 7.5)
    s = SpeedupModel("deepvm", {"a": a, "b": b})([1, 3, 4, 6])
    assert s.tolist()[:3] == [1, 3, 4]
    assert s[3] == pytest.approx(6 * 7.310585786 / 7.5)
    # A model stored with the plateau c (it cancels) reads the same curve.
    old = SpeedupModel("deepvm", {"a": a, "b": b, "c": c})([1, 3, 4, 6])
    assert old.tolist() == s.tolist()


def test_deepvm_paper_g4dn_is_linear_until_inflection():
    m = SpeedupModel("deepvm", {"a": 0.13388, "b": 12.8742, "c": 6.17667})
    s = m(np.arange(1, 13))
    assert np.allclose(s, np.arange(1, 13))
    assert m([20])[0] < 20


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        ("amdahl", {"p": 1.5}),
        ("usl", {"alpha": -1, "beta": 0}),
        ("deepvm", {"a": 0, "b": 1}),
        ("deepvm", {"a": 1}),
        ("logistic", {"a": 0, "b": 1, "c": 1}),
        ("nope", {}),
    ],
)
def test_bad_models_rejected(kind, params):
    with pytest.raises(InputError):
        SpeedupModel(kind, params)


def test_saturation_interpolation_and_clamping():
    nsat = SaturationModel()
    got = nsat([0.1, 0.3, 1.0, 1.7, 7.5, 10, 11.25, 12.5, 25, 30, 100])
    # 1.0: 2 + 0.7/1.4 * 10 = 7; 7.5: 16 + 2.5/5 * 4 = 18; 11.25: 20 + 0.5 * 4 = 22
    assert got.tolist() == [2, 2, 7, 12, 18, 20, 22, 24, 28, 32, 32]


def test_saturation_floors_between_points():
    # 2.0 Gbps: 12 + (0.3 / 3.3) * 4 = 12.36 -> 12
    assert SaturationModel()([2.0]).tolist() == [12]


def test_saturation_validation():
    with pytest.raises(InputError, match="decrease"):
        SaturationModel.from_points([(1, 10), (2, 5)])
    with pytest.raises(InputError, match="positive"):
        SaturationModel.from_points([(0, 10)])
    assert SaturationModel.from_points([(2, 4), (1, 2)])([1.5]).tolist() == [3]


def test_resolution_order_and_linear_fallback(tmp_path):
    f = tmp_path / "o.csv"
    f.write_text("instance_type,workload,model,p\nx,resnet50,amdahl,0.5\nx,*,amdahl,0.7\n")
    user = load_overhead_table(f)
    models = resolve_models(["x", "g4dn.xlarge", "zz"], "resnet50", [user])
    assert models["x"].params["p"] == 0.5
    assert models["g4dn.xlarge"].kind == "linear"
    assert (models["zz"].source, models["zz"].basis) == (
        "estimate",
        "no overhead model matched: linear, an upper bound",
    )
    assert (models["x"].source, models["x"].basis) == ("file", "file o.csv")
    models = resolve_models(["x", "g4dn.xlarge", "zz"], "gpt2", [user, shipped_overhead_table()])
    assert models["x"].params["p"] == 0.7
    assert models["g4dn.xlarge"].source == "transferred"
    assert "DeepVM paper" in models["g4dn.xlarge"].basis
    assert models["zz"].source == "estimate" and "conservative" in models["zz"].basis


def test_overhead_file_bad_row_names_row(tmp_path):
    f = tmp_path / "o.csv"
    f.write_text("instance_type,workload,model,a,b,c\nx,w,deepvm,0.1,2,3\ny,w,deepvm,0.1,,3\n")
    with pytest.raises(InputError, match=r"row 2.*'b'"):
        load_overhead_table(f)
