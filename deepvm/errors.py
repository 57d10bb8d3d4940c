"""The exceptions deepvm raises. Every one carries a one-line message that says
what is wrong and, where it can, how to fix it; the CLI prints it and exits 2."""

from __future__ import annotations


class DeepvmError(Exception):
    """Base class: a problem with the user's input or request, not a bug."""


class InputError(DeepvmError):
    """A bad input file, column, row or value."""


class UnknownWorkloadError(InputError):
    """A workload name that no registry, measurement or overhead table knows."""


class InfeasibleError(DeepvmError):
    """No cluster satisfies the budget, quotas and checkpoint constraints."""


class SolverError(DeepvmError):
    """The solver stopped without a verified optimum (time limit, numerical trouble)."""
