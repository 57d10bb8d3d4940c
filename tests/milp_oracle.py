"""The second oracle of the single-job planner (the first is the exhaustive
enumerator, deepvm.planner._exhaustive): the cluster choice as a mixed-integer
linear program (cvxpy + HiGHS), solved apart from the numpy planner that the
product runs. It lives with the tests because no command needs it.

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
cannot win. Given the worker candidate, Tiering's remote constraints involve
only (j, m), so the least feasible remote side has a closed form (``remote_floor``):
m_j = max(1, ceil(n / N_sat(b_j)), ceil(n / N_sat(b_i)), ceil(kC / 0.8 M_j)) if
that is within m_j's bound. Every candidate thus has a least hourly cost; those
over budget go, and so does everything ranked below the best one that fits. What
survives is the top-ranked group, and the MILP picks among it: the cheapest
cluster, and for Tiering its remote type and count. The survivors fill the slots
of a problem compiled once per slot count (a power of two), whose coefficients
are all cvxpy Parameters, so policies and top-k re-solve without re-compiling.
A sweep puts the problems of all its budgets into one block-diagonal MILP
(``solve_blocks``): HiGHS has a fixed cost per call of several milliseconds.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deepvm.base.config import DEFAULT_TIME_LIMIT_S
from deepvm.base.errors import SolverError
from deepvm.planner._constraints import violations
from deepvm.planner._enumeration import (
    SCORE_RTOL,
    remote_sides,
    remote_upper_bounds,
)
from deepvm.planner._highs import quiet_stdout
from deepvm.planner._policies import OPTIMISED_POLICIES, Planner
from deepvm.planner.architectures import REGISTRY, code
from deepvm.planner.candidates import (
    BUDGET_RTOL,
    TIERING,
    Candidates,
    CheckpointNeeds,
    Config,
)
from deepvm.planner.offers import REMOTE_MEMORY_FRACTION, FloatArray, Offers

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
    "user_limit": LIMIT_NO_INCUMBENT,  # refined from HiGHS's info, see solve_status()
    "optimal_inaccurate": ERROR,
    "infeasible_inaccurate": ERROR,
    "unbounded": ERROR,
    "unbounded_inaccurate": ERROR,
    "solver_error": ERROR,
}

SOLVER = "HIGHS"


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


def run_highs(
    problem: object, time_limit_s: float, feasibility_tolerance: float = 1e-9
) -> tuple[str, float]:
    """Solve a cvxpy problem with HiGHS to a proven optimum (zero gap); the planner
    status (STATUS_MAP, refined by HiGHS's incumbent flag) and the seconds taken.
    ``feasibility_tolerance``: how far a row or an integer may be off (HiGHS's
    default is 1e-6; tighter is slower on large models)."""
    import cvxpy as cp

    assert isinstance(problem, cp.Problem)
    start = time.perf_counter()
    try:
        # cvxpy warns "Solution may be inaccurate" on a time limit; the status says it.
        with quiet_stdout(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            problem.solve(
                solver=SOLVER,
                time_limit=time_limit_s,
                # cvxpy's default hands HiGHS the previous solve's answer as a start;
                # slots are reassigned between solves, and HiGHS then returned that
                # start as "optimal" although a better cluster existed (found by
                # the property test). Every solve starts cold.
                warm_start=False,
                mip_rel_gap=0.0,
                mip_abs_gap=1e-12,
                mip_feasibility_tolerance=feasibility_tolerance,
                primal_feasibility_tolerance=feasibility_tolerance,
                output_flag=False,
            )
    except cp.error.SolverError as exc:
        del exc  # the status says it; cvxpy's message is not for users
        return ERROR, time.perf_counter() - start
    return solve_status(problem), time.perf_counter() - start


def solve_status(problem: object) -> str:
    """The planner status of a solved cvxpy problem (see STATUS_MAP)."""
    status = STATUS_MAP.get(str(getattr(problem, "status", "")), ERROR)
    if status == LIMIT_NO_INCUMBENT:
        info = problem.solver_stats.extra_stats  # type: ignore[attr-defined]
        # HiGHS: primal_solution_status 2 = a feasible incumbent exists.
        if getattr(info, "primal_solution_status", 0) == 2:
            status = LIMIT_WITH_INCUMBENT
    return status


@dataclass(frozen=True)
class _Coefficients:
    """The MILP's data: arrays (a sweep, built once) or cvxpy Parameters (the slot
    problems, re-solved with new values). Per slot: rank, tiebreak (cost / 2B),
    cost, tier (1 on Tiering slots), n_tier, share, open (None: all open); per
    block: budget; per remote variable (Tiering block x CPU type): cost_m, tiebreak_m."""

    rank: Any
    tiebreak: Any
    cost: Any
    tier: Any
    n_tier: Any
    share: Any
    budget: Any
    cost_m: Any
    tiebreak_m: Any
    open: Any = None


class _Formulation:
    """The cluster MILP (see the module docstring) for ``sizes[b]`` slots in each
    of independent blocks b; ``tiered`` blocks get remote variables w, m. Each
    block also has a "no cluster" binary worth 0, below any candidate's rank -
    cost / 2B > 1/2: a block where nothing fits picks it instead of making the
    whole problem infeasible."""

    def __init__(
        self,
        sizes: np.ndarray,
        tiered: np.ndarray,
        offers: Offers,
        job: CheckpointNeeds,
        nsat_cpu: FloatArray,
        remote_upper: FloatArray,
        c: _Coefficients,
    ) -> None:
        import cvxpy as cp
        import scipy.sparse as sp

        nb, j, total = len(sizes), len(offers.cpu_types), int(sizes.sum())
        self.sizes = sizes
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        self.tiered = tiered if j else np.zeros(0, dtype=int)
        self.j = j
        nt = len(self.tiered)
        block = np.repeat(np.arange(nb), sizes)
        one_hot = sp.csr_matrix((np.ones(total), (block, np.arange(total))), shape=(nb, total))
        self.x = cp.Variable(total, boolean=True, name="x")
        self.none = cp.Variable(nb, boolean=True, name="none")
        self.w: Any = None
        self.m: Any = None
        x = self.x
        objective = c.rank @ x - c.tiebreak @ x
        constraints = [one_hot @ x + self.none == 1]
        if c.open is not None:
            constraints.append(x <= c.open)
        spend = one_hot @ cp.multiply(c.cost, x)
        if nt:
            self.w = w = cp.Variable(nt * j, boolean=True, name="w")
            self.m = m = cp.Variable(nt * j, integer=True, name="m")
            rows = one_hot[self.tiered]

            def per_block(values: FloatArray) -> Any:
                return sp.kron(sp.eye(nt), values.reshape(1, -1), format="csr")

            tiering = rows @ cp.multiply(c.tier, x)
            usable = REMOTE_MEMORY_FRACTION * offers.cpu_memory_gb
            constraints += [
                per_block(np.ones(j)) @ w == tiering,
                m >= w,
                m <= cp.multiply(np.tile(remote_upper, nt), w),
                rows @ cp.multiply(c.n_tier, x) <= per_block(nsat_cpu) @ m,
                rows @ cp.multiply(c.share, x) <= per_block(np.ones(j)) @ m,
                per_block(usable) @ m >= job.remote_memory_needed_gb * tiering,
            ]
            owner = sp.csr_matrix(
                (np.ones(nt * j), (np.repeat(self.tiered, j), np.arange(nt * j))),
                shape=(nb, nt * j),
            )
            spend = spend + owner @ cp.multiply(c.cost_m, m)
            objective = objective - c.tiebreak_m @ m
        else:
            constraints.append(cp.multiply(c.tier, x) == 0)  # Tiering needs a remote type
        constraints.append(spend <= c.budget)
        self.problem = cp.Problem(cp.Maximize(objective), constraints)

    def configs(self, candidates: Candidates, slot_candidate: np.ndarray) -> list[Config | None]:
        """Each block's chosen configuration (None: no cluster), after a solve;
        ``slot_candidate`` maps slots to candidate indices."""
        chosen, empty = self.x.value, self.none.value
        assert chosen is not None and empty is not None
        where = {int(b): t for t, b in enumerate(self.tiered)}
        out: list[Config | None] = []
        for b, (start, size) in enumerate(zip(self.starts, self.sizes, strict=True)):
            if empty[b] > 0.5:
                out.append(None)
                continue
            k = int(slot_candidate[start + int(np.argmax(chosen[start : start + size]))])
            arch = REGISTRY[int(candidates.architecture[k])].name
            worker, n = int(candidates.worker[k]), int(candidates.n[k])
            if arch != TIERING:
                out.append(Config(arch, worker, n))
                continue
            opened, counts = self.w.value, self.m.value
            assert opened is not None and counts is not None
            t = where[b]
            remote = int(np.argmax(opened[t * self.j : (t + 1) * self.j]))
            out.append(Config(arch, worker, n, remote, round(float(counts[t * self.j + remote]))))
        return out


class _SlotProblem:
    """One block of ``size`` slots whose coefficients are cvxpy Parameters, so it
    is compiled once and re-solved with new values."""

    def __init__(
        self,
        size: int,
        offers: Offers,
        job: CheckpointNeeds,
        nsat_cpu: FloatArray,
        remote_upper: FloatArray,
    ) -> None:
        import cvxpy as cp

        j = len(offers.cpu_types)

        def param(name: str, n: int = size) -> cp.Parameter:
            return cp.Parameter(n, name=name, nonneg=True)

        self.size = size
        self.c = _Coefficients(
            rank=param("rank"),
            tiebreak=param("tiebreak"),  # cost / 2B: DPP forbids param / param
            cost=param("cost"),
            tier=param("tier"),
            n_tier=param("n_tier"),
            share=param("share"),
            budget=cp.Parameter(nonneg=True, name="budget"),
            cost_m=param("cost_m", max(j, 1)),
            tiebreak_m=param("tiebreak_m", max(j, 1)),
            open=param("open"),
        )
        self.formulation = _Formulation(
            np.array([size]), np.array([0]), offers, job, nsat_cpu, remote_upper, self.c
        )


class ClusterMILP:
    """The MILP over a fixed candidate set; solve it for any scores, budget and
    mask. Compiled problems are cached per slot count."""

    def __init__(
        self,
        offers: Offers,
        job: CheckpointNeeds,
        candidates: Candidates,
        *,
        budget_cap: float | None = None,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
        presolve: bool = True,
    ) -> None:
        if len(set(offers.gpu_region) | set(offers.cpu_region)) > 1:
            raise ValueError("the MILP formulation plans one region: give it a one-region fleet")
        self.offers, self.job, self.candidates = offers, job, candidates
        self.time_limit_s = time_limit_s
        # presolve=False leaves every choice to the solver (tests check it alone).
        self.presolve = presolve
        self._k, self._j = len(candidates), len(offers.cpu_types)
        tier = candidates.arch_mask(TIERING)
        n = candidates.n.astype(float)
        nsat_gpu = offers.saturation(offers.gpu_gbps).astype(float)
        self._tier = tier.astype(float)
        self._n_tier = n * self._tier
        self._share = self._n_tier / nsat_gpu[candidates.worker]
        self._remote_upper = remote_upper_bounds(offers, budget_cap)
        self._nsat_cpu = (
            offers.saturation(offers.cpu_gbps).astype(float) if self._j else np.zeros(0)
        )
        self._problems: dict[int, _SlotProblem] = {}
        self.update_prices()

    def update_prices(self, offers: Offers | None = None) -> None:
        """Take the prices of ``fleet`` (same types, new prices) without re-compiling."""
        if offers is not None:
            self.offers = offers
        # NaN (no spot market) never reaches the solver: such candidates do not exist.
        self._worker_cost = np.nan_to_num(self.candidates.cost(self.offers), nan=np.inf)
        self._remote_floor = self.remote_floor()
        self._least_cost = self._worker_cost + self._remote_floor

    def _slots(self, count: int) -> _SlotProblem:
        size = max(16, 1 << max(count - 1, 0).bit_length())
        if size not in self._problems:
            self._problems[size] = _SlotProblem(
                size, self.offers, self.job, self._nsat_cpu, self._remote_upper
            )
        return self._problems[size]

    # -- solving ------------------------------------------------------------

    def _run(self, problem: object) -> tuple[str, float]:
        return run_highs(problem, self.time_limit_s)

    def remote_floor(self) -> FloatArray:
        """Per candidate, the least hourly cost of its remote side: 0 without one,
        inf where no remote type and count satisfies Tiering's constraints."""
        c = self.candidates
        top = int(c.n.max()) if len(c) else 1
        sides = remote_sides(self.offers, self.job, top, self._remote_upper)
        return sides.cost_of(c.worker, c.n, self._tier > 0)

    def contenders(self, ranks: FloatArray, mask: np.ndarray, budget: float) -> np.ndarray:
        """The candidates that can still be the best answer (an exact presolve):
        those whose least cost fits the budget, ranked as high as the best of them."""
        limit = budget * (1 + BUDGET_RTOL) + 1e-12
        if not self.presolve:
            return mask & (self._worker_cost <= limit)
        mask = mask & (self._least_cost <= limit)
        if mask.any():
            mask &= ranks >= ranks[mask].max()
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
        c = slots.c
        c.open.value = np.concatenate([np.ones(picked.size), np.zeros(pad)])
        c.rank.value = fill(ranks)
        c.cost.value = cost
        c.tiebreak.value = cost / scale
        c.tier.value = fill(self._tier)
        c.n_tier.value = fill(self._n_tier)
        c.share.value = fill(self._share)
        if self._j:
            c.cost_m.value = self.offers.cpu_ondemand.astype(float)
            c.tiebreak_m.value = c.cost_m.value / scale
        c.budget.value = float(budget)
        status, seconds = self._run(slots.formulation.problem)
        if status != OPTIMAL:
            return SolveOutcome(status, None, seconds)
        slot_candidate = np.concatenate([picked, np.zeros(pad, dtype=picked.dtype)])
        config = slots.formulation.configs(self.candidates, slot_candidate)[0]
        return self._verified(config, budget, seconds)

    def _verified(self, config: Config | None, budget: float, seconds: float) -> SolveOutcome:
        """The solver's answer, checked against the model (written independently)."""
        if config is None:
            return SolveOutcome(INFEASIBLE, None, seconds, "no cluster fits")
        problems = violations(self.offers, self.job, config, budget)
        if problems:
            message = f"solver answer failed verification: {', '.join(map(str, problems))}"
            return SolveOutcome(ERROR, None, seconds, message)
        return SolveOutcome(OPTIMAL, config, seconds)

    def solve_blocks(
        self, problems: Sequence[tuple[FloatArray, float, np.ndarray | None]]
    ) -> list[SolveOutcome]:
        """Solve many (score, budget, allowed) problems at once, as the blocks of one
        block-diagonal MILP: they share no variable, so the joint optimum is each
        block's optimum. Identical presolved blocks are solved once."""
        results: list[SolveOutcome | None] = [None] * len(problems)
        blocks: dict[tuple[int, ...], list[int]] = {}
        block_ranks: list[FloatArray] = []
        block_picks: list[np.ndarray] = []
        for index, (score, budget, allowed) in enumerate(problems):
            mask = np.ones(self._k, dtype=bool) if allowed is None else allowed > 0
            ranks = score_ranks(score, mask)
            picked = np.flatnonzero(self.contenders(ranks, mask, budget))
            if picked.size == 0:
                results[index] = SolveOutcome(INFEASIBLE, None, 0.0, "no candidate within budget")
                continue
            # Presolved survivors all fit and share the top rank (see contenders): the
            # answer is the cheapest of them whatever the budget, so one block serves all.
            key = tuple(int(k) for k in picked) if self.presolve else (index,)
            if key not in blocks:
                blocks[key] = []
                block_ranks.append(ranks[picked])
                block_picks.append(picked)
            blocks[key].append(index)
        if not blocks:
            return [r for r in results if r is not None]
        budgets = [min(problems[k][1] for k in members) for members in blocks.values()]
        outcomes = self._solve_block_milp(block_picks, block_ranks, budgets)
        for outcome, members in zip(outcomes, blocks.values(), strict=True):
            for index in members:
                results[index] = outcome
        return [r for r in results if r is not None]

    def _solve_block_milp(
        self, picks: list[np.ndarray], ranks: list[FloatArray], budgets: list[float]
    ) -> list[SolveOutcome]:
        sizes = np.array([len(p) for p in picks])
        cand = np.concatenate(picks)
        block = np.repeat(np.arange(len(picks)), sizes)
        tiered = np.flatnonzero(np.bincount(block, weights=self._tier[cand], minlength=len(picks)))
        scale = 2.0 * np.maximum(np.array(budgets), 1e-9)
        price = np.tile(self.offers.cpu_ondemand.astype(float), len(tiered))
        cost = self._worker_cost[cand]
        c = _Coefficients(
            rank=np.concatenate(ranks),
            tiebreak=cost / scale[block],
            cost=cost,
            tier=self._tier[cand],
            n_tier=self._n_tier[cand],
            share=self._share[cand],
            budget=np.array(budgets),
            cost_m=price,
            tiebreak_m=price / np.repeat(scale[tiered], self._j),
        )
        formulation = _Formulation(
            sizes, tiered, self.offers, self.job, self._nsat_cpu, self._remote_upper, c
        )
        status, seconds = self._run(formulation.problem)
        share = seconds / len(picks)
        if status != OPTIMAL:
            return [SolveOutcome(status, None, share)] * len(picks)
        configs = formulation.configs(self.candidates, cand)
        return [self._verified(k, b, share) for k, b in zip(configs, budgets, strict=True)]

    def candidate_index(self, config: Config) -> int:
        c = self.candidates
        hit = np.flatnonzero(
            (c.architecture == code(config.architecture))
            & (c.worker == config.worker)
            & (c.n == config.n_workers)
        )
        return int(hit[0])


class MilpPlanner(Planner):
    """A Planner whose optimised policies are solved by ClusterMILP instead of the
    numpy enumeration (candidates, scores and baselines are the Planner's)."""

    def __init__(
        self,
        offers: Offers,
        job: CheckpointNeeds,
        *,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
        presolve: bool = True,
        budget_cap: float | None = None,
        **options: Any,
    ) -> None:
        super().__init__(offers, job, budget_cap=budget_cap, **options)
        self.milp = ClusterMILP(
            self.offers,
            job,
            self.candidates,
            budget_cap=budget_cap,
            time_limit_s=time_limit_s,
            presolve=presolve,
        )

    def optimise(self, policy: str, budget: float, top: int = 1) -> list[tuple[Config, float]]:
        scores, allowed_mask = self.policy_scores(policy)
        found: list[tuple[Config, float]] = []
        allowed = allowed_mask.astype(float)
        while len(found) < top:
            outcome = self.milp.solve(scores, budget, allowed)
            if outcome.status == INFEASIBLE:
                break
            if outcome.status != OPTIMAL or outcome.config is None:
                raise SolverError(solver_message(outcome))
            found.append((outcome.config, outcome.solve_s))
            allowed[self.milp.candidate_index(outcome.config)] = 0.0
        return found

    def sweep(
        self, policies: Sequence[str], budgets: Sequence[float]
    ) -> dict[tuple[str, float], Config | None]:
        """Every (policy, budget) problem one block of a single MILP (solve_blocks)."""
        distinct = sorted(set(budgets))
        result: dict[tuple[str, float], Config | None] = {}
        problems, keys = [], []
        for policy in policies:
            if policy not in OPTIMISED_POLICIES:
                picks = self.baselines(policy, distinct)
                result.update({(policy, b): c for b, c in zip(distinct, picks, strict=True)})
                continue
            scores, allowed = self.policy_scores(policy)
            problems += [(scores, b, allowed.astype(float)) for b in distinct]
            keys += [(policy, b) for b in distinct]
        for key, outcome in zip(keys, self.milp.solve_blocks(problems), strict=True):
            if outcome.status == INFEASIBLE:
                result[key] = None
            elif outcome.status != OPTIMAL or outcome.config is None:
                raise SolverError(solver_message(outcome))
            else:
                result[key] = outcome.config
        return result


def solver_message(outcome: SolveOutcome) -> str:
    if outcome.status == LIMIT_WITH_INCUMBENT:
        return "the solver hit its time limit before proving an optimum (it had a feasible cluster)"
    if outcome.status == LIMIT_NO_INCUMBENT:
        return "the solver hit its time limit without finding any cluster"
    return f"the solver failed: {outcome.message or outcome.status}"
