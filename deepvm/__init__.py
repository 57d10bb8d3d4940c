"""deepvm: which cloud GPU cluster trains fastest for an hourly budget.

The public surface is small; everything else is internal. Names are imported
lazily so ``import deepvm`` (and the CLI's start-up) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Catalog",
    "DeepvmError",
    "InfeasibleError",
    "InputError",
    "Inputs",
    "JobSpec",
    "Recommendation",
    "SpeedupModel",
    "Store",
    "__version__",
    "compare",
    "flopp_table",
    "load_catalog",
    "load_inputs",
    "recommend",
    "sweep",
]

_LAZY = {
    "Catalog": "deepvm.catalog",
    "load_catalog": "deepvm.catalog",
    "DeepvmError": "deepvm.base.errors",
    "InfeasibleError": "deepvm.base.errors",
    "InputError": "deepvm.base.errors",
    "Inputs": "deepvm.planner",
    "JobSpec": "deepvm.base.config",
    "Recommendation": "deepvm.planner",
    "recommend": "deepvm.planner",
    "sweep": "deepvm.planner",
    "compare": "deepvm.planner",
    "SpeedupModel": "deepvm.performance.overhead",
    "Store": "deepvm.store",
    "flopp_table": "deepvm.performance.flopp",
    "load_inputs": "deepvm.records.inputs",
}

if TYPE_CHECKING:
    from deepvm.base.config import JobSpec
    from deepvm.base.errors import DeepvmError, InfeasibleError, InputError
    from deepvm.catalog import Catalog, load_catalog
    from deepvm.performance.flopp import flopp_table
    from deepvm.performance.overhead import SpeedupModel
    from deepvm.planner import Inputs, Recommendation, compare, recommend, sweep
    from deepvm.records.inputs import load_inputs
    from deepvm.store import Store


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'deepvm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
