"""Checkpoints for training on spot nodes: the tier a launched cluster runs
(``deepvm checkpoint serve``: deepvm.checkpoint.server) and what training code
calls (docs/ARCHITECTURE.md, "The checkpoint tier")::

    from deepvm import checkpoint

    resumed = checkpoint.load()            # (state, step) of the newest version, or None
    ...
    checkpoint.save(model.state_dict(), step)
"""

from deepvm.checkpoint.client import Saved, TierWarning, load, load_bytes, save, save_bytes

__all__ = ["Saved", "TierWarning", "load", "load_bytes", "save", "save_bytes"]
