"""Every exception deepvm defines descends from DeepvmError, classified by cause
(issue 38): bad input (InputError, exit 2), an unavailable source
(SourceUnavailableError, exit 1), or a bug (InternalError, exit 70)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import deepvm
from deepvm.base.errors import DeepvmError, InputError, InternalError, SourceUnavailableError


def every_module():
    names = [
        m.name
        for m in pkgutil.walk_packages(deepvm.__path__, "deepvm.")
        if not m.name.endswith("__main__")  # importing it runs the command line
    ]
    return [
        importlib.import_module(n)
        for n in [*names, "flows.deepvm_flows", "flows.forms", "flows.runs"]
    ]


def test_every_exception_deepvm_defines_is_a_deepvm_error():
    defined = {
        cls
        for module in every_module()
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, BaseException)
        and not issubclass(cls, Warning)
        and cls.__module__ == module.__name__
    }
    assert len(defined) >= 15  # the walk found them (a broken walk finds none)
    outside = sorted(c.__qualname__ for c in defined if not issubclass(c, DeepvmError))
    assert outside == []


def test_the_sources_and_the_tier_errors_are_classified_by_cause():
    from deepvm.catalog.http import SourceUnavailable, TransientSourceError
    from deepvm.catalog.spot_advisor import FeedError
    from deepvm.checkpoint._versions import CapacityError, CorruptVersion
    from flows.deepvm_flows import RefusedRun

    for unavailable in (SourceUnavailable, TransientSourceError, FeedError, CorruptVersion):
        assert issubclass(unavailable, SourceUnavailableError), unavailable
        assert unavailable("x").exit_status == 1
    for bad_input in (CapacityError, RefusedRun):
        assert issubclass(bad_input, InputError) and bad_input("x").exit_status == 2


def test_a_plan_that_fails_its_own_check_is_a_bug_not_a_solver_error(monkeypatch, capsys, tmp_path):
    """A fleet plan over a quota is deepvm's bug: InternalError, exit 70, a message
    that says so (it was SolverError, 'not a bug', exit 2)."""
    from deepvm.cli import main
    from deepvm.planner.fleet import _program as fleet_program

    real = fleet_program.solve

    def over_quota(weight, cost, owner, usage, capacity, *args, **kwargs):
        result = real(weight, cost, owner, usage, capacity, *args, **kwargs)
        first = np.unique(owner, return_index=True)[1]  # every job on its first cluster
        every = np.repeat(first, np.asarray(kwargs["count"], dtype=int))
        return fleet_program.ProgramResult(
            "optimal", every, float(weight[every].sum()), result.variables, result.rows
        )

    monkeypatch.setattr(fleet_program, "solve", over_quota)
    scenarios = tmp_path / "jobs.toml"  # more big jobs than the quotas hold
    scenarios.write_text(
        "".join(f'[[job]]\nname = "j{k}"\nworkload = "gpt2"\nbudget = 40\n' for k in range(40))
    )
    with pytest.raises(InternalError, match="failed verification"):
        from deepvm.planner import Inputs
        from deepvm.planner.fleet.plan import plan_fleet
        from deepvm.records.jobs import load_jobs

        plan_fleet(load_jobs(scenarios), Inputs.load())
    assert main(["fleet", "--jobs", str(scenarios)]) == 70
    err = capsys.readouterr().err
    assert "failed verification" in err and "a bug in deepvm" in err
