"""What each figure behind an answer is (docs/ARCHITECTURE.md, "Provenance"):
a throughput, a speedup model, a price or an interruption bucket says where it
is from (one of SOURCE_KINDS), from what exactly (its basis) and what date it
refers to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SOURCE_KINDS",
    "Provenance",
    "figures_of",
    "figures_words",
    "measured_kind",
    "outlier_words",
]

# measured: deepvm's own benchmark or scaling run in the store; file: a file the
# user gave; published: a public figure for this GPU model and this task;
# transferred: a public figure for another GPU variant, task or GPU count (the
# basis names the transfer, e.g. "A10 -> A10G"); estimate: a model of deepvm's.
SOURCE_KINDS = ("measured", "file", "published", "transferred", "estimate")


@dataclass(frozen=True)
class Provenance:
    source: str  # one of SOURCE_KINDS, or a price source's name
    basis: str = ""
    date: str | None = None

    def words(self) -> str:
        """``published (Lambda: ResNet-50 ..., 2024-07-24)``."""
        detail = "; ".join(p for p in (self.basis, self.date or "") if p)
        return f"{self.source} ({detail})" if detail else self.source

    def as_dict(self) -> dict[str, str | None]:
        return {"source": self.source, "basis": self.basis, "date": self.date}


def measured_kind(label: str) -> str:
    """The kind of a measured throughput row by its label: ``file <name>`` (a
    --throughput file) or a store benchmark."""
    return "file" if label.startswith("file") else "measured"


def figures_of(rec: Mapping[str, Any]) -> dict[str, Provenance]:
    """Where a recommendation's throughput, scaling, price and (with spot nodes)
    interruption figures come from, from its fields (Recommendation's)."""
    out = {
        "throughput": Provenance(
            rec["flops_source"], rec.get("flops_basis") or "", rec.get("flops_date")
        ),
        "scaling": Provenance(
            rec["overhead_source"], rec.get("overhead_basis") or "", rec.get("overhead_date")
        ),
        "price": Provenance(
            rec.get("price_source") or "catalog",
            f"spot zone {rec['zone']}" if rec.get("zone") and rec.get("n_spot") else "",
            rec.get("price_date"),
        ),
    }
    if rec.get("n_spot"):
        out["interruptions"] = Provenance(
            rec.get("interruption_source") or "estimate",
            rec.get("interruption_bucket") or "",
            rec.get("interruption_date"),
        )
    return out


def figures_words(rec: Mapping[str, Any]) -> str:
    """One line: ``throughput published (...); scaling ...; price ...; interruptions ...``."""
    return "; ".join(f"{name} {p.words()}" for name, p in figures_of(rec).items())


def outlier_words(rec: Mapping[str, Any]) -> str | None:
    """Why a recommendation's spot price is an outlier, or None."""
    if not rec.get("spot_outlier"):
        return None
    return (
        f"{rec['worker_type']} spot in {rec.get('zone') or rec['region']} is "
        f"{rec['spot_saving_pct']:.0f}% below on-demand, while the Spot Instance Advisor's "
        f"average saving in {rec['region']} is {rec['regional_saving_pct']:.0f}%: this zone's "
        "price is an outlier and may not last (plan on the average with --spot-price regional)"
    )
