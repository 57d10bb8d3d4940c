"""Analytic expected makespan vs Monte Carlo, over a grid of interruption rates,
cluster sizes, checkpoint stalls and restart times (run by hand:
`python benchmarks/preemption.py`).

Prints a markdown table; `rel. diff` is analytic / simulated - 1. The simulator
also lets preemptions strike restarts, which the analytic model ignores: it is
valid while lambda R and lambda (tau + delta) stay small (see deepvm.performance.preemption).
"""

from __future__ import annotations

import itertools
import time

from deepvm.performance.preemption import cluster_rate_per_s, expected_makespan, simulate

WORK_H = 100.0
RUNS = 4000


def main() -> None:
    print(
        "| monthly rate | spot nodes | stall s | restart s | lambda (tau+delta) | lambda R "
        "| interval s | analytic h | simulated h (± std) | rel. diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    grid = itertools.product((0.025, 0.3, 0.9), (1, 8, 64, 256), (10, 120), (300, 3600))
    for monthly, n, stall, restart in grid:
        rate = cluster_rate_per_s(n, monthly)
        a = expected_makespan(WORK_H, rate, None, stall, restart)
        s = simulate(WORK_H, rate, a.checkpoint_interval_s, stall, restart, runs=RUNS, seed=1)
        print(
            f"| {monthly} | {n} | {stall} | {restart} | "
            f"{rate * (a.checkpoint_interval_s + stall):.3f} | {rate * restart:.3f} | "
            f"{a.checkpoint_interval_s:.0f} | {a.makespan_h:.3f} | "
            f"{s.makespan_h_mean:.3f} (± {s.makespan_h_std:.3f}) | "
            f"{a.makespan_h / s.makespan_h_mean - 1:+.2%} |"
        )
    elapsed = time.perf_counter() - start
    print(f"\n{RUNS} runs per row, {WORK_H:g} h of work each; {elapsed:.1f} s in all")


if __name__ == "__main__":
    main()
