"""The exceptions deepvm raises. Every one carries a one-line message that says
what is wrong and, where it can, how to fix it; the CLI prints it and exits 2.

    DeepvmError                  a problem with the user's input or request, not a bug
    ├── InputError               a bad input file, column, row or value
    │   ├── UnknownWorkloadError
    │   ├── ParameterError       one named parameter (``--deadline-h`` / ``deadline_h``)
    │   ├── StoreError           the store cannot be used (path, permissions, files, disk)
    │   └── OutputError          an output file (--out, --plot) cannot be written there
    ├── InfeasibleError          no cluster satisfies the constraints
    ├── SolverError              the solver stopped without a verified optimum
    ├── SourceUnavailableError   a source failed (exit status 1: not the input's fault):
    │                            a price source, a feed of the wrong shape
    │                            (catalog.http.SourceUnavailable, FeedError), a
    │                            checkpoint version that arrived damaged (CorruptVersion)
    ├── LaunchError              a launch step failed in the cloud (exit status 1); the
    │                            message names what still runs and how to tear it down
    └── InternalError            deepvm's own check of its answer failed: a bug (exit 70)

Bad input also covers a checkpoint version too large for its folder (CapacityError)
and a flow run the library refused (flows' RefusedRun).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = [
    "DeepvmError",
    "InfeasibleError",
    "InputError",
    "InternalError",
    "LaunchError",
    "OutputError",
    "ParameterError",
    "SolverError",
    "SourceUnavailableError",
    "StoreError",
    "UnknownWorkloadError",
]


class DeepvmError(Exception):
    """Base class: a problem with the user's input or request, not a bug.

    A message that tells the user which parameter to change names it as
    ``{deadline_h}`` and lists it in ``names``: each front end renders it its own
    way (the CLI ``--deadline-h``, a flow its parameter, ``price_timeout_s`` for
    ``timeout_s``); ``str()`` gives the library's names, which the scenarios file
    and most flow parameters share."""

    exit_status = 2

    def __init__(self, message: str = "", *, names: Sequence[str] = ()) -> None:
        self.template = message
        self.names = tuple(names)
        super().__init__(self.render())

    def render(self, name_of: Callable[[str], str] | None = None) -> str:
        """The message with each named parameter spelled by ``name_of``."""
        text = self.template
        for name in self.names:  # by replacement: other braces in the text stay as they are
            text = text.replace("{" + name + "}", name_of(name) if name_of else name)
        return text


class InputError(DeepvmError):
    """A bad input file, column, row or value."""


class UnknownWorkloadError(InputError):
    """A workload name that no registry, measurement or overhead table knows."""


class ParameterError(InputError):
    """A bad value of one parameter. ``param`` is the library's name for it
    (``deadline_h``); each front end names it its own way: the CLI as a flag
    (``--deadline-h``), a flow and the scenarios file by the same name."""

    MISSING: object = object()  # the value when the parameter was not given at all

    def __init__(
        self, param: str, value: object, requirement: str, *, others: Sequence[str] = ()
    ) -> None:
        """``others``: further parameters the requirement names as ``{name}``."""
        self.param = param
        self.value = value
        self.requirement = requirement
        self.others = tuple(others)
        super().__init__(self.render(), names=(param, *self.others))

    def render(self, name_of: Callable[[str], str] | None = None) -> str:
        """The message with the parameter named by ``name_of`` (a front end's spelling)."""
        spell = name_of or (lambda n: n)
        name = spell(self.param)
        requirement = self.requirement
        for other in self.others:
            requirement = requirement.replace("{" + other + "}", spell(other))
        if self.value is ParameterError.MISSING:
            return f"{name} {requirement}"
        shown = f"{self.value:g}" if isinstance(self.value, float) else repr(self.value)
        return f"{name} {shown} {requirement}"


class StoreError(InputError):
    """The store cannot be used: its path, its permissions, a bad file in it, a full disk."""


class OutputError(InputError):
    """An output file cannot be written where the user asked."""


class InfeasibleError(DeepvmError):
    """No cluster satisfies the budget, quotas and checkpoint constraints."""


class SolverError(DeepvmError):
    """The solver stopped without a verified optimum (time limit, numerical trouble)."""


class SourceUnavailableError(DeepvmError):
    """A price source did not answer usefully within its deadline and retries."""

    exit_status = 1


class InternalError(DeepvmError):
    """An answer that fails deepvm's own verification (a plan over a quota, a
    cluster past its budget): a bug in deepvm, never the input's fault."""

    exit_status = 70  # EX_SOFTWARE

    def __init__(self, message: str = "") -> None:
        super().__init__(f"{message} (a bug in deepvm: please report it with the command)")


class LaunchError(DeepvmError):
    """A step of ``deepvm launch`` failed outside deepvm (SkyPilot, the AWS CLI, a
    tier that never answered): not the input's fault, so exit status 1."""

    exit_status = 1
