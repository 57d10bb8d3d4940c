"""Benchmark runs: measure workloads on this machine and turn them into
``benchmarks`` rows (docs/ARCHITECTURE.md, "The store"). A workload that fails becomes a failed row;
the others still run."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from deepvm import __version__
from deepvm.base.errors import ParameterError
from deepvm.bench._identity import Hardware, detect
from deepvm.bench._measure import DEFAULT_WARMUP, Measurement, default_device, measure, step_dtype

__all__ = [
    "MAX_STEP_SPREAD",
    "BenchmarkResult",
    "benchmark_frame",
    "check_device",
    "identify",
    "measurement_warning",
    "run_benchmarks",
]

OK, FAILED = "ok", "failed"


@dataclass(frozen=True)
class BenchmarkResult:
    workload: str
    status: str
    measurement: Measurement | None
    error: str = ""


def run_benchmarks(
    workloads: Sequence[str],
    *,
    steps: int | None = None,
    warmup: int = DEFAULT_WARMUP,
    batch_size: int | None = None,
    device: str | None = None,
    progress: bool = True,
    on_result: Callable[[BenchmarkResult], None] | None = None,
) -> list[BenchmarkResult]:
    device = device or default_device()
    results = []
    for name in workloads:
        try:
            m = measure(
                name,
                batch_size=batch_size,
                steps=steps,
                warmup=warmup,
                device=device,
                progress=progress,
            )
            result = BenchmarkResult(name, OK, m)
        except Exception as exc:  # OOM, a missing extra, a model that breaks: record it, go on
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
            result = BenchmarkResult(name, FAILED, None, message)
        finally:
            _free_accelerator_memory(device)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _free_accelerator_memory(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


# Step times whose p90 is this many times their p10 are too noisy to plan with
# unchecked (another process, thermal throttling, too few steps).
MAX_STEP_SPREAD = 1.5


def measurement_warning(m: Measurement) -> str | None:
    """Why a measurement should not be trusted as it is, or None."""
    spread = m.step_time_p90_s / m.step_time_p10_s if m.step_time_p10_s > 0 else math.inf
    if spread > MAX_STEP_SPREAD:
        return (
            f"noisy: step time p90/p10 = {spread:.2f} > {MAX_STEP_SPREAD}; re-run with more "
            "--steps on an idle machine"
        )
    return None


def benchmark_frame(
    results: Sequence[BenchmarkResult],
    hardware: Hardware,
    *,
    run_id: str | None = None,
    measured_at: dt.datetime | None = None,
    batch_size: int | None = None,
) -> pd.DataFrame:
    """The results as rows of the ``benchmarks`` table."""
    run_id = run_id or uuid.uuid4().hex
    when = pd.Timestamp(measured_at or dt.datetime.now(dt.UTC))
    rows = []
    for r in results:
        m = r.measurement
        rows.append(
            {
                "run_id": run_id,
                "measured_at": when,
                "instance_type": hardware.instance_type,
                "hostname": hardware.hostname,
                "device": hardware.device,
                "accelerator_name": hardware.accelerator_name,
                "accelerator_count": hardware.accelerator_count,
                "workload": r.workload,
                "dtype": m.dtype if m else step_dtype(hardware.device),
                "batch_size": m.batch_size if m else batch_size,
                "steps": m.steps if m else 0,
                "step_time_median_s": m.step_time_median_s if m else None,
                "step_time_p10_s": m.step_time_p10_s if m else None,
                "step_time_p90_s": m.step_time_p90_s if m else None,
                "flops_per_step": m.flops_per_step if m else None,
                "achieved_flops": m.achieved_flops if m else None,
                "samples_per_s": m.samples_per_s if m else None,
                "status": r.status,
                "error": r.error or None,
                "warning": measurement_warning(m) if m else None,
                "cpu_model": hardware.cpu_model,
                "cpu_cores": hardware.cpu_cores,
                "memory_gib": hardware.memory_gib,
                "wall_s": m.wall_s if m else None,
                "torch_version": hardware.torch_version,
                "cuda_version": hardware.cuda_version,
                "deepvm_version": __version__,
            }
        )
    return pd.DataFrame(rows)


def check_device(device: str | None) -> None:
    """Refuse a device this machine cannot run on, before any measurement:
    an unknown name, CUDA without CUDA, a GPU index past the last one."""
    if device is None:
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise ParameterError("device", device, "is not a device; use cpu, cuda or cuda:N") from None
    if parsed.type == "cpu":
        return
    if parsed.type != "cuda":
        raise ParameterError("device", device, "is not supported; use cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise ParameterError("device", device, "is not available: this machine has no CUDA GPU")
    count = torch.cuda.device_count()
    if parsed.index is not None and parsed.index >= count:
        raise ParameterError("device", device, f"is not available: this machine has {count} GPU(s)")


def identify(instance_type: str | None, device: str | None = None) -> Hardware:
    return detect(instance_type, device or default_device())
