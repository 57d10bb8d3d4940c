"""The SkyPilot task files `recommend --sky-yaml` and `fleet --sky-yaml` write
(docs/ARCHITECTURE.md, "Launching a plan"), and deepvm's wheel beside them, every
file checked before any is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepvm.base.errors import DeepvmError
from deepvm.cli._common import check_output_path
from deepvm.cli._output import progress

__all__ = ["check_launch_files", "check_yaml_path", "write_launch_files"]


def write_launch_files(path: str, result: Any, first: dict[str, Any], versions: int) -> None:
    """The first recommendation's SkyPilot tasks, and deepvm's wheel beside them for
    the nodes; every file checked before any is written."""
    from deepvm.launcher.wheel import build_wheel
    from deepvm.render.launch import write_sky_yaml

    check_launch_files(path, first, result.workload)
    title = (
        f"deepvm recommend --budget {result.budget:g}: {first['policy']} #{first['rank']} "
        f"for {result.workload} (objective {result.objective}), prices "
        f"{result.prices_snapshot}"
    )
    wheel = build_wheel(Path(path).resolve().parent)
    progress(f"wrote {wheel} (deepvm for the nodes)")
    files = write_sky_yaml(
        path, first, workload=result.workload, title=title, wheel=wheel, versions=versions
    )
    for written in files:
        progress(f"wrote {written}")


def check_launch_files(path: str, rec: dict[str, Any], workload: str, job: str = "") -> None:
    """Every SkyPilot task file a recommendation needs (deepvm.render.launch), and the
    wheel beside them, checked before any is written: a half-written launch is half
    a cluster."""
    from deepvm.launcher.wheel import wheel_name
    from deepvm.render.launch import sky_tasks, task_paths

    wheel = Path(path).resolve().parent / wheel_name()
    roles = [t.role for t in sky_tasks(rec, workload=workload, name="check", wheel=wheel)]
    for role, where in task_paths(path, roles).items():
        check_output_path(f"--sky-yaml ({job}{role} task)", str(where))
    check_output_path(f"--sky-yaml ({job}deepvm wheel)", str(wheel))


def check_yaml_path(path: str) -> None:
    """--sky-yaml: a .yaml path that can be written."""
    if not path.endswith((".yaml", ".yml")):
        raise DeepvmError(f"--sky-yaml {path!r} must end in .yaml")
    check_output_path("--sky-yaml", path)
