"""What every price source returns (docs/ARCHITECTURE.md, "The store"): instance
specs in the ``instances`` table's columns and long-format prices, behind one
interface. The sources (``aws``, ``gcp``, ``azure``, ``skypilot``) import this
module and ``sources`` imports them, so no source imports ``sources``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from deepvm.model.schemas import TABLES

__all__ = ["INSTANCE_COLUMNS", "PriceData", "PriceSource"]

# The `instances` table's columns, from the one schema module.
INSTANCE_COLUMNS = TABLES["instances"][1].names


@dataclass(frozen=True)
class PriceData:
    instances: pd.DataFrame  # INSTANCE_COLUMNS
    prices: pd.DataFrame  # provider, region, zone, instance_type, market, usd_per_hour, ...
    source: str
    dropped: int = 0  # rows without a usable (positive) price


class PriceSource(Protocol):
    @property
    def name(self) -> str: ...

    def fetch(self) -> PriceData: ...
