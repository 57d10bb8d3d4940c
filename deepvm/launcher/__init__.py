"""Launching a plan (docs/ARCHITECTURE.md, "Launching a plan"): ``deepvm launch``
wires a recommended cluster with SkyPilot, the checkpoint tier first
(:mod:`deepvm.launcher._steps`), moves a running job
(:mod:`deepvm.launcher.move`), ships deepvm to the nodes as a wheel
(:mod:`deepvm.launcher.wheel`), drives ``sky`` and ``aws`` through their command
lines (:mod:`deepvm.launcher._commands`), and records what runs
(:mod:`deepvm.launcher._manifest`)."""

from deepvm.launcher._commands import Tools
from deepvm.launcher._manifest import Manifest, known_launches
from deepvm.launcher._steps import LaunchOptions, Target, down, launch, restart
from deepvm.launcher.move import move, running_launch

__all__ = [
    "LaunchOptions",
    "Manifest",
    "Target",
    "Tools",
    "down",
    "known_launches",
    "launch",
    "move",
    "restart",
    "running_launch",
]
