import subprocess
import sys

import deepvm


def test_all_is_sorted_and_importable():
    assert deepvm.__all__ == sorted(deepvm.__all__)
    for name in deepvm.__all__:
        assert getattr(deepvm, name) is not None


def test_import_is_lean():
    code = (
        "import sys, deepvm, deepvm.cli; print(sorted(m for m in ('cvxpy', 'pandas', "
        "'pyarrow', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_recommend_from_python():
    result = deepvm.recommend(3.0, workload="gpt2", top=2)
    assert [r.rank for r in result.recommendations] == [1, 2]
    assert result.checkpoint_gb > 1  # gpt2: 124M params x 12 bytes
