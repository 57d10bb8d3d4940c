"""The cluster choice as a mixed-integer linear program (cvxpy + HiGHS).

Variables: one binary x_k per worker candidate (architecture, GPU type i, n),
one binary w_j per remote CPU type, an integer m_j remote-node count. Exactly
one candidate is chosen. Tiering's constraints are linear because N_sat is
monotone, so N_sat(min(b_i, b_j)) = min(N_sat(b_i), N_sat(b_j)) and
n <= N_sat(min(b_i, b_j)) m splits into

    sum_k n_k x_k <= sum_j N_sat(b_j) m_j   and   sum_k (n_k / N_sat(b_i_k)) x_k <= sum_j m_j,

exact because at most one x_k and one w_j are 1. Quotas act per variable and are
folded into the candidate set and the bounds of m.

The problem is built once per candidate set with cvxpy Parameters for the
objective scores, prices, budget, checkpoint memory and an ``allowed`` mask, so
sweeps, policies and top-k re-solve without re-compiling. Ties in the objective
(within SCORE_RTOL) go to the cheaper cluster through a second, lexicographic
solve that minimises cost at the optimal score.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from deepvm.planner.candidates import (
    TIERING,
    Candidates,
    Config,
    Job,
    violations,
)
from deepvm.planner.fleet import REMOTE_MEMORY_FRACTION, Fleet, FloatArray

# Planner statuses (cvxpy's own are mapped onto these, see STATUS_MAP).
OPTIMAL = "optimal"
INFEASIBLE = "infeasible"
LIMIT_WITH_INCUMBENT = "limit_with_incumbent"
LIMIT_NO_INCUMBENT = "limit_no_incumbent"
ERROR = "error"

STATUS_MAP = {
    "optimal": OPTIMAL,
    "infeasible": INFEASIBLE,
    "infeasible_or_unbounded": INFEASIBLE,
    "user_limit": LIMIT_NO_INCUMBENT,  # refined from HiGHS's info, see _status()
    "optimal_inaccurate": ERROR,
    "infeasible_inaccurate": ERROR,
    "unbounded": ERROR,
    "unbounded_inaccurate": ERROR,
    "solver_error": ERROR,
}

SCORE_RTOL = 1e-7  # objective values this close count as equal; cheaper wins
DEFAULT_TIME_LIMIT_S = 30.0
SOLVER = "HIGHS"
_NO_REMOTE_CAP = 4096  # bound on m_j when neither quota nor budget bounds it


@dataclass(frozen=True)
class SolveOutcome:
    status: str
    config: Config | None
    solve_s: float
    message: str = ""


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """HiGHS prints a banner on file descriptor 1 from C++; keep it out of --json."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # pytest capture, notebooks
        yield
        return
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), fd)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)


class ClusterMILP:
    """One compiled MILP over a fixed candidate set; solve it for any scores,
    budget and mask."""

    def __init__(
        self,
        fleet: Fleet,
        job: Job,
        candidates: Candidates,
        *,
        budget_cap: float | None = None,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    ) -> None:
        import cvxpy as cp

        self.fleet, self.job, self.candidates = fleet, job, candidates
        self.time_limit_s = time_limit_s
        k, j = len(candidates), len(fleet.cpu_types)
        self._k, self._j = k, j
        tier = candidates.arch_mask(TIERING).astype(float)
        n = candidates.n.astype(float)
        nsat_gpu = fleet.saturation(fleet.gpu_gbps).astype(float)
        nsat_cpu = fleet.saturation(fleet.cpu_gbps).astype(float)

        self.x = cp.Variable(max(k, 1), boolean=True, name="x")
        self.w = cp.Variable(max(j, 1), boolean=True, name="w")
        self.m = cp.Variable(max(j, 1), integer=True, name="m")
        self.score = cp.Parameter(max(k, 1), name="score")
        self.cost_x = cp.Parameter(max(k, 1), nonneg=True, name="cost_x")
        self.cost_m = cp.Parameter(max(j, 1), nonneg=True, name="cost_m")
        self.allowed = cp.Parameter(max(k, 1), nonneg=True, name="allowed")
        self.budget = cp.Parameter(nonneg=True, name="budget")
        self.memory_needed = cp.Parameter(nonneg=True, name="memory_needed")
        self.score_floor = cp.Parameter(name="score_floor")

        x, w, m = self.x, self.w, self.m
        pad = np.zeros(max(k, 1) - k)
        tier_v = np.concatenate([tier, pad])
        n_tier = np.concatenate([n * tier, pad])
        share = np.concatenate([n * tier / nsat_gpu[candidates.worker], pad])
        if j == 0:
            cpu_pad = np.zeros(1)
            nsat_cpu = mem = upper = cpu_pad
        else:
            mem = REMOTE_MEMORY_FRACTION * fleet.cpu_memory_gb
            upper = self._remote_upper_bounds(budget_cap)
        tiering_chosen = tier_v @ x
        constraints = [
            cp.sum(x) == 1,
            x <= self.allowed,
            cp.sum(w) == tiering_chosen,
            m >= w,
            m <= cp.multiply(upper, w),
            n_tier @ x <= nsat_cpu @ m,
            share @ x <= cp.sum(m),
            mem @ m >= self.memory_needed * tiering_chosen,
            self.cost_x @ x + self.cost_m @ m <= self.budget,
        ]
        self._cost_expr = self.cost_x @ x + self.cost_m @ m
        self._best = cp.Problem(cp.Maximize(self.score @ x), constraints)
        self._cheapest = cp.Problem(
            cp.Minimize(self._cost_expr), [*constraints, self.score @ x >= self.score_floor]
        )
        self.update_prices()
        self.memory_needed.value = job.remote_memory_needed_gb

    def _remote_upper_bounds(self, budget_cap: float | None) -> FloatArray:
        f = self.fleet
        quota = np.array([f.quotas.limit(g, "on_demand") for g in f.cpu_group])
        upper = np.floor(quota / f.cpu_vcpus)
        if budget_cap is not None:
            upper = np.minimum(upper, np.floor(budget_cap / f.cpu_ondemand + 1e-9))
        return np.minimum(upper, _NO_REMOTE_CAP)

    def update_prices(self, fleet: Fleet | None = None) -> None:
        """Take the prices of ``fleet`` (same types, new prices) without re-compiling."""
        if fleet is not None:
            self.fleet = fleet
        cost = np.nan_to_num(self.candidates.cost(self.fleet), nan=0.0)
        self.cost_x.value = np.concatenate([cost, np.zeros(self.x.size - self._k)])
        cpu = self.fleet.cpu_ondemand if self._j else np.zeros(1)
        self.cost_m.value = cpu.astype(float)

    # -- solving ------------------------------------------------------------

    def _run(self, problem: object) -> tuple[str, float]:
        import cvxpy as cp

        assert isinstance(problem, cp.Problem)
        start = time.perf_counter()
        try:
            with _quiet_stdout():
                problem.solve(
                    solver=SOLVER,
                    time_limit=self.time_limit_s,
                    mip_rel_gap=0.0,
                    mip_abs_gap=1e-12,
                    mip_feasibility_tolerance=1e-9,
                    primal_feasibility_tolerance=1e-9,
                    output_flag=False,
                )
        except cp.error.SolverError as exc:
            del exc  # the status says it; cvxpy's message is not for users
            return ERROR, time.perf_counter() - start
        return self._status(problem), time.perf_counter() - start

    @staticmethod
    def _status(problem: object) -> str:
        status = STATUS_MAP.get(str(getattr(problem, "status", "")), ERROR)
        if status == LIMIT_NO_INCUMBENT:
            info = problem.solver_stats.extra_stats  # type: ignore[attr-defined]
            # HiGHS: primal_solution_status 2 = a feasible incumbent exists.
            if getattr(info, "primal_solution_status", 0) == 2:
                status = LIMIT_WITH_INCUMBENT
        return status

    def solve(
        self, score: FloatArray, budget: float, allowed: np.ndarray | None = None
    ) -> SolveOutcome:
        """The best candidate by ``score`` (higher is better; ties: cheaper) within
        ``budget``, among ``allowed`` candidates. Values are read only after an
        optimal status and a check of the configuration against the model."""
        if self._k == 0:
            return SolveOutcome(INFEASIBLE, None, 0.0, "no candidate within quotas")
        mask = np.ones(self._k) if allowed is None else allowed.astype(float)
        if not mask.any():
            return SolveOutcome(INFEASIBLE, None, 0.0, "no candidate allowed")
        scale = float(np.max(np.abs(score[mask > 0]))) or 1.0
        self.score.value = score / scale
        self.allowed.value = mask
        self.budget.value = float(budget)
        status, t1 = self._run(self._best)
        if status != OPTIMAL:
            return SolveOutcome(status, None, t1)
        best = float(self._best.value)
        self.score_floor.value = best - SCORE_RTOL * max(abs(best), 1.0)
        status, t2 = self._run(self._cheapest)
        if status != OPTIMAL:
            return SolveOutcome(
                ERROR if status == INFEASIBLE else status,
                None,
                t1 + t2,
                "the tie-breaking solve did not confirm the optimum",
            )
        config = self._read_config()
        problems = violations(self.fleet, self.job, config, budget)
        if problems:
            return SolveOutcome(
                ERROR, None, t1 + t2, f"solver answer failed verification: {', '.join(problems)}"
            )
        return SolveOutcome(OPTIMAL, config, t1 + t2)

    def candidate_index(self, config: Config) -> int:
        from deepvm.planner.candidates import ARCHITECTURES

        c = self.candidates
        hit = np.flatnonzero(
            (c.architecture == ARCHITECTURES.index(config.architecture))
            & (c.worker == config.worker)
            & (c.n == config.n_workers)
        )
        return int(hit[0])

    def _read_config(self) -> Config:
        from deepvm.planner.candidates import ARCHITECTURES

        assert self.x.value is not None
        k = int(np.argmax(self.x.value[: self._k]))
        c = self.candidates
        arch = ARCHITECTURES[int(c.architecture[k])]
        if arch != TIERING:
            return Config(arch, int(c.worker[k]), int(c.n[k]))
        assert self.w.value is not None and self.m.value is not None
        j = int(np.argmax(self.w.value))
        return Config(arch, int(c.worker[k]), int(c.n[k]), j, round(float(self.m.value[j])))
