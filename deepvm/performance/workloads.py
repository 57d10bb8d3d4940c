"""The registry of sample workloads: names and the facts the planner needs.

The model builders (PyTorch, heavy) live in :mod:`deepvm.bench`; this module is
light so the planner and the CLI can validate ``--workload`` without torch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from deepvm.base.config import MAX_CHECKPOINT_GB, MAX_WORK_FLOPS
from deepvm.base.errors import ParameterError, UnknownWorkloadError

__all__ = [
    "CHECKPOINT_BYTES_PER_PARAM",
    "WORKLOADS",
    "WORKLOAD_COLUMNS",
    "Workload",
    "WorkloadName",
    "get_workload",
    "load_workloads",
    "parse_work",
    "training_work",
]

# Checkpoint bytes per parameter: fp32 weights + Adam's two fp32 moments.
CHECKPOINT_BYTES_PER_PARAM = 12


@dataclass(frozen=True)
class Workload:
    """A workload: a shipped sample model or one a user declares (--workloads).
    ``samples`` are images or sequences; batch sizes are the defaults per device
    kind (the CPU ones keep a measurement under a minute on a 2-core machine)."""

    name: str
    description: str
    parameters: int
    # Training FLOPs (forward + backward) per sample, counted by
    # torch.utils.flop_counter on the sample model (deepvm benchmark).
    train_flops_per_sample: float
    cpu_batch_size: int = 4
    gpu_batch_size: int = 32
    # Accelerator memory one GPU needs to train it (GiB): instance types whose GPUs
    # have less are never planned. For the sample models an ESTIMATE: fp16 weights
    # and gradients, fp32 master weights and Adam state (16 bytes per parameter)
    # plus activations at gpu_batch_size, rounded up.
    accelerator_memory_gib: float = 0.0
    samples_per_epoch: float | None = None
    default_checkpoint_gb: float | None = None  # None: weights + Adam state

    @property
    def checkpoint_gb(self) -> float:
        """Default checkpoint size in GB (weights + optimizer state)."""
        if self.default_checkpoint_gb is not None:
            return self.default_checkpoint_gb
        return self.parameters * CHECKPOINT_BYTES_PER_PARAM / 1e9


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("resnet18", "ResNet-18, 224x224 images", 11_689_512, 10.648e9, 8, 128, 6.0),
        Workload("resnet50", "ResNet-50, 224x224 images", 25_557_032, 24.299e9, 4, 64, 8.0),
        Workload("vit-b16", "ViT-B/16, 224x224 images", 86_567_656, 100.86e9, 2, 64, 12.0),
        Workload("gpt2", "GPT-2 small (124M), sequence 512", 124_439_808, 408.48e9, 1, 16, 10.0),
        Workload("bert-base", "BERT-base, sequence 128", 109_514_298, 85.497e9, 4, 64, 6.0),
        Workload(
            "tiny", "a two-layer MLP on 64 features, for tests", 8_578, 34_304.0, 64, 256, 0.1
        ),
    )
}


# The sample workloads as a vocabulary: a typo is an error, and forms (the
# Prefect UI) offer the names as choices.
WorkloadName = StrEnum("WorkloadName", {name: name for name in WORKLOADS})  # type: ignore[misc]


_WORK_UNITS = {"": 1.0, "flop": 1.0, "flops": 1.0, "tflop": 1e12, "pflop": 1e15, "eflop": 1e18}
_WORK_TEXT = re.compile(r"\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*")


def parse_work(text: str, param: str = "work") -> float:
    """Training work typed as text: FLOPs (``2e18``, ``2e18 FLOPs``) or with a unit
    (``2000 PFLOP``, ``2 EFLOP``, ``2e6 TFLOP``). Read whole, so an exponent can
    never be half-read: ``2e18`` is 2e18 or an error, never 218."""
    match = _WORK_TEXT.fullmatch(str(text))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _WORK_UNITS:
        raise ParameterError(
            param,
            text,
            "is not a training work: give FLOPs as 2e18, or with a unit: 2000 PFLOP, 2 EFLOP",
        )
    try:
        value = float(match.group(1)) * _WORK_UNITS[unit]
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_WORK_FLOPS:
        raise ParameterError(
            param, text, f"must be a positive amount of work, at most {MAX_WORK_FLOPS:g} FLOPs"
        )
    return value


def training_work(
    workload: str,
    *,
    work_flops: float | None = None,
    epochs: float | None = None,
    dataset_size: float | None = None,
    workloads: Mapping[str, Workload] | None = None,
) -> float | None:
    """Total training FLOPs: given directly, or epochs x dataset size (default:
    the workload's samples per epoch) x the workload's FLOPs per sample. None when
    neither is given. ``workloads``: the registry (default: the sample models)."""
    registry = workloads if workloads is not None else WORKLOADS
    if epochs is not None and dataset_size is None and workload in registry:
        dataset_size = registry[workload].samples_per_epoch
    if work_flops is not None:
        if epochs is not None or dataset_size is not None:
            raise ParameterError(
                "work_flops",
                work_flops,
                "is given: give the work either this way or as epochs and dataset size, not both",
            )
        if not 0 < work_flops < math.inf:
            raise ParameterError("work_flops", work_flops, "must be a positive number of FLOPs")
        return float(work_flops)
    if epochs is None and dataset_size is None:
        return None
    if epochs is None or dataset_size is None:
        missing = "epochs" if epochs is None else "dataset_size"
        raise ParameterError(missing, None, "is missing: epochs and dataset size go together")
    for param, value in (("epochs", epochs), ("dataset_size", dataset_size)):
        if not 0 < value < math.inf:
            raise ParameterError(param, value, "must be a positive number")
    work = epochs * dataset_size * get_workload(workload, registry).train_flops_per_sample
    if work > MAX_WORK_FLOPS:
        raise ParameterError(
            "epochs",
            epochs,
            f"x dataset size {dataset_size:g} x {workload}'s FLOPs per sample is {work:.3g} "
            f"FLOPs, over the {MAX_WORK_FLOPS:g} a job may have",
        )
    return work


def get_workload(name: str, workloads: Mapping[str, Workload] | None = None) -> Workload:
    registry = workloads if workloads is not None else WORKLOADS
    try:
        return registry[name]
    except KeyError:
        known = ", ".join(sorted(registry))
        raise UnknownWorkloadError(
            f"unknown workload {name!r}; known: {known} (declare your own in a workloads "
            "file: {workloads})",
            names=("workloads",),
        ) from None


WORKLOAD_COLUMNS = ("name", "train_flops_per_sample", "parameters", "accelerator_memory_gib")


def _looks_numeric(value: object) -> bool:
    try:
        float(str(value).strip())
    except ValueError:
        return False
    return True


def load_workloads(path: str | Path) -> dict[str, Workload]:
    """Users' own workloads (CSV, Parquet or TOML with [[workload]] tables): name,
    train_flops_per_sample, parameters, accelerator_memory_gib (per GPU), and
    optionally checkpoint_gb, samples_per_epoch, description. Returns the sample
    models with these added; a name may not reuse a sample model's."""
    from deepvm.base.errors import InputError
    from deepvm.base.tables import Table, numeric_column, read_table, reject_duplicates, text_column

    source = Path(path)
    what = "workloads"
    if source.suffix.lower() == ".toml":
        import tomllib

        try:
            data = tomllib.loads(source.read_text())
        except FileNotFoundError:
            raise InputError(f"workloads file {str(source)!r} does not exist") from None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise InputError(f"workloads file {str(source)!r} cannot be read: {exc}") from None
        entries = data.get("workload")
        if not isinstance(entries, list) or not entries:
            raise InputError(f"workloads file {str(source)!r} has no [[workload]] entries")
        table = Table.from_records(entries)
        table.source_path = str(source)
        missing = [c for c in WORKLOAD_COLUMNS if c not in table]
        if missing:
            raise InputError(f"workloads file {str(source)!r} lacks {', '.join(missing)}")
    else:
        table = read_table(source, WORKLOAD_COLUMNS, what)
    for k, raw_name in enumerate(table["name"]):
        shown = raw_name.item() if hasattr(raw_name, "item") else raw_name  # numpy scalars
        if isinstance(shown, bool | int | float) or _looks_numeric(shown):
            raise InputError(
                f"workloads file {str(source)!r}: row {k + 1}: name={shown!r} is a number; "
                "give the workload a name with a letter in it (it is a workload's name in "
                "every command and a column in the store)"
            )
    names = text_column(table, "name", what, key="name")
    table = table.with_columns(name=names)
    reject_duplicates(table, ["name"], what)
    # Upper bounds: past them a value is a unit mistake (and sums overflow).
    flops = numeric_column(
        table, "train_flops_per_sample", what, strictly_positive=True, maximum=1e20, key="name"
    )
    params = numeric_column(
        table, "parameters", what, minimum=1, maximum=1e15, integer=True, key="name"
    )
    memory = numeric_column(
        table, "accelerator_memory_gib", what, minimum=0, maximum=100_000, key="name"
    )

    def optional(column: str, maximum: float) -> list[float | None]:
        if column not in table:
            return [None] * len(table)
        values = numeric_column(
            table, column, what, strictly_positive=True, maximum=maximum, allow_missing=True,
            key="name",
        )  # fmt: skip
        return [None if math.isnan(v) else float(v) for v in values]

    checkpoint = optional("checkpoint_gb", MAX_CHECKPOINT_GB)
    epoch = optional("samples_per_epoch", 1e15)
    out = dict(WORKLOADS)
    for k, name in enumerate(names):
        if name in WORKLOADS:
            raise InputError(
                f"workloads file {str(source)!r}: {name!r} is a shipped sample workload; "
                "give yours another name"
            )
        description = (
            str(table["description"][k])
            if "description" in table and table["description"][k]
            else f"{name} (from {source.name})"
        )
        out[name] = Workload(
            name,
            description,
            int(params[k]),
            float(flops[k]),
            accelerator_memory_gib=float(memory[k]),
            samples_per_epoch=epoch[k],
            default_checkpoint_gb=checkpoint[k],
        )
    return out
