"""What every flow shares (docs/ARCHITECTURE.md, "Layers": flows are thin): the
store a flow opens, the stage runner that makes each stage a task, artifact keys, and
a refused run as one line."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from deepvm.base.errors import DeepvmError, InputError
from deepvm.store import Store, store_uri
from flows.forms import (
    flow_name,
)

__all__ = ["RefusedRun", "artifact_key", "as_task", "refusals_fail_in_one_line", "store_of"]


def store_of(store: str | None) -> Store:
    """The flow's store, opened once (the form's URI, else $DEEPVM_STORE, else
    ./deepvm-store on the worker)."""
    return Store.open(store_uri(store))


_T = TypeVar("_T")


def as_task(name: str, stage: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    """pipeline.nightly's stage runner: each stage a task of its own in the UI."""
    return cast(_T, task(name=name, cache_policy=NO_CACHE)(stage)(*args, **kwargs))


def artifact_key(*parts: str) -> str:
    import re

    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")


class RefusedRun(InputError, ValueError):  # ValueError: what API callers caught before
    """A request the library refused (bad input, nothing feasible), in one line
    that names the form's fields."""


_F = TypeVar("_F", bound=Callable[..., Any])


def refusals_fail_in_one_line(fn: _F) -> _F:
    """A refused run ends Failed with its one line as the state's message, and no
    traceback in the run's log (there is nothing to debug; Prefect logged one, and a
    failing task a second). Python callers still get the exception."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (RefusedRun, DeepvmError) as exc:
            refused = exc if isinstance(exc, RefusedRun) else RefusedRun(exc.render(flow_name))
            get_run_logger().error("%s", refused)
            return Failed(message=str(refused), data=refused)

    # The flow's parameter types, resolved in the flow's own module: Prefect builds
    # the run's form from the wrapper, whose module (this one) does not know them.
    signature = inspect.signature(fn, eval_str=True)
    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__annotations__ = {
        name: p.annotation
        for name, p in signature.parameters.items()
        if p.annotation is not inspect.Parameter.empty
    }
    if signature.return_annotation is not inspect.Signature.empty:
        run.__annotations__["return"] = signature.return_annotation
    return cast(_F, run)
