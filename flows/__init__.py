"""Prefect flows for deepvm: thin wrappers whose tasks each call one library function.

Run without a server (``python -m flows.deepvm_flows nightly``), Prefect starts a
temporary one. Two of its defaults tripped that run (seen here): its telemetry
printed tracebacks where there is no network, and its 20 s start-up limit ran out
on a busy machine, ending the run. A user's own settings still win.
"""

import os

__all__: list[str] = []  # settings only: the flows are in flows.deepvm_flows

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
