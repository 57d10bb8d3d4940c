"""Analytic expected makespan vs Monte Carlo, over a grid of interruption rates,
cluster sizes and checkpoint stalls (run by hand: `python benchmarks/preemption.py`).

Prints a markdown table; `rel. diff` is analytic / simulated - 1. The first-order
model is valid while lambda (tau + delta) stays small (see deepvm.preemption).
"""

from __future__ import annotations

import itertools
import time

from deepvm.preemption import cluster_rate_per_s, expected_makespan, simulate

WORK_H = 100.0
RESTART_S = 300.0
RUNS = 4000


def main() -> None:
    print(
        "| monthly rate | spot nodes | stall s | lambda (tau+delta) | interval s | analytic h "
        "| simulated h (± std) | rel. diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    for monthly, n, stall in itertools.product(
        (0.025, 0.075, 0.3, 0.9), (1, 8, 64, 256), (10, 120)
    ):
        rate = cluster_rate_per_s(n, monthly)
        a = expected_makespan(WORK_H, rate, None, stall, RESTART_S)
        s = simulate(WORK_H, rate, a.checkpoint_interval_s, stall, RESTART_S, runs=RUNS, seed=1)
        x = rate * (a.checkpoint_interval_s + stall)
        print(
            f"| {monthly} | {n} | {stall} | {x:.3f} | {a.checkpoint_interval_s:.0f} | "
            f"{a.makespan_h:.3f} | {s.makespan_h_mean:.3f} (± {s.makespan_h_std:.3f}) | "
            f"{a.makespan_h / s.makespan_h_mean - 1:+.2%} |"
        )
    print(
        f"\n{RUNS} runs per row, {WORK_H:g} h of work, restart {RESTART_S:g} s; "
        f"{time.perf_counter() - start:.1f} s in all"
    )


if __name__ == "__main__":
    main()
