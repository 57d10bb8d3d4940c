"""Speedup (overhead) models and the network-saturation model
(docs/ARCHITECTURE.md, "Overhead models").

A speedup model is data: a kind and its parameters. ``speedup(model, n)`` gives
s(n), the factor by which n data-parallel nodes multiply one node's FLOP/s, with
s(1) = 1 for every kind.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from deepvm.base.config import MAX_NODES_CAP
from deepvm.base.errors import InputError
from deepvm.base.tables import Table, as_table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_SATURATION_POINTS",
    "LINEAR",
    "MODEL_KINDS",
    "MODEL_PARAMS",
    "OVERHEAD_COLUMNS",
    "WILDCARD",
    "SaturationModel",
    "SpeedupModel",
    "deepvm_factor",
    "load_overhead_table",
    "load_saturation",
    "logistic",
    "resolve_models",
    "shipped_overhead_table",
    "speedup",
]

MODEL_PARAMS: dict[str, tuple[str, ...]] = {
    # The paper's K(n) is S(n) over its tangent at b, in which the plateau c cancels:
    # (a, b) are the model's parameters (a model stored with a c reads the same).
    "deepvm": ("a", "b"),
    "logistic": ("a", "b", "c"),
    "amdahl": ("p",),
    "usl": ("alpha", "beta"),
    "linear": (),
}
MODEL_KINDS = tuple(MODEL_PARAMS)


@dataclass(frozen=True)
class SpeedupModel:
    """A speedup model: ``kind`` (one of MODEL_KINDS), its ``params``, and where
    it came from: ``source`` (one of deepvm.model.provenance.SOURCE_KINDS: measured for
    deepvm's own fits, file, published, transferred, estimate), ``basis`` (from
    what: the MLPerf results, the file, the scaling run) and ``date``."""

    kind: str
    params: Mapping[str, float] = field(default_factory=dict)
    source: str = "estimate"
    basis: str = ""
    date: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in MODEL_PARAMS:
            raise InputError(
                f"unknown overhead model {self.kind!r}; known: {', '.join(MODEL_KINDS)}"
            )
        missing = [p for p in MODEL_PARAMS[self.kind] if p not in self.params]
        if missing:
            raise InputError(f"overhead model {self.kind!r} needs parameter(s) {missing}")
        bad = [p for p in MODEL_PARAMS[self.kind] if not math.isfinite(self.params[p])]
        if bad:
            raise InputError(f"overhead model {self.kind!r}: parameter(s) {bad} not finite")
        if self.kind == "logistic" and (self.params["a"] <= 0 or self.params["c"] <= 0):
            raise InputError("overhead model 'logistic' needs a > 0 and c > 0")
        if self.kind == "deepvm" and self.params["a"] <= 0:
            raise InputError("overhead model 'deepvm' needs a > 0")
        if self.kind == "amdahl" and not 0 <= self.params["p"] <= 1:
            raise InputError("overhead model 'amdahl' needs 0 <= p <= 1")
        if self.kind == "usl" and (self.params["alpha"] < 0 or self.params["beta"] < 0):
            raise InputError("overhead model 'usl' needs alpha >= 0 and beta >= 0")

    def __call__(self, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
        return speedup(self, n)

    def describe(self) -> str:
        values = ", ".join(f"{k}={self.params[k]:.6g}" for k in MODEL_PARAMS[self.kind])
        return f"{self.kind}({values})" if values else self.kind


LINEAR = SpeedupModel(
    "linear", {}, source="estimate", basis="no overhead model matched: linear, an upper bound"
)


def logistic(n: npt.ArrayLike, a: float, b: float, c: float) -> npt.NDArray[np.float64]:
    """S(n) = c / (1 + exp(-a (n - b)))."""
    x = np.asarray(n, dtype=float)
    with np.errstate(over="ignore"):  # exp overflow -> inf -> S = 0, which is right
        return c / (1.0 + np.exp(-a * (x - b)))


def deepvm_factor(n: npt.ArrayLike, a: float, b: float) -> npt.NDArray[np.float64]:
    """The paper's scaling factor K(n): 1 up to the inflection point b, then the
    logistic S(n) = c / (1 + exp(-a (n - b))) over its tangent at b, L(n) = (a c / 4)
    (n - b) + c / 2, in which c cancels: K(n) = 1 / ((1 + exp(-a (n - b))) ((a / 4)
    (n - b) + 1 / 2))."""
    x = np.asarray(n, dtype=float)
    tangent = (a / 4.0) * (x - b) + 0.5
    beyond = x > b
    # Evaluate S/L only where it is used: L can be <= 0 for n far below b.
    safe_tangent = np.where(beyond, tangent, 1.0)
    return np.where(beyond, logistic(x, a, b, 1.0) / safe_tangent, 1.0)


def speedup(model: SpeedupModel, n: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """s(n) for integer node counts n >= 1 (vectorised); s(1) = 1 for every kind."""
    x = np.asarray(n, dtype=float)
    if np.any(x < 1):
        raise ValueError("node counts must be >= 1")
    p = model.params
    if model.kind == "linear":
        s = x.copy()
    elif model.kind == "deepvm":
        s = x * deepvm_factor(x, p["a"], p["b"])
    elif model.kind == "logistic":
        s = logistic(x, p["a"], p["b"], p["c"])
    elif model.kind == "amdahl":
        s = 1.0 / ((1.0 - p["p"]) + p["p"] / x)
    else:  # usl
        s = x / (1.0 + p["alpha"] * (x - 1.0) + p["beta"] * x * (x - 1.0))
    return np.where(x == 1, 1.0, s)


# --- network saturation -----------------------------------------------------

DEFAULT_SATURATION_POINTS: tuple[tuple[float, int], ...] = (
    (0.3, 2),
    (1.7, 12),
    (5.0, 16),
    (10.0, 20),
    (12.5, 24),
    (15.0, 24),
    (25.0, 28),
    (30.0, 32),
)


@dataclass(frozen=True)
class SaturationModel:
    """N_sat(beta): how many spot workers one remote node serves before its link
    (beta Gbps) saturates. Linear between points, clamped outside, floored."""

    points: tuple[tuple[float, float], ...] = DEFAULT_SATURATION_POINTS

    @classmethod
    def from_points(cls, points: Sequence[tuple[float, float]]) -> SaturationModel:
        pts = sorted((float(b), float(w)) for b, w in points)
        if not pts:
            raise InputError("saturation table is empty")
        for b, w in pts:
            if b <= 0 or w < 1:
                raise InputError(f"saturation point ({b} Gbps, {w} workers) must be positive")
        bws = [b for b, _ in pts]
        workers = [w for _, w in pts]
        if len(set(bws)) != len(bws):
            raise InputError("saturation table has duplicate bandwidth_gbps values")
        if any(w2 < w1 for w1, w2 in itertools.pairwise(workers)):
            raise InputError("saturation workers must not decrease as bandwidth grows")
        return cls(tuple(pts))

    def __call__(self, bandwidth_gbps: npt.ArrayLike) -> npt.NDArray[np.int64]:
        bws = np.array([b for b, _ in self.points])
        workers = np.array([w for _, w in self.points])
        # A hair of slack so that 12.0 interpolated as 11.999999 still floors to 12.
        value = np.interp(np.asarray(bandwidth_gbps, dtype=float), bws, workers)
        return np.floor(value + 1e-9).astype(np.int64)


def load_saturation(path: str | Path) -> SaturationModel:
    """A saturation file: bandwidth_gbps, workers (monotone, positive)."""
    from deepvm.base.tables import numeric_column, read_table

    df = read_table(path, ("bandwidth_gbps", "workers"), "saturation")
    # Past 100 Tbit/s a NIC, and past the node cap a cluster, is a typo.
    bw = numeric_column(
        df, "bandwidth_gbps", "saturation", strictly_positive=True, maximum=100_000, key=""
    )
    workers = numeric_column(df, "workers", "saturation", minimum=1, maximum=MAX_NODES_CAP, key="")
    try:
        return SaturationModel.from_points(list(zip(bw, workers, strict=True)))
    except InputError as exc:
        raise InputError(f"saturation file {str(path)!r}: {exc}") from None


# --- overhead tables: which model each (instance type, workload) uses ------------

OVERHEAD_COLUMNS = ("instance_type", "workload", "model")
WILDCARD = "*"


def load_overhead_table(path: str | Path, *, shipped: bool = False) -> Table:
    """An overhead-model file: instance_type, workload, model and the model's
    parameters as columns (a, b, c / p / alpha, beta). ``*`` matches any instance
    type or workload. With a ``selected`` column only selected rows are kept.
    A user's file is the source (``file``) of its rows, its own ``source`` column,
    if any, their basis; the shipped file names each row's source, basis and date."""
    from deepvm.base.tables import optional_text, read_table, reject_duplicates, text_column

    what = "overhead"
    table = read_table(path, OVERHEAD_COLUMNS, what)
    table = table.with_columns(**{c: text_column(table, c, what) for c in OVERHEAD_COLUMNS})
    if "selected" in table:
        chosen = [str(v).lower() in ("true", "1", "yes") for v in optional_text(table["selected"])]
        table = table.take(np.array(chosen, dtype=bool))
    if not shipped:
        name = f"file {Path(path).name}"
        given = optional_text(table["source"]) if "source" in table else [None] * len(table)
        table = table.with_columns(
            source=np.full(len(table), "file", dtype=object),
            basis=np.array([f"{name}: {g}" if g else name for g in given], dtype=object),
        )
    reject_duplicates(table, ["instance_type", "workload"], what)
    # Build every model now so a bad row fails here, naming its row.
    for i, row in enumerate(table.records()):
        try:
            _model_from_row(row)
        except InputError as exc:
            raise InputError(f"overhead file {str(path)!r}: row {i + 1}: {exc}") from None
    return table


def _model_from_row(row: Mapping[str, object]) -> SpeedupModel:
    kind = str(row["model"]).strip()
    if kind not in MODEL_PARAMS:
        raise InputError(f"unknown overhead model {kind!r}; known: {', '.join(MODEL_KINDS)}")
    params: dict[str, float] = {}
    for name in MODEL_PARAMS[kind]:
        value = row.get(name)
        if value is None:
            raise InputError(f"model {kind!r} needs parameter {name!r}")
        try:
            params[name] = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InputError(f"model {kind!r} needs a numeric {name!r}, got {value!r}") from None
        if math.isnan(params[name]):
            raise InputError(f"model {kind!r} needs parameter {name!r}")
    date = row.get("source_date")
    return SpeedupModel(
        kind,
        params,
        source=str(row.get("source") or "file"),
        basis=str(row.get("basis") or ""),
        date=str(date) if isinstance(date, str) and date else None,
    )


def shipped_overhead_table() -> Table:
    from deepvm.base.datasets import dataset_path

    return load_overhead_table(dataset_path("overhead-default.csv"), shipped=True)


def resolve_models(
    instance_types: Sequence[str], workload: str, tables: Sequence[Table | pd.DataFrame]
) -> dict[str, SpeedupModel]:
    """The speedup model for each instance type on ``workload``.

    Tables are searched in order (user or fitted first, shipped defaults last);
    within a table an exact (type, workload) row beats (type, *), then (*,
    workload), then (*, *). Where nothing matches: ``linear``, an ``estimate``
    whose basis says so.
    """
    indexed = [
        {(str(r["instance_type"]), str(r["workload"])): r for r in as_table(t).records()}
        for t in tables
    ]
    result: dict[str, SpeedupModel] = {}
    built: dict[tuple[int, tuple[str, str]], SpeedupModel] = {}  # most types share a row
    for itype in instance_types:
        result[itype] = LINEAR
        found = False
        for t, rows in enumerate(indexed):
            for key in (
                (itype, workload),
                (itype, WILDCARD),
                (WILDCARD, workload),
                (WILDCARD, WILDCARD),
            ):
                if key in rows:
                    if (t, key) not in built:
                        built[t, key] = _model_from_row(rows[key])
                    result[itype] = built[t, key]
                    found = True
                    break
            if found:
                break
    return result
