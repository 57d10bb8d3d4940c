"""The registry of sample workloads: names and the facts the planner needs.

The model builders (PyTorch, heavy) live in :mod:`deepvm.bench`; this module is
light so the planner and the CLI can validate ``--workload`` without torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from deepvm.config import DEFAULT_WORKLOAD as DEFAULT_WORKLOAD
from deepvm.errors import ParameterError, UnknownWorkloadError

# Checkpoint bytes per parameter: fp32 weights + Adam's two fp32 moments.
CHECKPOINT_BYTES_PER_PARAM = 12


@dataclass(frozen=True)
class Workload:
    """A sample workload. ``samples`` are images or sequences; batch sizes are
    the defaults per device kind (the CPU ones keep a measurement under a minute
    on a 2-core machine)."""

    name: str
    description: str
    parameters: int
    # Training FLOPs (forward + backward) per sample, counted by
    # torch.utils.flop_counter on the sample model (deepvm benchmark).
    train_flops_per_sample: float
    cpu_batch_size: int = 4
    gpu_batch_size: int = 32

    @property
    def checkpoint_gb(self) -> float:
        """Default checkpoint size in GB (weights + optimizer state)."""
        return self.parameters * CHECKPOINT_BYTES_PER_PARAM / 1e9


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("resnet18", "ResNet-18, 224x224 images", 11_689_512, 10.648e9, 8, 128),
        Workload("resnet50", "ResNet-50, 224x224 images", 25_557_032, 24.299e9, 4, 64),
        Workload("vit-b16", "ViT-B/16, 224x224 images", 86_567_656, 100.86e9, 2, 64),
        Workload("gpt2", "GPT-2 small (124M), sequence 512", 124_439_808, 408.48e9, 1, 16),
        Workload("bert-base", "BERT-base, sequence 128", 109_514_298, 85.497e9, 4, 64),
        Workload("tiny", "a two-layer MLP on 64 features, for tests", 8_578, 34_304.0, 64, 256),
    )
}


# The sample workloads as a vocabulary: a typo is an error, and forms (the
# Prefect UI) offer the names as choices.
WorkloadName = StrEnum("WorkloadName", {name: name for name in WORKLOADS})  # type: ignore[misc]


def training_work(
    workload: str,
    *,
    work_flops: float | None = None,
    epochs: float | None = None,
    dataset_size: float | None = None,
) -> float | None:
    """Total training FLOPs: given directly, or epochs x dataset size x the
    workload's FLOPs per sample. None when neither is given."""
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
    return epochs * dataset_size * get_workload(workload).train_flops_per_sample


def get_workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        known = ", ".join(sorted(WORKLOADS))
        raise UnknownWorkloadError(f"unknown workload {name!r}; known: {known}") from None
