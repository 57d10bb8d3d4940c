"""Architecture-level analysis: candidates, their exact evaluation, policies
(docs/ARCHITECTURE.md, "Planning")."""

from deepvm.base.config import POLICIES
from deepvm.planner._policies import Planner
from deepvm.planner.api import RecommendResult, SweepResult, compare, recommend, sweep
from deepvm.planner.candidates import ARCHITECTURES, CheckpointNeeds, Config
from deepvm.planner.inputs import Inputs
from deepvm.planner.recommendation import Recommendation

__all__ = [
    "ARCHITECTURES",
    "POLICIES",
    "CheckpointNeeds",
    "Config",
    "Inputs",
    "Planner",
    "RecommendResult",
    "Recommendation",
    "SweepResult",
    "compare",
    "recommend",
    "sweep",
]
