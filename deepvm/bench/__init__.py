"""Measuring: sample workloads, FLOP counting, timing, hardware identity, scaling.

Needs the ``bench`` extra (torch, transformers): ``pip install 'deepvm[bench]'``.
Importing this package is cheap; torch is imported by the functions that use it.
"""

from __future__ import annotations

from deepvm.base.errors import DeepvmError

__all__ = ["INSTALL_HINT", "MissingExtraError", "require_torch"]

INSTALL_HINT = (
    "deepvm benchmark needs PyTorch and transformers: pip install 'deepvm[bench]' "
    "(on a CPU-only machine install the CPU build first: pip install torch==2.13.0)"
)


class MissingExtraError(DeepvmError):
    """The bench extra is not installed."""


def require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MissingExtraError(INSTALL_HINT) from None
