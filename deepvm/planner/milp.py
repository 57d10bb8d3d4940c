"""The cluster choice as a mixed-integer linear program (cvxpy + HiGHS).

Variables: one binary x_s per *slot*, each slot holding one worker candidate
(architecture, GPU type i, n); one binary w_j per remote CPU type and an integer
remote-node count m_j. Exactly one slot is chosen. Tiering's constraints are
linear because N_sat is monotone, so N_sat(min(b_i, b_j)) = min(N_sat(b_i),
N_sat(b_j)) and n <= N_sat(min(b_i, b_j)) m splits into

    sum_s n_s x_s <= sum_j N_sat(b_j) m_j   and   sum_s (n_s / N_sat(b_i_s)) x_s <= sum_j m_j,

exact because at most one x_s and one w_j are 1. Quotas act per variable and are
folded into the candidate set and the bounds of m.

The objective is lexicographic in one solve: candidates are ranked by score
(near-equal scores share a rank, see score_ranks) and the MILP maximises
rank - cost / (2 B). Every feasible cluster costs at most B, so the cost term
stays below 1/2 and never outweighs one rank step: the highest score wins, and
among equal scores the cheaper cluster. Integer ranks also keep the objective
well scaled whatever the FLOP/s magnitudes.

Before each solve an exact presolve (``contenders``) drops candidates that
cannot win: over budget on their workers alone, beaten by a smaller n of the
same type, or ranked below a Single Anchor / On-Demand cluster that is known
feasible. The survivors fill the slots of a problem compiled once per slot count
(a power of two), whose coefficients are all cvxpy Parameters: sweeps, policies
and top-k re-solve without re-compiling, and the solver sees only what matters
(a catalog of 1,000 types has ~10^5 candidates, of which a few hundred survive).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from deepvm.planner.candidates import (
    ARCHITECTURES,
    BUDGET_RTOL,
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


def score_ranks(score: FloatArray, mask: np.ndarray) -> FloatArray:
    """Integer ranks of the allowed scores, 1 = lowest, 0 for disallowed ones.
    Sorted best first, a score within SCORE_RTOL of the one before it shares its
    rank, so float noise never decides between clusters that are equally fast."""
    ranks = np.zeros(len(score))
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return ranks
    order = idx[np.argsort(-score[idx], kind="stable")]
    values = score[order]
    new_group = np.ones(len(values), dtype=bool)
    new_group[1:] = values[1:] < values[:-1] - SCORE_RTOL * np.abs(values[:-1])
    group = np.cumsum(new_group)  # 1 = best
    ranks[order] = group[-1] + 1 - group
    return ranks


def undominated(candidates: Candidates, ranks: FloatArray, mask: np.ndarray) -> np.ndarray:
    """A presolve that keeps the answer exact and spares the solver most columns.

    Among the allowed candidates of one architecture and GPU type, a larger n
    costs more (and for Tiering needs at least the remote side of a smaller n),
    so a candidate is dropped when a smaller allowed n ranks at least as high.
    Single Anchor and On-Demand costs are fixed, and every allowed candidate is
    within budget, so of those only the best of each type can win.

    Candidates come grouped by (architecture, type), n ascending (build_candidates).
    """
    if not mask.any():
        return mask
    group = candidates.architecture * (int(candidates.worker.max()) + 1) + candidates.worker
    allowed_rank = np.where(mask, ranks, 0.0)
    big = float(ranks.max()) + 1.0
    # Per-group running maximum via one cumulative max of group * big + rank
    # (groups are contiguous and ascending).
    running = np.maximum.accumulate(group * big + allowed_rank)
    same_group = np.concatenate([[False], group[1:] == group[:-1]])
    best_before = np.where(same_group, np.concatenate([[0.0], running[:-1]]) - group * big, 0.0)
    beats_smaller_n = mask & (ranks > best_before)
    starts = np.flatnonzero(~same_group)
    group_best = np.repeat(
        np.maximum.reduceat(allowed_rank, starts), np.diff(np.append(starts, len(group)))
    )
    tiering = candidates.arch_mask(TIERING)
    return beats_smaller_n & (tiering | (ranks == group_best))


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


class _SlotProblem:
    """The compiled MILP with ``size`` candidate slots (see the module docstring)."""

    def __init__(self, size: int, fleet: Fleet, remote_upper: FloatArray) -> None:
        import cvxpy as cp

        j = max(len(fleet.cpu_types), 1)
        has_cpu = len(fleet.cpu_types) > 0
        nsat_cpu = fleet.saturation(fleet.cpu_gbps).astype(float) if has_cpu else np.zeros(1)
        mem = REMOTE_MEMORY_FRACTION * fleet.cpu_memory_gb if has_cpu else np.zeros(1)
        upper = remote_upper if has_cpu else np.zeros(1)

        def param(name: str, n: int = size, **kw: bool) -> cp.Parameter:
            return cp.Parameter(n, name=name, **kw)

        self.size = size
        self.x = cp.Variable(size, boolean=True, name="x")
        self.w = cp.Variable(j, boolean=True, name="w")
        self.m = cp.Variable(j, integer=True, name="m")
        self.open = param("open", nonneg=True)
        self.rank = param("rank", nonneg=True)
        self.cost = param("cost", nonneg=True)
        self.tiebreak = param("tiebreak", nonneg=True)  # cost / 2B: DPP forbids param / param
        self.tier = param("tier", nonneg=True)
        self.n_tier = param("n_tier", nonneg=True)
        self.share = param("share", nonneg=True)
        self.memory_needed = param("memory_needed", nonneg=True)  # k C on tiering slots
        self.cost_m = param("cost_m", j, nonneg=True)
        self.tiebreak_m = param("tiebreak_m", j, nonneg=True)
        self.budget = cp.Parameter(nonneg=True, name="budget")
        x, w, m = self.x, self.w, self.m
        constraints = [
            cp.sum(x) == 1,
            x <= self.open,
            cp.sum(w) == self.tier @ x,
            m >= w,
            m <= cp.multiply(upper, w),
            self.n_tier @ x <= nsat_cpu @ m,
            self.share @ x <= cp.sum(m),
            mem @ m >= self.memory_needed @ x,
            self.cost @ x + self.cost_m @ m <= self.budget,
        ]
        objective = self.rank @ x - (self.tiebreak @ x + self.tiebreak_m @ m)
        self.problem = cp.Problem(cp.Maximize(objective), constraints)


class ClusterMILP:
    """The MILP over a fixed candidate set; solve it for any scores, budget and
    mask. Compiled problems are cached per slot count."""

    def __init__(
        self,
        fleet: Fleet,
        job: Job,
        candidates: Candidates,
        *,
        budget_cap: float | None = None,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    ) -> None:
        self.fleet, self.job, self.candidates = fleet, job, candidates
        self.time_limit_s = time_limit_s
        self._k, self._j = len(candidates), len(fleet.cpu_types)
        tier = candidates.arch_mask(TIERING)
        n = candidates.n.astype(float)
        nsat_gpu = fleet.saturation(fleet.gpu_gbps).astype(float)
        self._tier = tier.astype(float)
        self._n_tier = n * self._tier
        self._share = self._n_tier / nsat_gpu[candidates.worker]
        self._remote_upper = self._remote_upper_bounds(budget_cap)
        self._problems: dict[int, _SlotProblem] = {}
        self.update_prices()

    def _remote_upper_bounds(self, budget_cap: float | None) -> FloatArray:
        f = self.fleet
        if not self._j:
            return np.zeros(0)
        quota = np.array([f.quotas.limit(g, "on_demand") for g in f.cpu_group])
        upper = np.floor(quota / f.cpu_vcpus)
        if budget_cap is not None:
            upper = np.minimum(upper, np.floor(budget_cap / f.cpu_ondemand + 1e-9))
        return np.minimum(upper, _NO_REMOTE_CAP)

    def update_prices(self, fleet: Fleet | None = None) -> None:
        """Take the prices of ``fleet`` (same types, new prices) without re-compiling."""
        if fleet is not None:
            self.fleet = fleet
        # NaN (no spot market) never reaches the solver: such candidates do not exist.
        self._worker_cost = np.nan_to_num(self.candidates.cost(self.fleet), nan=np.inf)
        self._cheapest_remote = float(np.min(self.fleet.cpu_ondemand)) if self._j else np.inf

    def _slots(self, count: int) -> _SlotProblem:
        size = max(16, 1 << max(count - 1, 0).bit_length())
        if size not in self._problems:
            self._problems[size] = _SlotProblem(size, self.fleet, self._remote_upper)
        return self._problems[size]

    # -- solving ------------------------------------------------------------

    def _run(self, problem: object) -> tuple[str, float]:
        import cvxpy as cp

        assert isinstance(problem, cp.Problem)
        start = time.perf_counter()
        try:
            # cvxpy warns "Solution may be inaccurate" on a time limit; the status says it.
            with _quiet_stdout(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
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

    def contenders(self, ranks: FloatArray, mask: np.ndarray, budget: float) -> np.ndarray:
        """The candidates that can still be the best answer (an exact presolve)."""
        limit = budget * (1 + BUDGET_RTOL) + 1e-12
        mask = mask & (self._worker_cost <= limit)
        tier = self._tier > 0
        # A Tiering cluster also pays for at least one remote node.
        mask &= ~tier | (self._worker_cost + self._cheapest_remote <= limit)
        mask = undominated(self.candidates, ranks, mask)
        fixed = mask & ~tier  # Single Anchor / On-Demand: feasible as they stand
        if fixed.any():
            mask &= ranks >= ranks[fixed].max()
        return mask

    def solve(
        self, score: FloatArray, budget: float, allowed: np.ndarray | None = None
    ) -> SolveOutcome:
        """The best candidate by ``score`` (higher is better; ties: cheaper) within
        ``budget``, among ``allowed`` candidates. Values are read only after an
        optimal status and a check of the configuration against the model."""
        if self._k == 0:
            return SolveOutcome(INFEASIBLE, None, 0.0, "no candidate within quotas")
        mask = np.ones(self._k, dtype=bool) if allowed is None else allowed > 0
        ranks = score_ranks(score, mask)
        picked = np.flatnonzero(self.contenders(ranks, mask, budget))
        if picked.size == 0:
            return SolveOutcome(INFEASIBLE, None, 0.0, "no candidate within budget")
        slots = self._slots(picked.size)
        pad = slots.size - picked.size

        def fill(values: FloatArray) -> FloatArray:
            return np.concatenate([values[picked], np.zeros(pad)])

        scale = 2.0 * max(float(budget), 1e-9)
        cost = fill(self._worker_cost)
        slots.open.value = np.concatenate([np.ones(picked.size), np.zeros(pad)])
        slots.rank.value = fill(ranks)
        slots.cost.value = cost
        slots.tiebreak.value = cost / scale
        slots.tier.value = fill(self._tier)
        slots.n_tier.value = fill(self._n_tier)
        slots.share.value = fill(self._share)
        slots.memory_needed.value = fill(self._tier) * self.job.remote_memory_needed_gb
        remote = self.fleet.cpu_ondemand.astype(float) if self._j else np.zeros(1)
        slots.cost_m.value = remote
        slots.tiebreak_m.value = remote / scale
        slots.budget.value = float(budget)
        status, seconds = self._run(slots.problem)
        if status != OPTIMAL:
            return SolveOutcome(status, None, seconds)
        config = self._read_config(slots, picked)
        problems = violations(self.fleet, self.job, config, budget)
        if problems:
            return SolveOutcome(
                ERROR, None, seconds, f"solver answer failed verification: {', '.join(problems)}"
            )
        return SolveOutcome(OPTIMAL, config, seconds)

    def candidate_index(self, config: Config) -> int:
        c = self.candidates
        hit = np.flatnonzero(
            (c.architecture == ARCHITECTURES.index(config.architecture))
            & (c.worker == config.worker)
            & (c.n == config.n_workers)
        )
        return int(hit[0])

    def _read_config(self, slots: _SlotProblem, picked: np.ndarray) -> Config:
        assert slots.x.value is not None
        k = int(picked[int(np.argmax(slots.x.value[: picked.size]))])
        c = self.candidates
        arch = ARCHITECTURES[int(c.architecture[k])]
        if arch != TIERING:
            return Config(arch, int(c.worker[k]), int(c.n[k]))
        assert slots.w.value is not None and slots.m.value is not None
        j = int(np.argmax(slots.w.value))
        return Config(arch, int(c.worker[k]), int(c.n[k]), j, round(float(slots.m.value[j])))
