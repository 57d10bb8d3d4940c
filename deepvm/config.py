"""Defaults and environment names, defined once: the CLI's help, the flows'
forms and the library all read them from here. Light (no third-party imports),
so that ``deepvm --help`` stays fast."""

from __future__ import annotations

# The store: --store, else $DEEPVM_STORE, else this folder.
ENV_STORE = "DEEPVM_STORE"
DEFAULT_STORE = "deepvm-store"

# The job.
DEFAULT_WORKLOAD = "resnet50"
DEFAULT_OBJECTIVE = "throughput"
DEFAULT_TOP = 3
DEFAULT_MAX_NODES = 256
DEFAULT_CHECKPOINT_VERSIONS = 2
# Seconds to re-acquire a preempted node before the checkpoint is reloaded.
DEFAULT_RESTART_S = 300.0

# The solver: seconds per solve.
DEFAULT_TIME_LIMIT_S = 30.0

# Price sources: one deadline for a whole fetch, its retries included.
DEFAULT_PRICE_TIMEOUT_S = 60.0
DEFAULT_PRICE_RETRIES = 3
DEFAULT_PRICE_BACKOFF_S = 2.0

# Caps on one request (past them it is a mistake that would run for hours).
MAX_SWEEP_BUDGETS = 100_000
# Names that become store file names (scenarios, instance types) are at most this long.
MAX_NAME_LENGTH = 120
