"""deepvm as Prefect flows (docs/ARCHITECTURE.md, "Layers": front ends): every flow
of ``flows.nightly``, ``flows.planning`` and ``flows.measuring``, by the names
``prefect.yaml`` deploys. Every task calls one function of the library
(``deepvm.nightly.stages`` and friends); the flows add orchestration only:
logging, artifacts and typed parameters for the UI's form.

Run without a server: ``python -m flows.deepvm_flows nightly`` (or ``deepvm nightly``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from flows.measuring import benchmark, benchmark_fleet
from flows.nightly import fit_overhead, nightly, refresh_prices
from flows.planning import adopt, finish, fleet, recommend
from flows.runs import RefusedRun

__all__ = [
    "RefusedRun",
    "adopt",
    "benchmark",
    "benchmark_fleet",
    "finish",
    "fit_overhead",
    "fleet",
    "nightly",
    "recommend",
    "refresh_prices",
]


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "nightly"
    flows: dict[str, Any] = {
        "nightly": nightly,
        "refresh-prices": refresh_prices,
        "recommend": recommend,
        "fit-overhead": fit_overhead,
        "benchmark": benchmark,
        "fleet": fleet,
        "benchmark-fleet": benchmark_fleet,
        "adopt": adopt,
        "finish": finish,
    }
    print(flows[name](store=os.environ.get("DEEPVM_STORE")))
