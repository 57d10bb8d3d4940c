"""The nightly run without Prefect, and the backtest of following it (deepvm.nightly.backtest)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, cast

from deepvm.base.config import SPOT_ADVISOR_URL
from deepvm.cli._arguments import TEAM_BUDGET, date_text, path_text
from deepvm.cli._common import (
    PLANNING_OPTIONS,
    add_inputs,
    add_jobs_file,
    add_min_gain,
    add_time_limit,
    add_timeout,
    check_outputs,
    price_timeout,
    regions_list,
    store_location,
    writable_store,
)
from deepvm.cli._fleet import warn_unproven
from deepvm.cli._listing import add_format, output_format, render_listing
from deepvm.cli._output import json_text, print_json, progress

if TYPE_CHECKING:
    from deepvm.planner.inputs import InputFiles

__all__ = ["add_backtest_parser", "add_parsers", "cmd_backtest", "cmd_nightly"]


def add_parsers(sub: Any) -> None:
    nt = sub.add_parser(
        "nightly",
        help="refresh prices, FLOPP, refit, re-plan every registered job, plan the fleet",
        description="The nightly run without Prefect: prices -> FLOPP -> refit (when there "
        "are newer scaling runs) -> re-plan every job of the scenarios file -> one fleet "
        "plan for all of them under the shared quotas -> change report; then every month "
        "that ended before the night's date is compacted into one file per table.",
    )
    nt.add_argument(
        "--store", metavar="URI", help="the store (default: $DEEPVM_STORE, else ./deepvm-store)"
    )
    add_jobs_file(nt, "registered jobs (TOML; default: the shipped datasets/scenarios.toml)")
    nt.add_argument(
        "--source",
        default=None,
        help="price source: snapshot, aws, gcp, azure, skypilot, or a catalog file; a source "
        "that prices some clouds only keeps the others' newest rows (default: the date's "
        "own refresh, `deepvm prices refresh`, if it has one, else the shipped snapshot)",
    )
    nt.add_argument(
        "--regions",
        metavar="R,R",
        help="price regions to fetch (aws, azure); every region is planned",
    )
    nt.add_argument(
        "--skypilot-csv",
        metavar="PATH_OR_URL",
        type=path_text,
        help="a SkyPilot vms.csv (with --source skypilot)",
    )
    nt.add_argument(
        "--spot-advisor-url",
        metavar="URL_OR_PATH",
        type=path_text,
        help="also fetch AWS's Spot Instance Advisor feed (interruption buckets, regional "
        "spot savings) before planning: its URL (" + SPOT_ADVISOR_URL + ") or a saved "
        "copy (default: plan on the store's newest feed, else the shipped one)",
    )
    nt.add_argument(
        "--date", type=date_text, metavar="YYYY-MM-DD", help="snapshot date (default: today, UTC)"
    )
    nt.add_argument(
        "--workloads",
        metavar="FILE",
        type=path_text,
        help="your own workloads, which the scenarios file's jobs may name (see recommend)",
    )
    nt.add_argument(
        "--team-budget",
        type=TEAM_BUDGET,
        metavar="USD_PER_HOUR",
        help="the most all the jobs' clusters may cost together per hour in the fleet "
        "plan (default: none)",
    )
    nt.add_argument(
        "--no-compact",
        action="store_true",
        help="leave finished months' daily files as they are (see `deepvm store compact`)",
    )
    add_min_gain(nt)
    add_timeout(nt)
    add_time_limit(nt)
    nt.add_argument("--json", action="store_true", help="print one JSON object")
    # the planning options `fleet` takes (the prices come from --source)
    add_inputs(nt, prices=False)


def cmd_nightly(args: argparse.Namespace) -> int:
    from deepvm.nightly.stages import nightly
    from deepvm.performance.workloads import load_workloads
    from deepvm.records.jobs import load_jobs
    from deepvm.render.report import change_report_markdown

    registry = load_workloads(args.workloads) if args.workloads else None
    scenarios = load_jobs(args.scenarios, registry)
    store = writable_store(store_location(args, required=True))
    assert store is not None
    report = nightly(
        store,
        scenarios,
        source=args.source,
        snapshot_date=args.date,
        regions=regions_list(args.regions),
        skypilot_csv=args.skypilot_csv,
        timeout_s=price_timeout(args),
        team_budget=args.team_budget,
        workloads=args.workloads,
        compact=not args.no_compact,
        spot_advisor_url=args.spot_advisor_url,
        min_gain=args.min_gain,
        planning=cast("InputFiles", {k: getattr(args, k) for k in PLANNING_OPTIONS}),
        fleet_time_limit_s=args.time_limit,
    )
    if report.fleet is not None:
        warn_unproven(report.fleet)
    failed = [p for p in report.plans if p.error]
    if args.json:
        print_json(
            {
                "snapshot_date": report.snapshot_date,
                "store": store.uri,
                "prices": {
                    "source": report.prices.source,
                    "failed": report.prices.failed,
                    "stale": report.prices.stale,
                    "rows": report.prices.rows,
                    "attempts": report.prices.attempts,
                    "error": report.prices.error,
                    "carried": report.prices.carried,
                    "kept": report.prices.kept,
                },
                "spot_advisor": None
                if report.advisor is None
                else {
                    "source": report.advisor.source,
                    "failed": report.advisor.failed,
                    "rows": report.advisor.rows,
                    "error": report.advisor.error,
                    "kept": report.advisor.kept,
                },
                "refitted_models": report.refitted,
                "plans": [
                    {
                        "scenario": p.scenario,
                        "error": p.error,
                        "recommendations": 0
                        if p.recommendations is None
                        else len(p.recommendations),
                    }
                    for p in report.plans
                ],
                "fleet": None if report.fleet is None else report.fleet.as_dict(),
                "changes": json.loads(report.changes.to_json(orient="records")),
                "compacted": None
                if report.compacted is None
                else {t: m for t, m in report.compacted.months.items() if m},
                "compact_error": report.compact_error,
            }
        )
    else:
        print(change_report_markdown(report.changes, prices=report.prices))
        for p in failed:
            print(f"job {p.scenario} not planned: {p.error}", file=sys.stderr)
    if report.compact_error:
        print(
            f"warning: the night is published, but compacting finished months failed: "
            f"{report.compact_error}",
            file=sys.stderr,
        )
    if report.advisor is not None and report.advisor.failed:
        keeps = report.advisor.kept or "the shipped"
        print(
            f"warning: the Spot Instance Advisor feed failed ({report.advisor.error}); "
            f"planned on {keeps} feed's buckets",
            file=sys.stderr,
        )
    if report.prices.failed:
        print(
            f"deepvm: price source {report.prices.source!r} unreachable "
            f"({report.prices.error}); planned on the {report.prices.fallback_from} snapshot",
            file=sys.stderr,
        )
        return 1
    return 0 if len(failed) < len(report.plans) else 1


def add_backtest_parser(sub: Any) -> None:
    bt = sub.add_parser(
        "backtest",
        help="replay the store's price history: planning once against following the nightly",
        description="Replay the store's price snapshots night by night for the registered "
        "jobs (each planned alone, 24 h a night) and compare planning once, following every "
        "night's plan (naive), following it only where the move pays (aware), and the "
        "hindsight bound (free moves): work, cost, moves and hours lost to moves, per job "
        "and in total (deepvm.nightly.backtest).",
    )
    bt.add_argument("--store", metavar="URI", help="the store (default: $DEEPVM_STORE)")
    bt.add_argument("--from", dest="date_from", type=date_text, metavar="YYYY-MM-DD")
    bt.add_argument("--to", dest="date_to", type=date_text, metavar="YYYY-MM-DD")
    add_jobs_file(bt, "registered jobs (TOML; default: the shipped datasets/scenarios.toml)")
    add_min_gain(bt)
    bt.add_argument(
        "--synthetic",
        type=int,
        metavar="NIGHTS",
        help="first fill the store with this many nights of labelled synthetic prices "
        "(seeded walks around the shipped snapshot; for trying it out, not for plans)",
    )
    bt.add_argument("--seed", type=int, default=7, help="the synthetic prices' seed (default 7)")
    bt.add_argument(
        "--start",
        type=date_text,
        default="2026-11-01",
        metavar="YYYY-MM-DD",
        help="the synthetic prices' first night (default 2026-11-01)",
    )
    bt.add_argument("--plot", metavar="FILE.png", help="also draw cumulative work and cost")
    add_format(bt)


def cmd_backtest(args: argparse.Namespace) -> int:
    from deepvm.nightly.backtest import backtest, write_synthetic
    from deepvm.records.jobs import load_jobs
    from deepvm.store import Store

    check_outputs(None, args.plot)
    jobs = load_jobs(args.scenarios)
    uri = store_location(args, required=True)
    if args.synthetic is not None:
        store = writable_store(uri)
        nights = write_synthetic(store, args.synthetic, seed=args.seed, start=args.start)
        progress(f"wrote {len(nights)} nights of synthetic prices (seed {args.seed}) into {uri}")
    else:
        store = Store.open(uri)
    progress(f"replaying {len(jobs)} jobs ...")
    result = backtest(
        store, jobs, date_from=args.date_from, date_to=args.date_to, min_gain=args.min_gain
    )
    totals = result.rows.groupby("policy", sort=False)[
        ["work_flops", "cost_usd", "moves", "hours_lost"]
    ].sum()
    rows = [
        *result.rows.to_dict("records"),
        *(
            {"job": "(all)", "policy": p, **t, "work_per_usd": t["work_flops"] / t["cost_usd"]}
            for p, t in totals.to_dict("index").items()
        ),
    ]
    for r in rows:
        r["moves"] = int(r["moves"])
    if output_format(args) == "json":
        text = json_text(
            {"nights": result.nights, "min_gain": args.min_gain, "rows": rows,
             "notes": result.notes}
        )  # fmt: skip
    else:
        shown = [
            {
                **r,
                "work": f"{r['work_flops'] / 1e18:,.1f} EFLOP",
                "cost": f"${r['cost_usd']:,.2f}",
                "per $": f"{r['work_per_usd'] / 1e15:,.1f} PFLOP",
                "lost": f"{r['hours_lost']:.2f} h",
            }
            for r in rows
        ]
        header = (
            f"Backtest of {len(jobs)} jobs over {len(result.nights)} nights "
            f"({result.nights[0]} .. {result.nights[-1]}), min gain {args.min_gain:g}"
        )
        text = render_listing(
            args,
            shown,
            [("job", "job"), ("policy", "policy"), ("work", "work"), ("cost", "cost"),
             ("per $", "work per $"), ("moves", "moves"), ("lost", "hours lost")],
            ["job", "policy", "work_flops", "cost_usd", "work_per_usd", "moves", "hours_lost"],
            header=header,
        )  # fmt: skip
    if args.plot:
        from deepvm.render.plots import plot_backtest

        title = f"backtest: {len(jobs)} jobs, {result.nights[0]} .. {result.nights[-1]}"
        progress(f"wrote {plot_backtest(result.series, args.plot, title)}")
    sys.stdout.write(text)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0
