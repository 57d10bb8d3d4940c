from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "datasets" / "scenarios" / "paper"
