"""Files written for the user (--out, --plot, --sky-yaml): whole or not at all.
Standard library only, so that any layer may use it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deepvm.base.errors import OutputError

__all__ = ["atomic_output"]


@contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix, so writers that go by it
    still do) that replaces ``path`` when the block ends without an error: a
    half-written file never replaces a good one. OS failures are OutputError."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp{target.suffix}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
