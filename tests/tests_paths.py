from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "datasets" / "scenarios" / "paper"

# The paper's scenario as CLI input overrides.
PAPER_ARGS = [
    "--catalog",
    str(PAPER / "catalog.csv"),
    "--throughput",
    str(PAPER / "throughput.csv"),
    "--overhead",
    str(PAPER / "overhead.csv"),
    "--quotas",
    str(PAPER / "quotas.csv"),
]
