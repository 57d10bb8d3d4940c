"""The tools a launch drives, each through its own command line: SkyPilot's
``sky`` (launch, status --ip, down, check) and the AWS CLI (zone names). deepvm
writes no cloud client of its own; what these tools print back is read here, and
every failure becomes one line that says which tool and what it said.

A dry run goes through the same calls: each prints its command line instead of
running it and answers with a placeholder (``<address of NAME>``), so a dry run
shows exactly what a launch would run, in order.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from deepvm.base.errors import InputError, LaunchError

__all__ = ["Tools", "ZoneAnswer"]

SKY_EXTRA = (
    "pip install 'skypilot[aws,gcp,azure]' (or deepvm's extra: pip install 'deepvm[launch]')"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CLOUD_NAMES = {"aws": "AWS", "gcp": "GCP", "azure": "Azure"}
# A SkyPilot launch provisions, installs and starts: minutes, at most an hour.
LAUNCH_TIMEOUT_S = 3600.0
QUICK_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ZoneAnswer:
    """The zone name of a zone ID, or why there is none."""

    name: str | None
    problem: str | None = None  # the AWS CLI is missing or failed: why
    unknown: bool = False  # the account has no such zone


@dataclass
class Tools:
    """``sky`` and ``aws`` for one launch: ``env`` is the environment the tools
    run in (the launch's token is in it, for ``--secret``); with ``dry_run`` each
    call is shown through ``show`` and nothing runs."""

    env: dict[str, str]
    dry_run: bool = False
    show: Callable[[str], None] = print
    calls: list[list[str]] = field(default_factory=list)

    # -- SkyPilot ------------------------------------------------------------------

    def require_sky(self) -> None:
        if not self.dry_run and self._which("sky") is None:
            raise InputError(f"the sky command (SkyPilot) is not installed: {SKY_EXTRA}")

    def check_cloud(self, cloud: str) -> None:
        """SkyPilot can use ``cloud`` (``sky check``), or an InputError with its reason."""
        label = _CLOUD_NAMES.get(cloud, cloud)
        out = self._run(["sky", "check", cloud], placeholder=f"{label}: enabled", quick=True)
        text = _ANSI.sub("", out.stdout + "\n" + out.stderr)
        status = re.search(rf"^\s*{re.escape(label)}:\s*(enabled|disabled)", text, re.M | re.I)
        if status and status.group(1).lower() == "enabled":
            return
        reason = re.search(r"^\s*(?:Reason|Hint)[^:]*:\s*(.+)$", text, re.M)
        why = reason.group(1).strip() if reason else _last_line(text) or "no answer"
        raise InputError(
            f"SkyPilot cannot use {label}: {why}; set up its credentials and run `sky check "
            f"{cloud}`"
        )

    def launch(self, cluster: str, task_file: str, *, secret: str | None) -> list[str]:
        """``sky launch`` one task as cluster ``cluster`` (detached: returns once the
        run has started); its command line."""
        argv = ["sky", "launch", "--yes", "--detach-run", "--cluster", cluster]
        if secret:
            argv += ["--secret", secret]  # its value from this environment, never the argv
        argv.append(task_file)
        out = self._run(argv, timeout=LAUNCH_TIMEOUT_S, check=False)
        if out.returncode != 0:
            raise LaunchError(
                f"sky launch of {cluster} failed: {_last_line(out.stderr + out.stdout)}"
            )
        return argv

    def address(self, cluster: str) -> str:
        """The head node's address (``sky status --ip``)."""
        out = self._run(
            ["sky", "status", "--ip", cluster], placeholder=f"<address of {cluster}>", quick=True
        )
        address = _last_line(out.stdout)
        if not re.fullmatch(r"<address of [^>]+>|[0-9A-Za-z.:\-]+", address):
            raise LaunchError(f"sky status --ip {cluster} printed no address: {address!r}")
        return address

    def down(self, cluster: str) -> str | None:
        """Tear ``cluster`` down; None, or why it failed."""
        out = self._run(["sky", "down", "--yes", cluster], timeout=LAUNCH_TIMEOUT_S, check=False)
        if out.returncode == 0:
            return None
        return _last_line(out.stderr + out.stdout) or f"exit status {out.returncode}"

    # -- AWS -----------------------------------------------------------------------

    def zone_name(self, region: str, zone_id: str) -> ZoneAnswer:
        """This account's name of AWS zone ID ``zone_id`` (``use1-az1`` -> ``us-east-1a``)."""
        argv = [
            "aws", "ec2", "describe-availability-zones", "--region", region,
            "--zone-ids", zone_id, "--query", "AvailabilityZones[0].ZoneName",
            "--output", "text",
        ]  # fmt: skip
        if not self.dry_run and self._which("aws") is None:
            return ZoneAnswer(None, "the AWS CLI (aws) is not installed")
        out = self._run(argv, placeholder=f"<zone name of {zone_id}>", quick=True, check=False)
        said = _last_line(out.stderr + out.stdout)
        if out.returncode != 0:
            if "InvalidParameterValue" in said or "not valid" in said:
                return ZoneAnswer(None, said, unknown=True)
            return ZoneAnswer(None, f"aws ec2 describe-availability-zones failed: {said}")
        name = _last_line(out.stdout)
        if not name or name == "None":
            return ZoneAnswer(None, f"this account has no zone {zone_id} in {region}", True)
        return ZoneAnswer(name)

    # -- running -------------------------------------------------------------------

    def _which(self, tool: str) -> str | None:
        return shutil.which(tool, path=self.env.get("PATH", os.defpath))

    def _run(
        self,
        argv: Sequence[str],
        *,
        placeholder: str = "",
        quick: bool = False,
        timeout: float | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if self.dry_run:
            self.show("$ " + shlex.join(argv))
            return subprocess.CompletedProcess(list(argv), 0, placeholder + "\n", "")
        executable = self._which(argv[0])
        if executable is None:
            raise InputError(f"the {argv[0]} command is not installed")
        try:
            out = subprocess.run(
                [executable, *argv[1:]],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=QUICK_TIMEOUT_S if quick else timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise LaunchError(f"{shlex.join(argv)} did not finish in time") from None
        if check and out.returncode != 0:
            raise LaunchError(f"{shlex.join(argv)} failed: {_last_line(out.stderr + out.stdout)}")
        return out


def _last_line(text: str) -> str:
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()]
    return lines[-1] if lines else ""
