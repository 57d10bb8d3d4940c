import subprocess
import sys
from pathlib import Path

import pytest

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


PAPER = "datasets/scenarios/paper"
PAPER_FILES = [
    f"--{name}={PAPER}/{name}.csv" for name in ("catalog", "throughput", "overhead", "quotas")
]


@pytest.mark.parametrize(
    ("argv", "absent"),
    [
        (["--help"], ("cvxpy", "pandas", "pyarrow")),
        (["recommend", "--budget", "3", "--json"], ("cvxpy", "pandas", "pyarrow")),
        (["sweep", "--budgets", "0:10.1:0.1", "--json", *PAPER_FILES], ("cvxpy", "pandas")),
        (["sweep", "--budgets", "1:4:1"], ("cvxpy", "pandas")),
        (["compare", "--budget", "3", "--epochs", "1", "--dataset-size", "1000"], ("cvxpy",)),
        (["flopp", "--json"], ("cvxpy",)),
        (["catalog", "--json"], ("cvxpy",)),
    ],
)
def test_single_job_commands_import_no_solver_and_sweeps_no_pandas(argv, absent):
    """The single-job planner is a numpy enumeration: cvxpy (about a second to
    import) loads only for the fleet's program, and recommend and sweep read
    their CSVs without pandas (benchmarks/planner.py measures what that saves)."""
    code = (
        "import contextlib, io, sys\n"
        "from deepvm.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        status = main({argv!r})\n"
        "    except SystemExit as exit:\n"
        "        status = exit.code\n"
        f"print(status, sorted(m for m in {absent!r} if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "0 []", out.stdout + out.stderr
