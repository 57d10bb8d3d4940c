"""Markdown for people: recommendations and the nightly change report (used by
the Prefect artifacts and `deepvm nightly`).

Every table stays narrow enough for Prefect's content column at 1440 px (about
110 characters of text, cells and separators): the key figures in the table,
the long text (a cluster in words, a reason) as a list below it, one per job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from deepvm.catalog.quotas import UNIT_WORDS
from deepvm.model.cluster import cluster_words
from deepvm.planner.fleet.types import deadline_words

if TYPE_CHECKING:
    from deepvm.nightly.prices import PriceRefresh
    from deepvm.planner.fleet.types import FleetPlan

__all__ = ["change_report_markdown", "fleet_markdown", "recommendations_markdown", "work_line"]


def _hours_or_never(value: object) -> str:
    if value is None or pd.isna(value):
        return "-"
    return "never" if value == float("inf") else f"{float(value):.3g} h"  # type: ignore[arg-type]


def _listed(jobs: Sequence[str], texts: Sequence[str]) -> str:
    """Long text per job, as a list (in a table it would widen it past the column)."""
    return "\n".join(f"- **{j}**: {t}" for j, t in zip(jobs, texts, strict=True) if t)


def _md_table(df: pd.DataFrame) -> str:
    header = "| " + " | ".join(df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = [
        "| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |"
        for row in df.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body])


def _hours(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value):.3g} h"  # type: ignore[arg-type]


def _dollars(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"${float(value):,.2f}"  # type: ignore[arg-type]


def work_line(work_flops: float | None) -> str:
    """The job's work as the artifact echoes it (what the form's field became)."""
    if work_flops is None or pd.isna(work_flops):
        return "Work: not given (makespan and total cost need it)."
    return f"Work: {work_flops:.4g} FLOPs ({work_flops / 1e15:,.6g} PFLOP)."


def recommendations_markdown(title: str, recs: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """Two narrow tables: where and what each cluster is with its cost, speed,
    makespan and total cost; then where its figures come from."""
    rows = recs.to_dict("records")
    work = recs["work_flops"].iloc[0] if "work_flops" in recs and len(recs) else None
    shown = pd.DataFrame(
        {
            "policy": [f"{r['policy']} #{r['rank']}" for r in rows],
            "region": recs["region"],
            "zone": recs["zone"].fillna(""),
            "$/h": recs["hourly_cost"].map(lambda v: f"{v:.4f}"),
            "TFLOP/s": recs["throughput_flops"].map(lambda v: f"{v / 1e12:.2f}"),
            "makespan": recs["expected_makespan_h"].map(_hours),
            "total $": recs["expected_total_cost"].map(_dollars),
        }
    )
    clusters = _listed(list(shown["policy"]), [cluster_words(r, architecture=True) for r in rows])
    sources = pd.DataFrame(
        {
            "policy": shown["policy"],
            "scaling model": recs["overhead_model"] + " [" + recs["overhead_source"] + "]",
            "F from": recs["flops_source"],
        }
    )
    parts = [f"# {title}", work_line(work), *notes, _md_table(shown)]
    parts += ["The clusters:", clusters, _md_table(sources)]
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
    if prices is not None and not prices.failed and (prices.carried or prices.kept):
        lines.append(prices.words()[0].upper() + prices.words()[1:] + ".")
    if changes.empty:
        lines.append("No job was planned.")
        return "\n\n".join(lines)
    first = changes["previous_date"].isna()
    changed = int(changes["changed"].sum())
    if first.all():
        lines.append(f"First night: {len(changes)} jobs planned, no earlier plan to compare with.")
    else:
        lines.append(
            f"{changed} of {int((~first).sum())} jobs' cluster in the fleet plan changed since "
            "the previous night"
            + (f"; {int(first.sum())} planned for the first time." if first.any() else ".")
        )
    now = pd.DataFrame(
        {
            "job": changes["scenario"],
            "$/h": changes["new_hourly_cost"].map(_money),
            "TFLOP/s": changes["new_throughput_flops"].map(_tflops),
            "value": changes["value"].map(lambda v: "" if pd.isna(v) else f"{v:.3f}"),
            "vs. before": [
                "first plan" if f else ("moved" if c else "same")
                for f, c in zip(first, changes["changed"], strict=True)
            ],
        }
    )
    lines.append(_md_table(now))
    lines += ["Tonight's clusters:", _listed(list(now["job"]), list(changes["new_cluster"]))]
    running = changes[changes["decision"].notna()] if "decision" in changes else changes[:0]
    if not running.empty:
        lines.append("Running jobs (`deepvm adopt`): stay, or move to tonight's cluster:")
        lines.append(
            _md_table(
                pd.DataFrame(
                    {
                        "job": running["scenario"],
                        "stay or move": running["decision"],
                        "gain": running["gain"].map(_share),
                        "move costs": running["migration_usd"].map(_money),
                        "pays after": running["break_even_h"].map(_hours_or_never),
                    }
                )
            )
        )
        why = [
            f"runs {was}"
            + (f"; the move takes {_hours_or_never(hours)}" if decision == "move" else "")
            + f": {reason}"
            for was, decision, hours, reason in zip(
                running["running_cluster"], running["decision"], running["migration_h"],
                running["decision_reason"], strict=True,
            )
        ]  # fmt: skip
        lines.append(_listed(list(running["scenario"]), why))
    moved = changes[changes["changed"]]
    if not moved.empty:
        lines.append("What moved, and from where:")
        before = pd.DataFrame(
            {
                "job": moved["scenario"],
                "night": moved["previous_date"].astype(str),
                "$/h": moved["old_hourly_cost"].map(_money),
                "TFLOP/s": moved["old_throughput_flops"].map(_tflops),
            }
        )
        lines.append(_md_table(before))
        lines.append(_listed(list(moved["scenario"]), [f"was {w}" for w in moved["old_cluster"]]))
    held = changes[changes["binding"].notna()]
    if not held.empty:
        lines.append("Held back (value: the job's objective over what it would get alone):")
        lines.append(_listed(list(held["scenario"]), list(held["binding"])))
    return "\n\n".join(lines)


def _share(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value):.1%}"  # type: ignore[arg-type]


def _money(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value):.4f}"  # type: ignore[arg-type]


def _tflops(value: object) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value) / 1e12:.2f}"  # type: ignore[arg-type]


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
    raw = plan.as_dict()["jobs"]
    columns = {
        "job": [j["scenario"] for j in raw],
        "priority": [f"{j['priority']:g}" for j in raw],
        "value": [f"{j['value']:.3f}" for j in raw],
        "$/h": [_money(j["hourly_cost"]) for j in raw],
        "alone $/h": [_money(j["solo_hourly_cost"]) for j in raw],
    }
    if any(j["expected_makespan_h"] is not None for j in raw):  # a job gave its work
        columns["makespan"] = [_hours(j["expected_makespan_h"]) for j in raw]
        columns["total $"] = [_dollars(j["expected_total_cost"]) for j in raw]
    if any(j["deadline_h"] is not None for j in raw):
        columns["deadline"] = [deadline_words(j) or "" for j in raw]
    lines.append(_md_table(pd.DataFrame(columns)))
    where = [
        (f"{cluster_words(j, architecture=True, region=True)}" if j["planned"] else "unplanned")
        + ("" if j["work_flops"] is None else f"; work {j['work_flops'] / 1e15:,.6g} PFLOP")
        for j in raw
    ]
    lines += ["The clusters:", _listed(columns["job"], where)]
    short = [j for j in raw if j["binding"] or j["note"]]
    if short:  # the explanation can be long: a list
        lines.append("Short of what they would get alone, or running (stay or move):")
        lines.append(
            _listed([j["scenario"] for j in short], [j["binding"] or j["note"] for j in short])
        )
    usage = [
        {
            "region": u["region"],
            "quota": u["label"] or f"{u['quota_group']} {u['market']}",
            "fleet use": f"{u['used']:g} {UNIT_WORDS[u['unit']]}",
            "limit": "none" if u["quota"] is None else f"{u['quota']:g} {UNIT_WORDS[u['unit']]}",
            "if planned alone": f"{u['solo_used']:g} {UNIT_WORDS[u['unit']]}",
        }
        for u in plan.as_dict()["usage"]
    ]
    if usage:
        lines.append(_md_table(pd.DataFrame(usage)))
    return "\n\n".join(lines)


def _usd(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
