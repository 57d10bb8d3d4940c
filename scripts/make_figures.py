"""Regenerate the README's example figures from the commands shown beside them
(run by hand: `python scripts/make_figures.py`; not in CI, the scaling run takes
a few minutes). Each figure is written by exactly the command in FIGURES, on the
shipped data, so the README's image and its command cannot disagree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# figure -> the commands that make it (the README shows the last one beside the image).
FIGURES: dict[str, list[list[str]]] = {
    "sweep-paper.png": [["sweep", "--budgets", "0:10.1:0.1", "--plot", "docs/sweep-paper.png"]],
    "compare.png": [
        ["compare", "--budget", "10", "--work", "1e19", "--plot", "docs/compare.png"],
    ],
    "fit-resnet18-local-cpu.png": [
        ["benchmark-scaling", "--workload", "resnet18", "--nodes", "1,2,3,4", "--steps", "8",
         "--instance-type", "local-cpu", "--store", "{store}"],
        ["fit", "--store", "{store}", "--plot", "{plots}"],
    ],
}  # fmt: skip


def run(argv: list[str], **paths: str) -> None:
    argv = [a.format(**paths) for a in argv]
    print("deepvm", " ".join(argv), flush=True)
    subprocess.run([sys.executable, "-m", "deepvm", *argv], cwd=ROOT, check=True)


def main() -> None:
    wanted = sys.argv[1:] or list(FIGURES)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"store": f"{tmp}/store", "plots": f"{tmp}/plots"}
        for name in wanted:
            for argv in FIGURES[name]:
                run(argv, **paths)
            if name.startswith("fit-"):  # fit names its PNG after the group
                (made,) = Path(paths["plots"]).glob("local-cpu__resnet18.png")
                shutil.copy(made, DOCS / name)
            print(f"  -> docs/{name}")


if __name__ == "__main__":
    main()
