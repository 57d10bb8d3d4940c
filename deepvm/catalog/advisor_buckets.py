"""AWS's Spot Instance Advisor buckets and the monthly interruption fraction
deepvm plans with for each (docs/ARCHITECTURE.md, "Interruptions and spot
prices"): a catalog fact, read by the catalog's feed and rows and by the
preemption model."""

from __future__ import annotations

__all__ = ["INTERRUPTION_BUCKETS", "bucket_rate"]

# AWS's Spot Instance Advisor publishes the fraction of spot instances of a type
# reclaimed per month in buckets; deepvm plans with one value per bucket: the
# midpoint, and 0.30 for the open ">20%" bucket.
INTERRUPTION_BUCKETS = {
    "<5%": 0.025,
    "5-10%": 0.075,
    "10-15%": 0.125,
    "15-20%": 0.175,
    ">20%": 0.30,
}


def bucket_rate(label: str) -> float:
    """The monthly interruption fraction deepvm uses for an Advisor bucket label."""
    key = label.strip().replace(" ", "").replace("%", "") + "%"
    key = key.replace("-%", "%")
    if key not in INTERRUPTION_BUCKETS:
        known = ", ".join(INTERRUPTION_BUCKETS)
        raise ValueError(f"unknown interruption bucket {label!r}; known: {known}")
    return INTERRUPTION_BUCKETS[key]
