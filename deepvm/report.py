"""Markdown for people: recommendations and the nightly change report (used by
the Prefect artifacts and `deepvm nightly`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from deepvm.cluster import cluster_words

if TYPE_CHECKING:
    from deepvm.pipeline import PriceRefresh
    from deepvm.planner.fleet_types import FleetPlan


def _md_table(df: pd.DataFrame) -> str:
    header = "| " + " | ".join(df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = [
        "| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |"
        for row in df.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body])


def recommendations_markdown(title: str, recs: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    shown = pd.DataFrame(
        {
            "policy": recs["policy"],
            "rank": recs["rank"],
            "architecture": recs["architecture"],
            "cluster": [cluster_words(r) for r in recs.to_dict("records")],
            "$/h": recs["hourly_cost"].map(lambda v: f"{v:.4f}"),
            "TFLOP/s": recs["throughput_flops"].map(lambda v: f"{v / 1e12:.2f}"),
            "scaling model": recs["overhead_model"] + " [" + recs["overhead_source"] + "]",
            "F from": recs["flops_source"],
        }
    )
    parts = [f"# {title}", *notes, _md_table(shown)]
    return "\n\n".join(parts)


def change_report_markdown(
    changes: pd.DataFrame, *, stale: bool = False, prices: PriceRefresh | None = None
) -> str:
    """The night's changes; ``prices`` (the refresh) names a failed source and why."""
    lines = ["# deepvm nightly: change report"]
    if prices is not None and prices.failed:
        lines.append(
            f"**Prices are stale**: the price source `{prices.source}` was unreachable "
            f"({prices.error}); planned on the snapshot of {prices.fallback_from}."
        )
    elif stale or (prices is not None and prices.stale):
        lines.append("**Prices are stale**: the price source failed; the last snapshot was used.")
    if changes.empty:
        lines.append("No job was planned.")
        return "\n\n".join(lines)
    shown = changes.copy()
    for column in ("old_hourly_cost", "new_hourly_cost"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.4f}")
    for column in ("old_throughput_flops", "new_throughput_flops"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v / 1e12:.2f} T")
    if "value" in shown:
        shown["value"] = shown["value"].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
    changed = int(changes["changed"].sum())
    lines.append(
        f"{changed} of {len(changes)} jobs' cluster in the fleet plan changed (value: the job's "
        "objective over what it would get alone; binding: the shared limit holding it back)."
    )
    lines.append(_md_table(shown))
    return "\n\n".join(lines)


def fleet_markdown(plan: FleetPlan) -> str:
    """A fleet plan: each job's cluster next to what it gets alone, and the shared
    quotas' use next to what the solo plans would ask for."""
    team = f", team budget ${plan.team_budget:g}/h" if plan.team_budget is not None else ""
    lines = [
        "# deepvm fleet plan",
        f"Status {plan.status}; value {plan.objective_value:.4g} (the sum of each job's "
        f"priority x its objective over what it gets alone); ${plan.hourly_cost:.4f}/h"
        f"{team}; prices {plan.prices_snapshot}.",
    ]
    jobs = []
    for j in plan.as_dict()["jobs"]:
        cluster = cluster_words(j, architecture=True) if j["planned"] else "unplanned"
        jobs.append(
            {
                "job": j["scenario"],
                "priority": f"{j['priority']:g}",
                "value": f"{j['value']:.3f}",
                "cluster": cluster,
                "$/h": "" if j["hourly_cost"] is None else f"{j['hourly_cost']:.4f}",
                "alone $/h": ""
                if j["solo_hourly_cost"] is None
                else f"{j['solo_hourly_cost']:.4f}",
                "held back by": j["binding"] or j["note"] or "",
            }
        )
    lines.append(_md_table(pd.DataFrame(jobs)))
    usage = [
        {
            "region": u["region"],
            "quota": f"{u['quota_group']} {u['market']}",
            "fleet vCPUs": f"{u['vcpus']:g}",
            "limit": "none" if u["quota"] is None else f"{u['quota']:g}",
            "if planned alone": f"{u['solo_vcpus']:g}",
        }
        for u in plan.as_dict()["usage"]
    ]
    if usage:
        lines.append(_md_table(pd.DataFrame(usage)))
    return "\n\n".join(lines)


def _usd(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
