"""Timing training steps and counting their FLOPs.

A measurement: build the workload with random weights, make one synthetic batch,
run warm-up steps, then timed steps with device synchronisation; FLOPs of one
step (forward + backward) come from ``torch.utils.flop_counter``. Achieved
FLOP/s = FLOPs per step / median step time.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepvm.base.config import BENCH_MAX_STEPS as MAX_STEPS
from deepvm.base.config import BENCH_MIN_STEPS as MIN_STEPS
from deepvm.base.config import BENCH_TARGET_TIMED_S as TARGET_TIMED_S
from deepvm.base.config import DEFAULT_BENCH_WARMUP as DEFAULT_WARMUP
from deepvm.bench import require_torch
from deepvm.bench._models import SampleModel, build_model
from deepvm.performance.workloads import get_workload

__all__ = ["Measurement", "autocast", "count_step_flops", "default_device", "measure", "step_dtype"]


@dataclass(frozen=True)
class Measurement:
    workload: str
    device: str
    dtype: str
    batch_size: int
    warmup: int
    step_times_s: tuple[float, ...]
    flops_per_step: float
    wall_s: float

    @property
    def steps(self) -> int:
        return len(self.step_times_s)

    @property
    def step_time_median_s(self) -> float:
        return statistics.median(self.step_times_s)

    def quantile(self, q: float) -> float:
        """Linear-interpolated quantile of the step times (q in [0, 1])."""
        times = sorted(self.step_times_s)
        pos = q * (len(times) - 1)
        low = int(pos)
        high = min(low + 1, len(times) - 1)
        return times[low] + (times[high] - times[low]) * (pos - low)

    @property
    def step_time_p10_s(self) -> float:
        return self.quantile(0.10)

    @property
    def step_time_p90_s(self) -> float:
        return self.quantile(0.90)

    @property
    def achieved_flops(self) -> float:
        return self.flops_per_step / self.step_time_median_s

    @property
    def samples_per_s(self) -> float:
        return self.batch_size / self.step_time_median_s


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def step_dtype(device: str) -> str:
    """bf16 autocast on CUDA, plain fp32 elsewhere."""
    return "bfloat16" if device.startswith("cuda") else "float32"


def _cache_path() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "deepvm" / "flops.json"


def autocast(device: str) -> Any:
    import torch

    if step_dtype(device) == "bfloat16":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _forward_backward(sample: SampleModel, batch: dict[str, Any], device: str) -> None:
    with autocast(device):
        loss = sample.model(**batch).loss
    loss.backward()


def count_step_flops(sample: SampleModel, batch_size: int, device: str) -> float:
    """FLOPs of one training step (forward + backward; the optimizer's elementwise
    work is not counted), cached per (workload, batch size, dtype, torch version)
    in memory and in ~/.cache/deepvm/flops.json."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    key = f"{sample.name}|{batch_size}|{step_dtype(device)}|{torch.__version__}"
    path = _cache_path()
    cache = _FLOP_CACHE
    if not cache and path.exists():
        with contextlib.suppress(OSError, ValueError):  # a broken cache is recounted
            cache.update(json.loads(path.read_text()))
    if key in cache:
        return float(cache[key])
    batch = sample.make_batch(batch_size, device)
    with FlopCounterMode(display=False) as counter:
        _forward_backward(sample, batch, device)
    sample.model.zero_grad(set_to_none=True)
    flops = float(counter.get_total_flops())
    cache[key] = flops
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # the cache is an optimisation only
    return flops


_FLOP_CACHE: dict[str, float] = {}


def _keep_freed_memory() -> None:
    """Ask glibc to keep freed activation buffers instead of unmapping them after
    every step: re-faulting tens of MB of pages per step is slow and uneven, and
    the spread of step times is what a measurement is judged by."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 * 1024 * 1024)  # M_MMAP_THRESHOLD: glibc's maximum, 32 MiB
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: keep up to 1 GiB free in the heap
    except (OSError, AttributeError):
        pass  # another libc: its own allocator policy stands


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(
    workload: str,
    *,
    batch_size: int | None = None,
    steps: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    device: str | None = None,
    progress: bool = True,
    seed: int = 0,
) -> Measurement:
    """Measure one workload on this machine (real training steps)."""
    require_torch()
    import torch

    start = time.perf_counter()
    spec = get_workload(workload)
    device = device or default_device()
    if batch_size is None:
        batch_size = spec.gpu_batch_size if device.startswith("cuda") else spec.cpu_batch_size
    if batch_size < 1 or warmup < 0 or (steps is not None and steps < 2):
        raise ValueError("batch size must be >= 1, warm-up >= 0 and steps >= 2")
    _keep_freed_memory()
    torch.manual_seed(seed)
    sample = build_model(workload)
    sample.model.to(device).train()
    flops = count_step_flops(sample, batch_size, device)
    optimizer = torch.optim.AdamW(sample.model.parameters(), lr=1e-4)
    batch = sample.make_batch(batch_size, device)

    def step() -> float:
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        _forward_backward(sample, batch, device)
        optimizer.step()
        _sync(device)
        return time.perf_counter() - t0

    last = 0.0
    for _ in range(max(warmup, 1)):  # at least one untimed step: lazy init, allocator
        last = step()
    if steps is None:
        steps = max(MIN_STEPS, min(MAX_STEPS, round(TARGET_TIMED_S / max(last, 1e-6))))
    times = []
    bar = _progress(steps, f"{workload} ({device}, batch {batch_size})", progress)
    for _ in range(steps):
        times.append(step())
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return Measurement(
        workload=workload,
        device=device,
        dtype=step_dtype(device),
        batch_size=batch_size,
        warmup=max(warmup, 1),
        step_times_s=tuple(times),
        flops_per_step=flops,
        wall_s=time.perf_counter() - start,
    )


def _progress(total: int, label: str, enabled: bool) -> Any:
    if not enabled or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=label, unit="step", file=sys.stderr, leave=False)
